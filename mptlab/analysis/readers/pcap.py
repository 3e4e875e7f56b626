"""Packet captures (``traces/*.pcap*``, runs with ``traces: {tcpdump: true}``):
the ``pcap_*`` tables of mptlab.analysis.pcap and the data connection's
figures as run columns (docs/analysis.md, "Packet traces")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...spec.metrics import Metric
from .base import Run

ATTRIBUTES = ("pcap_error",)
METRICS = (
    Metric(
        "pcap_data_bytes", "B", None, "data bytes of the connection direction that carried most"
    ),
    Metric("pcap_ofo_bytes_max", "B", "lower", "its MPTCP OFO queue at its peak, from the wire"),
    Metric("pcap_ofo_segs_max", "segments", "lower", "the same in segments"),
    Metric(
        "pcap_hol_delay_{stat}_ms",
        "ms",
        "lower",
        "how long data waited in the MPTCP OFO queue, byte-weighted (mean, p50, p75, p95, "
        'max): the MPT-BM paper\'s "MPTCP buffer delay" (its Table II)',
    ),
    Metric("pcap_reinjected_bytes", "B", "lower", "bytes sent again on another subflow"),
    Metric("pcap_retrans_segs", "segments", "lower", "TCP retransmissions, seen at the sender"),
    Metric("pcap_packets", "pkt", None, "packets in the captures"),
)
HOL = ("hol_delay_mean_ms", "hol_delay_p50_ms", "hol_delay_p75_ms", "hol_delay_p95_ms")


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    pcaps = sorted(run.rd.traces.glob("*.pcap*")) if run.pcap else []
    if not pcaps or run.info is None:
        return {}, {}
    return tables(pcaps, run.addresses)


def tables(pcaps: list[Path], addresses: dict) -> tuple[dict, dict[str, pd.DataFrame]]:
    from .. import pcap as pc

    captures: dict[str, list] = {}
    errors = []
    row: dict = {}
    for f in pcaps:
        host = f.name.split(".")[0].rsplit("-", 1)[0] if "-" in f.name else "capture"
        try:
            captures.setdefault(host, []).append(pc.read(f))
        except pc.PcapError as exc:
            errors.append(str(exc))
    if errors:
        row["pcap_error"] = "; ".join(errors)[:2000]
    if not captures:
        return row, {}
    res = pc.analyze(captures, addresses.get("client") or [], addresses.get("server") or [])
    out = {}
    if len(res.subflows):
        out["pcap_subflows"] = res.subflows
    if len(res.connections):
        out["pcap_connections"] = res.connections
        row.update(_main_connection(res))
    row["pcap_packets"] = res.packets
    if len(res.ofo):
        out["pcap_ofo"] = res.ofo
    return row, out


def _main_connection(res) -> dict:
    """The run columns of the connection direction that carried the most data."""
    row: dict = {}
    main = res.connections.sort_values("data_bytes", ascending=False).iloc[0]
    row["pcap_data_bytes"] = float(main["data_bytes"])
    row["pcap_ofo_bytes_max"] = float(main["ofo_bytes_max"])
    row["pcap_ofo_segs_max"] = float(main["ofo_segs_max"])
    for k in (*HOL, "hol_delay_max_ms"):
        row[f"pcap_{k}"] = float(main[k]) if main[k] is not None else np.nan
    row["pcap_reinjected_bytes"] = float(main["reinjected_bytes"])
    sf = res.subflows
    snd = sf[(sf.conn == main["conn"]) & (sf.direction == main["direction"])]
    if len(snd):
        # retransmissions are seen at the sender (a lost original never reaches the receiver)
        want = {"s2c": "server", "c2s": "client"}.get(main["direction"])
        sender = (
            want if want in set(snd["host"]) else snd.groupby("host")["bytes_wire"].sum().idxmax()
        )
        row["pcap_retrans_segs"] = float(snd[snd.host == sender]["retrans_segs"].sum())
    return row
