"""Calibration of the MPT-BM paper's receive buffer on its baselines
(docs/reproduction.md, "Calibration protocol").

    python -m bench.run calibrate_mptbm   # MPTLAB_CAL_REPS (default 5), MPTLAB_CAL_OUT

The paper ran "unbounded" 16 MiB buffers with autotuning on (Sec. IV), yet
says its MPTCP "becomes receive-window limited" (Sec. III), and its
baselines used 67-80 % of the paths' summed rates; on Linux 6.12 the same
16 MiB ceiling never limits (the client advertises 7-9.5 MB against ~2 MB
in flight) and our baselines finish 5-21 % sooner than the paper's.  How
large the window was that v0.88's autotuning actually gave is not stated:
the ceiling of TCP's autotuning (``kernel.rmem``) is the open parameter.

Every candidate runs MPT-BM *off* (lambda = 0) only, in the paper's three
scenarios, and is scored against every lambda = 0 number the paper gives
for them: the 16 MiB completion times (Sec. V: 13.5, 15.4, 10.9 s), the
buffer delays (Table II) and buffer sizes (Table III), read from the
``paper:`` values of the experiments' own claims (their baseline side), so
the two cannot drift apart.  The error of a candidate is the mean
|log(ours / paper)| over all of them (the protocol's rule), shown also per
group, because the groups pull apart: the buffer delays are set by the 3G
queue depth, not the window (docs/reproduction.md), and the sizes are
bounded by the buffer itself.  MPT-BM's own numbers (lambda 1.5 and 3.0)
never enter.  The result goes into docs/reproduction.md (section
``calibration-mptbm``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path

import yaml

import mptlab

from .calibrate import Target, measure
from .report import write_section

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reproduction.md"

# kernel.rmem candidates: the shipped 16 MiB (the paper's figure), and the
# ceilings below it down to about one BDP of the summed paths (~1 MiB) and
# under it (the first run, 3 a cell, found 1 MiB best at the grid's edge).
CANDIDATES = ["16MiB", "4MiB", "2MiB", "1MiB", "768KiB", "512KiB"]

SCENARIOS = {"mptbm-3g1-3g2": "3G1+3G2", "mptbm-3g1-wlan": "3G1+WLAN", "mptbm-3g2-wlan": "3G2+WLAN"}
BASELINE = "lambda=0"
# the claims' metrics, grouped as the paper's tables are
GROUPS = {
    "duration_s": "time",
    "pcap_hol_delay": "delay (Table II)",
    "k_rcvbuf_bytes": "size (Table III)",
    "k_rmem_bytes": "size (Table III)",
}
# Table III's two readings (docs/reproduction.md): the claims read one, the
# other is shown in its own group, not scored
OTHER_READING = {"k_rcvbuf_bytes": "k_rmem_bytes", "k_rmem_bytes": "k_rcvbuf_bytes"}
OTHER = "size, the other reading (not scored)"


def group(metric: str) -> str:
    return next(g for prefix, g in GROUPS.items() if metric.startswith(prefix))


def targets() -> list[Target]:
    """The paper's lambda = 0 values, from the claims that compare with it."""
    out: dict[tuple[str, str], Target] = {}
    for base, label in SCENARIOS.items():
        for claim in mptlab.Experiment.from_yaml(base).spec.expect:
            paper = claim.paper
            if not isinstance(paper, list) or claim.compare[1] != BASELINE:
                continue
            if not any(claim.metric.startswith(prefix) for prefix in GROUPS):
                continue
            out.setdefault(
                (base, claim.metric),
                Target(
                    base, BASELINE, claim.metric, paper[1], claim.scale, f"{label} {claim.metric}"
                ),
            )
    return list(out.values())


def experiments(reps: int) -> dict:
    """Per candidate and scenario: the lambda = 0 baseline only."""
    out: dict[str, dict] = {}
    for rmem in CANDIDATES:
        for base in SCENARIOS:
            out[f"cal-{rmem}-{base}"] = {
                "extends": base,
                "description": f"calibration candidate rmem {rmem} on {base}'s baseline",
                "kernel": {"rmem": rmem},
                "repetitions": reps,
                "matrix": {"kernel.mptbm.lambda": [0]},
                "expect": [],
            }
    return out


def main() -> None:
    reps = int(os.environ.get("MPTLAB_CAL_REPS", "5"))
    out = Path(os.environ.get("MPTLAB_CAL_OUT", ROOT / "results" / "calibration-mptbm"))
    out.mkdir(parents=True, exist_ok=True)
    campaign = out / "calibration.yaml"
    campaign.write_text(yaml.safe_dump({"experiments": experiments(reps)}, sort_keys=False))
    started = time.monotonic()
    wanted = targets()
    groups = [*dict.fromkeys(GROUPS.values()), OTHER]
    rows = []
    for rmem in CANDIDATES:
        logs: dict[str, list[float]] = {g: [] for g in groups}
        cells = []
        for base in SCENARIOS:
            exp = mptlab.Experiment.from_yaml(campaign, f"cal-{rmem}-{base}")
            results = mptlab.run(exp, out=out, progress=False)
            for t in (t for t in wanted if t.base == base):
                mean, n, bad = measure(results, t)
                ratio = mean / t.paper
                if math.isfinite(ratio) and ratio > 0:
                    logs[group(t.metric)].append(abs(math.log(ratio)))
                if t.metric == "duration_s":
                    cells.append(
                        f"{mean:.3g} ({ratio:.2f}x, n={n}{f', {bad} not ok' if bad else ''})"
                    )
                for mine, other in OTHER_READING.items():
                    if t.metric.startswith(mine):
                        alt = replace(t, metric=t.metric.replace(mine, other))
                        ratio = measure(results, alt)[0] / alt.paper
                        if math.isfinite(ratio) and ratio > 0:
                            logs[OTHER].append(abs(math.log(ratio)))
        every = [x for g in groups if g != OTHER for x in logs[g]]
        error = sum(every) / len(every) if every else math.nan
        per = [sum(logs[g]) / len(logs[g]) if logs[g] else math.nan for g in groups]
        print(
            f"rmem {rmem}: error {error:.3f} ({', '.join(f'{g} {e:.3f}' for g, e in zip(groups, per, strict=True))})",
            flush=True,
        )
        rows.append((error, rmem, per, cells))
    wall = time.monotonic() - started
    rows.sort(key=lambda r: (math.isnan(r[0]), r[0]))
    paper_times = [t.paper for t in wanted if t.metric == "duration_s"]
    body = "\n".join(
        [
            f"MPT-BM off (lambda = 0) only, {reps} runs per cell, virtual time.  Scored on "
            f"the paper's {len(wanted)} lambda = 0 numbers of these scenarios (the claims' "
            "baseline values): error = mean |log(ours / paper)| over all of them, lowest "
            "first, and per group; the last group reads Table III the other way (the claims "
            "read the receive buffer autotuning grants, k_rcvbuf_bytes_p*; the other reading "
            "is the memory the segments hold, k_rmem_bytes_p*), not scored.  The time cells: our mean 16 MiB completion time (ratio "
            f"to the paper's, n; runs not ok are counted).  Wall time {wall / 60:.0f} min.",
            "",
            "| kernel.rmem | error | "
            + " | ".join(f"error: {g}" for g in groups)
            + " | "
            + " | ".join(f"{label} s" for label in SCENARIOS.values())
            + " |",
            "|" + "---|" * (len(groups) + len(SCENARIOS) + 2),
            *(
                f"| {rmem} | {err:.3f} | "
                + " | ".join(f"{e:.3f}" for e in per)
                + " | "
                + " | ".join(cells)
                + " |"
                for err, rmem, per, cells in rows
            ),
            "| paper | | "
            + " | " * (len(groups) - 1)
            + " | "
            + " | ".join(f"{p:g}" for p in paper_times)
            + " |",
        ]
    )
    (out / "calibration.md").write_text(body + "\n")
    write_section(
        "calibration-mptbm",
        "Calibration of the MPT-BM receive buffer on its lambda = 0 baselines",
        "python -m bench.run calibrate_mptbm",
        body,
        doc=DOC,
    )
    print(body)
