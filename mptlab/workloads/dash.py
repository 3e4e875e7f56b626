"""DASH video streaming: the emulated player fetches ffmpeg-made segments
over HTTP/1.1 (MPTCP or TCP) and adapts the bitrate.

Content (``prepare()`` on the host, cached; ``traffic/media.py``): a
``duration`` long test pattern in ``segment`` long segments at every bitrate
of ``ladder`` (FEC chapter: Big Buck Bunny, 3 min, 4 s segments, at most
4 Mibit/s; the default ladder is a 10-step subset of the 4 s Big Buck Bunny
DASH dataset's bitrates, 0.33 to 4.22 Mbit/s, whose top is 4.02 Mibit/s:
chosen).  The server is ``traffic/_httpd.py``; the player
(``traffic/dash_player.py``) runs in the agent, on one persistent
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
import sys
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .helpers import dash_player, media
from .helpers.common import (
    WorkloadError,
    connect,
    endpoints,
    mptcp,
    params,
    prepared,
    stop,
    wait_listening,
)
from .helpers.httpd import Connection
from .helpers.types import Duration, Rate

PORT = 8082
# a subset of the bitrates (kbit/s) of the 4 s Big Buck Bunny DASH dataset (ITEC, Lederer et al. 2012)
LADDER = [0.331, 0.522, 0.791, 1.033, 1.547, 2.134, 2.484, 3.079, 3.527, 4.220]


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    duration: Duration = Field(180_000.0, gt=0, description="content length (FEC chapter: 3 min)")
    segment: Duration = Field(4000.0, gt=0, description="segment length (FEC chapter: 4 s)")
    ladder: list[Rate] = Field(default_factory=lambda: list(LADDER), min_length=1)
    fps: int = Field(25, ge=1, le=60)
    play: Duration | None = Field(None, gt=0, description="play only this much of the content")
    adaptation: Literal["basic", "sara", "bba"] = "basic"
    max_buffer: Duration = Field(30_000.0, gt=0)
    startup: Duration = Field(4000.0, gt=0, description="buffer needed to start or resume playback")
    basic_window: int = Field(3, ge=1, description="segments in basic's moving average")
    sara: tuple[Duration, Duration, Duration] = Field(
        (8000.0, 16000.0, 24000.0), description="I, B_alpha, B_beta"
    )
    bba: tuple[Duration, Duration] = Field((8000.0, 16000.0), description="reservoir, cushion")

    @model_validator(mode="after")
    def _consistent(self):
        if self.segment > self.duration:
            raise ValueError("segment is longer than the content (duration)")
        if self.startup > self.max_buffer:
            raise ValueError("startup buffer exceeds max_buffer")
        if len(set(self.ladder)) != len(self.ladder):
            raise ValueError("ladder bitrates repeat")
        if not 0 < self.sara[0] < self.sara[1] < self.sara[2]:
            raise ValueError("sara thresholds must be increasing: [I, B_alpha, B_beta]")
        return self

    @property
    def ladder_kbps(self) -> list[int]:
        return sorted(round(r * 1000) for r in self.ladder)

    def algorithm(self):
        if self.adaptation == "basic":
            return dash_player.Basic(window=self.basic_window)
        if self.adaptation == "sara":
            return dash_player.Sara(*(x / 1000 for x in self.sara))
        return dash_player.Bba(*(x / 1000 for x in self.bba))

    def segments(self) -> int:
        total = int(self.duration // self.segment)
        return min(total, max(1, round((self.play or self.duration) / self.segment)))


def quick(p: dict) -> dict:
    return {**p, "play": min(p.get("play") or p.get("duration", 180_000.0), 40_000.0)}


def prepare(p: dict) -> dict:
    q = Params.model_validate(p)
    return media.prepare_dash(q.duration / 1000, q.segment / 1000, q.ladder_kbps, q.fps)


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
            w.writerow([s.number, s.rep, s.bitrate, s.size, f"{s.request:.6f}", f"{s.end:.6f}",
                        f"{s.buffer_before:.4f}", f"{s.throughput / 1e6:.4f}"])  # fmt: skip


def run(ctx) -> dict:
    p = params(ctx, Params)
    prep = prepared(ctx)
    root = Path(prep["root"])
    if not (root / prep["mpd"]).exists():
        raise RuntimeError(f"DASH content missing in {root} (prepare() on the host makes it)")
    dest, bind = endpoints(ctx)
    cmd = [
        sys.executable,
        "-m",
        "mptlab.workloads.helpers.httpd",
        "--root",
        str(root),
        "--port",
        str(PORT),
    ]
    cmd += ["--mptcp"] if mptcp(ctx) else []
    log = open(ctx.trace_dir / "dash-server.log", "w")  # noqa: SIM115
    repo = str(Path(__file__).resolve().parent.parent)
    server = ctx.net.popen(ctx.server, cmd, stdout=log, stderr=subprocess.STDOUT, cwd=repo)
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

        player = dash_player.Player(fetch, p.algorithm(), max_buffer_s=p.max_buffer / 1000,
                                    startup_s=p.startup / 1000, log=ctx.log)  # fmt: skip
        session = player.play(f"http://{dest}:{PORT}/{prep['mpd']}", segments=p.segments())
        conn.close()
        ctx.mark("workload_end")
    finally:
        stop(server)
        log.close()
    write_segments(ctx.trace_dir / "dash-segments.csv", session)
    metrics = session.metrics()
    metrics.update(adaptation=p.adaptation, ladder_mbps=[k / 1000 for k in p.ladder_kbps])
    return metrics
