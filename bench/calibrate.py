"""Calibration of the BLEST paper's open setup parameters on its baselines
(docs/reproduction.md, "Calibration protocol").

    python -m bench.run calibrate      # MPTLAB_CAL_REPS (default 4), MPTLAB_CAL_OUT

The paper leaves three things of its emulation setup open: whether a
link's "Delay" is one-way or round-trip, how the "16 MiB" (bulk) and
"1024/2048 KiB" (CBR, web) buffers were set (TCP autotuning's ceiling, or
setsockopt by the application, which Linux doubles and fixes), and how
many background flows of which kind loaded each bottleneck; and its
kernel (3.14) recovered losses by counting duplicate ACKs where 6.12 uses
RACK (``net.ipv4.tcp_recovery``).  Every
candidate (``CANDIDATES``; in two stages, ``main``) is run on the paper's
*baseline* numbers only, minRTT (``minrtt_pr``, MPTCP v0.90's default with OR&P) in:

- bulk, 3G + WLAN: the bytes minRTT's opportunistic retransmission re-sent
  (Table II: 0.53 MiB; ``or_resent_bytes``, kernel patch 0011: the table
  in docs/reproduction.md dated 2026-11-25 was measured before it, with
  ``k_bytes_reinjected``, which also counts re-sends after a timeout);
- CBR 1 Mbit/s, 3G + WLAN and WLAN + WLAN: mean application delay
  (Table IV: 68 and 52.18 ms);
- web, both scenarios, three pages: mean completion time (Table III).

The error of a candidate is the mean |log(ours / paper)| over those nine
numbers; the table lists each number's ratio so that a choice can be
checked against every baseline, not only the mean.  The numbers of BLEST,
OTIAS and DAPS never enter.  The result goes into docs/reproduction.md
(section ``calibration``) with the command and the date.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

import mptlab

from .report import write_section

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reproduction.md"

# The open parameters and their candidate readings.
DELAYS = {
    "rtt": ("wlan", "3g"),  # as shipped: the paper's Delay is the RTT (half each way)
    "oneway": ("wlan-oneway", "3g-oneway"),  # the Delay of each direction (CORE's link delay)
}
BUFFERS = ["autotune", "socket"]
BACKGROUNDS = {
    # as shipped: 1 rate-limited TCP flow and 5 UDP on/off flows per bottleneck
    "shipped": {"tcp_flows": 1, "udp_flows": 5},
    # the paper's "saturated sender and rate-limited TCP flows": one of each
    "greedy": {"tcp_flows": 1, "udp_flows": 5, "tcp_greedy": 1},
}
# Loss recovery: 6.12 detects losses with RACK (time-based, since 4.18);
# the paper's 3.14 counted duplicate ACKs (with early retransmit and tail
# loss probes), which recovers a lost segment of a thin flow (CBR) later.
RECOVERY = {"rack": {}, "dupack": {"net.ipv4.tcp_recovery": 0}}
CANDIDATES = list(itertools.product(DELAYS, BUFFERS, BACKGROUNDS, RECOVERY))

# One-way reading: the shipped profiles with each direction's delay doubled.
PROFILES = {
    "wlan-oneway": {
        "description": "WLAN of the BLEST setup, its 25 ms read as one-way",
        "source": "Ferlin et al., BLEST, IFIP Networking 2016, Sec. III",
        "paper_delay": "25 ms, read as one-way (RTT 50 ms): a calibration candidate",
        "rate": "25mbit",
        "delay": "25ms",
        "loss": "1%",
        "queue": "100 packets",
    },
    "3g-oneway": {
        "description": "3G of the BLEST setup, its 65 ms read as one-way",
        "source": "Ferlin et al., BLEST, IFIP Networking 2016, Sec. III",
        "paper_delay": "65 ms, read as one-way (RTT 130 ms): a calibration candidate",
        "rate": "5mbit",
        "delay": "65ms",
        "queue": "3750 packets",
    },
}


@dataclass(frozen=True)
class Target:
    """One baseline number of the paper and where mptlab measures it."""

    base: str  # the shipped experiment
    variant: str  # the variant of the calibration experiment
    metric: str
    paper: float
    scale: float  # metric unit per paper unit
    label: str


TARGETS = [
    Target("blest-3g-wlan", "scheduler=minrtt_pr", "or_resent_bytes", 0.53, 1 << 20,
           "bulk 3G+WLAN: OR&P re-sent MiB (Table II)"),
    Target("blest-3g-wlan-cbr", "scheduler=minrtt_pr", "delay_mean_ms", 68.0, 1.0,
           "CBR 3G+WLAN: delay ms (Table IV)"),
    Target("blest-wlan-wlan-cbr", "scheduler=minrtt_pr", "delay_mean_ms", 52.18, 1.0,
           "CBR WLAN+WLAN: delay ms (Table IV)"),
    Target("blest-3g-wlan-web", "page=wikipedia,scheduler=minrtt_pr", "page_load_s", 0.421, 1.0,
           "web 3G+WLAN wikipedia s (Table III)"),
    Target("blest-3g-wlan-web", "page=amazon,scheduler=minrtt_pr", "page_load_s", 1.60, 1.0,
           "web 3G+WLAN amazon s"),
    Target("blest-3g-wlan-web", "page=huffingtonpost,scheduler=minrtt_pr", "page_load_s", 4.87,
           1.0, "web 3G+WLAN huffingtonpost s"),
    Target("blest-wlan-wlan-web", "page=wikipedia,scheduler=minrtt_pr", "page_load_s", 0.398,
           1.0, "web WLAN+WLAN wikipedia s"),
    Target("blest-wlan-wlan-web", "page=amazon,scheduler=minrtt_pr", "page_load_s", 1.461, 1.0,
           "web WLAN+WLAN amazon s"),
    Target("blest-wlan-wlan-web", "page=huffingtonpost,scheduler=minrtt_pr", "page_load_s",
           4.218, 1.0, "web WLAN+WLAN huffingtonpost s"),
]  # fmt: skip


def candidate_name(delay: str, buffers: str, background: str, recovery: str) -> str:
    return f"{delay}-{buffers}-{background}-{recovery}"


def experiments(reps: int) -> dict:
    """The calibration campaign: per candidate and shipped setup, its minRTT
    baseline only."""
    out: dict[str, dict] = {}
    for delay, buffers, background, recovery in CANDIDATES:
        name = candidate_name(delay, buffers, background, recovery)
        for base in sorted({t.base for t in TARGETS}):
            spec = mptlab.Experiment.from_yaml(base)
            wlan_wlan = "wlan-wlan" in base
            wlan, g3 = DELAYS[delay]
            bg = dict(spec.data["background"][0])
            bg.update(BACKGROUNDS[background])
            exp = {
                "extends": base,
                "description": f"calibration candidate {name} on {base}'s minRTT baseline",
                "paths": [wlan, wlan] if wlan_wlan else [wlan, g3],
                "kernel": {"buffers": buffers, "sysctls": RECOVERY[recovery]},
                "background": [bg],
                "repetitions": reps,
                "variants": [],
                "expect": [],
            }
            if spec.data["workload"]["type"] == "web":
                exp["matrix"] = {
                    "workload.page": ["wikipedia", "amazon", "huffingtonpost"],
                    "kernel.scheduler": ["minrtt_pr"],
                }
            else:
                exp["matrix"] = {"kernel.scheduler": ["minrtt_pr"]}
            out[f"cal-{name}-{base}"] = exp
    return out


def measure(results: mptlab.Results, target: Target) -> tuple[float, int, int]:
    """Our mean of the target's metric over the variant's ok runs, with n
    and the number of runs not ok (kept in the table: no survivor bias)."""
    runs = results.runs
    mine = runs[runs["variant"] == target.variant]
    ok = mine[mine["status"] == "ok"]
    if target.metric not in ok:
        return math.nan, 0, len(mine) - len(ok)
    values = ok[target.metric].dropna()
    mean = float(values.mean()) / target.scale if len(values) else math.nan
    return mean, len(values), len(mine) - len(ok)


def evaluate(campaign: Path, out: Path, candidate: tuple) -> tuple[float, str, list[str]]:
    """Run one candidate's baselines (resuming what exists) and score them."""
    name = candidate_name(*candidate)
    ratios, cells = [], []
    for target in TARGETS:
        exp = mptlab.Experiment.from_yaml(campaign, f"cal-{name}-{target.base}")
        results = mptlab.run(exp, out=out, progress=False)
        mean, n, bad = measure(results, target)
        ratio = mean / target.paper if target.paper else math.nan
        ratios.append(ratio)
        cells.append(f"{mean:.3g} ({ratio:.2f}x, n={n}{f', {bad} not ok' if bad else ''})")
    logs = [abs(math.log(r)) for r in ratios if r and math.isfinite(r) and r > 0]
    error = sum(logs) / len(logs) if logs else math.nan
    print(f"{name}: error {error:.3f}", flush=True)
    return error, name, cells


def table(rows: list) -> str:
    rows = sorted(rows, key=lambda r: (math.isnan(r[0]), r[0]))
    head = "| candidate (delay-buffers-background-recovery) | error | " + " | ".join(
        t.label for t in TARGETS
    )
    return "\n".join(
        [
            head + " |",
            "|" + "---|" * (len(TARGETS) + 2),
            *(f"| {name} | {err:.3f} | " + " | ".join(cells) + " |" for err, name, cells in rows),
            "| paper | | " + " | ".join(f"{t.paper:g}" for t in TARGETS) + " |",
        ]
    )


def main() -> None:
    """Two stages, to keep the campaign near 40 minutes on 2 CPUs: the links,
    background and loss recovery (every combination, buffers as shipped),
    then the buffer mechanism on the best of those.  The buffers move the
    bulk baseline most (a 16 MiB window against 3G's seconds of queue) and
    the others little (1-2 MiB buffers at 1 Mbit/s or per web object)."""
    reps = int(os.environ.get("MPTLAB_CAL_REPS", "4"))
    out = Path(os.environ.get("MPTLAB_CAL_OUT", ROOT / "results" / "calibration"))
    out.mkdir(parents=True, exist_ok=True)
    campaign = out / "calibration.yaml"
    campaign.write_text(
        yaml.safe_dump({"profiles": PROFILES, "experiments": experiments(reps)}, sort_keys=False)
    )
    started = time.monotonic()
    first = [c for c in CANDIDATES if c[1] == "autotune"]
    rows = [evaluate(campaign, out, c) for c in first]
    best = min(zip(rows, first, strict=True), key=lambda rc: rc[0][0])[1]
    other = next(b for b in BUFFERS if b != best[1])
    second = [r for r, c in zip(rows, first, strict=True) if c == best]
    second.append(evaluate(campaign, out, (best[0], other, *best[2:])))
    wall = time.monotonic() - started
    body = (
        f"minRTT (`minrtt_pr`) only, {reps} runs per cell, virtual time; each cell: our mean "
        "(ratio to the paper's value, n; runs not ok are counted).  Error: mean |log(ours / "
        f"paper)| over the row; lowest first.  Wall time {wall / 60:.0f} min.\n\n"
        "Stage 1, the one-way or round-trip reading of the links' delay, the background "
        "and the loss recovery (buffers: autotune):\n\n"
        + table(rows)
        + "\n\nStage 2, the buffer mechanism on the best of stage 1:\n\n"
        + table(second)
    )
    (out / "calibration.md").write_text(body + "\n")
    write_section(
        "calibration",
        "Calibration of the BLEST setup on the minRTT baselines",
        "python -m bench.run calibrate",
        body,
        doc=DOC,
    )
    print(body)
