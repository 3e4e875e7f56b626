"""Kernel tracepoints inside the guest: enable the mptlab MPTCP events and
parse what they print.

The kernel patch ``0002`` adds three events (see kernel/README.md):

- ``mptcp:mptcp_subflow_stats``: once per subflow when it closes: bytes handed
  to it and reinjected, TCP retransmissions, addresses;
- ``mptcp:mptcp_conn_stats``: once per connection when it is destroyed;
- ``mptcp:mptcp_ofo_queue``: every change of the out-of-order queue.

During a run, ``TraceReader`` drains the buffer (``trace_pipe``) every half
second, so a long run cannot overflow it: OFO events go to a compact CSV with
wall-clock times, everything else to ``ktrace.txt``.  Events lost anyway (the
kernel's overrun counters) are counted, never silently dropped.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
STATS_EVENTS = ("mptcp_subflow_stats", "mptcp_conn_stats")
OFO_EVENT = "mptcp_ofo_queue"
OFO_COLUMNS = "t,token,ofo_bytes,ofo_segs"

_FIELD = re.compile(r"(\w+)=(\S+)")
_EVENT = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>[\d.]+): (?P<event>\w+): (?P<body>.*)$"
)


_OFO = re.compile(r"\s([\d.]+): mptcp_ofo_queue: token=([0-9a-f]+) ofo_bytes=(\d+) ofo_segs=(\d+)")


def enable(
    events: tuple[str, ...] = STATS_EVENTS, buffer_kb: int = 8192, clock: str | None = None
) -> None:
    """Clear the trace buffer and enable ``events`` (names under events/mptcp/);
    ``clock="mono"`` stamps events with CLOCK_MONOTONIC (``time.monotonic()``)."""
    (TRACEFS / "buffer_size_kb").write_text(str(buffer_kb))
    if clock:
        (TRACEFS / "trace_clock").write_text(clock)
    (TRACEFS / "trace").write_text("")
    for event in events:
        (TRACEFS / "events" / "mptcp" / event / "enable").write_text("1")


def _value(text: str):
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"[0-9a-f]{8}", text):
        return text
    return text


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
            record[key] = _value(value)
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


class TraceReader:
    """Drain ``trace_pipe`` into ``text_path`` (every event but OFO changes)
    and ``ofo_path`` (OFO changes as ``t,token,ofo_bytes,ofo_segs`` with
    ``t`` in wall-clock seconds; needs ``enable(clock="mono")``) every
    ``interval`` s in a thread, then once more on ``stop()``."""

    def __init__(self, text_path: Path, ofo_path: Path, interval: float = 0.5):
        self.offset = time.time() - time.monotonic()
        self.fd = os.open(TRACEFS / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        self.text = open(text_path, "w")  # noqa: SIM115 - closed in stop()
        self.ofo = open(ofo_path, "w")  # noqa: SIM115
        self.ofo.write(OFO_COLUMNS + "\n")
        self.ofo_events = 0
        self.partial = ""
        self.interval = interval
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            self.drain()

    def drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 17)
            except BlockingIOError:
                return
            if not chunk:
                return
            lines = (self.partial + chunk.decode(errors="replace")).split("\n")
            self.partial = lines.pop()
            rows, other = split_ofo(lines, self.offset)
            self.ofo_events += len(rows)
            self.ofo.writelines(rows)
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
        return self.ofo_events
