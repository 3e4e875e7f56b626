"""Bulk transfer with iperf3 (through ``mptcpize`` for MPTCP: Debian's
iperf3 3.12 has no MPTCP flag).

By bytes (``-n``) or by duration (``-t``); ``download`` makes the server send
(iperf3 ``-R``).  Metrics, from the receiver's 100 ms intervals:

- ``goodput_mbps``: bytes received after the warm-up divided by that time;
- ``goodput_total_mbps``, ``bytes_received``, ``duration_s``: whole transfer;
- ``retransmits``: TCP retransmissions iperf3 reports for the sender.

iperf3's ``-n`` stops counting when the sender has *written* the bytes, so
for byte-limited runs ``bytes_received`` can fall short of ``bytes`` by
what was still buffered; both are reported.
"""

from __future__ import annotations

import json
import subprocess
from typing import Literal

from ._common import endpoints, mptcpize

PORT = 5201


def _params_model():
    # pydantic (and orchestrator.spec) cost ~1 s of host CPU to import in a
    # UML guest, which never validates: only the host builds this model.
    from pydantic import BaseModel, ConfigDict, Field, model_validator

    from orchestrator.spec import Duration, Size

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        bytes: Size | None = Field(None, gt=0)
        duration: Duration | None = Field(None, gt=0)
        direction: Literal["download", "upload"] = "download"

        @model_validator(mode="after")
        def _bytes_or_duration(self):
            if (self.bytes is None) == (self.duration is None):
                raise ValueError(
                    "give exactly one of bytes (e.g. '64MiB') or duration (e.g. '90s')"
                )
            return self

    return Params


def __getattr__(name: str):
    """``Params`` (the workload interface's model) is built on first use (PEP 562)."""
    if name == "Params":
        globals()["Params"] = model = _params_model()
        return model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def quick(params: dict) -> dict:
    """1/8 of the bytes or duration, at least 1 MiB or 5 s."""
    out = dict(params)
    if out.get("bytes"):
        out["bytes"] = max(1 << 20, out["bytes"] // 8)
    if out.get("duration"):
        out["duration"] = max(5000.0, out["duration"] / 8)
    return out


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
    return mptcpize(ctx) + args


def run(ctx) -> dict:
    dest, bind = _endpoints(ctx)
    prefix = mptcpize(ctx)
    server_log = open(ctx.trace_dir / "iperf3-server.json", "w")  # noqa: SIM115
    server = ctx.net.popen(ctx.server, prefix + ["iperf3", "-s", "-1", "-p", str(PORT), "-J"],
                           stdout=server_log, stderr=subprocess.STDOUT)  # fmt: skip
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
    if proc.returncode != 0:
        raise RuntimeError(f"iperf3 client failed ({proc.returncode}): {err.strip() or out[-500:]}")
    # goodput is what the receiver saw: the client downloads, the server receives uploads
    if ctx.workload.direction == "download":
        report = json.loads(out)
    else:
        report = json.loads((ctx.trace_dir / "iperf3-server.json").read_text())
    return metrics(report, ctx.config.warmup / 1000)


def metrics(report: dict, warmup_s: float) -> dict:
    """Goodput and totals from an iperf3 client JSON report (receiver view)."""
    end = report["end"]
    received = end["sum_received"]
    sent = end["sum_sent"]
    intervals = [iv["sum"] for iv in report.get("intervals", [])]
    after = [iv for iv in intervals if iv["start"] >= warmup_s - 1e-9]
    window_bytes = sum(iv["bytes"] for iv in after)
    window_s = sum(iv["seconds"] for iv in after)
    return {
        "goodput_mbps": window_bytes * 8 / window_s / 1e6 if window_s > 0 else None,
        "goodput_total_mbps": received["bits_per_second"] / 1e6,
        "bytes_received": received["bytes"],
        "bytes_sent": sent["bytes"],
        "duration_s": received["seconds"],
        "retransmits": sent.get("retransmits"),
        "analysis_window_s": window_s,
        "interval_bytes": [iv["bytes"] for iv in intervals],
    }
