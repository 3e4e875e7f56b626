"""Campaign throughput: how many 3G+WLAN bulk runs can share this machine
before a run's goodput suffers, and the per-run overhead.

    python -m bench.run campaign

For each concurrency N, a campaign of N identical runs (two-path, lossless
WLAN 25 Mbit/s 12.5 ms + 3G 5 Mbit/s 32.5 ms, default scheduler, 20 s
download) runs with ``--jobs N``; the median per-run goodput is compared
with that of runs alone (N=1, four of them).  Overhead = a run's wall time
minus its workload time (boot, network build, teardown).
"""

from __future__ import annotations

import resource
import statistics
import tempfile
from pathlib import Path

import mptlab
from mptlab.rundir import CampaignDir

from .report import write_section

LEVELS = [1, 2, 3, 4, 6, 8, 12, 16]
BENCH = mptlab.Experiment(
    "bench",
    topology="two-path",
    profiles={
        "bench-wlan": {"rate": "25mbit", "delay": "12.5ms", "queue": "100 packets"},  # lossless
        "bench-3g": {"rate": "5mbit", "delay": "32.5ms", "queue": "100 packets"},  # short queue
    },
    paths=["bench-wlan", "bench-3g"],
    kernel={"path_manager": {"subflows": 2, "add_addr_accepted": 2}},
    workload=mptlab.Bulk(duration="20s"),
    warmup="2s",
    timeout="120s",
)


LIMIT_NOTE = """\
The limit is host CPU: a system call in a UML guest costs ~70 us of host CPU on this machine
(ptrace round trips), so guests are CPU-bound long before the links are.  Once N x (host CPU per
run) exceeds what the CPUs give in a run's wall time, guests wait for the CPU, their timers fire
late and goodput drops.  `mptlab run` warns, naming the runs, when a guest waited for CPU more than
10 % of its run (docs/deployment.md).
"""


def _median(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows if r.get(key) is not None]
    return f"{statistics.median(values):.1f}" if values else "-"


def run_level(tmp: Path, n: int, reps: int) -> list[dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # measure N, as asked: no back-off
    results = mptlab.run(BENCH, jobs=n, repetitions=reps, out=tmp / f"n{n}", back_off=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / reps
    rows = []
    for run_dir in CampaignDir(results.path).run_dirs():
        info = run_dir.run_info() or {}
        if info.get("status") != "ok":
            rows.append({"ok": False})
            continue
        res = run_dir.result() or {}
        work = res["marks"]["workload_end"] - res["marks"]["workload_start"]
        lateness = res.get("fidelity", {}).get("sampler_lateness", {})
        rows.append(
            {
                "ok": True,
                "goodput": res["metrics"]["goodput_mbps"],
                "overhead": info["seconds"] - work,
                "seconds": info["seconds"],
                "cpu": cpu,
                "late_p50": lateness.get("p50_ms"),
                "late_p99": lateness.get("p99_ms"),
                "wait": 100 * (info.get("host_cpu_wait_s") or 0) / info["seconds"],
            }
        )
    assert results.report is not None and len(rows) == len(results.report.outcomes)
    return rows


def main() -> None:
    results = {}
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-", dir="/var/tmp") as tmp:
        for n in LEVELS:
            rows = run_level(Path(tmp), n, reps=max(n, 4))
            results[n] = rows
            ok = [r for r in rows if r["ok"]]
            print(
                n, len(ok), statistics.median(r["goodput"] for r in ok) if ok else None, flush=True
            )
    solo = statistics.median(r["goodput"] for r in results[1] if r["ok"])
    lines = [
        "| concurrent runs | ok | median goodput (Mbit/s) | vs solo | worst run vs solo | median overhead (s) "
        "| wall time per run (s) | host CPU per run (s) | waiting for CPU (% of run) | sampler lateness p50 / p99 (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    best = 1
    for n, rows in results.items():
        ok = [r for r in rows if r["ok"]]
        if not ok:
            lines.append(f"| {n} | 0/{len(rows)} | - | - | - | - | - | - | - | - |")
            continue
        med = statistics.median(r["goodput"] for r in ok)
        worst = min(r["goodput"] for r in ok)
        rel, rel_worst = (med - solo) / solo * 100, (worst - solo) / solo * 100
        if len(ok) == len(rows) and abs(rel) <= 2:
            best = max(best, n)
        lines.append(
            f"| {n} | {len(ok)}/{len(rows)} | {med:.2f} | {rel:+.1f} % | {rel_worst:+.1f} % "
            f"| {statistics.median(r['overhead'] for r in ok):.1f} | {statistics.median(r['seconds'] for r in ok):.1f} "
            f"| {ok[0]['cpu']:.1f} | {_median(ok, 'wait')} | {_median(ok, 'late_p50')} / {_median(ok, 'late_p99')} |"
        )
    body = (
        "Two-path topology, lossless WLAN (25 Mbit/s, 12.5 ms, 100 pkts) + 3G (5 Mbit/s, 32.5 ms, 100 pkts),\n"
        "default scheduler, 20 s download after which goodput is taken (2 s warm-up excluded);\n"
        "default traces (subflow and connection samples every 100 ms, every OFO change from the kernel\n"
        "tracepoint, no tcpdump).  N runs (at least 4) of the same campaign with `--jobs N`.\n"
        "Host CPU per run: user + system CPU of all the guests of a level divided by its runs.\n"
        "Waiting for CPU: time the guest's host processes were ready to run but had no CPU\n"
        "(scheduler statistics), as a share of the run's wall time (median over runs).\n"
        "Sampler lateness: how late the guest's 100 ms sampling wakeups came (median over runs).\n\n"
        + "\n".join(lines)
        + f"\n\n**Largest concurrency with median per-run goodput within 2 % of a solo run: {best}.**\n"
        "Overhead = run wall time minus workload time (boot, network build, teardown).\n"
        + LIMIT_NOTE
    )
    write_section(
        "campaign", "Campaign throughput and per-run overhead", "python -m bench.run campaign", body
    )
    print(body)
