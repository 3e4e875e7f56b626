"""Kernel tracepoints inside the guest: enable the mptlab events and parse
what they print.

The kernel patch ``0002`` adds three events (see kernel/README.md):

- ``mptcp:mptcp_subflow_stats``: once per subflow when it closes: bytes handed
  to it and reinjected, TCP retransmissions, addresses;
- ``mptcp:mptcp_conn_stats``: once per connection when it is destroyed;
- ``mptcp:mptcp_ofo_queue``: every change of the out-of-order queue.

The TCP-dFEC patch adds two more (system ``tcp``; enabled only when the
experiment sets ``kernel.fec``, docs/fec.md):

- ``tcp:tcp_fec_stats``: once per FEC-negotiated socket when it is destroyed:
  FEC packets sent, acknowledged, lost, recoveries, the mean and final ratio,
  data and retransmitted segments;
- ``tcp:tcp_fec_ratio``: every re-evaluation of a socket's dynamic ratio.

During a run, ``TraceReader`` drains the buffer (``trace_pipe``) every half
second, so a long run cannot overflow it: OFO events and FEC ratio changes go
to compact CSVs with wall-clock times, everything else to ``ktrace.txt``.
Events lost anyway (the kernel's overrun counters) are counted, never
silently dropped.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sbdu import SbdUnit

TRACEFS = Path("/sys/kernel/tracing")
STATS_EVENTS = ("mptcp_subflow_stats", "mptcp_conn_stats")
OFO_EVENT = "mptcp_ofo_queue"
OFO_COLUMNS = "t,token,ofo_bytes,ofo_segs"
FEC_STATS_EVENT = "tcp/tcp_fec_stats"
FEC_RATIO_EVENT = "tcp/tcp_fec_ratio"
FEC_EVENTS = (FEC_STATS_EVENT, FEC_RATIO_EVENT)
FEC_RATIO_COLUMNS = "t,saddr,sport,daddr,dport,ratio,residual,srtt_us"

_FIELD = re.compile(r"(\w+)=(\S+)")
_EVENT = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>[\d.]+): (?P<event>\w+): (?P<body>.*)$"
)


_OFO = re.compile(r"\s([\d.]+): mptcp_ofo_queue: token=([0-9a-f]+) ofo_bytes=(\d+) ofo_segs=(\d+)")
_FEC_RATIO_FIELDS = ("saddr", "sport", "daddr", "dport", "ratio_milli", "residual_ppm", "srtt_us")


def event_path(event: str) -> Path:
    """An event's directory: ``system/name`` (``tcp/tcp_fec_stats``), or a bare
    name of mptlab's MPTCP events (``mptcp_ofo_queue`` = ``mptcp/mptcp_ofo_queue``)."""
    system, sep, name = event.partition("/")
    return TRACEFS / "events" / (system if sep else "mptcp") / (name if sep else system)


def event_name(event: str) -> str:
    """The name the trace prints (``tcp/tcp_fec_stats`` -> ``tcp_fec_stats``)."""
    return event.rpartition("/")[2]


def enable(
    events: tuple[str, ...] = STATS_EVENTS, buffer_kb: int = 8192, clock: str | None = None
) -> None:
    """Clear the trace buffer and enable ``events`` (``system/name``, or bare
    names under events/mptcp/); ``clock="mono"`` stamps events with
    CLOCK_MONOTONIC (``time.monotonic()``).  An event the kernel does not
    have is an error that names it."""
    (TRACEFS / "buffer_size_kb").write_text(str(buffer_kb))
    if clock:
        (TRACEFS / "trace_clock").write_text(clock)
    (TRACEFS / "trace").write_text("")
    for event in events:
        path = event_path(event)
        if not path.is_dir():
            raise RuntimeError(
                f"kernel tracepoint {event} missing ({path} does not exist): "
                "a kernel without the patch that adds it?"
            )
        (path / "enable").write_text("1")


def _value(key: str, text: str):
    # a token is printed as %08x: kept as text even when its eight hex digits
    # are all decimal ones (2.3 % of tokens), which int() would misread
    if key.startswith("token") or not re.fullmatch(r"-?\d+", text):
        return text
    return int(text)


def parse(text: str) -> list[dict]:
    """Events in ftrace's text format as dicts: ``event``, ``ts`` and the printed fields."""
    events = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _EVENT.match(line)
        if not m:
            continue
        record = {"event": m["event"], "ts": float(m["ts"])}
        for key, value in _FIELD.findall(m["body"]):
            record[key] = _value(key, value)
        events.append(record)
    return events


def read(events: tuple[str, ...] | None = None) -> list[dict]:
    """Parse the current trace buffer, keeping only ``events`` if given."""
    records = parse((TRACEFS / "trace").read_text())
    if events is not None:
        records = [r for r in records if r["event"] in events]
    return records


def sender_subflows(records: list[dict], token: str | None = None) -> list[dict]:
    """The ``mptcp_subflow_stats`` records of the connection that sent the most data
    (or of ``token``), one per subflow."""
    subflows = [r for r in records if r["event"] == "mptcp_subflow_stats"]
    if token is None:
        totals: dict[str, int] = {}
        for r in subflows:
            totals[r["token"]] = totals.get(r["token"], 0) + r["bytes_sent"]
        if not totals:
            return []
        token = max(totals, key=lambda t: totals[t])
    return [r for r in subflows if r["token"] == token]


def lost_events() -> int:
    """Events the kernel could not keep (ring buffer overruns plus dropped
    events, summed over CPUs) since the buffer was last cleared."""
    total = 0
    for stats in (TRACEFS / "per_cpu").glob("cpu*/stats"):
        for line in stats.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("overrun", "dropped events"):
                total += int(value.split()[0])
    return total


def split_ofo(lines: list[str], offset: float) -> tuple[list[str], list[str]]:
    """ftrace text lines -> (OFO change CSV rows ``t,token,ofo_bytes,ofo_segs``
    with ``t`` = event time + ``offset``, every other non-empty line); rows and
    lines end in a newline."""
    rows, other = [], []
    for line in lines:
        m = _OFO.search(line) if OFO_EVENT in line else None
        if m:
            rows.append(f"{float(m[1]) + offset:.6f},{m[2]},{m[3]},{m[4]}\n")
        elif line:
            other.append(line + "\n")
    return rows, other


def fec_ratio_row(line: str, offset: float) -> str | None:
    """A ``tcp_fec_ratio`` event as a CSV row of ``FEC_RATIO_COLUMNS``:
    ``t`` = event time + ``offset``, ``ratio`` in segments (ratio_milli /
    1000), ``residual`` as a fraction (residual_ppm / 10^6); None for any
    other line."""
    m = _EVENT.match(line) if "tcp_fec_ratio" in line else None
    if not m or m["event"] != "tcp_fec_ratio":
        return None
    f = dict(_FIELD.findall(m["body"]))
    if not all(k in f for k in _FEC_RATIO_FIELDS):
        return None
    try:
        ratio, residual = int(f["ratio_milli"]) / 1000, int(f["residual_ppm"]) / 1e6
    except ValueError:
        return None
    return (
        f"{float(m['ts']) + offset:.6f},{f['saddr']},{f['sport']},{f['daddr']},{f['dport']},"
        f"{ratio:.3f},{residual:.6f},{f['srtt_us']}\n"
    )


def split_events(lines: list[str], offset: float) -> tuple[list[str], list[str], list[str]]:
    """ftrace text lines -> (OFO change CSV rows, FEC ratio CSV rows, every
    other non-empty line), with wall-clock times (event time + ``offset``);
    rows and lines end in a newline."""
    rows, fec, other = [], [], []
    for line in lines:
        m = _OFO.search(line) if OFO_EVENT in line else None
        if m:
            rows.append(f"{float(m[1]) + offset:.6f},{m[2]},{m[3]},{m[4]}\n")
            continue
        row = fec_ratio_row(line, offset)
        if row is not None:
            fec.append(row)
        elif line:
            other.append(line + "\n")
    return rows, fec, other


class TraceReader:
    """Drain ``trace_pipe`` into ``text_path`` (every event but OFO changes
    and FEC ratio changes), ``ofo_path`` (OFO changes as
    ``t,token,ofo_bytes,ofo_segs`` with ``t`` in wall-clock seconds; needs
    ``enable(clock="mono")``) and ``fec_ratio_path`` (if given: FEC ratio
    changes as ``FEC_RATIO_COLUMNS``) every ``interval`` s in a thread, then
    once more on ``stop()``."""

    def __init__(
        self,
        text_path: Path,
        ofo_path: Path,
        interval: float = 0.5,
        fec_ratio_path: Path | None = None,
        sbd: SbdUnit | None = None,
    ):
        self.offset = time.time() - time.monotonic()
        self.fd = os.open(TRACEFS / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        self.text = open(text_path, "w")  # noqa: SIM115 - closed in stop()
        self.ofo = open(ofo_path, "w")  # noqa: SIM115
        self.ofo.write(OFO_COLUMNS + "\n")
        self.ofo_events = 0
        self.fec = open(fec_ratio_path, "w") if fec_ratio_path else None  # noqa: SIM115
        if self.fec:
            self.fec.write(FEC_RATIO_COLUMNS + "\n")
        self.fec_ratio_events = 0
        self.sbd = sbd
        self.partial = ""
        self.interval = interval
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.drain()

    def drain(self) -> None:
        self._read()
        if self.sbd is not None:  # everything traced so far is read: close SBD's intervals
            self.sbd.advance(time.monotonic(), self.offset)

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 17)
            except BlockingIOError:
                return
            if not chunk:
                return
            lines = (self.partial + chunk.decode(errors="replace")).split("\n")
            self.partial = lines.pop()
            if self.sbd is not None:  # one-way delays go to SBD, not to ktrace.txt
                lines = self.sbd.feed(lines)
            rows, fec, other = split_events(lines, self.offset)
            self.ofo_events += len(rows)
            self.ofo.writelines(rows)
            self.fec_ratio_events += len(fec)
            if self.fec:
                self.fec.writelines(fec)
            self.text.writelines(other)

    def stop(self) -> int:
        """Stop, drain what is left, close the files; the number of OFO events."""
        self.stop_event.set()
        self.thread.join(10)
        self.drain()
        if self.partial:
            self.text.write(self.partial + "\n")
        os.close(self.fd)
        self.text.close()
        self.ofo.close()
        if self.fec:
            self.fec.close()
        return self.ofo_events
