"""Stress: many short bulk runs over 3G + WLAN, every scheduler, no stall.

The BLEST paper's setup (``blest-3g-wlan``: 16 MiB socket buffers, the 3G
path's 3750-packet queue, the D-ITG background) once deadlocked about one
run in eight: under TCP memory pressure the MPTCP receiver dropped even
the segment that would fill the hole in its out-of-order queue
(docs/stalls.md).  The cause was the guest's small TCP memory budget;
this test runs 30 transfers (every scheduler, virtual time) through the production path (campaign, guest
agent, watchdog) and asserts that none stalls, and that the runs did reach
the memory use at which the old 256 MB guests entered memory pressure, so
a regression of the fix would show here.

Reno, as when the deadlock was found: blest-3g-wlan now runs OLIA, under
which ``redundant`` (every byte on both paths, at the pace of the slower)
can crawl: in one run the WLAN subflow sat at cwnd 2 for 150 s (OLIA gives
the growth to the loss-free 3G path, whose large cwnd redundant leaves
unused), 8.6 of 16 MiB, killed as ``timeout``: slow, not stalled (the data
level moved all along), and not what this test is about.

With the old budget, 16 MiB transfers stalled in the reproducer
(``bench/stall_repro.py``) in most runs; a run that stalls now is reported
by the watchdog as ``stalled`` within its ``stall_timeout``.
"""

import json

import pytest

from mptlab.spec.catalog import known_schedulers

pytestmark = pytest.mark.kernel

SCHEDULERS = known_schedulers()  # every one shipped: 10 on 2026-11-24
REPS = 3  # 10 schedulers x 3 = 30 runs: a 1-in-8 event shows with p = 1 - (7/8)^30 = 98 %

CAMPAIGN = f"""\
experiments:
  stress:
    extends: blest-3g-wlan
    description: "stall stress test: short blest-3g-wlan bulk runs, every scheduler"
    workload: {{type: bulk, bytes: 16MiB, direction: download}}
    kernel: {{congestion_control: reno}}
    warmup: 0s
    timeout: 150s
    repetitions: {REPS}
    matrix:
      kernel.scheduler: {SCHEDULERS}
    variants: []
"""

# Pressure began at 3757 pages (14.7 MB) of TCP memory in the 256 MB guest
# (tcp_mem 2817/3757/5634), where the runs deadlocked.
OLD_PRESSURE_PAGES = 3757


def test_no_run_stalls_in_30_short_blest_3g_wlan_transfers_of_every_scheduler(tmp_path, mptlab):
    camp = tmp_path / "stress.yaml"
    camp.write_text(CAMPAIGN)
    out = tmp_path / "out"
    # virtual time: the deadlock is one of memory, not of timing (docs/stalls.md),
    # and it is faster: 30 runs in 3 min 42 s (beside a full test suite),
    # where 24 real-time runs took 10 min
    p = mptlab("run", camp, "--jobs", 2, "--clock", "virtual", "--out", out, timeout=1500)
    runs = sorted((out / "stress" / "runs").glob("*/rep-*[0-9]"))
    assert len(runs) == len(SCHEDULERS) * REPS, p.stdout + p.stderr
    outcomes, peaks, pruned = {}, [], 0
    for run in runs:
        info = json.loads((run / "run.json").read_text())
        outcomes[f"{run.parent.name}/{run.name}"] = (info["status"], info.get("reason", ""))
        if not (run / "result.json").exists():  # a crash or timeout: in `bad` below, with why
            continue
        result = json.loads((run / "result.json").read_text())
        peaks.append(result["watchdog"]["tcp_mem_peak_pages"])
        pruned += sum(
            h.get("delta", {}).get("MPTcpExt.RcvPruned", 0) for h in result["nstat"].values()
        )
    bad = {k: v for k, v in outcomes.items() if v[0] != "ok"}
    assert not bad, (bad, p.stdout[-3000:])
    assert p.returncode == 0, p.stdout + p.stderr
    assert pruned == 0
    # the transfers used as much TCP memory as made the old guests deadlock
    assert max(peaks) > OLD_PRESSURE_PAGES, peaks
