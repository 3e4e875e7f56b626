"""Run a campaign: many isolated guests at once, resumable, nothing overwritten.

Layout of a campaign directory (``results/<experiment>/`` by default)::

    campaign.json                 what was asked: runs, order, seed, provenance
    runs/<variant>/rep-NNN/       one run dir per run (self-describing):
        spec.json                 the fully expanded run
        run.json                  outcome: status, reason, timings, provenance
        result.json               metrics and kernel counters (written by the guest)
        guest-provenance.json     tool versions, module hashes, settings applied
        agent.log guest.log console.log traces/

A run is finished when its ``run.json`` exists.  Rerunning a campaign skips
finished runs; a run dir left by an interrupted campaign (no ``run.json``)
is moved aside (``rep-NNN.interrupted-K``) and the run is done again; with
``retry_failed`` a failed run is moved aside (``rep-NNN.failed-K``) and
retried, with ``retry_starved`` a run whose guest was starved of host CPU
(``rep-NNN.starved-K``).  Nothing is deleted or overwritten.

Concurrency adapts downwards: when a run comes back starved (its guest
waited for a host CPU more than ``STARVED_WAIT_SHARE`` of the time), the
campaign runs one guest fewer from then on (never fewer than one) and says
so; starved runs are listed at the end, to be rerun with ``retry_starved``.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import status as run_status
from ..guest.agent import atomic_write
from ..rundir import RunSpec
from .boot import boot
from .kernel import REPO_ROOT, KernelBuild

BOOT_MARGIN_S = 20  # on top of the experiment's timeout: boot, topology, teardown
# A guest whose processes spent more than this share of the run ready to run
# but waiting for a host CPU (scheduler statistics, mptlab.campaign.boot.TreeCPU)
# was starved by its neighbours: its timing, hence its results, may be off.
# Alone a guest waits ~3 %; bulk goodput held within 1 % up to ~23 % and lost
# 3-4 % at ~34 % (docs/benchmarks.md, campaign throughput); delay metrics
# feel waiting sooner, hence a margin.
STARVED_WAIT_SHARE = 0.10


def _wait_share(wait_s: float | None, seconds: float | None) -> float | None:
    return wait_s / seconds if wait_s is not None and seconds else None


def default_jobs() -> int:
    """Concurrent guests: 1 per CPU.  A 30 Mbit/s two-path bulk run costs ~8 s
    of host CPU per 20 s, blest-3g-wlan with its D-ITG background ~12 s per
    18 s: on 2 CPUs bulk keeps within 2 % of a solo run's goodput up to 3-4
    guests, but blest-3g-wlan's guests already wait for CPU at 2
    (docs/benchmarks.md).  Lighter campaigns can ask for more with --jobs;
    the campaign backs off by itself when guests starve."""
    return os.cpu_count() or 1


@dataclass
class Outcome:
    run_id: str
    status: str  # mptlab.status.RUN_STATUSES: ok, failed, stalled, timeout, panic, crashed
    reason: str = ""
    seconds: float = 0.0
    previous: bool = False  # finished in an earlier invocation
    cpu_wait_share: float | None = None  # host CPU wait / run time (run.json)

    @property
    def starved(self) -> bool:
        return self.cpu_wait_share is not None and self.cpu_wait_share > STARVED_WAIT_SHARE


@dataclass
class CampaignReport:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        """Every run that did not end ok (failed, stalled, timeout, ...)."""
        return [o for o in self.outcomes if o.status != run_status.OK]

    def breakdown(self) -> str:
        """``"2 failed, 1 stalled"``: the runs not ok, by status."""
        return run_status.breakdown(o.status for o in self.outcomes)

    notices: list[str] = field(default_factory=list)

    @property
    def starved(self) -> list[Outcome]:
        """Runs that finished but whose guest was short of host CPU."""
        return [o for o in self.outcomes if o.status == "ok" and o.starved]


class Slots:
    """At most ``limit`` holders at once; ``shrink()`` lowers the limit for
    the holders to come (those running finish).  Entering gives the limit in
    force, so that runs that overlapped lower it once, not once each."""

    def __init__(self, limit: int):
        self.limit = limit
        self.active = 0
        self.cond = threading.Condition()

    def __enter__(self):
        with self.cond:
            self.cond.wait_for(lambda: self.active < self.limit)
            self.active += 1
            return self.limit

    def __exit__(self, *exc) -> None:
        with self.cond:
            self.active -= 1
            self.cond.notify_all()

    def shrink(self, seen: int | None = None) -> int | None:
        """One fewer (not below one) unless the limit already moved from
        ``seen``; the new limit, or None if it did not change."""
        with self.cond:
            if self.limit <= 1 or (seen is not None and seen != self.limit):
                return None
            self.limit -= 1
            return self.limit


def host_tools() -> dict[str, str]:
    """Versions of the tools the guests run (the guest's root is the host's /)."""

    def version(*cmd: str) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unavailable"

    return {
        "iperf3": version("iperf3", "--version"),
        "iproute2": version("ip", "-V"),
        "tcpdump": version("tcpdump", "--version"),
        "mptcpize": version("dpkg-query", "-W", "-f", "${Version}", "mptcpize"),
        "d-itg": version("dpkg-query", "-W", "-f", "${Version}", "d-itg"),
        "nghttp2": version("dpkg-query", "-W", "-f", "${Version}", "nghttp2-client"),
        "ffmpeg": version("dpkg-query", "-W", "-f", "${Version}", "ffmpeg"),
        "python": sys.version.split()[0],
    }


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain"], capture_output=True, text=True
        )
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


class Campaign:
    def __init__(
        self,
        out_dir: Path,
        runs: list[RunSpec],
        kernel: KernelBuild,
        jobs: int | None = None,
        seed: int = 1,
        retry_failed: bool = False,
        retry_starved: bool = False,
        back_off: bool = True,
        on_progress: Callable[[Outcome, int, int, int], None] | None = None,
        cluster: str | None = None,
    ):
        self.out_dir = Path(out_dir)
        self.runs = runs
        self.kernel = kernel
        self.jobs = jobs or default_jobs()
        self.seed = seed
        self.retry_failed = retry_failed
        self.retry_starved = retry_starved
        self.back_off = back_off  # one guest fewer after a starved run (off: a fixed --jobs)
        self.on_progress = on_progress
        self.cluster = cluster  # a Dask scheduler address: runs go to its workers
        self._lock = threading.Lock()
        self.tools = host_tools()
        self.commit = git_commit()

    # ------------------------------------------------------------ layout
    def run_dir(self, run: RunSpec) -> Path:
        return self.out_dir / "runs" / run.variant / f"rep-{run.repetition:03d}"

    def order(self) -> list[RunSpec]:
        """The runs in a seeded random order (recorded in campaign.json)."""
        order = list(self.runs)
        random.Random(self.seed).shuffle(order)
        return order

    def write_campaign(self, order: list[RunSpec]) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        info = (
            json.loads(self.kernel.build_info.read_text())
            if self.kernel.build_info.exists()
            else {}
        )
        path = self.out_dir / "campaign.json"
        previous = json.loads(path.read_text()) if path.exists() else None
        record = {
            "experiment": sorted({r.experiment for r in self.runs}),
            "runs": len(self.runs),
            "order_seed": self.seed,
            "order": [r.run_id for r in order],
            "kernel": {**info, "modules_dir": str(self.kernel.modules_dir)},
            "git_commit": self.commit,
            "tools": self.tools,
            "invocations": (previous or {}).get("invocations", [])
            + [{"started": time.time(), "jobs": self.jobs}],
        }
        atomic_write(path, json.dumps(record, indent=1))

    # ------------------------------------------------------------- runs
    def _set_aside(self, run_dir: Path, why: str) -> Path:
        k = 1
        while (target := run_dir.with_name(f"{run_dir.name}.{why}-{k}")).exists():
            k += 1
        run_dir.rename(target)
        return target

    def _previous(self, run: RunSpec) -> Outcome | None:
        """The outcome of an earlier invocation, or None if the run must (re)run."""
        run_dir = self.run_dir(run)
        if not run_dir.exists():
            return None
        marker = run_dir / "run.json"
        if not marker.exists():
            self._set_aside(run_dir, "interrupted")
            return None
        info = json.loads(marker.read_text())
        if info["status"] != "ok" and self.retry_failed:
            self._set_aside(run_dir, "failed")
            return None
        outcome = Outcome(
            run.run_id,
            info["status"],
            info.get("reason", ""),
            info.get("seconds", 0),
            previous=True,
            cpu_wait_share=_wait_share(info.get("host_cpu_wait_s"), info.get("seconds")),
        )
        if outcome.status == "ok" and outcome.starved and self.retry_starved:
            self._set_aside(run_dir, "starved")
            return None
        return outcome

    def execute(self, run: RunSpec) -> Outcome:
        run_dir = self.run_dir(run)
        run_dir.mkdir(parents=True)
        atomic_write(run_dir / "spec.json", json.dumps(run.to_json(), indent=1))
        timeout_s = run.config["timeout"] / 1000 + BOOT_MARGIN_S
        script = f"exec {sys.executable} -m mptlab.guest.agent {run_dir}\n"
        entry = run_dir / "guest-entry.sh"
        entry.write_text("#!/bin/sh\n" + script)
        entry.chmod(0o755)
        started = time.time()
        res = boot(self.kernel, run_dir, entry, timeout=timeout_s,
                   mem_mb=run.config["kernel"].get("memory", 1 << 30) >> 20,
                   env={"MPTLAB_MODULES_DIR": str(self.kernel.modules_dir)})  # fmt: skip
        result_path = run_dir / "result.json"
        try:
            result = json.loads(result_path.read_text()) if result_path.exists() else None
        except (OSError, json.JSONDecodeError) as exc:
            result = {"status": "unreadable", "error": f"result.json unreadable: {exc}"}
        status, reason = run_status.outcome(res.status, res.reason, result)
        seconds = time.time() - started
        outcome = Outcome(run.run_id, status, reason, seconds,
                          cpu_wait_share=_wait_share(res.cpu_wait_s, seconds))  # fmt: skip
        atomic_write(
            run_dir / "run.json",
            json.dumps(
                {
                    "status": status,
                    "reason": reason,
                    "started": started,
                    "seconds": outcome.seconds,
                    "boot_status": res.status,
                    "host_cpu_s": res.cpu_s,
                    "host_cpu_wait_s": res.cpu_wait_s,
                    "timeout_s": timeout_s,
                    "experiment": run.experiment,
                    "variant": run.variant,
                    "repetition": run.repetition,
                    "seed": run.seed,
                    "host": socket.gethostname(),
                    "kernel_dir": str(self.kernel.dir),
                    "git_commit": self.commit,
                    "tools": self.tools,
                },
                indent=1,
            ),
        )
        return outcome

    def prepare(self) -> None:
        """Host-side preparation a workload needs before its runs (e.g. media or
        page content made once and cached): ``traffic.<type>.prepare(params)``
        returns data merged into the runs' ``config.workload.prepared``."""
        from .. import workloads as traffic

        cache: dict[str, dict] = {}
        for run in self.runs:
            work = run.config["workload"]
            module = traffic.load(work["type"])
            if not hasattr(module, "prepare"):
                continue
            key = json.dumps(work, sort_keys=True)
            if key not in cache:
                cache[key] = module.prepare({k: v for k, v in work.items() if k != "type"})
            run.config = {**run.config, "workload": {**work, "prepared": cache[key]}}

    def run(self) -> CampaignReport:
        self.prepare()
        order = self.order()
        self.write_campaign(order)
        report = CampaignReport()
        todo = []
        for run in order:
            prev = self._previous(run)
            if prev is None:
                todo.append(run)
            else:
                report.outcomes.append(prev)
        total = len(order)
        done = [len(report.outcomes)]
        failed = [len(report.failed)]

        def record(outcome: Outcome) -> None:
            with self._lock:
                report.outcomes.append(outcome)
                done[0] += 1
                failed[0] += outcome.status != "ok"
                if self.on_progress:
                    self.on_progress(outcome, done[0], failed[0], total)

        slots = Slots(self.jobs)

        def one(run: RunSpec) -> None:
            with slots as limit_then:
                try:
                    outcome = self.execute(run)
                except Exception as exc:  # noqa: BLE001 - a host-side error fails this run only
                    outcome = Outcome(run.run_id, "crashed",
                                      f"host error: {type(exc).__name__}: {exc}")  # fmt: skip
            if self.back_off and outcome.starved and (limit := slots.shrink(limit_then)):
                with self._lock:
                    report.notices.append(
                        f"{run.run_id} waited for host CPU {outcome.cpu_wait_share:.0%} of its "
                        f"time: {limit} guest(s) at once from now on"
                    )
            record(outcome)

        if self.cluster:
            from .cluster import run_on_cluster

            run_on_cluster(self.cluster, self.out_dir, self.kernel, todo, record,
                           lambda run, why: Outcome(run.run_id, "crashed", why))  # fmt: skip
            return report
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            list(pool.map(one, todo))
        return report
