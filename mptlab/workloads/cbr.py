"""Constant bit rate frames with D-ITG over MPTCP (``mptcpize``) or TCP.

The BLEST paper's "video streaming" traffic: frames of ``frame_size`` bytes
at ``rate`` (1 Mbit/s with 5 KiB frames: 24.41 frames/s), from the server to
the client (``download``, default) or back (``upload``).  ``ITGSend`` writes
one frame per application write with constant inter-departure times;
``ITGRecv`` logs every frame when it is complete; both logs are decoded with
``ITGDec``.  Sender and receiver share the guest's clock, so each frame's
one-way application delay is ``rxTime - txTime`` directly.

D-ITG's sender opens the connection: for ``download`` the server's D-ITG
connects to the client (with MPTCP, the client then joins the server's
other addresses as they are announced).

Metrics (frames sent at or after ``warmup``): ``delay_*_ms`` (one-way
application delay: mean, median, p95, p99, min, max, std), ``jitter_ms``
(mean |delay difference| of consecutive frames), ``frames_sent``,
``frames_received``, ``frames_lost``, ``goodput_mbps``, ``frame_rate``,
``path_owd_ms`` (each path's configured one-way propagation delay, for
reference).  Per-frame records: ``traces/cbr-frames.csv``.
"""

from __future__ import annotations

import csv
import signal
import subprocess
import time

from ..guest.netlab import wait_listening
from ..guest.workload import WorkloadError
from ..spec.metrics import Metric
from .helpers.common import (
    announce_client_addresses,
    endpoints,
    ipdv,
    mptcpize,
    reverse_endpoints,
    stop,
    summary,
)

SIGNAL_PORT = 9000
DATA_PORT = 8999

HEADLINE = ("delay_mean_ms", "delay_p95_ms", "jitter_ms", "frames_lost")
METRICS = (  # goodput_mbps, delay_*_ms, jitter_ms, analysis_window_s, rate_mbps: helpers.common
    Metric("frames_sent", "", None, "frames sent at or after the warm-up"),
    Metric("frames_received", "", "higher", "of those, frames received"),
    Metric("frames_lost", "", "lower", "of those, frames never received"),
    Metric("frame_rate", "1/s", None, "frames received per second of sending time"),
    Metric("frame_size", "B", None, "the configured frame size"),
    Metric("configured_frame_rate", "1/s", None, "frames per second the rate and size give"),
    Metric(
        "path_owd_ms",
        "ms",
        None,
        "each path's configured one-way propagation delay, for reading delays against",
        table="series",
    ),
)


def frames_per_s(rate_mbit: float, frame_size: int) -> float:
    return rate_mbit * 1e6 / (8 * frame_size)


# ------------------------------------------------------------ D-ITG logs
def _tod(text: str) -> float:
    """D-ITG's ``H:M:S.us`` time of day -> seconds since midnight."""
    h, m, s = text.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def parse_itgdec(text: str) -> list[dict]:
    """Records of ``ITGDec LOG -l OUT`` text: flow, seq, src, dst, tx, rx (s of day), size.
    A record line without those fields is a ``WorkloadError`` quoting it."""
    out = []
    for line in text.splitlines():
        if not line.startswith("Flow>"):
            continue
        fields = line.replace(">", "> ").split()
        rec = {}
        for key, value in zip(fields[::2], fields[1::2], strict=False):
            rec[key.rstrip(">")] = value
        try:
            out.append(_record(rec))
        except (KeyError, ValueError) as exc:
            raise WorkloadError(f"ITGDec: unreadable record ({exc!r}): {line[:200]!r}") from None
    return out


def _record(rec: dict) -> dict:
    return {
        "flow": int(rec["Flow"]),
        "seq": int(rec["Seq"]),
        "src": rec["Src"],
        "dst": rec["Dest"],
        "tx": _tod(rec["txTime"]),
        "rx": _tod(rec["rxTime"]),
        "size": int(rec["Size"]),
    }


def unwrap_day(records: list[dict]) -> None:
    """Make times monotonic across midnight (times of day wrap at 86400 s)."""
    if not records:
        return
    first = records[0]["tx"]
    for r in records:
        for key in ("tx", "rx"):
            if r[key] < first - 43200:
                r[key] += 86400


def decode(log, text_out) -> list[dict]:
    """Run ``ITGDec`` on a binary log; the decoded text goes to ``text_out``."""
    proc = subprocess.run(["ITGDec", str(log), "-l", str(text_out)], capture_output=True, text=True)
    if proc.returncode != 0 or not text_out.exists():
        raise WorkloadError(
            f"ITGDec {log} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}"
        )
    records = parse_itgdec(text_out.read_text())
    unwrap_day(records)
    return records


def frame_metrics(
    received: list[dict], sent: list[dict] | None, warmup_s: float, frame_size: int
) -> dict:
    """Delay, jitter, loss and goodput of one flow's frames sent at or after
    ``warmup_s`` (relative to the first frame sent)."""
    sent = sent or []
    t0 = min([r["tx"] for r in sent] + [r["tx"] for r in received]) if (sent or received) else 0.0
    start = t0 + warmup_s
    rx = sorted((r for r in received if r["tx"] >= start - 1e-9), key=lambda r: r["seq"])
    tx = [r for r in sent if r["tx"] >= start - 1e-9]
    delays = [(r["rx"] - r["tx"]) * 1000 for r in rx]
    n_sent = len(tx) if sent else (rx[-1]["seq"] - rx[0]["seq"] + 1 if rx else 0)
    out = {
        "frames_sent": n_sent,
        "frames_received": len(rx),
        "frames_lost": max(0, n_sent - len(rx)),
    }
    out.update(summary(delays, "delay"))
    out["jitter_ms"] = ipdv(delays)
    if rx:
        span = max(r["rx"] for r in rx) - min(r["tx"] for r in rx)
        out["goodput_mbps"] = sum(r["size"] for r in rx) * 8 / span / 1e6 if span > 0 else None
        send_span = rx[-1]["tx"] - rx[0]["tx"]
        out["frame_rate"] = (len(rx) - 1) / send_span if send_span > 0 else None
    else:
        out["goodput_mbps"] = out["frame_rate"] = None
    out["analysis_window_s"] = (max(r["tx"] for r in tx) - start) if tx else None
    return out


def path_owd_ms(ctx) -> list[float]:
    """Each path's configured one-way propagation delay (client to server
    direction, the ``pathN`` links), for reading delays against."""
    out = []
    for n in range(1, len(ctx.config.paths) + 1):
        links = [ln for ln in ctx.plan.links if ln.label == f"path{n}"]
        out.append(sum(ln.a_to_b.delay for ln in links if ln.a_to_b is not None))
    return out


def write_frames(path, records: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["flow", "seq", "tx", "rx", "delay_ms", "size"])
        for r in records:
            w.writerow(
                [
                    r["flow"],
                    r["seq"],
                    f"{r['tx']:.6f}",
                    f"{r['rx']:.6f}",
                    f"{(r['rx'] - r['tx']) * 1000:.3f}",
                    r["size"],
                ]
            )


# ------------------------------------------------------------------ run
def run(ctx) -> dict:
    p = ctx.workload
    fps = frames_per_s(p.rate, p.frame_size)
    if p.direction == "download":
        sender, receiver = ctx.server, ctx.client
        dest, _ = reverse_endpoints(ctx)
        announced = announce_client_addresses(ctx)
        if announced:
            ctx.log("cbr: the client announces its addresses: " + "; ".join(announced))
    else:
        sender, receiver = ctx.client, ctx.server
        dest, _ = endpoints(ctx)
    prefix = mptcpize(ctx)
    recv_log, send_log = ctx.trace_dir / "ditg-cbr-recv.log", ctx.trace_dir / "ditg-cbr-send.log"
    recv_out = open(ctx.trace_dir / "ditg-cbr-recv.out", "w")  # noqa: SIM115
    itgrecv = ctx.net.popen(
        receiver,
        prefix + ["ITGRecv", "-l", str(recv_log)],
        stdout=recv_out,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_listening(ctx.net.ns(receiver), SIGNAL_PORT, itgrecv)
        args = ["ITGSend", "-T", "TCP", "-a", dest, "-rp", str(DATA_PORT)]
        args += ["-C", f"{fps:.6f}", "-c", str(p.frame_size), "-t", str(int(p.duration))]
        # no -sa: D-ITG 2.8.1 fails to bind a source address ("Address family not
        # supported"); routing sends traffic to an address over that address's path
        args += ["-l", str(send_log)] + (["-D"] if p.nodelay else [])
        ctx.log("workload: " + " ".join(prefix + args))
        ctx.mark("workload_start")
        send = ctx.net.popen(
            sender, prefix + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            out, _ = send.communicate(timeout=p.duration / 1000 + 60)
        except subprocess.TimeoutExpired:
            send.kill()
            out, _ = send.communicate()
            raise WorkloadError("ITGSend did not finish in time") from None
        ctx.mark("workload_end")
        (ctx.trace_dir / "ditg-cbr-send.out").write_text(out)
        if send.returncode != 0 or "Error" in out:
            raise WorkloadError(f"ITGSend failed ({send.returncode}): {out.strip()[-400:]}")
        time.sleep(0.5)  # the last frames' log records
    finally:
        stop(itgrecv, signal.SIGINT)
        recv_out.close()
    received = decode(recv_log, ctx.trace_dir / "ditg-cbr-recv.txt")
    sent = decode(send_log, ctx.trace_dir / "ditg-cbr-send.txt")
    write_frames(ctx.trace_dir / "cbr-frames.csv", received)
    metrics = frame_metrics(received, sent, ctx.config.warmup / 1000, p.frame_size)
    metrics.update(
        rate_mbps=p.rate,
        frame_size=p.frame_size,
        configured_frame_rate=fps,
        path_owd_ms=path_owd_ms(ctx),
    )
    return metrics
