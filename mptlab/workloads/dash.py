"""DASH video streaming: the emulated player fetches ffmpeg-made segments
over HTTP/1.1 (MPTCP or TCP) and adapts the bitrate.

Content (``prepare()`` on the host, cached; ``helpers/media.py``): a
``duration`` long test pattern in ``segment`` long segments at every bitrate
of ``ladder`` (FEC chapter: Big Buck Bunny, 3 min, 4 s segments, at most
4 Mibit/s; the default ladder is a 10-step subset of the 4 s Big Buck Bunny
DASH dataset's bitrates, 0.33 to 4.22 Mbit/s, whose top is 4.02 Mibit/s:
chosen).  The server is ``helpers/httpd.py``; the player
(``helpers/dash_player.py``) runs in the agent, on one persistent
connection from the client, after the experiment's ``warmup``.

Metrics: ``avg_bitrate_mbps`` (mean nominal bitrate of the segments
played), ``avg_media_rate_mbps`` (their actual bytes per second of video),
``switches`` (bitrate changes between consecutive segments),
``switch_size_mbps``, ``stalls`` (rebufferings after playback started),
``stall_s``, ``startup_delay_s`` (player start to playback start: MPD, init
and the first ``startup`` seconds of video), ``segments``,
``top_bitrate_share``, ``last_bitrate_mbps``, ``download_mbps`` (segment
bytes over download time), ``session_s`` (until the last frame plays), and
per segment ``bitrates_mbps``, ``throughputs_mbps``, ``buffer_s`` (buffer
when requested).  Per-segment records: ``traces/dash-segments.csv``.
"""

from __future__ import annotations

import csv
import subprocess
import time
from pathlib import Path

from ..guest.netlab import wait_listening
from ..guest.sockets import connect
from ..guest.workload import WorkloadError
from ..spec.metrics import Metric
from .helpers import dash_player, httpd, media
from .helpers.common import endpoints, mptcp, stop
from .helpers.content import prepared
from .helpers.httpd import Connection

PORT = 8082

HEADLINE = ("avg_bitrate_mbps", "switches", "stalls", "stall_s")
METRICS = (
    Metric("avg_bitrate_mbps", "Mbit/s", "higher", "mean nominal bitrate of the segments played"),
    Metric("avg_media_rate_mbps", "Mbit/s", "higher", "their actual bytes per second of video"),
    Metric("switches", "", "lower", "bitrate changes between consecutive segments"),
    Metric("switch_size_mbps", "Mbit/s", "lower", "mean size of a bitrate change"),
    Metric("stalls", "", "lower", "rebufferings after playback started"),
    Metric("stall_s", "s", "lower", "time spent rebuffering"),
    Metric("startup_delay_s", "s", "lower", "player start to playback start"),
    Metric("segments", "", None, "segments played"),
    Metric("top_bitrate_share", "", "higher", "share of the segments at the top bitrate"),
    Metric("last_bitrate_mbps", "Mbit/s", None, "the last segment's bitrate"),
    Metric("download_mbps", "Mbit/s", "higher", "segment bytes over download time"),
    Metric("session_s", "s", None, "until the last frame plays"),
    Metric("bitrates_mbps", "Mbit/s", None, "each segment's bitrate", table="series"),
    Metric("throughputs_mbps", "Mbit/s", None, "each segment's throughput", table="series"),
    Metric("buffer_s", "s", None, "the buffer when each segment was requested", table="series"),
    Metric("adaptation", "", None, "the adaptation algorithm (text)"),
    Metric("ladder_mbps", "Mbit/s", None, "the bitrate ladder", table="series"),
)


def ladder_kbps(ladder_mbit: list[float]) -> list[int]:
    return sorted(round(r * 1000) for r in ladder_mbit)


def algorithm(p):
    """The adaptation algorithm the parameters ``p`` choose."""
    if p.adaptation == "basic":
        return dash_player.Basic(window=p.basic_window)
    if p.adaptation == "sara":
        return dash_player.Sara(*(x / 1000 for x in p.sara))
    return dash_player.Bba(*(x / 1000 for x in p.bba))


def segments(p) -> int:
    """How many segments are played."""
    total = int(p.duration // p.segment)
    return min(total, max(1, round((p.play or p.duration) / p.segment)))


def prepare(p: dict) -> dict:
    return media.prepare_dash(
        p["duration"] / 1000, p["segment"] / 1000, ladder_kbps(p["ladder"]), p["fps"]
    )


def write_segments(path: Path, session: dash_player.Session) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "segment",
                "rep",
                "bitrate",
                "bytes",
                "request_s",
                "end_s",
                "buffer_s",
                "throughput_mbps",
            ]
        )
        for s in session.segments:
            w.writerow(
                [
                    s.number,
                    s.rep,
                    s.bitrate,
                    s.size,
                    f"{s.request:.6f}",
                    f"{s.end:.6f}",
                    f"{s.buffer_before:.4f}",
                    f"{s.throughput / 1e6:.4f}",
                ]
            )


def run(ctx) -> dict:
    p = ctx.workload
    prep = prepared(ctx)
    root = Path(prep["root"])
    if not (root / prep["mpd"]).exists():
        raise RuntimeError(f"DASH content missing in {root} (prepare() on the host makes it)")
    dest, bind = endpoints(ctx)
    cmd = httpd.command(root, PORT, mptcp(ctx))
    log = open(ctx.trace_dir / "dash-server.log", "w")  # noqa: SIM115
    server = ctx.net.popen(ctx.server, cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(ctx.net.ns(ctx.server), PORT, server)
        time.sleep(ctx.config.warmup / 1000)
        ctx.mark("workload_start")
        conn = Connection(
            connect(ctx.net.ns(ctx.client), mptcp(ctx), dest, PORT, bind), f"{dest}:{PORT}"
        )

        def fetch(url: str, keep: bool) -> tuple[int, bytes | None]:
            path = "/" + url.split("/", 3)[3]
            f = conn.get(path, keep=keep)
            if f.status != 200:
                raise WorkloadError(f"GET {path}: HTTP {f.status}")
            return f.size, f.body

        player = dash_player.Player(
            fetch,
            algorithm(p),
            max_buffer_s=p.max_buffer / 1000,
            startup_s=p.startup / 1000,
            log=ctx.log,
        )
        session = player.play(f"http://{dest}:{PORT}/{prep['mpd']}", segments=segments(p))
        conn.close()
        ctx.mark("workload_end")
    finally:
        stop(server)
        log.close()
    write_segments(ctx.trace_dir / "dash-segments.csv", session)
    metrics = session.metrics()
    metrics.update(adaptation=p.adaptation, ladder_mbps=[k / 1000 for k in ladder_kbps(p.ladder)])
    return metrics
