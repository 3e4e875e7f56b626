"""Video content made with ffmpeg on the host (``prepare()``), cached under
``~/.cache/mptlab/content/``.

- DASH: a synthetic test pattern (``testsrc2``, 25 fps) encoded with x264
  at every bitrate of a ladder, constant bit rate (``nal-hrd=cbr``, so that
  segment sizes follow the nominal bitrates), one key frame per segment, cut
  into fragmented-MP4 segments by ffmpeg's DASH muxer.  ``manifest.mpd`` is
  written here: a static MPD with one ``SegmentTemplate`` per
  representation and, in the ``urn:mptlab:dash`` namespace, every segment's
  size in bytes (SARA needs them; the standard MPD has no such field).
- Live: the same pattern as one H.264 elementary stream (Annex B) at a
  constant bit rate with I, P and B frames, and ``frames.json``: every
  access unit in decoding order (byte offset, size, picture type).

Same inputs, same content key; ffmpeg's output bytes may differ between
ffmpeg versions, the sizes only slightly.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from xml.sax.saxutils import quoteattr

from .content import build_once, content_dir

MPTLAB_NS = "urn:mptlab:dash:2024"
DASH_NS = "urn:mpeg:dash:schema:mpd:2011"
SOURCE = "testsrc2"


def _ffmpeg() -> str:
    path = shutil.which("ffmpeg")
    if not path:
        raise RuntimeError("ffmpeg is not installed (scripts/install-deps.sh runtime installs it)")
    return path


def resolution(kbps: float) -> tuple[int, int]:
    """Frame size for a bitrate (chosen, a typical 16:9 ladder)."""
    for limit, size in (
        (500, (320, 180)),
        (1200, (480, 270)),
        (2200, (640, 360)),
        (3200, (854, 480)),
    ):
        if kbps < limit:
            return size
    return 1280, 720


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"ffmpeg failed ({proc.returncode}): {' '.join(cmd[:6])} ...\n{proc.stderr[-1500:]}"
        )


# ------------------------------------------------------------------ DASH
def dash_inputs(duration_s: float, segment_s: float, ladder_kbps: list[int], fps: int) -> dict:
    return {
        "duration_s": duration_s,
        "segment_s": segment_s,
        "ladder_kbps": sorted(ladder_kbps),
        "fps": fps,
        "source": SOURCE,
    }


def _encode_dash(tmp: Path, inputs: dict) -> None:
    ladder = inputs["ladder_kbps"]
    fps = inputs["fps"]
    gop = round(inputs["segment_s"] * fps)
    top_w, top_h = resolution(max(ladder))
    n = len(ladder)
    split = f"[0:v]split={n}" + "".join(f"[s{i}]" for i in range(n)) + ";"
    split += ";".join(
        f"[s{i}]scale={resolution(k)[0]}:{resolution(k)[1]}[v{i}]" for i, k in enumerate(ladder)
    )
    cmd = [_ffmpeg(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi"]
    cmd += ["-i", f"{SOURCE}=size={top_w}x{top_h}:rate={fps}", "-t", f"{inputs['duration_s']:g}"]
    cmd += ["-filter_complex", split]
    for i in range(n):
        cmd += ["-map", f"[v{i}]"]
    cmd += ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
    cmd += ["-x264-params", f"keyint={gop}:min-keyint={gop}:scenecut=0:nal-hrd=cbr"]
    for i, k in enumerate(ladder):
        for option in ("b", "maxrate", "minrate", "bufsize"):
            cmd += [f"-{option}:v:{i}", f"{k}k"]
    cmd += ["-f", "dash", "-seg_duration", f"{inputs['segment_s']:g}"]
    cmd += ["-use_template", "1", "-use_timeline", "0"]
    cmd += ["-init_seg_name", "init-$RepresentationID$.m4s"]
    cmd += ["-media_seg_name", "seg-$RepresentationID$-$Number$.m4s"]
    cmd += ["-adaptation_sets", "id=0,streams=v", "ffmpeg.mpd"]
    _run(cmd, tmp)
    reps = []
    for i, k in enumerate(ladder):
        sizes = []
        j = 1
        while (tmp / f"seg-{i}-{j}.m4s").exists():
            sizes.append((tmp / f"seg-{i}-{j}.m4s").stat().st_size)
            j += 1
        w, h = resolution(k)
        reps.append(
            {
                "id": str(i),
                "bandwidth": k * 1000,
                "width": w,
                "height": h,
                "init": f"init-{i}.m4s",
                "init_size": (tmp / f"init-{i}.m4s").stat().st_size,
                "sizes": sizes,
            }
        )
    ffmpeg_mpd = (tmp / "ffmpeg.mpd").read_text()
    for r in reps:
        m = re.search(rf'<Representation id="{r["id"]}"[^>]*codecs="([^"]+)"', ffmpeg_mpd)
        r["codecs"] = m.group(1) if m else "avc1.42c01f"
    counts = {len(r["sizes"]) for r in reps}
    if len(counts) != 1 or not counts.pop():
        raise RuntimeError(f"ffmpeg made uneven segment counts: {[len(r['sizes']) for r in reps]}")
    (tmp / "manifest.mpd").write_text(mpd(inputs, reps))
    (tmp / "content.json").write_text(
        json.dumps({"inputs": inputs, "representations": reps}, indent=1)
    )


def mpd(inputs: dict, reps: list[dict]) -> str:
    """A static MPD listing, per representation, its segment sizes."""
    seg_ms = round(inputs["segment_s"] * 1000)
    out = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<MPD xmlns="{DASH_NS}" xmlns:mptlab="{MPTLAB_NS}" type="static" '
        f'profiles="urn:mpeg:dash:profile:isoff-live:2011" '
        f'mediaPresentationDuration="PT{inputs["duration_s"]:g}S" minBufferTime="PT{inputs["segment_s"]:g}S">',
        '  <Period id="0" start="PT0S">',
        '    <AdaptationSet id="0" contentType="video" mimeType="video/mp4" segmentAlignment="true" '
        f'frameRate="{inputs["fps"]}">',
    ]
    for r in reps:
        out += [
            f'      <Representation id={quoteattr(r["id"])} bandwidth="{r["bandwidth"]}" width="{r["width"]}" '
            f'height="{r["height"]}" codecs="{r["codecs"]}">',
            f'        <SegmentTemplate timescale="1000" duration="{seg_ms}" startNumber="1" '
            f'initialization="init-$RepresentationID$.m4s" media="seg-$RepresentationID$-$Number$.m4s"/>',
            f'        <mptlab:SegmentSizes init="{r["init_size"]}">{" ".join(map(str, r["sizes"]))}'
            "</mptlab:SegmentSizes>",
            "      </Representation>",
        ]
    out += ["    </AdaptationSet>", "  </Period>", "</MPD>", ""]
    return "\n".join(out)


def prepare_dash(
    duration_s: float, segment_s: float, ladder_kbps: list[int], fps: int = 25
) -> dict:
    inputs = dash_inputs(duration_s, segment_s, ladder_kbps, fps)
    root = build_once(content_dir("dash", inputs), lambda tmp: _encode_dash(tmp, inputs))
    content = json.loads((root / "content.json").read_text())
    return {
        "root": str(root),
        "mpd": "manifest.mpd",
        "segments": len(content["representations"][0]["sizes"]),
        "ladder_kbps": inputs["ladder_kbps"],
    }


# ------------------------------------------------------------------ live
def live_inputs(duration_s: float, kbps: int, fps: int, gop: int, bframes: int) -> dict:
    return {
        "duration_s": duration_s,
        "kbps": kbps,
        "fps": fps,
        "gop": gop,
        "bframes": bframes,
        "source": SOURCE,
        "size": "1280x720",
    }


def _encode_live(tmp: Path, inputs: dict) -> None:
    k, gop = inputs["kbps"], inputs["gop"]
    size, fps, bframes = inputs["size"], inputs["fps"], inputs["bframes"]
    cmd = [_ffmpeg(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi"]
    cmd += ["-i", f"{SOURCE}=size={size}:rate={fps}", "-t", f"{inputs['duration_s']:g}"]
    cmd += ["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"]
    cmd += [
        "-x264-params",
        f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes={bframes}:nal-hrd=cbr",
    ]
    cmd += ["-b:v", f"{k}k", "-maxrate", f"{k}k", "-minrate", f"{k}k", "-bufsize", f"{k // 2}k"]
    cmd += ["-f", "h264", "stream.h264"]
    _run(cmd, tmp)
    packets = _probe(tmp, ["-show_packets", "-show_entries", "packet=pos,size,flags"])["packets"]
    frames = _probe(tmp, ["-show_frames", "-show_entries", "frame=pict_type,pkt_pos"])["frames"]
    types = {int(f["pkt_pos"]): f["pict_type"] for f in frames if "pkt_pos" in f}
    table = [
        {"offset": int(p["pos"]), "size": int(p["size"]), "type": types.get(int(p["pos"]), "?")}
        for p in packets
    ]
    (tmp / "frames.json").write_text(json.dumps({"inputs": inputs, "frames": table}))


def _probe(cwd: Path, what: list[str]) -> dict:
    """ffprobe's JSON about ``stream.h264`` (``what``: its -show options)."""
    probe = shutil.which("ffprobe") or "ffprobe"
    cmd = [probe, "-v", "error", *what, "-of", "json", "stream.h264"]
    return json.loads(
        subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True).stdout
    )


def prepare_live(
    duration_s: float, kbps: int, fps: int = 25, gop: int = 50, bframes: int = 2
) -> dict:
    inputs = live_inputs(duration_s, kbps, fps, gop, bframes)
    root = build_once(content_dir("live", inputs), lambda tmp: _encode_live(tmp, inputs))
    table = json.loads((root / "frames.json").read_text())["frames"]
    return {
        "root": str(root),
        "stream": "stream.h264",
        "frames": len(table),
        "bytes": sum(f["size"] for f in table),
    }
