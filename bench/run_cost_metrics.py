"""What a change of the headline run's cost did to its results: the
``run_cost`` headline run (``blest-3g-wlan``, minrtt_pr, as shipped, virtual
time) with bulk's ``rcvlowat`` 0 and 16 KiB, N repetitions each (the same
seeds), every numeric column of the runs table: medians, change, Mann-Whitney p.

    python -m bench.run run_cost_metrics     # MPTLAB_BENCH_REPS=N (default 10), --jobs 2

With ``MPTLAB_BENCH_BEFORE=DIR`` (the output dir of this benchmark's runs in a
checkout from before the change, where the bulk workload had no rcvlowat),
that campaign is the first column.  Prints a Markdown table; docs/benchmarks.md
("Per-run host CPU down") holds the one of 2026-11-27.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

import pandas as pd
from scipy.stats import mannwhitneyu

import mptlab
from mptlab.analysis import ingest

from .run_cost import NAME

SKIP = {"seed", "repetition", "started", "finished", "workload_start", "workload_end"}
SKIP |= {"seconds", "host_cpu_wait_s", "host_cpu_wait_share"}


def campaign(out: Path, reps: int, rcvlowat: int | None) -> Path:
    workload: dict = {"type": "bulk", "bytes": "64MiB"}
    if rcvlowat is not None:
        workload["rcvlowat"] = rcvlowat
    exp = mptlab.Experiment.from_yaml(NAME).replace(
        matrix={"kernel.scheduler": ["minrtt_pr"]},
        variants=[],
        expect=[],
        clock="virtual",
        workload=workload,
    )
    return mptlab.run(exp, jobs=2, repetitions=reps, out=out, progress=False).path


def table(roots: dict[str, Path]) -> str:
    runs = {}
    for name, root in roots.items():
        ingest.ingest(root, pcap=False)
        runs[name] = ingest.load_runs(root)
    names = list(runs)
    first = runs[names[0]]
    lines = [
        "| metric | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"{n}: change, p" for n in names[1:])
        + " |",
        "|---" * (2 * len(names)) + "|",
    ]
    for col in first.columns:
        if col in SKIP or not pd.api.types.is_numeric_dtype(first[col]):
            continue
        vals = {
            n: pd.to_numeric(t[col], errors="coerce").dropna().tolist() if col in t else []
            for n, t in runs.items()
        }
        if not all(vals.values()) or len({v for vs in vals.values() for v in vs}) <= 1:
            continue
        med = {n: statistics.median(v) for n, v in vals.items()}
        cells = [f"{med[n]:.4g}" for n in names]
        for n in names[1:]:
            base = med[names[0]]
            change = f"{(med[n] - base) / abs(base) * 100:+.1f} %" if base else f"{med[n]:+.3g}"
            cells.append(f"{change}, p = {mannwhitneyu(vals[names[0]], vals[n]).pvalue:.2f}")
        lines.append(f"| {col} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    reps = int(os.environ.get("MPTLAB_BENCH_REPS", "10"))
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-cost-", dir="/var/tmp") as tmp:
        roots = {}
        before = os.environ.get("MPTLAB_BENCH_BEFORE")
        if before:
            roots["before"] = Path(before)
        for lowat in (0, 16 << 10):
            roots[f"rcvlowat {lowat}"] = campaign(Path(tmp) / f"lowat{lowat}", reps, lowat)
        print(table(roots))
