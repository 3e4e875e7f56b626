"""The kernel's own counters (result.json ``nstat`` and ``memory``: each
host's namespace at the workload's start and end) as the long ``nstat``
table, and the few that answer a paper's question as run columns
(``COUNTER_COLUMNS``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...spec.metrics import Metric
from .base import Run

NSTAT_COLUMNS = ["host", "mib", "counter", "name", "start", "end", "delta", "kind"]

# Kernel counters that become run columns: column -> (group, counter, hosts).
# The counters are per network namespace; a column sums the hosts named (None:
# every host).
# - or_*: the opportunistic re-send's own counters (kernel patch 0011): what
#   the BLEST paper's Table II counts ("retransmitted by OR&P").
#   k_bytes_reinjected also holds MPTCP-level re-sends after a timeout, which
#   no scheduler chooses (3G + WLAN bulk, n = 10: OR is 68 % of minRTT's
#   re-sent bytes, 90 % of BLEST's).
# - cwnd_restarts_*: RFC 2861 restarts of a socket's cwnd after an idle period
#   longer than its RTO (patch 0012), per host: the ECF paper's "initial
#   window resets" are the data sender's (the server in a download); the
#   client's are its requests after idle periods.
# - sbd_feedback_*: MPTCP-SBD's decisions on the wire (patch 0015): options
#   the receiver's subflows sent, and the sender's parsed (each decision rides
#   on three segments of each subflow).
COUNTER_COLUMNS: dict[str, tuple[str, str, tuple[str, ...] | None]] = {
    "or_resent_segs": ("MPTcpExt", "OppRetrans", None),
    "or_resent_bytes": ("MPTcpExt", "OppRetransBytes", None),
    "cwnd_restarts_server": ("TcpExt", "TCPCwndRestart", ("server",)),
    "cwnd_restarts_client": ("TcpExt", "TCPCwndRestart", ("client",)),
    "sbd_feedback_sent": ("MPTcpExt", "SbdTx", None),
    "sbd_feedback_received": ("MPTcpExt", "SbdRx", None),
}
_UNKNOWN = "NaN (unknown) with a kernel built before patch"
METRICS = (
    Metric(
        "or_resent_segs",
        "segments",
        None,
        "what the opportunistic retransmission re-sent (the BLEST paper's \"retransmitted "
        f'by OR&P", its Table II), summed over hosts (MPTcpExtOppRetrans); {_UNKNOWN} 0011',
    ),
    Metric(
        "or_resent_bytes",
        "B",
        None,
        f"the same in bytes (MPTcpExtOppRetransBytes); unlike k_bytes_reinjected without "
        f"MPTCP-level re-sends after a timeout; {_UNKNOWN} 0011",
    ),
    Metric(
        "cwnd_restarts_{host}",
        "",
        "lower",
        "RFC 2861 restarts of a socket's cwnd after it sent nothing for longer than its RTO, "
        "in that host's namespace (server, client; TcpExtTCPCwndRestart): the ECF paper's "
        f'"initial window resets" are the data sender\'s; {_UNKNOWN} 0012',
    ),
    Metric(
        "sbd_feedback_sent",
        "",
        None,
        f"MPTCP-SBD options the receiver's subflows sent (MPTcpExtSbdTx); {_UNKNOWN} 0015",
    ),
    Metric(
        "sbd_feedback_received",
        "",
        None,
        f"MPTCP-SBD options the sender parsed (MPTcpExtSbdRx); {_UNKNOWN} 0015",
    ),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    ns = nstat_rows(run.result)
    return counter_columns(run.result), ({"nstat": ns} if len(ns) else {})


def counter_columns(result: dict) -> dict:
    """The COUNTER_COLUMNS of a run: each counter's change during the run,
    summed over its hosts.  NaN where the kernel has no such counter (built
    before the patch that adds it), a host is missing, or a host's start or
    end snapshot lacks it: unknown, not zero."""
    nstat = result.get("nstat") or {}
    out = {col: np.nan for col in COUNTER_COLUMNS}
    if not nstat:
        return out
    for col, (group, counter, hosts) in COUNTER_COLUMNS.items():
        total = 0.0
        for host in hosts or tuple(nstat):
            entry = nstat.get(host) or {}
            a = ((entry.get("start") or {}).get(group) or {}).get(counter)
            b = ((entry.get("end") or {}).get(group) or {}).get(counter)
            if a is None or b is None:
                total = np.nan
                break
            total += b - a
        out[col] = float(total)
    return out


def nstat_rows(result: dict) -> pd.DataFrame:
    """result.json ``nstat`` and ``memory`` in long form: one row per host and
    counter that is non-zero at the start or the end of the run.  ``mib`` is
    the group (``TcpExt``, ``MPTcpExt``, ``Tcp``, ...), ``name`` the counter
    as ``nstat`` prints it (``TcpExtTCPOFOQueue``); ``kind`` is ``counter``
    (``delta`` = end - start) or ``gauge`` (``sockstat``, ``meminfo``,
    ``tcp_mem``: values at the two moments, host ``guest`` for guest-wide
    ones)."""
    rows = []
    for host, entry in (result.get("nstat") or {}).items():
        start, end = entry.get("start") or {}, entry.get("end") or {}
        for mib in dict.fromkeys([*start, *end]):
            a, b = start.get(mib) or {}, end.get(mib) or {}
            for counter in dict.fromkeys([*a, *b]):
                v0, v1 = a.get(counter), b.get(counter)
                if not v0 and not v1:
                    continue
                d = v1 - v0 if v0 is not None and v1 is not None else None
                rows.append((host, mib, counter, f"{mib}{counter}", v0, v1, d, "counter"))
    for (host, mib, counter), (v0, v1) in _gauges(result.get("memory") or {}).items():
        d = v1 - v0 if v0 is not None and v1 is not None else None
        rows.append((host, mib, counter, f"{mib}{counter}", v0, v1, d, "gauge"))
    df = pd.DataFrame(rows, columns=NSTAT_COLUMNS)
    for c in ("start", "end", "delta"):
        df[c] = df[c].astype("Int64")
    return df


def _gauges(mem: dict) -> dict[tuple, list]:
    """(host, mib, counter) -> [value at the start, at the end] of result.json ``memory``."""
    gauges: dict[tuple, list] = {}
    for i, snap in enumerate((mem.get("start") or {}, mem.get("end") or {})):
        for k, v in (snap.get("meminfo_kb") or {}).items():
            gauges.setdefault(("guest", "meminfo", f"{k}_kB"), [None, None])[i] = v
        for k, v in enumerate(snap.get("tcp_mem_pages") or []):
            name = ("min", "pressure", "max")[k] if k < 3 else str(k)
            gauges.setdefault(("guest", "tcp_mem", f"{name}_pages"), [None, None])[i] = v
        for host, groups in (snap.get("sockstat") or {}).items():
            for g, values in (groups or {}).items():
                for k, v in values.items():
                    gauges.setdefault((host, f"sockstat_{g}", k), [None, None])[i] = v
    return gauges
