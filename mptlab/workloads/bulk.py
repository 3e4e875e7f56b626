"""Bulk transfer with iperf3 (through ``mptcpize`` for MPTCP: Debian's
iperf3 3.12 has no MPTCP flag).

By bytes (``-n``) or by duration (``-t``); ``download`` makes the server send
(iperf3 ``-R``).  Metrics, from the receiver's 100 ms intervals:

- ``goodput_mbps``: bytes received after the warm-up divided by that time;
- ``goodput_total_mbps``, ``bytes_received``, ``duration_s``: whole transfer;
- ``retransmits``: TCP retransmissions iperf3 reports for the sender;
- ``goodput_cov``: coefficient of variation (sd / mean) of the goodput in
  the analysis window's whole seconds (the MPT-BM paper's stability metric);
  ``duration_s`` of a byte-limited transfer is its completion time.

iperf3's ``-n`` stops counting when the sender has *written* the bytes, so
for byte-limited runs ``bytes_received`` can fall short of ``bytes`` by
what was still buffered; both are reported.

When iperf3 fails (its JSON report has an ``error``, e.g. "idle timeout for
receiving data", or was cut short), the run fails with iperf3's own words
(``WorkloadError``), carrying the metrics of the intervals it did report.

Under virtual time (``clock: virtual``) both iperf3 processes run with
``helpers/spin_sleep.c`` preloaded (``helpers.spin``): iperf3 spins on
select() at the end of a byte-limited test, which under virtual time costs
much host CPU and hardly any guest time (the file says why, with measurements).
"""

from __future__ import annotations

import json
import subprocess

from ..guest.workload import WorkloadError
from ..spec.metrics import Metric
from .helpers import spin
from .helpers.common import endpoints, mptcpize

PORT = 5201

HEADLINE = ("goodput_mbps", "goodput_cov", "duration_s", "retransmits")
METRICS = (  # goodput_mbps, duration_s, analysis_window_s: helpers.common
    Metric(
        "goodput_cov",
        "",
        "lower",
        "sd / mean of the goodput per whole second of the analysis window "
        "(the MPT-BM paper's stability metric)",
    ),
    Metric(
        "goodput_total_mbps", "Mbit/s", "higher", "goodput of the whole transfer, warm-up included"
    ),
    Metric("bytes_received", "B", None, "bytes the receiver got (iperf3's end report)"),
    Metric("bytes_sent", "B", None, "bytes the sender wrote (iperf3's end report)"),
    Metric("retransmits", "segments", "lower", "TCP retransmissions iperf3 reports for the sender"),
    Metric("interval_bytes", "B", None, "bytes received per 100 ms interval", table="series"),
)


def preload(ctx) -> list[str]:
    """The command prefix that adds ``spin_sleep.so`` to iperf3's preloads
    (``helpers.spin``): under virtual time, and under real time when the
    workload sets a receive low-water mark (``rcvlowat``)."""
    lowat = int(getattr(ctx.workload, "rcvlowat", 0) or 0)
    virtual = ctx.config.clock == "virtual"
    if not virtual and not lowat:
        return []
    prefix = spin.prefix(lowat)
    if not prefix and lowat:
        raise WorkloadError(
            "bulk: rcvlowat needs spin_sleep.so, which the host could not build (no C compiler?)"
        )
    if not prefix:
        ctx.log(
            "bulk: no spin_sleep.so (the host could not build it): a byte-limited "
            "transfer's end will cost much host CPU under virtual time"
        )
    return prefix


def _endpoints(ctx) -> tuple[str, str | None]:
    """(server address to connect to, client address to bind or None)."""
    return endpoints(ctx)


def command(ctx, dest: str, bind: str | None) -> list[str]:
    w = ctx.workload
    args = ["iperf3", "-c", dest, "-p", str(PORT), "-J", "-i", "0.1"]
    args += ["-n", str(w.bytes)] if w.bytes else ["-t", f"{w.duration / 1000:g}"]
    if w.direction == "download":
        args.append("-R")
    if bind:
        args += ["-B", bind]
    return mptcpize(ctx) + preload(ctx) + args


def run(ctx) -> dict:
    dest, bind = _endpoints(ctx)
    prefix = mptcpize(ctx) + preload(ctx)
    server_log = open(ctx.trace_dir / "iperf3-server.json", "w")  # noqa: SIM115
    server = ctx.net.popen(
        ctx.server,
        prefix + ["iperf3", "-s", "-1", "-p", str(PORT), "-J"],
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    ctx.net.wait_listening(ctx.server, PORT)
    ctx.mark("workload_start")
    client_cmd = command(ctx, dest, bind)
    ctx.log("workload: " + " ".join(client_cmd))
    proc = ctx.net.popen(
        ctx.client, client_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = proc.communicate()
    ctx.mark("workload_end")
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    server_log.close()
    (ctx.trace_dir / "iperf3-client.json").write_text(out)
    client = parse_report(out, "iperf3 client")
    server_report = parse_report(
        (ctx.trace_dir / "iperf3-server.json").read_text(), "iperf3 server"
    )
    # goodput is what the receiver saw: the client downloads, the server receives uploads
    report = client if ctx.workload.direction == "download" else server_report
    error = iperf3_error(
        client, server_report if report is server_report else None, proc.returncode, err
    )
    if error or not isinstance(report, dict):
        raise WorkloadError(
            error or str(report), metrics=_partial(report, ctx.config.warmup / 1000)
        )
    return metrics(report, ctx.config.warmup / 1000)


def iperf3_error(
    client: dict | str, receiver: dict | str | None, returncode: int, stderr: str = ""
) -> str | None:
    """Why iperf3 failed, in its own words, or None.  iperf3 puts the reason
    in its JSON report's ``error`` ("idle timeout for receiving data",
    "unable to connect to server: ...", "interrupt - the client has
    terminated"); ``receiver``: the server's report when it is the receiver
    (uploads), else None."""
    if isinstance(client, dict) and client.get("error"):
        return f"iperf3: {client['error']}"
    if isinstance(receiver, dict) and receiver.get("error"):
        return f"iperf3 server: {receiver['error']}"
    tail = stderr.strip()[-300:]
    if isinstance(client, str):
        return f"{client} (exit status {returncode}{'; ' + tail if tail else ''})"
    if returncode != 0:
        return f"iperf3 client exited with {returncode} without an error in its report" + (
            f" ({tail})" if tail else ""
        )
    if isinstance(receiver, str):
        return receiver
    return None


def parse_report(text: str, who: str) -> dict | str:
    """iperf3's JSON report, or what is wrong with it (a string)."""
    if not text.strip():
        return f"{who} wrote no report"
    try:
        report = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{who} report is not JSON ({exc.msg} at char {exc.pos})"
    return report if isinstance(report, dict) else f"{who} report is not a JSON object"


def _partial(report, warmup_s: float) -> dict | None:
    """The metrics of whatever intervals a failed report holds (None: none)."""
    if not isinstance(report, dict) or not report.get("intervals"):
        return None
    try:
        return metrics(report, warmup_s)
    except WorkloadError:
        return None


def goodput_cov(intervals: list[dict], period_s: float = 1.0) -> float | None:
    """sd / mean of the goodput per whole ``period_s`` (intervals summed by
    their start time; a period iperf3's intervals do not fully cover, such as
    the last one, is left out: a half-second at the end would count as a
    dip).  None with fewer than 2 periods."""
    bins: dict[int, list[float]] = {}
    for iv in intervals:
        k = int(iv.get("start", 0) // period_s)
        acc = bins.setdefault(k, [0.0, 0.0])
        acc[0] += iv.get("bytes", 0)
        acc[1] += iv.get("seconds", 0)
    rates = [b / secs for b, secs in bins.values() if secs >= 0.99 * period_s]
    if len(rates) < 2:
        return None
    mean = sum(rates) / len(rates)
    if mean <= 0:
        return None
    var = sum((r - mean) ** 2 for r in rates) / (len(rates) - 1)
    return var**0.5 / mean


def metrics(report: dict, warmup_s: float) -> dict:
    """Goodput and totals from an iperf3 JSON report (receiver view).

    A report without an ``end`` section (iperf3 interrupted) gives the
    totals of its intervals (no ``bytes_sent``, ``retransmits``);
    ``WorkloadError`` if there is nothing to measure."""
    intervals = [
        iv["sum"] for iv in report.get("intervals", []) if isinstance(iv, dict) and "sum" in iv
    ]
    end = report.get("end") or {}
    received = end.get("sum_received")
    sent = end.get("sum_sent") or {}
    if received is None and not intervals:
        error = f": {report['error']}" if report.get("error") else ""
        raise WorkloadError(f"iperf3: the report has neither an end section nor intervals{error}")
    after = [iv for iv in intervals if iv.get("start", 0) >= warmup_s - 1e-9]
    window_bytes = sum(iv.get("bytes", 0) for iv in after)
    window_s = sum(iv.get("seconds", 0) for iv in after)
    if received is None:  # interrupted: the intervals are all there is
        total = sum(iv.get("bytes", 0) for iv in intervals)
        seconds = max((iv.get("end", 0) for iv in intervals), default=0)
        received = {
            "bytes": total,
            "seconds": seconds,
            "bits_per_second": total * 8 / seconds if seconds else 0.0,
        }
    return {
        "goodput_mbps": window_bytes * 8 / window_s / 1e6 if window_s > 0 else None,
        "goodput_cov": goodput_cov(after),
        "goodput_total_mbps": received.get("bits_per_second", 0.0) / 1e6,
        "bytes_received": received.get("bytes"),
        "bytes_sent": sent.get("bytes"),
        "duration_s": received.get("seconds"),
        "retransmits": sent.get("retransmits"),
        "analysis_window_s": window_s,
        "interval_bytes": [iv.get("bytes") for iv in intervals],
    }
