"""Where a headline run's host CPU goes: one ``blest-3g-wlan`` run
(``scheduler=minrtt_pr``, 64 MiB download over 3G + WLAN, OLIA, the paper's
background, default traces) on virtual time, with parts of it taken away.

    python -m bench.run run_cost            # MPTLAB_BENCH_REPS=N runs per row (default 2)

Each row runs alone (``--jobs 1``; its guest pinned alone on a CPU), so its
wall time is about its host CPU.  Host CPU: user + system time of the
guest's host processes (``run.json`` ``host_cpu_s``); guest time: the
workload's own duration (``duration_s``).  Rows, each differing from the
first in one thing:

- *as shipped*: the run as ``mptlab run blest-3g-wlan`` makes it;
- *background by D-ITG*: ``generator: d-itg`` (the paper's tool) instead of
  mptlab's replayer (docs/workloads.md, "Background traffic");
- *no background*, *no traces* (no sampler, no OFO events), *neither*;
- *idle*: the same topology with an idle workload of 1 s and no traces:
  boot, network build, teardown.

The parts' costs are differences between rows; the same seed in every row,
so a row's goodput differs from the first only through what was taken away.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

import mptlab
from mptlab.rundir import CampaignDir

from .report import write_section

NAME = "blest-3g-wlan"
BACKGROUND = {"preset": "blest-3g-wlan", "tcp_flows": 1, "udp_flows": 5, "seed": 1}
NO_TRACES = {"ss_interval": None, "ofo_interval": None, "ofo_events": False}


def rows() -> list[tuple[str, dict]]:
    return [
        ("as shipped", {}),
        ("background by D-ITG", {"background": [{**BACKGROUND, "generator": "d-itg"}]}),
        ("no background", {"background": []}),
        ("no traces", {"traces": NO_TRACES}),
        ("no subflow samples", {"traces": {"ss_interval": None}}),
        ("no connection samples", {"traces": {"ofo_interval": None}}),
        ("no OFO events", {"traces": {"ofo_events": False}}),
        ("neither", {"background": [], "traces": NO_TRACES}),
        (
            "idle (boot, network, teardown)",
            {"background": [], "traces": NO_TRACES, "workload": {"type": "idle", "duration": "1s"}},
        ),
    ]


def measure(out: Path, label: str, changes: dict, reps: int) -> dict:
    exp = mptlab.Experiment.from_yaml(NAME).replace(
        matrix={"kernel.scheduler": ["minrtt_pr"]},
        variants=[],
        expect=[],
        clock="virtual",
        **changes,
    )
    results = mptlab.run(exp, jobs=1, repetitions=reps, out=out, progress=False)
    cpu, wall, guest, goodput, ok = [], [], [], [], 0
    for run_dir in CampaignDir(results.path).run_dirs():
        info = run_dir.run_info() or {}
        if info.get("status") != "ok":
            continue
        ok += 1
        cpu.append(info["host_cpu_s"])
        wall.append(info["seconds"])
        metrics = (run_dir.result() or {}).get("metrics", {})
        guest.append(metrics.get("duration_s") or 0.0)
        if metrics.get("goodput_mbps") is not None:
            goodput.append(metrics["goodput_mbps"])
    med = statistics.median
    return {
        "label": label,
        "ok": f"{ok}/{reps}",
        "cpu": med(cpu) if cpu else None,
        "cpu_range": f"{min(cpu):.1f}-{max(cpu):.1f}" if cpu else "-",
        "wall": med(wall) if wall else None,
        "guest": med(guest) if guest else None,
        "goodput": med(goodput) if goodput else None,
    }


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def main() -> None:
    reps = int(os.environ.get("MPTLAB_BENCH_REPS", "2"))
    out = []
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-cost-", dir="/var/tmp") as tmp:
        for i, (label, changes) in enumerate(rows()):
            r = measure(Path(tmp) / f"row{i}", label, changes, reps)
            out.append(r)
            print(r, flush=True)
    lines = [
        "| run | ok | host CPU, median (s) | range | wall, median (s) "
        "| guest time of the workload (s) | goodput (Mbit/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in out:
        lines.append(
            f"| {r['label']} | {r['ok']} | {_f(r['cpu'])} | {r['cpu_range']} | {_f(r['wall'])} "
            f"| {_f(r['guest'])} | {_f(r['goodput'], '.2f')} |"
        )
    by = {r["label"]: r["cpu"] for r in out}
    parts = []
    if None not in by.values():
        parts = [
            f"- background (mptlab's replayer): {by['as shipped'] - by['no background']:.1f} s; "
            f"with D-ITG: {by['background by D-ITG'] - by['no background']:.1f} s",
            f"- traces (sampler, OFO events): {by['as shipped'] - by['no traces']:.1f} s; "
            f"of which subflow samples {by['as shipped'] - by['no subflow samples']:.1f} s, "
            f"connection samples {by['as shipped'] - by['no connection samples']:.1f} s, "
            f"OFO events {by['as shipped'] - by['no OFO events']:.1f} s",
            f"- the 64 MiB transfer itself: {by['neither'] - by['idle (boot, network, teardown)']:.1f} s",
            f"- boot, network build, teardown: {by['idle (boot, network, teardown)']:.1f} s",
        ]
    body = (
        __doc__.split("\n\n", 2)[2].strip()
        + f"\n\n{reps} run(s) per row.\n\n"
        + "\n".join(lines)
        + ("\n\nHost CPU by part (differences of medians):\n\n" + "\n".join(parts) if parts else "")
        + "\n"
    )
    write_section("run_cost", "Per-run host CPU", "python -m bench.run run_cost", body)
    print(body)
