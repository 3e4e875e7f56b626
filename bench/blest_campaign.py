"""The headline campaign's wall time, real vs virtual time: ``blest-3g-wlan``
as shipped (64 MiB downloads over 3G + WLAN with the D-ITG background,
16 MiB buffers, OLIA, every variant), one repetition per variant.

    python -m bench.run blest_campaign          # MPTLAB_BENCH_REPS=N for more

Each clock runs the same runs (same seed) with ``--jobs`` = the CPUs this
process may use, as ``mptlab run`` would (real time keeps its starvation
back-off: that is what a user gets).  Per clock: runs ok, wall time, median
wall time per run, the projected wall time of the full campaign (its runs x
wall time per run of this sample, at the same concurrency), and the median
goodput of the MPTCP variants.  The throughput ratio says how many times
more runs virtual time finishes per wall-second.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import mptlab
from mptlab.rundir import CampaignDir

from .report import write_section

NAME = "blest-3g-wlan"
CLOCKS = ["virtual", "real"]


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def run_clock(tmp: Path, clock: str, reps: int, jobs: int) -> dict:
    exp = mptlab.Experiment.from_yaml(NAME)
    full = len(exp.runs())
    load_before = loadavg()
    started = time.monotonic()
    results = mptlab.run(
        exp, jobs=jobs, repetitions=reps, out=tmp / clock, clock=clock, progress=False
    )  # type: ignore[arg-type]
    wall = time.monotonic() - started
    ok, seconds, goodputs, statuses = 0, [], [], []
    for run_dir in CampaignDir(results.path).run_dirs():
        info = run_dir.run_info() or {}
        statuses.append(info.get("status"))
        if info.get("status") != "ok":
            continue
        ok += 1
        seconds.append(info["seconds"])
        res = run_dir.result() or {}
        if run_dir.path.parent.name.startswith("scheduler="):
            goodputs.append(res["metrics"]["goodput_mbps"])
    n = len(statuses)
    return {
        "clock": clock,
        "runs": n,
        "ok": ok,
        "wall": wall,
        "per_run": statistics.median(seconds) if seconds else None,
        "full_runs": full,
        "projected_h": wall / n * full / 3600 if n else None,
        "goodput": statistics.median(goodputs) if goodputs else None,
        "load": f"{load_before} / {loadavg()}",
    }


def main() -> None:
    reps = int(os.environ.get("MPTLAB_BENCH_REPS", "1"))
    jobs = len(os.sched_getaffinity(0))
    rows = []
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-blest-", dir="/var/tmp") as tmp:
        for clock in CLOCKS:
            row = run_clock(Path(tmp), clock, reps, jobs)
            rows.append(row)
            print(row, flush=True)
    lines = [
        "| clock | runs ok | wall time (s) | wall time per run, median (s) "
        "| full campaign, projected (h) | MPTCP goodput, median (Mbit/s) "
        "| host load 1 min (before / after) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = "-" if r["per_run"] is None else f"{r['per_run']:.1f}"
        gp = "-" if r["goodput"] is None else f"{r['goodput']:.2f}"
        proj = "-" if r["projected_h"] is None else f"{r['projected_h']:.2f}"
        lines.append(
            f"| {r['clock']} | {r['ok']}/{r['runs']} | {r['wall']:.0f} | {per} "
            f"| {proj} ({r['full_runs']} runs) | {gp} | {r['load']} |"
        )
    by = {r["clock"]: r for r in rows}
    ratio = by["real"]["wall"] / by["virtual"]["wall"] if by["virtual"]["wall"] else None
    body = (
        __doc__.split("\n\n", 2)[2].split('"""')[0].strip()
        + f"\n\n{reps} repetition(s) per variant, --jobs {jobs}.\n\n"
        + "\n".join(lines)
        + (f"\n\nVirtual time finished the sample {ratio:.1f}x faster.\n" if ratio else "\n")
    )
    write_section(
        "blest_campaign", "blest-3g-wlan campaign time", "python -m bench.run blest_campaign", body
    )
    print(body)
