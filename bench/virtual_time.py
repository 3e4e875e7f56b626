"""Real vs virtual time (``clock: real | virtual``): what a run costs and how
faithful it is, with 1, 2, 4, 8 and 16 guests at once.

    python -m bench.run virtual_time

For each clock and each concurrency N, a campaign of max(N, 2) identical runs
runs with ``--jobs N`` and no back-off: two-path topology, lossless WLAN
(25 Mbit/s, 12.5 ms) + 3G (5 Mbit/s, 32.5 ms), 100-packet queues, default
scheduler, a 10 s MPTCP download by duration, default traces.  Per level:

- wall time per run (median of ``run.json`` ``seconds``);
- host CPU per run (user + system CPU of all the level's guests / runs);
- run-seconds per wall-second: guest seconds of workload done by the level
  (runs x 10 s) divided by the level's wall time (real time at full
  efficiency: N);
- goodput error: median goodput vs the links' payload rate
  (25 + 5 Mbit/s x 1448/1514 for 1500-byte frames with TCP timestamps);
- RTT error: the smallest sRTT the sender saw on the WLAN subflow
  (``min_rtt_us``, 100 ms samples) vs the configured 25 ms.

The host's load (``/proc/loadavg``) before and after each level is printed
with the table: on a shared machine the real-time rows move with it, the
virtual-time rows' results must not (their wall time does).
"""

from __future__ import annotations

import csv
import resource
import statistics
import tempfile
import time
from pathlib import Path

import mptlab
from mptlab.rundir import CampaignDir

from .report import write_section

LEVELS = [1, 2, 4, 8, 16]  # the issue's 1-16 concurrent guests
CLOCKS = ["real", "virtual"]
DURATION_S = 10.0
RATES = (25.0, 5.0)  # Mbit/s on the two paths
RTT_MS = 25.0  # WLAN path: 12.5 ms each way
BENCH = mptlab.Experiment(
    "bench-vt",
    topology="two-path",
    profiles={
        "bvt-wlan": {"rate": "25mbit", "delay": "12.5ms", "queue": "100 packets"},
        "bvt-3g": {"rate": "5mbit", "delay": "32.5ms", "queue": "100 packets"},
    },
    paths=["bvt-wlan", "bvt-3g"],
    kernel={"path_manager": {"subflows": 2, "add_addr_accepted": 2}},
    workload=mptlab.Bulk(duration=f"{DURATION_S:g}s"),
    timeout="120s",
)
EXPECTED_MBPS = sum(RATES) * 1448 / 1514


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def min_rtt_ms(run_dir: Path, server_addr: str) -> float | None:
    """The smallest ``min_rtt_us`` of the server's (the sender's) subflow from ``server_addr``."""
    path = run_dir / "traces" / "server-subflows.csv"
    if not path.exists():
        return None
    values = [
        int(row["min_rtt_us"])
        for row in csv.DictReader(path.open())
        if row["saddr"] == server_addr and row["sport"] == "5201" and row["min_rtt_us"]
    ]
    return min(values) / 1000 if values else None


def run_level(tmp: Path, clock: str, n: int) -> dict:
    reps = max(n, 2)
    load_before = loadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    results = mptlab.run(
        BENCH,
        jobs=n,
        repetitions=reps,
        out=tmp / f"{clock}-{n}",
        back_off=False,
        clock=clock,  # type: ignore[arg-type]
        progress=False,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / reps
    ok, goodputs, rtts, seconds = 0, [], [], []
    for run_dir in CampaignDir(results.path).run_dirs():
        info = run_dir.run_info() or {}
        if info.get("status") != "ok":
            continue
        ok += 1
        res = run_dir.result() or {}
        seconds.append(info["seconds"])
        goodputs.append(res["metrics"]["goodput_mbps"])
        server1 = res["addresses"]["server"][0]
        rtt = min_rtt_ms(run_dir.path, server1)
        if rtt is not None:
            rtts.append(rtt)
    return {
        "clock": clock,
        "n": n,
        "runs": reps,
        "ok": ok,
        "wall_per_run": statistics.median(seconds) if seconds else None,
        "cpu_per_run": cpu,
        "throughput": reps * DURATION_S / wall,
        "goodput": statistics.median(goodputs) if goodputs else None,
        "goodput_spread": (max(goodputs) - min(goodputs)) if goodputs else None,
        "rtt": min(rtts) if rtts else None,
        "load": f"{load_before} / {loadavg()}",
    }


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-vt-", dir="/var/tmp") as tmp:
        for n in LEVELS:
            for clock in CLOCKS:
                row = run_level(Path(tmp), clock, n)
                rows.append(row)
                print(row, flush=True)
    lines = [
        "| clock | guests at once | ok | wall time per run (s) | host CPU per run (s) "
        "| run-seconds per wall-second | goodput (Mbit/s), median / spread | goodput error "
        "| min RTT WLAN (ms) | RTT error | host load 1 min (before / after) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        gp_err = (r["goodput"] - EXPECTED_MBPS) / EXPECTED_MBPS * 100 if r["goodput"] else None
        rtt_err = r["rtt"] - RTT_MS if r["rtt"] is not None else None
        lines.append(
            f"| {r['clock']} | {r['n']} | {r['ok']}/{r['runs']} | {_f(r['wall_per_run'], '.1f')} "
            f"| {r['cpu_per_run']:.1f} | {r['throughput']:.2f} "
            f"| {_f(r['goodput'], '.3f')} / {_f(r['goodput_spread'], '.3f')} "
            f"| {_f(gp_err, '+.2f')} % | {_f(r['rtt'], '.3f')} | {_f(rtt_err, '+.3f')} ms "
            f"| {r['load']} |"
        )
    body = (
        __doc__.split("\n\n", 2)[2].split('"""')[0].strip()
        + f"\n\nExpected goodput {EXPECTED_MBPS:.2f} Mbit/s.\n\n"
        + "\n".join(lines)
        + "\n"
    )
    write_section("virtual_time", "Virtual time", "python -m bench.run virtual_time", body)
    print(body)
