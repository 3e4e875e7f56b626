"""A small HTTP/1.1 file server and client (standard library only).

Server (runs in the server's namespace, one thread per connection,
persistent connections, ``sendfile``)::

    python -m mptlab.workloads.helpers.httpd --root DIR --port 8081 [--mptcp]

serves GET and HEAD for files under DIR with ``Content-Length`` and
keep-alive; anything else gets 404/405.  It opens an IPPROTO_MPTCP listener
with ``--mptcp`` (no ``mptcpize`` needed) and stops on SIGTERM.

Client: ``Connection`` wraps a connected socket and fetches one object at a
time (no pipelining), timing each request.
"""

from __future__ import annotations

import argparse
import contextlib
import mimetypes
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

IPPROTO_MPTCP = 262
MAX_HEADER = 16384


# ----------------------------------------------------------------- server
def _read_request(conn: socket.socket, buf: bytearray) -> tuple[str, str, dict] | None:
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        buf += chunk
        if len(buf) > MAX_HEADER:
            return None
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    buf[:] = rest
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3:
        return None
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


def _serve_connection(conn: socket.socket, root: Path) -> None:
    buf = bytearray()
    try:
        while True:
            req = _read_request(conn, buf)
            if req is None:
                return
            method, target, headers = req
            path = (root / target.split("?", 1)[0].lstrip("/")).resolve()
            close = headers.get("connection", "").lower() == "close"
            if method not in ("GET", "HEAD"):
                conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                continue
            if not path.is_file() or root not in path.parents:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                continue
            size = path.stat().st_size
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nContent-Type: {ctype}\r\n"
                f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
            )
            conn.sendall(head.encode())
            if method == "GET" and size:
                with open(path, "rb") as fh:
                    conn.sendfile(fh)
            if close:
                return
    except OSError:
        return
    finally:
        conn.close()


def serve(root: Path, port: int, use_mptcp: bool) -> None:
    proto = IPPROTO_MPTCP if use_mptcp else socket.IPPROTO_TCP
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(128)
    root = root.resolve()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"serving {root} on {port} ({'MPTCP' if use_mptcp else 'TCP'})", flush=True)
    while True:
        conn, _ = lsock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve_connection, args=(conn, root), daemon=True).start()


# ----------------------------------------------------------------- client
@dataclass
class Fetch:
    path: str
    status: int
    size: int  # body bytes
    start: float  # epoch s: request written
    first_byte: float  # epoch s: first response byte
    end: float  # epoch s: last body byte
    connection: int
    body: bytes | None = None


class Connection:
    """One persistent HTTP/1.1 connection over an already connected socket."""

    def __init__(self, sock: socket.socket, host: str, index: int = 0):
        self.sock = sock
        self.host = host
        self.index = index
        self._buf = bytearray()
        self._scratch = bytearray(256 * 1024)

    def get(self, path: str, keep: bool = False) -> Fetch:
        start = time.time()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nUser-Agent: mptlab\r\n\r\n".encode()
        )
        first = None
        while b"\r\n\r\n" not in self._buf:
            chunk = self.sock.recv(65536)
            if first is None:
                first = time.time()
            if not chunk:
                raise ConnectionError(f"connection closed waiting for the response to {path}")
            self._buf += chunk
        head, _, rest = bytes(self._buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == "content-length":
                length = int(value)
        body = bytearray(rest[:length]) if keep else None
        got = min(len(rest), length)
        self._buf = bytearray(rest[length:])
        view = memoryview(self._scratch)
        while got < length:
            n = self.sock.recv_into(view, min(len(view), length - got))
            if n == 0:
                raise ConnectionError(f"connection closed after {got} of {length} bytes of {path}")
            if body is not None:
                body += view[:n]
            got += n
        end = time.time()
        return Fetch(
            path,
            status,
            length,
            start,
            first or end,
            end,
            self.index,
            bytes(body) if body is not None else None,
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def command(root: Path, port: int, use_mptcp: bool) -> list[str]:
    """The command that serves ``root`` on ``port`` (to run in the server's namespace)."""
    return [sys.executable, "-m", __name__, "--root", str(root), "--port", str(port)] + (
        ["--mptcp"] if use_mptcp else []
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mptlab.workloads.helpers.httpd")
    p.add_argument("--root", required=True, type=Path)
    p.add_argument("--port", type=int, default=8081)
    p.add_argument("--mptcp", action="store_true")
    args = p.parse_args(argv)
    serve(args.root, args.port, args.mptcp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
