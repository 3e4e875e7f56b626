"""Sockets inside a host's network namespace, made in this process.

A workload can run its client and server as threads of the agent instead of
processes (each costs ~80 ms in the guest): ``listen`` and ``connect`` make
TCP or MPTCP sockets that live in a host's namespace.  Every socket made
here (and every connection accepted from it) is tracked, so that when the
stall watchdog stops a run the agent shuts them down (``abort_sockets``) and
a thread blocked in send() or recv() on a frozen connection returns.
"""

from __future__ import annotations

import contextlib
import socket
import weakref

from .netlab import in_netns

IPPROTO_MPTCP = 262

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


def connect(
    ns: str, use_mptcp: bool, dest: str, port: int, bind: str | None = None, timeout: float = 30.0
) -> socket.socket:
    sock = stream_socket(ns, use_mptcp)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if bind:
        sock.bind((bind, 0))
    sock.settimeout(timeout)
    sock.connect((dest, port))
    sock.settimeout(None)
    return sock
