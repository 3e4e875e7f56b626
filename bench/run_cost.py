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
- *no subflow samples*, *no connection samples*, *no OFO events*: one
  part of the traces taken away;
- *idle*: the same topology with an idle workload of 1 s and no traces:
  boot, network build, teardown.

The parts' costs are differences between rows; the same seed in every row,
so a row's goodput differs from the first only through what was taken away.
A row that changes what the guest does (traces, background) also changes
the run's realisation, so its guest time differs: CPU per 100 s of guest
time is shown beside the CPU.

The rows are interleaved (every row's first run, then every row's second,
...): on this shared 2-CPU virtual machine the same run (same seed, same
realisation to the last byte) took 3.6 to 5.8 s of host CPU within an
hour, the speed of the machine drifting; run after run, a row would carry
the drift of its minutes.
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


def speed_probe() -> float:
    """CPU seconds of a fixed piece of pure-Python work (~0.3 s on this
    machine at its faster): taken in every pass, it shows how the
    machine's own speed moved while the rows ran."""
    start = time.process_time()
    acc = 0
    for i in range(3_000_000):
        acc = (acc + i * i) % 1_000_003
    return time.process_time() - start


def _experiment(changes: dict) -> mptlab.Experiment:
    return mptlab.Experiment.from_yaml(NAME).replace(
        matrix={"kernel.scheduler": ["minrtt_pr"]},
        variants=[],
        expect=[],
        clock="virtual",
        **changes,
    )


def summarise(out: Path, label: str, reps: int) -> dict:
    cpu, wall, guest, goodput, per100, ok = [], [], [], [], [], 0
    for run_dir in CampaignDir(out / NAME).run_dirs():
        info = run_dir.run_info() or {}
        if info.get("status") != "ok":
            continue
        ok += 1
        cpu.append(info["host_cpu_s"])
        wall.append(info["seconds"])
        metrics = (run_dir.result() or {}).get("metrics", {})
        guest.append(metrics.get("duration_s") or 0.0)
        if guest[-1]:
            per100.append(100 * cpu[-1] / guest[-1])
        if metrics.get("goodput_mbps") is not None:
            goodput.append(metrics["goodput_mbps"])
    med = statistics.median
    return {
        "label": label,
        "ok": f"{ok}/{reps}",
        "cpu": med(cpu) if cpu else None,
        "cpu_range": f"{min(cpu):.1f}-{max(cpu):.1f}" if cpu else "-",
        "per100": med(per100) if per100 else None,
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
        table = rows()
        # interleaved: each pass adds one repetition to every row (a campaign
        # resumes: repetition k keeps its seed whenever it runs)
        probes = []
        for k in range(reps):
            probes.append(speed_probe())
            for i, (label, changes) in enumerate(table):
                mptlab.run(
                    _experiment(changes),
                    jobs=1,
                    repetitions=k + 1,
                    out=Path(tmp) / f"row{i}",
                    progress=False,
                )
                print(f"pass {k + 1}/{reps}: {label}", flush=True)
        for i, (label, _) in enumerate(table):
            out.append(summarise(Path(tmp) / f"row{i}", label, reps))
            print(out[-1], flush=True)
    lines = [
        "| run | ok | host CPU, median (s) | range | per 100 s of guest time (s) "
        "| wall, median (s) | guest time of the workload (s) | goodput (Mbit/s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in out:
        lines.append(
            f"| {r['label']} | {r['ok']} | {_f(r['cpu'])} | {r['cpu_range']} | "
            f"{_f(r['per100'], '.2f')} | {_f(r['wall'])} "
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
        + f"\n\n{reps} run(s) per row.  The speed probe (``speed_probe``, one per "
        f"pass): {', '.join(f'{p:.2f}' for p in probes)} s.\n\n"
        + "\n".join(lines)
        + ("\n\nHost CPU by part (differences of medians):\n\n" + "\n".join(parts) if parts else "")
        + "\n"
    )
    write_section("run_cost", "Per-run host CPU", "python -m bench.run run_cost", body)
    print(body)
