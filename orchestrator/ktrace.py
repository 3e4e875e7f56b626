"""Kernel tracepoints inside the guest: enable the mptlab MPTCP events and
parse what they print.

The kernel patch ``0002`` adds three events (see kernel/README.md):

- ``mptcp:mptcp_subflow_stats``: once per subflow when it closes: bytes handed
  to it and reinjected, TCP retransmissions, addresses;
- ``mptcp:mptcp_conn_stats``: once per connection when it is destroyed;
- ``mptcp:mptcp_ofo_queue``: every change of the out-of-order queue.
"""

from __future__ import annotations

import re
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
STATS_EVENTS = ("mptcp_subflow_stats", "mptcp_conn_stats")

_FIELD = re.compile(r"(\w+)=(\S+)")
_EVENT = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>[\d.]+): (?P<event>\w+): (?P<body>.*)$"
)


def enable(events: tuple[str, ...] = STATS_EVENTS, buffer_kb: int = 8192) -> None:
    """Clear the trace buffer and enable ``events`` (names under events/mptcp/)."""
    (TRACEFS / "buffer_size_kb").write_text(str(buffer_kb))
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
        token = max(totals, key=totals.get)
    return [r for r in subflows if r["token"] == token]
