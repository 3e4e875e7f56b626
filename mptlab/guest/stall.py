"""The stall watchdog: a run whose data level stops moving is ended, and said why.

A real run (bulk iperf3 over MPTCP, 3G + WLAN) once froze for good: the
receiver held megabytes in its MPTCP out-of-order queue, the data level
never moved again, and iperf3 gave up after its idle timeout.  This module
catches that inside the guest, while the state is still there to look at.

What is watched: every connection in the client's and the server's
namespaces (the background flows run between background hosts, in other
namespaces), read through sock_diag (``mptlab.guest.sampler.Diag``, the
fields by name) every ``POLL_S``:

- an MPTCP connection (not fallen back to TCP): its data level is
  ``snd_una`` (the data sequence number the peer acknowledged: data that
  arrived *in order*), data is outstanding while ``write_seq > snd_una``
  (written by the application, not yet acknowledged: unsent or in flight);
- a plain TCP socket (single-path runs, or a tool that is not MPTCP), or
  the subflow of an MPTCP connection that fell back to TCP (whose MPTCP
  ``snd_una`` then follows ``snd_nxt`` and says nothing): the level is
  ``bytes_acked``, outstanding means ``unacked > 0`` or ``notsent_bytes > 0``;
- the subflows of a working MPTCP connection are not judged one by one: a
  subflow on a dead path while the connection goes on over another is not
  a stall.

A connection stalls when data is outstanding and its level has not moved
for ``stall_timeout`` (``Detector``).  Application-paced idle time (CBR
gaps, a DASH player with a full buffer, think time between page loads) has
nothing outstanding and never counts.  A receiver application that stops
reading would (the window closes, the level freezes with data waiting): no
workload here does that.

When a connection stalls, the watchdog writes ``traces/stall-snapshot.json``
(every MPTCP connection and subflow of both hosts with every field the
sampler reads, the nstat counters, ``ss -tinmM``), says what it saw in words
(``describe``) and lets the agent stop the workload.

``stall_timeout: auto`` (the default) is ``auto_timeout()`` of the planned
links; see docs/experiments.md for the reasoning.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..spec.shapes import ETH_FRAME
from . import sampler
from .netlab import in_netns
from .nstat import parse_sockstat, read_fd

# A poll is a sock_diag dump per namespace and protocol, each walking the
# kernel's socket hash tables for IPv4 and IPv6: ~4-8 ms of guest CPU per
# namespace and protocol measured in the UML guest during a transfer (the
# 100 ms sampler does the same dumps ten times a second).  Once a second is
# plenty against timeouts of 6 s and more.
POLL_S = 1.0
# auto stall_timeout = worst path RTT + its RTO + MARGIN_S + the longest planned
# outage (docs/experiments.md has the reasoning)
RTO_MIN_S = 0.2  # Linux TCP_RTO_MIN
BACKOFFS = 5  # timeouts of one segment in a row the margin covers at the minimum RTO
MARGIN_S = RTO_MIN_S * (2**BACKOFFS - 1)  # 0.2 + 0.4 + 0.8 + 1.6 + 3.2 = 6.2 s
MPTCP_INFO_FLAGS_OFFSET = 8  # struct mptcp_info.mptcpi_flags (uapi, stable since 5.x)
MPTCP_INFO_FLAG_FALLBACK = 1
TCP_STATES = {
    1: "ESTABLISHED",
    2: "SYN_SENT",
    3: "SYN_RECV",
    4: "FIN_WAIT1",
    5: "FIN_WAIT2",
    6: "TIME_WAIT",
    7: "CLOSE",
    8: "CLOSE_WAIT",
    9: "LAST_ACK",
    10: "LISTEN",
    11: "CLOSING",
}


# ------------------------------------------------------------ the timeout
def _shape_delay_s(shape) -> float:
    return (shape.delay + 2 * shape.jitter) / 1000 if shape is not None else 0.0


def _shape_queue_s(shape, link_rtt_ms: float) -> float:
    """Time to drain a full bottleneck queue (0: no rate limit, no queue)."""
    if shape is None or not shape.rate:
        return 0.0
    q = shape.queue
    limit = q.limit_bytes(shape.rate, link_rtt_ms)
    if limit is None:
        limit = q.limit_packets(shape.rate, link_rtt_ms) * ETH_FRAME
    return limit * 8 / (shape.rate * 1e6)


def path_rtts(plan, client: str, server: str) -> list[dict]:
    """Each (client address, server address) pair the plan routes both ways:
    its propagation RTT (``rtt_s``, delays plus twice the jitter, both
    directions) and the time to drain the full bottleneck queues of its
    slower direction (``queue_s``), with the worst shape each link has
    during the run (link events included)."""
    shapes: dict[tuple[int, str], list] = {}
    for i, ln in enumerate(plan.links):
        shapes[(i, "a_to_b")] = [ln.a_to_b]
        shapes[(i, "b_to_a")] = [ln.b_to_a]
    for ev in plan.events:
        for d in ("a_to_b", "b_to_a"):
            if ev.get(d) is not None:
                shapes[(ev["link"], d)].append(ev[d])

    def link_rtt_ms(i: int) -> float:
        ln = plan.links[i]
        return sum(s.delay for s in (ln.a_to_b, ln.b_to_a) if s is not None)

    def cost(hops) -> tuple[float, float]:
        delay = queue = 0.0
        for i, d in hops:
            delay += max(_shape_delay_s(s) for s in shapes[(i, d)])
            queue += max(_shape_queue_s(s, link_rtt_ms(i)) for s in shapes[(i, d)])
        return delay, queue

    out = []
    for c_addr in plan.addresses(client):
        for s_addr in plan.addresses(server):
            fwd = plan.route(client, c_addr, s_addr)
            rev = plan.route(server, s_addr, c_addr)
            if fwd is None or rev is None:
                continue
            (d1, q1), (d2, q2) = cost(fwd), cost(rev)
            out.append(
                {"client": c_addr, "server": s_addr, "rtt_s": d1 + d2, "queue_s": max(q1, q2)}
            )
    return out


def planned_outage_s(plan) -> float:
    """The longest time a link direction is planned to drop everything
    (``loss`` 100 % from a link event, or from the start, until a later event
    lowers it): a run that is meant to stand still that long must not count
    as stalled.  An outage that never ends adds nothing (it is a stall)."""
    longest = 0.0
    for i, ln in enumerate(plan.links):
        for d in ("a_to_b", "b_to_a"):
            base = getattr(ln, d)
            since = 0.0 if base is not None and base.loss >= 100 else None
            for ev in sorted(plan.events, key=lambda e: e["at_ms"]):
                shape = ev.get(d) if ev["link"] == i else None
                if shape is None:
                    continue
                t = ev["at_ms"] / 1000
                if shape.loss >= 100 and since is None:
                    since = t
                elif shape.loss < 100 and since is not None:
                    longest = max(longest, t - since)
                    since = None
    return longest


def auto_timeout(plan, client: str, server: str) -> tuple[float, dict]:
    """(seconds, how it was reached): worst path RTT with full queues, plus
    the RTO such an RTT gives (srtt + 4 rttvar, about twice the RTT, at
    least TCP_RTO_MIN on top), plus ``MARGIN_S``, plus twice the longest
    planned outage."""
    paths = path_rtts(plan, client, server)
    if paths:
        worst = max(paths, key=lambda p: p["rtt_s"] + p["queue_s"])
        rtt = worst["rtt_s"] + worst["queue_s"]
    else:  # no routed pair (should not happen): every shaped link at once
        rtt = 0.0
        for ln in plan.links:
            lrtt = sum(s.delay for s in (ln.a_to_b, ln.b_to_a) if s is not None)
            rtt += sum(_shape_delay_s(s) + _shape_queue_s(s, lrtt) for s in (ln.a_to_b, ln.b_to_a))
        worst = None
    rto = 2 * rtt + RTO_MIN_S
    outage = planned_outage_s(plan)
    # after an outage of O s the next retransmission comes when the backed-off
    # RTO expires: up to about O s later (the timeouts double)
    seconds = rtt + rto + MARGIN_S + 2 * outage
    return round(seconds, 3), {
        "worst_path": worst,
        "worst_rtt_s": round(rtt, 4),
        "rto_s": round(rto, 4),
        "margin_s": round(MARGIN_S, 3),
        "planned_outage_s": outage,
    }


def resolve_timeout(setting, plan, client: str, server: str) -> tuple[float | None, dict]:
    """The run's stall timeout in s from the config's ``stall_timeout``
    (``"auto"``, ``"off"`` or ms; absent: auto) and how it was chosen."""
    if setting in (None, "auto"):
        seconds, how = auto_timeout(plan, client, server)
        return seconds, {"setting": "auto", **how}
    if setting == "off":
        return None, {"setting": "off"}
    return float(setting) / 1000, {"setting": "config"}


# ------------------------------------------------------------ the decision
@dataclass
class Conn:
    """One connection as the watchdog sees it at one poll."""

    key: tuple  # stable across polls: (host, kind, saddr, sport, daddr, dport)
    host: str  # where the socket lives: the sending side of what is outstanding
    kind: str  # "mptcp" | "tcp"
    level: int  # data level: MPTCP snd_una, TCP bytes_acked
    outstanding: bool
    fields: dict = field(default_factory=dict)  # everything read, for the words


@dataclass
class Frozen:
    conn: Conn
    level: int  # the level it is frozen at
    seconds: float  # for how long


class Detector:
    """Feed it every poll's connections; it says which stalled.

    A connection's clock restarts whenever its level moves or nothing is
    outstanding; it stalls when the clock reaches ``timeout_s``.  A
    connection seen for the first time starts its clock then."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.state: dict[tuple, tuple[int, float]] = {}  # key -> (level, since)
        self.last: list[Conn] = []

    def update(self, now: float, conns: list[Conn]) -> list[Frozen]:
        state = {}
        frozen = []
        for c in conns:
            level, since = self.state.get(c.key, (c.level, now))
            if c.level != level or not c.outstanding:
                level, since = c.level, now
            state[c.key] = (level, since)
            if c.outstanding and now - since >= self.timeout_s:
                frozen.append(Frozen(c, level, now - since))
        self.state = state
        self.last = conns
        return sorted(frozen, key=lambda f: -f.seconds)

    def longest(self, now: float) -> Frozen | None:
        """The connection with data outstanding whose level has stood still
        longest (below the timeout too), or None."""
        best = None
        for c in self.last:
            if not c.outstanding or c.key not in self.state:
                continue
            level, since = self.state[c.key]
            if best is None or now - since > best.seconds:
                best = Frozen(c, level, now - since)
        return best


def _int(v) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def connections(host: str, mptcp: list[dict], subflows: list[dict]) -> list[Conn]:
    """The connections of one host to judge: MPTCP connections that did not
    fall back, plain TCP sockets, and the subflows of fallen-back MPTCP
    connections (``mptcp``: records with the sampler's MPTCP fields and
    ``fallback``; ``subflows``: the sampler's subflow rows as dicts)."""
    out = []
    fallback_tokens = set()
    for m in mptcp:
        if m.get("fallback"):
            fallback_tokens.add(_int(m.get("token")))
            continue
        out.append(
            Conn(
                (host, "mptcp", m["saddr"], m["sport"], m["daddr"], m["dport"]),
                host,
                "mptcp",
                _int(m.get("snd_una")),
                _int(m.get("write_seq")) != _int(m.get("snd_una")),
                m,
            )
        )
    for s in subflows:
        token = s.get("token_loc")
        if token not in (None, "") and _int(token) not in fallback_tokens:
            continue  # a subflow of a working MPTCP connection: the connection is judged
        out.append(
            Conn(
                (host, "tcp", s["saddr"], s["sport"], s["daddr"], s["dport"]),
                host,
                "tcp",
                _int(s.get("bytes_acked")),
                _int(s.get("unacked")) > 0 or _int(s.get("notsent_bytes")) > 0,
                s,
            )
        )
    return out


# ------------------------------------------------------------ the words
def size(n: float) -> str:
    n = float(n)
    if abs(n) >= 1e6:
        return f"{n / 1e6:.1f} MB"
    if abs(n) >= 1e3:
        return f"{n / 1e3:.1f} kB"
    return f"{n:.0f} B"


def _peer(conn: Conn, mptcp_by_host: dict[str, list[dict]]) -> tuple[str, dict] | None:
    """The other end of an MPTCP connection: the record in another host
    whose addresses are this one's, reversed."""
    f = conn.fields
    for host, records in mptcp_by_host.items():
        if host == conn.host:
            continue
        for m in records:
            if (m["saddr"], m["sport"], m["daddr"], m["dport"]) == (
                f["daddr"],
                f["dport"],
                f["saddr"],
                f["sport"],
            ):
                return host, m
    return None


def _subflow_words(s: dict, path_of) -> str:
    p = path_of(s.get("saddr")) if path_of else None
    state = TCP_STATES.get(_int(s.get("state")), str(s.get("state")))
    words = [
        f"{'path' + str(p) + ' ' if p else ''}{s['saddr']}:{s['sport']}->{s['daddr']}:{s['dport']}"
    ]
    if state != "ESTABLISHED":
        words.append(state)
    words.append(f"cwnd {s.get('cwnd')}")
    words.append(f"{s.get('unacked')} unacked")
    if _int(s.get("lost")):
        words.append(f"{s.get('lost')} lost")
    if _int(s.get("notsent_bytes")):
        words.append(f"{size(_int(s.get('notsent_bytes')))} not sent")
    words.append(f"rto {_int(s.get('rto')) / 1000:.0f} ms")
    words.append(f"srtt {_int(s.get('srtt_us')) / 1000:.0f} ms")
    words.append(f"{s.get('total_retrans')} retransmissions")
    return " ".join(words[:1]) + ": " + ", ".join(words[1:])


def describe(
    frozen: list[Frozen],
    mptcp_by_host: dict[str, list[dict]],
    subflows_by_host: dict[str, list[dict]],
    path_of=None,
) -> str:
    """The reason, in words: direction, how long the level stood still and
    where, what was outstanding, the receiver's MPTCP OFO queue, the subflows."""
    if not frozen:
        return ""
    f = frozen[0]
    c = f.conn
    m = c.fields
    peer = _peer(c, mptcp_by_host) if c.kind == "mptcp" else None
    others = [h for h in list(mptcp_by_host) + list(subflows_by_host) if h != c.host]
    to = peer[0] if peer else (others[0] if others else "peer")
    if c.kind == "mptcp":
        acked = m.get("bytes_acked")
        at = f"{_int(acked)} bytes" if acked not in (None, "") else f"data sequence {f.level}"
        text = (
            f"{c.host} -> {to}: MPTCP data level frozen at {at} for {f.seconds:.1f} s with "
            f"{size(_int(m.get('write_seq')) - _int(m.get('snd_una')))} outstanding"
        )
        if peer:
            r = peer[1]
            text += (
                f"; receiver's MPTCP OFO queue {size(_int(r.get('ofo_bytes')))} "
                f"({_int(r.get('ofo_segs'))} segments, max {size(_int(r.get('ofo_bytes_max')))})"
            )
        else:
            text += "; receiver's MPTCP socket not seen"
        token = _int(m.get("token"))
        subs = [
            s
            for s in subflows_by_host.get(c.host, [])
            if _int(s.get("token_loc")) == token and s.get("token_loc") not in (None, "")
        ]
        if subs:
            text += "; subflows: " + "; ".join(_subflow_words(s, path_of) for s in subs)
        elif c.host in subflows_by_host:  # read, and none of them is this connection's
            text += "; no subflow left"
    else:
        text = (
            f"{c.host} -> {to}: TCP data level frozen at {f.level} bytes acked for {f.seconds:.1f} s "
            f"(TCP {_subflow_words(m, path_of)})"
        )
    if len(frozen) > 1:
        text += f" (and {len(frozen) - 1} more connection(s) frozen)"
    return text


# ------------------------------------------------------------ the thread
def _mptcp_records(diag, now: float) -> list[dict]:
    """Every MPTCP connection (not listeners): the sampler's fields by name,
    the scheduler and whether it fell back to TCP."""
    s = sampler
    out = []
    for addrs, state, attrs in diag.dump(s.IPPROTO_MPTCP):
        if state == s.TCP_LISTEN or s.INET_DIAG_INFO not in attrs:
            continue
        blob = attrs[s.INET_DIAG_INFO]
        rec = {
            "t": round(now, 6),
            "saddr": addrs[0],
            "sport": addrs[1],
            "daddr": addrs[2],
            "dport": addrs[3],
            "state": state,
            **s._fields(blob, s.MPTCP_INFO),
        }
        flags = (
            struct.unpack_from("=I", blob, MPTCP_INFO_FLAGS_OFFSET)[0]
            if len(blob) >= MPTCP_INFO_FLAGS_OFFSET + 4
            else 0
        )
        rec["fallback"] = bool(flags & MPTCP_INFO_FLAG_FALLBACK)
        out.append(rec)
    return out


def _subflow_records(diag, now: float) -> list[dict]:
    s = sampler
    return [dict(zip(s.SUBFLOW_COLUMNS, row, strict=False)) for row in s.subflow_rows(diag, now)]


def memory_diagnosis(nstat_result: dict, tcp_mem_peak: int, tcp_mem: list[int] | None) -> str:
    """Words on TCP memory trouble in a run's counters, or "".

    Under TCP memory pressure an MPTCP receiver drops even the segment that
    fills the hole in its out-of-order queue (MPTcpExt RcvPruned) and never
    prunes that queue: the connection can deadlock (docs/stalls.md).
    """
    pruned = sum(h.get("delta", {}).get("MPTcpExt.RcvPruned", 0) for h in nstat_result.values())
    pressures = sum(
        h.get("delta", {}).get("TcpExt.TCPMemoryPressures", 0) for h in nstat_result.values()
    )
    if not pruned and not pressures:
        return ""
    words = []
    if pruned:
        words.append(
            f"the MPTCP receiver dropped {pruned} segments for lack of TCP memory "
            "(MPTcpExt RcvPruned)"
        )
    if pressures:
        words.append(f"TCP memory pressure began {pressures} times")
    if tcp_mem and tcp_mem_peak:
        words.append(f"peak TCP memory {tcp_mem_peak} pages, tcp_mem {'/'.join(map(str, tcp_mem))}")
    return "; ".join(words) + " (the receive-memory deadlock of docs/stalls.md)"


class Watchdog:
    """The detector in a thread of the agent, polling the client's and the
    server's namespaces every ``poll_s``.  ``fired`` is set once a
    connection stalled; ``reason`` and ``info`` say what happened and
    ``snapshot_path`` holds the state at that moment."""

    def __init__(
        self,
        namespaces: dict[str, str],
        timeout_s: float,
        snapshot_path: Path,
        poll_s: float = POLL_S,
        path_of=None,
        extra_snapshot=None,
        log=None,
        how: dict | None = None,
        mptcp: bool = True,
    ):
        self.namespaces = namespaces
        self.diags = {}
        for host, ns in namespaces.items():
            with in_netns(ns):
                self.diags[host] = sampler.Diag()
        self.detector = Detector(timeout_s)
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.snapshot_path = Path(snapshot_path)
        self.path_of = path_of
        self.extra_snapshot = extra_snapshot  # () -> dict merged into the snapshot (nstat)
        self.log = log or (lambda msg: None)
        self.how = how or {}
        self.mptcp = mptcp
        self.fired = threading.Event()
        self.stop_event = threading.Event()
        self.reason = ""
        self.info: dict = {}
        self.polls = 0
        self.error: str | None = None
        self.cpu_s = 0.0
        self.started = time.monotonic()
        self.last: tuple[dict, dict] = ({}, {})
        # TCP memory in use (pages, all namespaces: the budget is the guest's)
        # at every poll, so that a run says how close it came to tcp_mem
        # (docs/stalls.md); one read of an fd opened once.
        self.tcp_mem_peak = 0
        try:
            self._sockstat_fd: int | None = os.open("/proc/net/sockstat", os.O_RDONLY)
        except OSError:
            self._sockstat_fd = None
        self.thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)
        self.thread.start()

    def poll(self, subflows: bool = False) -> tuple[dict, dict]:
        """({host: MPTCP records}, {host: TCP socket records}).  An MPTCP run
        reads the TCP sockets only when it must judge them (a connection
        fell back to TCP, or there is no MPTCP connection at all: a tool
        that is not MPTCP) or when ``subflows`` asks: half the cost."""
        now = time.time()
        mptcp = {h: _mptcp_records(d, now) if self.mptcp else [] for h, d in self.diags.items()}
        records = [m for recs in mptcp.values() for m in recs]
        if subflows or not records or any(m.get("fallback") for m in records):
            tcp = {h: _subflow_records(d, now) for h, d in self.diags.items()}
        else:
            tcp = {}  # not read
        return mptcp, tcp

    def _run(self) -> None:
        cpu0 = time.thread_time()
        try:
            while not self.stop_event.is_set():
                mptcp, subflows = self.poll()
                self.last = (mptcp, subflows)
                self.polls += 1
                self._sample_tcp_mem()
                conns = [
                    c for h in self.diags for c in connections(h, mptcp[h], subflows.get(h, []))
                ]
                frozen = self.detector.update(time.monotonic(), conns)
                if frozen:
                    if not subflows:  # the subflows, for the words
                        subflows = self.poll(subflows=True)[1]
                    self._fire(frozen, mptcp, subflows)
                    return
                self.stop_event.wait(self.poll_s)
        except Exception as exc:  # noqa: BLE001 - the watchdog must never break the run
            self.error = f"{type(exc).__name__}: {exc}"
            self.log(f"stall watchdog stopped: {self.error}")
        finally:
            self.cpu_s = time.thread_time() - cpu0

    def _sample_tcp_mem(self) -> None:
        if self._sockstat_fd is None:
            return
        pages = parse_sockstat(read_fd(self._sockstat_fd)).get("TCP", {}).get("mem", 0)
        self.tcp_mem_peak = max(self.tcp_mem_peak, pages)

    def _fire(self, frozen: list[Frozen], mptcp: dict, subflows: dict) -> None:
        self.reason = describe(frozen, mptcp, subflows, self.path_of)
        f = frozen[0]
        self.info = {
            "t": time.time(),
            "after_s": round(time.monotonic() - self.started, 3),
            "frozen_s": round(f.seconds, 3),
            "stall_timeout_s": self.timeout_s,
            "host": f.conn.host,
            "kind": f.conn.kind,
            "level": f.level,  # MPTCP: the data sequence number snd_una; TCP: bytes acked
            "bytes_acked": _int(f.conn.fields.get("bytes_acked"))
            if f.conn.kind == "mptcp"
            else f.level,
            "connections_frozen": [
                {
                    "host": x.conn.host,
                    "kind": x.conn.kind,
                    "frozen_s": round(x.seconds, 3),
                    "level": x.level,
                    **{k: x.conn.fields.get(k) for k in ("saddr", "sport", "daddr", "dport")},
                }
                for x in frozen
            ],
            "snapshot": str(self.snapshot_path.name),
        }
        self.log(f"stall: {self.reason}")
        try:
            self.write_snapshot(frozen, mptcp, subflows)
        except Exception as exc:  # noqa: BLE001 - the stall is reported without it
            self.log(f"stall snapshot failed: {type(exc).__name__}: {exc}")
        self.fired.set()

    def write_snapshot(self, frozen: list[Frozen], mptcp: dict, subflows: dict) -> None:
        snap: dict = {
            "t": time.time(),
            "reason": self.reason,
            "stall": self.info,
            "hosts": {h: {"mptcp": mptcp[h], "subflows": subflows.get(h, [])} for h in self.diags},
        }
        if self.extra_snapshot:
            try:
                snap.update(self.extra_snapshot())
            except Exception as exc:  # noqa: BLE001
                snap["extra_error"] = f"{type(exc).__name__}: {exc}"
        ss = {}
        for host, ns in self.namespaces.items():  # once per run: a process each is affordable
            try:
                proc = subprocess.run(
                    ["ip", "netns", "exec", ns, "ss", "-tinmM"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                )
                ss[host] = proc.stdout + proc.stderr
            except (OSError, subprocess.TimeoutExpired) as exc:
                ss[host] = f"ss failed: {exc}"
        snap["ss"] = ss
        tmp = self.snapshot_path.with_name(self.snapshot_path.name + ".tmp")
        tmp.write_text(json.dumps(snap, indent=1, default=str))
        tmp.replace(self.snapshot_path)

    def observation(self) -> str:
        """The longest current freeze of a connection with data outstanding,
        in words (for a workload that failed before the watchdog fired), or ""."""
        longest = self.detector.longest(time.monotonic())
        if longest is None or longest.seconds < 2 * self.poll_s:
            return ""
        mptcp, subflows = self.last
        return describe([longest], mptcp, subflows, self.path_of)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(10)
        if self._sockstat_fd is not None and not self.thread.is_alive():
            os.close(self._sockstat_fd)
            self._sockstat_fd = None

    def summary(self) -> dict:
        return {
            "stall_timeout_s": self.timeout_s,
            **self.how,
            "watched": "MPTCP connections" if self.mptcp else "TCP sockets",
            "poll_s": self.poll_s,
            "polls": self.polls,
            "cpu_s": round(self.cpu_s, 4),
            "fired": self.fired.is_set(),
            "error": self.error,
            "tcp_mem_peak_pages": self.tcp_mem_peak,
        }
