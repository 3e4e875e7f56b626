"""TCP-dFEC (runs with ``kernel.fec``, docs/fec.md): every FEC socket
(result.json ``kernel.fec``) and every re-evaluation of a socket's dynamic
ratio (``traces/fec-ratio.csv``).

The run's ``fec_*`` metrics are computed in the guest (mptlab/guest/fec.py,
from the ``tcp_fec_stats`` tracepoint) and arrive among the workload's
metrics (readers.result); they are declared here, with the instrument.
Absent, not 0, in runs without FEC."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import rundir
from ...spec.metrics import Metric
from .base import Run, read_csv

METRICS = (
    Metric("fec_sent", "pkt", None, "FEC packets the data connection's sockets sent"),
    Metric("fec_recovered", "pkt", "higher", "segments the receiver rebuilt from FEC"),
    Metric("fec_failed", "pkt", "lower", "FEC packets that could not rebuild a loss"),
    Metric("fec_lost", "pkt", None, "FEC packets lost"),
    Metric("fec_rcvd", "pkt", None, "FEC packets the receiver got"),
    Metric("fec_ratio_mean", "segments", None, "data segments per FEC packet, mean over the run"),
    Metric("fec_ratio_end", "segments", None, "the same at the run's end"),
    Metric("fec_overhead", "", "lower", "FEC packets among all packets sent (m / (k + m))"),
    Metric("fec_data_segs", "segments", None, "data segments sent"),
    Metric("fec_retrans_segs", "segments", "lower", "data segments retransmitted"),
    Metric("fec_residual", "", "lower", "residual loss: retransmitted / (data - retransmitted)"),
    Metric("fec_sockets", "", None, "sockets that negotiated FEC"),
    Metric("path{n}_fec_sent", "pkt", None, "fec_sent on path n"),
    Metric("path{n}_fec_recovered", "pkt", "higher", "fec_recovered on path n"),
    Metric("path{n}_fec_failed", "pkt", "lower", "fec_failed on path n"),
    Metric("path{n}_fec_ratio_mean", "segments", None, "fec_ratio_mean on path n"),
    Metric("path{n}_fec_overhead", "", "lower", "fec_overhead on path n"),
    Metric("fec_ratio", "segments", None, "data segments per FEC packet", table="fec_ratio"),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    tables = {}
    fec = pd.DataFrame((run.result.get("kernel") or {}).get("fec") or [])
    if len(fec):
        tables["kernel_fec"] = fec.drop(columns=["event"], errors="ignore")
    ratio = read_ratio(run.rd.trace(rundir.FEC_RATIO_EVENTS))
    if ratio is not None and len(ratio):
        t0 = run.t0
        ratio["t_rel"] = ratio["t"] - t0 if t0 else np.nan
        ratio["socket"] = (
            ratio["saddr"]
            + ":"
            + ratio["sport"].astype(str)
            + ">"
            + ratio["daddr"]
            + ":"
            + ratio["dport"].astype(str)
        )
        ratio["path"] = [run.path_of(a) for a in ratio["saddr"]]
        tables["fec_ratio"] = ratio
    return {}, tables


def read_ratio(path) -> pd.DataFrame | None:
    """``traces/fec-ratio.csv``: every re-evaluation of a socket's dynamic FEC
    ratio (``t, saddr, sport, daddr, dport, ratio, residual, srtt_us``)."""
    return read_csv(path, "an FEC ratio CSV", dtype={"saddr": "string", "daddr": "string"})
