"""Live (non-adaptive) H.264 video over MPTCP or TCP, paced in real time.

Content (``prepare()`` on the host, cached; ``helpers/media.py``): an
ffmpeg-made H.264 stream of a test pattern, ``duration`` long (FEC chapter:
1 min of Big Buck Bunny), at ``bitrate`` (FEC chapter: 3.4 Mibit/s), ``fps``
frames/s (25), constant bit rate, I/P/B frames (GOP ``gop`` frames and
``bframes`` B-frames: chosen).

The server sends the stream's access units (frames, in decoding order) as
a live encoder would: frame i is handed to the socket at ``t0 + i / fps``
(a 20-byte header: index, size, that time, picture type; then the frame's
bytes); the client, which opened the connection, reads them and notes when
each frame is complete.  Sender and receiver share the guest's clock.  A
frame is *in time* when its last byte arrives within ``playout_delay`` of
its capture time (the receiver's playout buffer; chosen 1 s), *late* when
it arrives afterwards, *dropped* when it has not arrived when the session
ends (``playout_delay`` + 2 s after the last frame's capture time).

Metrics: ``frames``, ``frames_in_time``, ``frames_late``,
``frames_dropped``, ``in_time_ratio``, per picture type
``frames_in_time_by_type`` / ``frames_by_type``, ``delay_*_ms`` (capture
to complete arrival), ``jitter_ms``, ``sender_lag_max_ms`` (how far the
sender fell behind the frame clock because the socket was full),
``goodput_mbps``.  Per-frame records: ``traces/live-frames.csv``.
"""

from __future__ import annotations

import csv
import json
import socket
import struct
import threading
import time
from pathlib import Path

from ..guest.sockets import connect, listen
from ..guest.workload import WorkloadError
from ..spec.metrics import Metric
from .helpers import media
from .helpers.common import endpoints, ipdv, mptcp, recv_exact, summary
from .helpers.content import prepared

PORT = 8083
HEADER = struct.Struct("!IIdc3x")  # index, size, capture time, picture type
GRACE_S = 2.0

HEADLINE = ("in_time_ratio", "frames_in_time", "frames_dropped")
METRICS = (  # goodput_mbps, delay_*_ms, jitter_ms, sender_lag_max_ms: helpers.common
    Metric("frames", "", None, "frames of the stream"),
    Metric("frames_in_time", "", "higher", "frames complete within the playout delay"),
    Metric("frames_late", "", "lower", "frames complete after it"),
    Metric("frames_dropped", "", "lower", "frames not complete when the session ended"),
    Metric("in_time_ratio", "", "higher", "frames_in_time / frames"),
    Metric("frames_by_type_{t}", "", None, "frames of picture type t (I, P, B)"),
    Metric("frames_in_time_by_type_{t}", "", "higher", "of those, in time"),
    Metric(
        "sender_cut_at_deadline",
        "",
        None,
        "the receiver's deadline cut the sender off (a path slower than the stream)",
    ),
    Metric("stream_mbps", "Mbit/s", None, "the stream's bitrate"),
    Metric("playout_delay_ms", "ms", None, "the configured playout delay"),
)


def prepare(p: dict) -> dict:
    return media.prepare_live(
        p["duration"] / 1000, round(p["bitrate"] * 1000), p["fps"], p["gop"], p["bframes"]
    )


def _send(lsock: socket.socket, stream: bytes, frames: list[dict], fps: int, out: dict) -> None:
    try:
        conn, _ = lsock.accept()  # the listener stays open: MPTCP joins arrive at its port
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.time() + 0.05
        lag = 0.0
        for i, f in enumerate(frames):
            target = t0 + i / fps
            now = time.time()
            if now < target:
                time.sleep(target - now)
            else:
                lag = max(lag, now - target)
                out["lag"] = lag
            head = HEADER.pack(i, f["size"], target, f["type"].encode()[:1] or b"?")
            conn.sendall(head + stream[f["offset"] : f["offset"] + f["size"]])
        out["lag"] = lag
        out["t0"] = t0
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        conn.close()
    except BaseException as exc:  # noqa: BLE001 - reported by the receiver side
        out["error"] = exc


def frame_metrics(
    frames: list[dict], arrivals: dict[int, tuple[float, float]], playout_s: float
) -> dict:
    """``arrivals``: index -> (capture time, complete time)."""
    total = len(frames)
    in_time = late = 0
    by_type: dict[str, int] = {}
    in_time_type: dict[str, int] = {}
    delays = []
    for i, f in enumerate(frames):
        by_type[f["type"]] = by_type.get(f["type"], 0) + 1
        if i not in arrivals:
            continue
        cap, done = arrivals[i]
        delays.append((done - cap) * 1000)
        if done - cap <= playout_s:
            in_time += 1
            in_time_type[f["type"]] = in_time_type.get(f["type"], 0) + 1
        else:
            late += 1
    out = {
        "frames": total,
        "frames_in_time": in_time,
        "frames_late": late,
        "frames_dropped": total - len(arrivals),
        "in_time_ratio": in_time / total if total else None,
        "frames_by_type": by_type,
        "frames_in_time_by_type": in_time_type,
    }
    out.update(summary(delays, "delay"))
    out["jitter_ms"] = ipdv(delays)
    return out


def run(ctx) -> dict:
    p = ctx.workload
    prep = prepared(ctx)
    root = Path(prep["root"])
    frames = json.loads((root / "frames.json").read_text())["frames"]
    stream = (root / prep["stream"]).read_bytes()
    dest, bind = endpoints(ctx)
    use = mptcp(ctx)
    lsock = listen(ctx.net.ns(ctx.server), use, PORT)
    sent: dict = {}
    time.sleep(ctx.config.warmup / 1000)
    sender = threading.Thread(target=_send, args=(lsock, stream, frames, p.fps, sent), daemon=True)
    sender.start()
    ctx.mark("workload_start")
    sock = connect(ctx.net.ns(ctx.client), use, dest, PORT, bind)
    arrivals: dict[int, tuple[float, float]] = {}
    received = 0
    end_by = None
    at_deadline = False  # the receiver closed because the stream's time was up
    buf = bytearray(max(f["size"] for f in frames) + HEADER.size)
    try:
        while True:
            if end_by is not None:
                left = end_by - time.time()
                if left <= 0:
                    at_deadline = True
                    break
                sock.settimeout(left)
            head = recv_exact(sock, HEADER.size, buf)
            if head is None:
                break
            idx, size, cap, _ = HEADER.unpack(head)
            if end_by is None:  # the first frame fixes the stream's clock
                end_by = (
                    cap - idx / p.fps + (len(frames) - 1) / p.fps + p.playout_delay / 1000 + GRACE_S
                )
            if recv_exact(sock, size, buf) is None:
                break
            arrivals[idx] = (cap, time.time())
            received += size
    except TimeoutError as exc:
        at_deadline = end_by is not None
        ctx.log(f"live: receiver stopped: {exc!r}")
    except (EOFError, OSError) as exc:
        ctx.log(f"live: receiver stopped: {exc!r}")
    finally:
        sock.close()
    ctx.mark("workload_end")
    sender.join(timeout=10)
    lsock.close()
    err = sent.get("error")
    cut = at_deadline and isinstance(err, ConnectionResetError | BrokenPipeError)
    if cut:
        # A path slower than the stream: the sender is still writing when the
        # receiver's deadline (stream end + playout delay + grace) closes the
        # connection.  That is the live outcome (frames that never arrived are
        # dropped), not a failed run: every run of fec-tcp-live at 400 ms / 5 %
        # loss (0.14 Mbit/s for a 3.6 Mbit/s stream) was once "failed" this way.
        ctx.log(
            f"live: the receiver's deadline cut the sender off ({err!r}); unsent frames count as dropped"
        )
    elif err is not None:
        raise WorkloadError(f"live sender failed: {err!r}")
    with open(ctx.trace_dir / "live-frames.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["frame", "type", "bytes", "capture", "complete", "delay_ms"])
        for i, f in enumerate(frames):
            cap, done = arrivals.get(i, (None, None))
            w.writerow(
                [
                    i,
                    f["type"],
                    f["size"],
                    f"{cap:.6f}" if cap else "",
                    f"{done:.6f}" if done else "",
                    f"{(done - cap) * 1000:.3f}" if done and cap else "",
                ]
            )
    metrics = frame_metrics(frames, arrivals, p.playout_delay / 1000)
    span = max((d for _, d in arrivals.values()), default=0) - min(
        (c for c, _ in arrivals.values()), default=0
    )
    metrics.update(
        sender_lag_max_ms=sent.get("lag", 0.0) * 1000,
        sender_cut_at_deadline=cut,
        goodput_mbps=received * 8 / span / 1e6 if span > 0 else None,
        stream_mbps=prep["bytes"] * 8 / (len(frames) / p.fps) / 1e6,
        playout_delay_ms=p.playout_delay,
    )
    return metrics
