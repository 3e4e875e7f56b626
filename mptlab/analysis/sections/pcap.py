"""Packet traces against the kernel counters, per run with a capture: OFO queue
maximum, retransmissions and reinjections as each saw them."""

from __future__ import annotations

import math

from ..html import Markup, render, table
from ..units import human
from .context import Context
from .parts import pct, value


def _row(r) -> list:
    k = r.get("k_ofo_bytes_max")
    diff = (
        (r["pcap_ofo_bytes_max"] / k - 1)
        if k and isinstance(k, float) and math.isfinite(k) and k
        else math.nan
    )
    return [
        r["run_id"],
        value("k_ofo_bytes_max", k),
        value("pcap_ofo_bytes_max", r["pcap_ofo_bytes_max"]),
        pct(diff),
        human(r.get("k_tcp_retrans"), "count"),
        human(r.get("pcap_retrans_segs"), "count"),
        value("k_bytes_reinjected", r.get("k_bytes_reinjected")),
        value("pcap_reinjected_bytes", r.get("pcap_reinjected_bytes")),
        value("pcap_hol_delay_mean_ms", r.get("pcap_hol_delay_mean_ms")),
    ]


def section(ctx: Context) -> Markup | None:
    runs = ctx.runs
    if "pcap_ofo_bytes_max" not in runs or runs["pcap_ofo_bytes_max"].isna().all():
        return None
    rows = [_row(r) for _, r in runs[runs["pcap_ofo_bytes_max"].notna()].iterrows()]
    headers = [
        "run",
        "OFO max (kernel)",
        "OFO max (pcap)",
        "diff",
        "TCP retrans (kernel)",
        "retrans segs (pcap)",
        "reinjected (kernel)",
        "reinjected (pcap)",
        "HOL delay mean (pcap)",
    ]
    return render(
        "<h2 id='pcap'>Packet traces against the kernel counters</h2>{{ t }}",
        t=table(headers, rows),
    )
