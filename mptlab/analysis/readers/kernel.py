"""The kernel's per-connection and per-subflow counters (result.json
``kernel``, read by the agent at the workload's end): the tables as they
are, and the data connection's counters as run columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import rundir
from ...spec.metrics import Metric
from .base import Run

ATTRIBUTES = ("k_token",)
METRICS = (
    Metric("k_bytes_sent", "B", None, "bytes the data sender's MPTCP connection sent"),
    Metric(
        "k_bytes_reinjected",
        "B",
        "lower",
        "of those, bytes re-sent on another subflow (MPTCP reinjections, also after a timeout)",
    ),
    Metric("k_reinjected_share", "", "lower", "k_bytes_reinjected / k_bytes_sent"),
    Metric("k_tcp_retrans", "segments", "lower", "TCP retransmissions of the sender's subflows"),
    Metric("k_subflows", "", None, "subflows that carried data"),
    Metric("k_bytes_received", "B", None, "bytes the data receiver's connection received"),
    Metric("k_ofo_bytes_max", "B", "lower", "the receiver's MPTCP out-of-order queue at its peak"),
    Metric("k_ofo_segs_max", "segments", "lower", "the same in segments"),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    kc = run.result.get("kernel") or {}
    conns = pd.DataFrame(kc.get("connections") or [])
    subs = pd.DataFrame(kc.get("subflows") or [])
    tables = {}
    if len(conns):
        conns["token"] = [rundir.kernel_token(t) for t in conns["token"]]
        tables["kernel_connections"] = conns.drop(columns=["event"], errors="ignore")
    if len(subs):
        subs["token"] = [rundir.kernel_token(t) for t in subs["token"]]
        subs = subs[subs["token"].notna() & (subs["token"] != "00000000")]
        tables["kernel_subflows"] = subs.drop(columns=["event"], errors="ignore")
    return summary(conns, subs), tables


def summary(conns: pd.DataFrame, subs: pd.DataFrame) -> dict:
    """Run-level counters of the data connection (the one that sent the most)."""
    out: dict = {}
    if not len(conns) or "bytes_sent" not in conns:
        return out
    snd = conns.loc[conns["bytes_sent"].idxmax()]
    rcv = conns.loc[conns["bytes_received"].idxmax()] if "bytes_received" in conns else None
    out["k_token"] = snd["token"]
    out["k_bytes_sent"] = float(snd["bytes_sent"])
    out["k_bytes_reinjected"] = float(snd.get("bytes_reinjected", np.nan))
    out["k_reinjected_share"] = (
        float(snd["bytes_reinjected"]) / float(snd["bytes_sent"]) if snd["bytes_sent"] else np.nan
    )
    if rcv is not None:
        out["k_bytes_received"] = float(rcv["bytes_received"])
        out["k_ofo_bytes_max"] = float(rcv.get("ofo_bytes_max", np.nan))
        out["k_ofo_segs_max"] = float(rcv.get("ofo_segs_max", np.nan))
    if len(subs) and "token" in subs:
        mine = subs[subs["token"] == snd["token"]]
        out["k_tcp_retrans"] = float(mine["tcp_retrans"].sum()) if "tcp_retrans" in mine else np.nan
        out["k_subflows"] = int((mine["bytes_sent"] > 0).sum())
        total = float(mine["bytes_sent"].sum())
        if "path" in mine and total > 0:
            # the path shares' first source (readers.paths declares them)
            for p, g in mine.dropna(subset=["path"]).groupby("path"):
                out[f"path{int(p)}_bytes"] = float(g["bytes_sent"].sum())
                out[f"path{int(p)}_share"] = float(g["bytes_sent"].sum()) / total
            out["path_share_source"] = "kernel"
    return out
