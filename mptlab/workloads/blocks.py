"""Block sender: fixed-size blocks at a fixed rate; the receiver logs when
each block has arrived (the application-limited traffic of the scheduler
framework paper in the Ferlin thesis: 8 KB blocks at a fixed rate, e.g.
500 kbit/s and 1875 kbit/s on NorNet).

The client opens the connection (MPTCP or TCP); for ``download`` the server
sends, for ``upload`` the client.  Block i is due at ``t0 + i * size * 8 /
rate``; the sender writes it then (or as soon as the socket takes it, when
it fell behind), with a 16-byte header (index, due time) inside the block.
The receiver notes when each block is complete.  One clock for both ends.

Metrics (blocks due at or after ``warmup``): ``delay_*_ms`` (due time to
complete arrival: mean, median, p95, p99, min, max, std), ``jitter_ms``,
``worst_delay_increase_pct`` (the paper's metric: (max - min) / min of the
block delays, in %), ``blocks_sent``, ``blocks_received``,
``goodput_mbps``, ``sender_lag_max_ms``.  Per-block records:
``traces/blocks.csv``.
"""

from __future__ import annotations

import csv
import socket
import struct
import threading
import time

from ..guest.sockets import connect, listen
from ..guest.workload import WorkloadError
from ..spec.metrics import Metric
from .helpers.common import endpoints, ipdv, mptcp, recv_exact, summary

PORT = 8084
HEADER = struct.Struct("!Qd")  # index, due time

HEADLINE = ("delay_mean_ms", "delay_p95_ms", "worst_delay_increase_pct")
METRICS = (  # goodput_mbps, delay_*_ms, jitter_ms, rate_mbps, sender_lag_max_ms: helpers.common
    Metric("blocks_sent", "", None, "blocks due at or after the warm-up"),
    Metric("blocks_received", "", "higher", "of those, blocks received"),
    Metric(
        "worst_delay_increase_pct",
        "%",
        "lower",
        "(max - min) / min of the block delays (the Ferlin thesis's metric)",
    ),
    Metric("block_size", "B", None, "the configured block size"),
    Metric("interval_ms", "ms", None, "time between two blocks' due times"),
)


def interval_s(block_size: int, rate_mbit: float) -> float:
    """Time between two blocks' due times."""
    return block_size * 8 / (rate_mbit * 1e6)


def _sender(sock: socket.socket, p, t0: float, out: dict) -> None:
    try:
        interval = interval_s(p.block_size, p.rate)
        n = max(1, int(p.duration / 1000 / interval))
        pad = bytes(p.block_size - HEADER.size)
        lag = 0.0
        for i in range(n):
            due = t0 + i * interval
            now = time.time()
            if now < due:
                time.sleep(due - now)
            else:
                lag = max(lag, now - due)
            sock.sendall(HEADER.pack(i, due) + pad)
        out.update(sent=n, lag=lag)
        sock.shutdown(socket.SHUT_WR)
    except BaseException as exc:  # noqa: BLE001 - reported by run()
        out["error"] = exc


def _receiver(sock: socket.socket, size: int, out: dict) -> None:
    arrivals = []
    buf = bytearray(size)
    try:
        while True:
            block = recv_exact(sock, size, buf)
            if block is None:
                break
            idx, due = HEADER.unpack_from(block)
            arrivals.append((idx, due, time.time()))
    except BaseException as exc:  # noqa: BLE001
        out["error"] = exc
    out["arrivals"] = arrivals


def block_metrics(
    arrivals: list[tuple[int, float, float]], sent: int, warmup_s: float, t0: float, block_size: int
) -> dict:
    start = t0 + warmup_s
    rows = [(i, due, rx) for i, due, rx in arrivals if due >= start - 1e-9]
    delays = [(rx - due) * 1000 for _, due, rx in rows]
    first_due = min((i for i, due, _ in arrivals if due >= start - 1e-9), default=0)
    out: dict[str, float | None] = {
        "blocks_sent": max(0, sent - first_due),
        "blocks_received": len(rows),
    }
    out.update(summary(delays, "delay"))
    out["jitter_ms"] = ipdv(delays)
    lo = min(delays) if delays else None
    out["worst_delay_increase_pct"] = (max(delays) - lo) / lo * 100 if lo else None
    span = (rows[-1][2] - rows[0][1]) if rows else 0
    out["goodput_mbps"] = len(rows) * block_size * 8 / span / 1e6 if span > 0 else None
    return out


def run(ctx) -> dict:
    p = ctx.workload
    dest, bind = endpoints(ctx)
    use = mptcp(ctx)
    lsock = listen(ctx.net.ns(ctx.server), use, PORT)
    client = connect(ctx.net.ns(ctx.client), use, dest, PORT, bind)
    server, _ = lsock.accept()  # the listener stays open: MPTCP joins arrive at its port
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    snd, rcv = (server, client) if p.direction == "download" else (client, server)
    sent: dict = {}
    got: dict = {}
    ctx.mark("workload_start")
    t0 = time.time() + 0.05
    threads = [
        threading.Thread(target=_sender, args=(snd, p, t0, sent)),
        threading.Thread(target=_receiver, args=(rcv, p.block_size, got)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=p.duration / 1000 + 120)
    ctx.mark("workload_end")
    client.close()
    server.close()
    lsock.close()
    for side in (sent, got):
        if "error" in side:
            raise WorkloadError(f"block transfer failed: {side['error']!r}")
    arrivals = got.get("arrivals", [])
    with open(ctx.trace_dir / "blocks.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["block", "due", "complete", "delay_ms"])
        for i, due, rx in arrivals:
            w.writerow([i, f"{due:.6f}", f"{rx:.6f}", f"{(rx - due) * 1000:.3f}"])
    metrics = block_metrics(
        arrivals, sent.get("sent", 0), ctx.config.warmup / 1000, t0, p.block_size
    )
    metrics.update(
        sender_lag_max_ms=sent.get("lag", 0.0) * 1000,
        block_size=p.block_size,
        rate_mbps=p.rate,
        interval_ms=interval_s(p.block_size, p.rate) * 1000,
    )
    return metrics
