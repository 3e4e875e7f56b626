"""Helpers shared by the workloads (guest side and host side).

Guest side: endpoints for MPTCP or the single-path TCP baseline, sockets
created inside a host's network namespace (so that a workload can run its
client and server as threads of the agent, without a process per step),
waiting for a listener, stopping processes, summary statistics.

Host side: the content cache (``~/.cache/mptlab/content/<hash>/``) for what a
workload prepares once (web pages, video).

Only the standard library is imported here: the helper servers started with
``python -m traffic.<helper>`` import this module and must start fast in the
guest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path

IPPROTO_MPTCP = 262
CONTENT_VERSION = 1  # bump when a content generator changes its output


# ------------------------------------------------------------------ guest
class WorkloadError(RuntimeError):
    """A workload that could not finish, in words (its tool's own error, not
    an exception from reading its output); ``metrics``: what it measured
    before it failed, if anything (the agent records them)."""

    def __init__(self, message: str, metrics: dict | None = None):
        super().__init__(message)
        self.metrics = metrics


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


def params(ctx, model):
    """The workload's validated ``Params`` (units already normalised on the host)."""
    data = {k: v for k, v in ctx.spec.config["workload"].items() if k not in ("type", "prepared")}
    return model.model_validate(data)


# The workload sockets made here (and the connections they accept), so that
# the agent can shut them down when the stall watchdog stops a run: a thread
# blocked in send() or recv() on a frozen connection then returns.
OPEN_SOCKETS: weakref.WeakSet = weakref.WeakSet()


class _TrackedSocket(socket.socket):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        OPEN_SOCKETS.add(self)

    def accept(self):
        conn, addr = super().accept()
        OPEN_SOCKETS.add(conn)
        return conn, addr


def abort_sockets() -> int:
    """Shut down every open workload socket (both directions); how many."""
    n = 0
    for sock in list(OPEN_SOCKETS):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
            n += 1
    return n


def stream_socket(ns: str, use_mptcp: bool) -> socket.socket:
    """A TCP (or MPTCP) socket that lives in network namespace ``ns``."""
    from mptlab.guest.netlab import in_netns

    proto = IPPROTO_MPTCP if use_mptcp else socket.IPPROTO_TCP
    with in_netns(ns):
        return _TrackedSocket(socket.AF_INET, socket.SOCK_STREAM, proto)


def listen(
    ns: str, use_mptcp: bool, port: int, addr: str = "0.0.0.0", backlog: int = 64
) -> socket.socket:
    sock = stream_socket(ns, use_mptcp)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((addr, port))
    sock.listen(backlog)
    return sock


def connect(ns: str, use_mptcp: bool, dest: str, port: int, bind: str | None = None,
            timeout: float = 30.0) -> socket.socket:  # fmt: skip
    sock = stream_socket(ns, use_mptcp)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if bind:
        sock.bind((bind, 0))
    sock.settimeout(timeout)
    sock.connect((dest, port))
    sock.settimeout(None)
    return sock


def listening(ns: str, port: int) -> bool:
    """True if a TCP (or MPTCP) socket listens on ``port`` in namespace ``ns``
    (read from /proc, no process started)."""
    from mptlab.guest.netlab import in_netns

    with in_netns(ns):
        for name in ("tcp", "tcp6"):
            try:
                lines = Path(f"/proc/thread-self/net/{name}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return True
    return False


def wait_listening(
    ns: str, port: int, proc: subprocess.Popen | None = None, timeout: float = 20.0
) -> None:
    """Wait until something listens on ``port`` in ``ns`` (RuntimeError if ``proc`` exits first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if listening(ns, port):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(
                f"{proc.args[0] if proc.args else 'server'} exited ({proc.returncode}) before listening on {port}"
            )
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} in {ns} after {timeout:g} s")


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
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else (0.0 if n else None)
    for key, value in (
        ("mean", mean), ("median", percentile(v, 50)), ("p95", percentile(v, 95)),
        ("p99", percentile(v, 99)), ("min", min(v) if v else None), ("max", max(v) if v else None),
        ("std", std),
    ):  # fmt: skip
        out[f"{prefix}_{key}_{unit}"] = value
    return out


def ipdv(delays: list[float]) -> float | None:
    """Mean absolute difference of consecutive delays (IP packet delay
    variation, RFC 3393/5481 style, as "jitter")."""
    if len(delays) < 2:
        return None
    return sum(abs(b - a) for a, b in zip(delays, delays[1:], strict=False)) / (len(delays) - 1)


def derive_seed(*parts) -> int:
    """A 32-bit seed from any JSON-able parts (stable across runs and hosts)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:4], "big")


# ------------------------------------------------------------------- host
def content_dir(kind: str, inputs: dict) -> Path:
    """The cache directory for content made from ``inputs`` (a JSON-able dict):
    ``<cache>/content/<kind>-<hash>/``; the hash covers the inputs and
    ``CONTENT_VERSION``."""
    from mptlab.campaign.kernel import cache_dir

    key = hashlib.sha256(
        json.dumps([CONTENT_VERSION, kind, inputs], sort_keys=True).encode()
    ).hexdigest()[:16]
    return cache_dir() / "content" / f"{kind}-{key}"


def build_once(target: Path, build) -> Path:
    """Make ``target`` with ``build(tmp_dir)`` unless it exists; atomic (a
    temporary sibling renamed into place), safe against concurrent builders."""
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir()
    build(tmp)
    (tmp / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
    try:
        tmp.rename(target)
    except OSError:  # another builder won the race
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / ".complete").exists():
            raise
    return target


def prepared(ctx) -> dict:
    """What the workload's ``prepare()`` returned on the host (``config.workload.prepared``)."""
    data = ctx.spec.config["workload"].get("prepared")
    if not data:
        raise RuntimeError(
            f"workload {ctx.workload.type!r} needs content made on the host by its prepare() "
            "(mptlab run does this); none was passed to the guest"
        )
    return data
