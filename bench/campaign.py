"""Campaign throughput: how many 3G+WLAN bulk runs can share this machine
before a run's goodput suffers, and the per-run overhead.

    python -m bench.run campaign

For each concurrency N, a campaign of N identical runs (two-path, lossless
WLAN 25 Mbit/s 12.5 ms + 3G 5 Mbit/s 32.5 ms, default scheduler, 20 s
download) runs with ``--jobs N``; the median per-run goodput is compared
with that of runs alone (N=1, three of them).  Overhead = a run's wall time
minus its workload time (boot, network build, teardown).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import textwrap
from pathlib import Path

from orchestrator.catalog import Catalog
from orchestrator.paths import find_kernel
from orchestrator.runner import Campaign

from .report import write_section

LEVELS = [1, 4, 8, 12, 16, 20, 24]
CAMPAIGN = """\
profiles:
  bench-wlan: {rate: 25mbit, delay: 12.5ms, queue: 100 packets}
  bench-3g: {rate: 5mbit, delay: 32.5ms, queue: 100 packets}
experiments:
  bench:
    topology: two-path
    paths: [bench-wlan, bench-3g]
    kernel: {path_manager: {subflows: 2, add_addr_accepted: 2}}
    workload: {type: bulk, duration: 20s}
    warmup: 2s
    timeout: 120s
    traces: {ss_interval: 100ms, ofo_interval: 10ms}
"""


def run_level(tmp: Path, kernel, n: int, reps: int) -> list[dict]:
    path = tmp / "bench.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    runs = Catalog.load(path).expand("bench", repetitions=reps)
    out = tmp / f"n{n}"
    report = Campaign(out, runs, kernel, jobs=n).run()
    rows = []
    for run_dir in sorted((out / "runs" / "base").glob("rep-*")):
        info = json.loads((run_dir / "run.json").read_text())
        if info["status"] != "ok":
            rows.append({"ok": False})
            continue
        res = json.loads((run_dir / "result.json").read_text())
        work = res["marks"]["workload_end"] - res["marks"]["workload_start"]
        rows.append({"ok": True, "goodput": res["metrics"]["goodput_mbps"], "overhead": info["seconds"] - work,
                     "seconds": info["seconds"]})  # fmt: skip
    assert len(rows) == len(report.outcomes)
    return rows


def main() -> None:
    kernel = find_kernel()
    results = {}
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-", dir="/var/tmp") as tmp:
        for n in LEVELS:
            rows = run_level(Path(tmp), kernel, n, reps=3 if n == 1 else n)
            results[n] = rows
            ok = [r for r in rows if r["ok"]]
            print(n, len(ok), statistics.median(r["goodput"] for r in ok) if ok else None, flush=True)
    solo = statistics.median(r["goodput"] for r in results[1] if r["ok"])
    lines = ["| concurrent runs | ok | median goodput (Mbit/s) | vs solo | worst run vs solo | median overhead (s) | wall time per run (s) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    best = 1
    for n, rows in results.items():
        ok = [r for r in rows if r["ok"]]
        if not ok:
            lines.append(f"| {n} | 0/{len(rows)} | - | - | - | - | - |")
            continue
        med = statistics.median(r["goodput"] for r in ok)
        worst = min(r["goodput"] for r in ok)
        rel, rel_worst = (med - solo) / solo * 100, (worst - solo) / solo * 100
        if len(ok) == len(rows) and abs(rel) <= 2:
            best = max(best, n)
        lines.append(f"| {n} | {len(ok)}/{len(rows)} | {med:.2f} | {rel:+.1f} % | {rel_worst:+.1f} % "
                     f"| {statistics.median(r['overhead'] for r in ok):.1f} | {statistics.median(r['seconds'] for r in ok):.1f} |")  # fmt: skip
    body = (
        "Two-path topology, lossless WLAN (25 Mbit/s, 12.5 ms, 100 pkts) + 3G (5 Mbit/s, 32.5 ms, 100 pkts),\n"
        "default scheduler, 20 s download after which goodput is taken (2 s warm-up excluded);\n"
        "samplers on (100 ms subflows, 10 ms OFO).  N runs of the same campaign with `--jobs N`.\n\n"
        + "\n".join(lines)
        + f"\n\n**Largest concurrency with median per-run goodput within 2 % of a solo run: {best}.**\n"
        "Overhead = run wall time minus workload time (boot, network build, teardown).\n"
    )
    write_section("campaign", "Campaign throughput and per-run overhead", "python -m bench.run campaign", body)
    print(body)
