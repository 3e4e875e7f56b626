"""The run itself: where it is (layout), how it went (run.json) and what it
was (spec.json: its variant keys and the configuration that matters most)."""

from __future__ import annotations

import json

import pandas as pd

from ... import rundir
from ...spec.metrics import Metric
from .base import Run, colname, scalar

# run attributes, not metrics (the experiment's description and the run's
# bookkeeping); each variant key is a column too (dots as underscores)
ATTRIBUTES = (
    "run_id",
    "campaign",
    "run_dir",
    "attempt",
    "experiment",
    "variant",
    "repetition",
    "seed",
    "status",
    "reason",
    "started",
    "boot_status",
    "git_commit",
    "timeout_s",
    "host",
    "variant_keys",
    "topology",
    "paths",
    "mptcp",
    "scheduler",
    "congestion_control",
    "tcp_path",
    "workload",
    "warmup_ms",
    "clock",
)
METRICS = (
    Metric("seconds", "s", None, "the run's wall-clock time (run.json)"),
    Metric("host_cpu_s", "s", "lower", "host CPU time the run cost (run.json)"),
    Metric(
        "host_cpu_wait_s",
        "s",
        "lower",
        "time the guest was runnable but waited for a host CPU (run.json)",
    ),
    Metric(
        "host_cpu_wait_share",
        "",
        "lower",
        "host_cpu_wait_s / seconds: above 0.10 a real-time guest was starved by its "
        "neighbours (`WHERE clock = 'virtual' OR host_cpu_wait_share <= 0.10` keeps the "
        "trustworthy runs)",
    ),
)
RUN_FIELDS = (
    "started",
    "seconds",
    "boot_status",
    "git_commit",
    "timeout_s",
    "host",
    "host_cpu_s",
    "host_cpu_wait_s",
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    rd, info, spec = run.rd, run.info, run.spec
    attempt = rd.attempt() if info is not None or rd.set_aside_as else "incomplete"
    row: dict = {
        "run_id": run.run_id,
        "campaign": run.campaign,
        "run_dir": str(rd.path),
        "attempt": attempt,
    }
    row["experiment"] = spec.get("experiment") or (info or {}).get("experiment")
    row["variant"] = spec.get("variant") or (info or {}).get("variant") or rd.variant
    row["repetition"] = spec.get("repetition", (info or {}).get("repetition"))
    if row["repetition"] is None:
        row["repetition"] = rd.repetition
    row["seed"] = spec.get("seed", (info or {}).get("seed"))
    row.update(_status(run, attempt))
    # variant keys and the resolved configuration that matters most
    vkeys = spec.get("variant_keys") or {}
    row["variant_keys"] = json.dumps(vkeys, sort_keys=True)
    for k, v in vkeys.items():
        row[colname(k)] = scalar(v)
    row.update(_config(run.config))
    return row, {}


def _status(run: Run, attempt: str) -> dict:
    info = run.info
    if info is None and attempt == "interrupted":
        return {"status": "interrupted", "reason": "no run.json: left by an interrupted invocation"}
    if info is None:
        return {
            "status": "incomplete",
            "reason": f"no run.json ({run.info_err}): still running, or its invocation was killed",
        }
    row = {"status": info.get("status", "unknown"), "reason": info.get("reason", "")}
    for k in RUN_FIELDS:
        row[k] = info.get(k)
    if info.get("host_cpu_wait_s") is not None and info.get("seconds"):
        row["host_cpu_wait_share"] = info["host_cpu_wait_s"] / info["seconds"]
    return row


def _config(cfg: dict) -> dict:
    kern = cfg.get("kernel") or {}
    work = cfg.get("workload") or {}
    return {
        "topology": cfg.get("topology"),
        "paths": "+".join(map(str, cfg.get("paths") or [])),
        "mptcp": kern.get("mptcp"),
        "scheduler": kern.get("scheduler") if kern.get("mptcp", True) else "tcp",
        "congestion_control": kern.get("congestion_control"),
        "tcp_path": kern.get("tcp_path") if kern.get("mptcp") is False else None,
        "workload": work.get("type"),
        "warmup_ms": cfg.get("warmup"),
        "clock": rundir.clock_of(cfg),
    }
