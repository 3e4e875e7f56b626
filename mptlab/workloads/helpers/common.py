"""Helpers shared by the workloads, in the guest: endpoints for MPTCP or the
single-path TCP baseline, stopping processes, reading exact byte counts,
summary statistics.

Only the standard library (and the guest's services) are imported here: the
helper servers started with ``python -m mptlab.workloads.helpers.<helper>``
import this module and must start fast in the guest.
"""

from __future__ import annotations

import contextlib
import math
import signal
import socket
import subprocess

from ...spec.metrics import Metric

# The metrics several workloads produce, declared once (mptlab.spec.metrics):
# the delay summary and jitter of summary() and ipdv() below, and the names
# the workloads share with one meaning
METRICS = (
    Metric(
        "goodput_mbps",
        "Mbit/s",
        "higher",
        "application bytes received per second after the warm-up (bulk: in the analysis "
        "window; cbr, blocks, live: over the received frames' or blocks' span)",
    ),
    Metric(
        "duration_s",
        "s",
        "lower",
        "bulk: the whole transfer (a byte-limited one's completion time); idle: the measured "
        "idle time",
    ),
    Metric("analysis_window_s", "s", None, "the time after the warm-up the metrics cover"),
    Metric(
        "delay_{stat}_ms",
        "ms",
        "lower",
        "application delay of frames (cbr: one-way; live: capture to arrival) or blocks (due "
        "to arrival): mean, median, p95, p99, min, max, std",
    ),
    Metric("jitter_ms", "ms", "lower", "mean |difference| of consecutive delays (ipdv)"),
    Metric("rate_mbps", "Mbit/s", None, "the configured sending rate"),
    Metric(
        "sender_lag_max_ms",
        "ms",
        "lower",
        "how far the sender fell behind its clock because the socket was full",
    ),
)


# ------------------------------------------------------------------ guest
def mptcp(ctx) -> bool:
    return bool(ctx.config.kernel.mptcp)


def mptcpize(ctx) -> list[str]:
    """Command prefix that makes an unmodified TCP program use MPTCP."""
    return ["mptcpize", "run"] if mptcp(ctx) else []


def _addresses(ctx, dest_host: str, src_host: str) -> tuple[str, str | None]:
    dest = ctx.plan.addresses(dest_host)
    if mptcp(ctx):
        return dest[0], None
    k = ctx.config.kernel.tcp_path - 1
    src = ctx.plan.addresses(src_host)
    return dest[min(k, len(dest) - 1)], src[min(k, len(src) - 1)]


def endpoints(ctx) -> tuple[str, str | None]:
    """(server address the client connects to, client address to bind or None).

    MPTCP: the server's first address, no bind (the path manager adds the
    other subflows).  Single-path TCP: both ends on path ``kernel.tcp_path``.
    """
    return _addresses(ctx, ctx.server, ctx.client)


def reverse_endpoints(ctx) -> tuple[str, str | None]:
    """(client address the server connects to, server address to bind or None):
    for tools whose sender opens the connection (D-ITG), sending from the
    server to the client."""
    return _addresses(ctx, ctx.client, ctx.server)


JOIN_PORT = 10999  # the client's in-kernel listener for joins to its announced addresses


def announce_client_addresses(ctx) -> list[str]:
    """Let the client announce its other addresses (``signal`` endpoints with
    a port of their own).

    The agent configures the path manager for connections the client opens.
    When a tool's *server side* opens the connection (D-ITG's sender connects
    to its receiver), the client is the passive end: its joins to the
    server's ephemeral port are refused, and D-ITG closes its data listener
    after accepting.  So the client announces each extra address with port
    ``JOIN_PORT`` (the kernel listens there for joins) and the server joins
    them.  Returns the ``ip mptcp`` lines run in the client's namespace.
    """
    if not mptcp(ctx):
        return []
    lines = []
    for i, addr in enumerate(ctx.plan.addresses(ctx.client)):
        if i > 0:
            dev = ctx.net.hosts[ctx.client].interfaces[i]
            lines.append(f"mptcp endpoint add {addr} dev {dev} signal port {JOIN_PORT}")
    if lines:
        ctx.net.batch(ctx.client, "ip", lines)
    return lines


def stop(
    proc: subprocess.Popen | None, sig: int = signal.SIGTERM, timeout: float = 10.0
) -> int | None:
    """Signal a process started with ``ip netns exec`` (which execs the tool) and reap it."""
    if proc is None:
        return None
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def recv_exact(sock: socket.socket, n: int, buf: bytearray | None = None) -> bytes | None:
    """Read exactly ``n`` bytes (None on EOF before any byte; EOFError mid-way)."""
    view = memoryview(buf if buf is not None and len(buf) >= n else bytearray(n))[:n]
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            if got == 0:
                return None
            raise EOFError(f"connection closed after {got} of {n} bytes")
        got += k
    return bytes(view)


# ------------------------------------------------------------- statistics
def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of ``values``."""
    if not values:
        return None
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(values: list[float], prefix: str, unit: str = "ms", scale: float = 1.0) -> dict:
    """``{prefix}_{mean,median,p95,p99,min,max,std}_{unit}`` of ``values`` x ``scale``."""
    v = [x * scale for x in values]
    out = {}
    n = len(v)
    mean = sum(v) / n if n else None
    std = None if not n else 0.0
    if n > 1:
        m = sum(v) / n
        std = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    for key, value in (
        ("mean", mean),
        ("median", percentile(v, 50)),
        ("p95", percentile(v, 95)),
        ("p99", percentile(v, 99)),
        ("min", min(v) if v else None),
        ("max", max(v) if v else None),
        ("std", std),
    ):
        out[f"{prefix}_{key}_{unit}"] = value
    return out


def ipdv(delays: list[float]) -> float | None:
    """Mean absolute difference of consecutive delays (IP packet delay
    variation, RFC 3393/5481 style, as "jitter")."""
    if len(delays) < 2:
        return None
    return sum(abs(b - a) for a, b in zip(delays, delays[1:], strict=False)) / (len(delays) - 1)
