"""TCP-dFEC's kernel records -> the run's FEC metrics (docs/fec.md).

The kernel prints one ``tcp_fec_stats`` record per FEC-negotiated socket
when it is destroyed (``mptlab.guest.tracepoints``).  A socket both sends
and receives, so every record has the sender's fields (``fec_sent``,
``fec_acked``, ``fec_lost``, ``fb_recovered``/``fb_failed`` as the receiver
reported them, ``ratio_mean_milli``, ``ratio_milli``, ``data_segs``,
``retrans_segs``) and the receiver's (``fec_rcvd``, ``fec_recovered``,
``fec_failed``).

The metrics are those of the workload's data connection, chosen as the rest
of the kernel counters choose it (``mptlab.analysis.ingest``: the connection
that sent the most): for MPTCP, the subflows of the connection whose
``mptcp_subflow_stats`` records sent the most bytes, matched by their
4-tuples; for plain TCP, the socket that sent the most data segments.  Its
*sender* sockets give what was sent, the peers (the same 4-tuples reversed)
what was received and rebuilt.

Only the standard library: this runs in the guest, and the unit tests feed it
hand-written records.
"""

from __future__ import annotations

from collections.abc import Callable

STATS = "tcp_fec_stats"


def _tuple(r: dict) -> tuple:
    return (r.get("saddr"), r.get("sport"), r.get("daddr"), r.get("dport"))


def _reverse(t: tuple) -> tuple:
    return (t[2], t[3], t[0], t[1])


def annotate(
    records: list[dict],
    path_of: Callable[[str], int | None],
    host_of: Callable[[str], str | None] = lambda addr: None,
) -> list[dict]:
    """The ``tcp_fec_stats`` records of ``records``, each with its ``path``
    (the index of its local address among the client's or the server's) and
    ``host`` (the role whose address it is: client, server, or None)."""
    out = []
    for r in records:
        if r.get("event") != STATS:
            continue
        r = dict(r)
        r["path"] = path_of(str(r.get("saddr", "")))
        r["host"] = host_of(str(r.get("saddr", "")))
        out.append(r)
    return out


def main_sockets(fec: list[dict], subflows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(sender records, receiver records) of the workload's data connection.

    MPTCP (``subflows``: ``mptcp_subflow_stats`` records): the subflows of
    the token that sent the most bytes, by 4-tuple (the sender's view) and
    reversed (the receiver's).  Otherwise, or when no FEC record matches
    them: the record with the most data segments (the data sender), with
    every MPTCP record of its host's address set towards the same peer when
    it is an MPTCP subflow, and the reversed 4-tuples as receivers."""
    if not fec:
        return [], []
    totals: dict = {}
    for sf in subflows:
        totals[sf.get("token")] = totals.get(sf.get("token"), 0) + int(sf.get("bytes_sent") or 0)
    if totals:
        token = max(totals, key=lambda t: totals[t])
        mine = {_tuple(sf) for sf in subflows if sf.get("token") == token}
        senders = [r for r in fec if _tuple(r) in mine]
        if senders:
            back = {_reverse(t) for t in mine}
            return senders, [r for r in fec if _tuple(r) in back]
    top = max(fec, key=lambda r: int(r.get("data_segs") or 0))
    if top.get("mptcp"):
        # no subflow record to match: the MPTCP subflows sent from the top
        # sender's side (its path's host) towards the same peer port
        senders = [
            r
            for r in fec
            if r.get("mptcp")
            and r.get("host") == top.get("host")
            and (r.get("dport") == top.get("dport") or r.get("sport") == top.get("sport"))
        ]
    else:
        senders = [top]
    back = {_reverse(_tuple(r)) for r in senders}
    return senders, [r for r in fec if _tuple(r) in back]


def _sum(records: list[dict], key: str) -> int:
    return sum(int(r.get(key) or 0) for r in records)


def _socket_metrics(snd: list[dict], rcv: list[dict]) -> dict:
    sent, data, retrans = _sum(snd, "fec_sent"), _sum(snd, "data_segs"), _sum(snd, "retrans_segs")
    weighted = sum(int(r.get("ratio_mean_milli") or 0) * int(r.get("fec_sent") or 0) for r in snd)
    end = [r for r in snd if r.get("ratio_milli") is not None]
    end_weight = _sum(end, "data_segs")
    out: dict = {
        "fec_sent": sent,
        "fec_lost": _sum(snd, "fec_lost"),
        # what the receiver rebuilt: its own count, else what it reported back
        "fec_recovered": _sum(rcv, "fec_recovered") if rcv else _sum(snd, "fb_recovered"),
        "fec_failed": _sum(rcv, "fec_failed") if rcv else _sum(snd, "fb_failed"),
        "fec_ratio_mean": weighted / sent / 1000 if sent else None,
        "fec_ratio_end": (
            sum(int(r["ratio_milli"]) * int(r.get("data_segs") or 0) for r in end)
            / end_weight
            / 1000
            if end_weight
            else (sum(int(r["ratio_milli"]) for r in end) / len(end) / 1000 if end else None)
        ),
        # FEC packets among all packets sent (the thesis's overhead, m / (k + m))
        "fec_overhead": sent / (sent + data) if sent + data else None,
        "fec_data_segs": data,
        "fec_retrans_segs": retrans,
        # the thesis's residual loss, over the whole transfer
        "fec_residual": retrans / (data - retrans) if data > retrans else None,
    }
    if rcv:
        out["fec_rcvd"] = _sum(rcv, "fec_rcvd")
    return out


def metrics(fec: list[dict], subflows: list[dict]) -> dict:
    """The run's FEC metrics (``fec_sent``, ``fec_recovered``, ``fec_failed``,
    ``fec_ratio_mean``, ``fec_ratio_end``, ``fec_overhead``, ``fec_lost``,
    ``fec_rcvd``, ``fec_data_segs``, ``fec_retrans_segs``, ``fec_residual``,
    ``fec_sockets``) of the data connection, and per path
    ``path<N>_fec_sent``, ``path<N>_fec_recovered``, ``path<N>_fec_failed``,
    ``path<N>_fec_ratio_mean``, ``path<N>_fec_overhead``.  Call it only when
    the experiment asked for FEC: with FEC off the metrics are absent, not 0;
    with FEC on and no socket that negotiated it (one end without FEC) the
    counts are 0, the ratios None and ``fec_sockets`` 0."""
    snd, rcv = main_sockets(fec, subflows)
    out = _socket_metrics(snd, rcv)
    out["fec_sockets"] = len(snd)
    paths = sorted({r["path"] for r in snd if r.get("path") is not None})
    if len(paths) > 1 or any(r.get("mptcp") for r in snd):
        for p in paths:
            mine = [r for r in snd if r.get("path") == p]
            back = {_reverse(_tuple(r)) for r in mine}
            theirs = [r for r in rcv if _tuple(r) in back]
            m = _socket_metrics(mine, theirs)
            for key in ("fec_sent", "fec_recovered", "fec_failed", "fec_ratio_mean"):
                out[f"path{p}_{key}"] = m[key]
            out[f"path{p}_fec_overhead"] = m["fec_overhead"]
    return out
