"""Run a campaign: many isolated guests at once, resumable, nothing overwritten.

A campaign dir (``results/<experiment>/`` by default; its layout:
``mptlab.rundir``) gets one run dir per run.  A run is finished when its
``run.json`` exists.  Rerunning a campaign skips finished runs; a run dir
left by an interrupted campaign (no ``run.json``) is set aside
(``rep-NNN.interrupted-K``) and the run is done again; with
``retry_failed`` a failed run is set aside (``rep-NNN.failed-K``) and
retried, with ``retry_starved`` a run whose guest was starved of host CPU
(``rep-NNN.starved-K``).  Nothing is deleted or overwritten.

Concurrency adapts downwards: when a run comes back starved (its guest
waited for a host CPU more than ``rundir.STARVED_WAIT_SHARE`` of the time), the
campaign runs one guest fewer from then on (never fewer than one) and says
so; starved runs are listed at the end, to be rerun with ``retry_starved``.
That guard is for real time only: a virtual-time run (``clock: virtual``)
gets the same result whenever it gets a CPU, so it is never starved and
never makes the campaign back off.

A campaign dir holds runs of one clock per run: resuming a run with the
other clock (``mptlab run X --clock virtual`` over a real-time campaign) is
refused, naming the runs, rather than mixing results of both clocks.

Stopping: SIGINT or SIGTERM (Ctrl-C) while ``run()`` runs in the main
thread, or ``stop()`` from anywhere, stops the campaign: no run starts any
more, the running guests are killed (within ``boot.CPU_SAMPLE_S``) and their
run dirs set aside as interrupted; ``run()`` returns the report with
``stopped`` set.  One campaign per campaign dir at a time: ``run()`` holds
an exclusive ``flock`` on ``campaign.lock`` (released by the kernel however
the process ends) and raises ``CampaignLocked``, naming the holder's PID,
when another invocation holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import rundir
from ..rundir import CampaignDir, RunSpec, clock_of
from ..spec.yamlsrc import SpecError
from . import content
from .boot import CONFINE_ENV, Interrupted, check_confinement, confined
from .cluster import run_on_cluster, scheduler
from .execute import Outcome, Provenance, execute, previous
from .kernel import KernelBuild
from .provenance import git_commit, guest_inputs, host_tools

__all__ = [
    "Campaign",
    "CampaignLock",
    "CampaignLocked",
    "CampaignReport",
    "Outcome",
    "Slots",
    "default_jobs",
]
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class CampaignLocked(RuntimeError):
    """Another invocation is using this campaign dir."""


class CampaignLock:
    """An exclusive ``flock`` on ``<campaign dir>/campaign.lock`` holding the
    holder's PID.  The kernel drops it when the holder's process ends, however
    it ends (``kill -9`` too), so a lock is never stale; the file stays."""

    def __init__(self, campaign_dir: Path):
        self.path = Path(campaign_dir) / rundir.LOCK
        self.fd: int | None = None

    def __enter__(self) -> CampaignLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").split()
            os.close(fd)
            who = (
                f"PID {holder[0]} on {holder[1]}" if len(holder) >= 2 else "a process (PID unknown)"
            )
            raise CampaignLocked(
                f"{self.path.parent} is in use by another `mptlab run` ({who}): wait for it to "
                f"end or stop it (Ctrl-C, or kill -INT {holder[0] if holder else 'PID'}), then "
                "run this again to resume"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {time.time():.0f}\n".encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


def default_jobs() -> int:
    """Concurrent guests: 1 per CPU, so that each virtual-time guest runs pinned
    alone on its CPU.  In real time a guest that waits for a CPU sees its
    timers fire late: on 2 CPUs bulk kept within 2 % of a solo run's goodput
    up to 3-4 guests, blest-3g-wlan's guests already waited at 2
    (docs/benchmarks.md).  Lighter campaigns can ask for more with --jobs; a
    real-time campaign backs off by itself when guests starve."""
    return os.cpu_count() or 1


@dataclass
class CampaignReport:
    outcomes: list[Outcome] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    total: int = 0  # runs of the campaign
    stopped: str | None = None  # the signal (or reason) that stopped the campaign
    interrupted: list[str] = field(default_factory=list)  # runs killed by the stop
    wall_s: float = 0.0  # this invocation's wall time running its runs

    def cost(self) -> dict:
        """The figure of merit of this invocation (issue 26): guest seconds of
        experiment per wall second and per host-CPU second, over the runs it
        ran (not those finished earlier), failed ones included."""
        mine = [o for o in self.outcomes if not o.previous]
        guest = sum(o.guest_s or 0.0 for o in mine)
        cpu = sum(o.host_cpu_s or 0.0 for o in mine)
        return {
            "runs": len(mine),
            "guest_s": round(guest, 3),
            "wall_s": round(self.wall_s, 3),
            "host_cpu_s": round(cpu, 3),
            "guest_per_wall_s": round(guest / self.wall_s, 3) if self.wall_s else None,
            "guest_per_cpu_s": round(guest / cpu, 3) if cpu else None,
        }

    @property
    def failed(self) -> list[Outcome]:
        """Every run that did not end ok (failed, stalled, timeout, ...)."""
        return [o for o in self.outcomes if o.status != rundir.OK]

    def breakdown(self) -> str:
        """``"2 failed, 1 stalled"``: the runs not ok, by status."""
        return rundir.breakdown(o.status for o in self.outcomes)

    @property
    def starved(self) -> list[Outcome]:
        """Runs that finished but whose guest was short of host CPU."""
        return [o for o in self.outcomes if o.status == rundir.OK and o.starved]


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
        self.dir = CampaignDir(
            Path(out_dir).resolve()
        )  # the guest runs elsewhere: no relative paths
        self.runs = runs
        self.kernel = kernel
        self.jobs = jobs or default_jobs()
        self.explicit_jobs = jobs  # a batch cluster's guests at once: as asked, else one job
        self.seed = seed
        self.retry_failed = retry_failed
        self.retry_starved = retry_starved
        self.back_off = back_off  # one guest fewer after a starved run (off: a fixed --jobs)
        self.on_progress = on_progress
        self.cluster = cluster  # a Dask scheduler address, or slurm / pbs: runs go to workers
        self._lock = threading.Lock()
        self.provenance = Provenance(host_tools(), git_commit(), guest_inputs(kernel))
        self.cancel = threading.Event()  # set: stopping (no new run, running guests killed)
        self.stopped: str | None = None

    def stop(self, why: str = "stopped") -> None:
        """Stop the campaign: no new run starts, running guests are killed.
        Safe from a signal handler and from any thread; again: no effect."""
        if self.cancel.is_set():
            return
        self.stopped = why
        self.cancel.set()

    @contextlib.contextmanager
    def _stop_on_signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM stop the campaign while it runs (main thread only:
        Python delivers signals there).  The guests run in sessions of their
        own, so a terminal's Ctrl-C reaches only this process; it kills them."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame) -> None:
            name = signal.Signals(signum).name
            if self.cancel.is_set():
                msg = f"mptlab: {name}: already stopping\n"
            else:
                msg = f"mptlab: {name}: stopping: no new runs, killing the running guests\n"
            os.write(2, msg.encode())  # not print(): a handler must not re-enter a stream
            self.stop(name)

        previous_handlers = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, old in previous_handlers.items():
                signal.signal(sig, old)

    @property
    def out_dir(self) -> Path:
        return self.dir.path

    def order(self) -> list[RunSpec]:
        """The runs in a seeded random order (recorded in campaign.json)."""
        order = list(self.runs)
        random.Random(self.seed).shuffle(order)
        return order

    def write_campaign(self, order: list[RunSpec]) -> None:
        build = self.kernel.build_info
        info = json.loads(build.read_text()) if build.exists() else {}
        previous_info = self.dir.info() or {}
        self.dir.write_info(
            {
                "experiment": sorted({r.experiment for r in self.runs}),
                "runs": len(self.runs),
                "order_seed": self.seed,
                "order": [r.run_id for r in order],
                # definition order and matrix keys in the experiment's order
                # (run_id and the ingested tables keep neither): the report
                # lists variants and pairs them along the matrix by these
                "variants": self._variants(previous_info),
                "clocks": sorted({clock_of(r.config) for r in self.runs}),
                "kernel": {**info, "modules_dir": str(self.kernel.modules_dir)},
                "git_commit": self.provenance.commit,
                "tools": self.provenance.tools,
                "guest_inputs": self.provenance.guest_inputs,
                "invocations": previous_info.get("invocations", [])
                + [{"started": time.time(), "jobs": self.jobs}],
            }
        )

    def _record_cost(self, report: CampaignReport) -> None:
        """This invocation's figure of merit into its entry of campaign.json."""
        info = self.dir.info()
        if not info or not info.get("invocations"):
            return
        info["invocations"][-1]["cost"] = report.cost()
        self.dir.write_info(info)

    def _variants(self, previous_info: dict) -> list[dict]:
        """This invocation's variants after those an earlier one recorded (an
        invocation may run some variants only: ``mptlab run --variant``)."""
        mine = [
            {"experiment": e, "variant": v, "keys": k}
            for (e, v), k in {
                (r.experiment, r.variant): dict(r.variant_keys or {}) for r in self.runs
            }.items()
        ]
        ours: dict[tuple, dict] = {(m["experiment"], m["variant"]): m for m in mine}
        prev = [m for m in previous_info.get("variants", []) if isinstance(m, dict)]
        keys = [(m.get("experiment"), m.get("variant")) for m in prev]
        if all(k in ours for k in keys):
            return mine  # this invocation has every variant: its order
        merged = [ours.pop(k, m) for k, m in zip(keys, prev, strict=True)]
        return merged + list(ours.values())

    # ------------------------------------------------------------- runs
    def check_clocks(self) -> None:
        """Refuse to resume runs finished (or started) with another clock."""
        clash = []
        for run in self.runs:
            run_dir = self.dir.run_dir(run.variant, run.repetition)
            if not run_dir.file(rundir.SPEC).exists():
                continue
            try:
                before = clock_of(run_dir.run_spec().config)
            except (OSError, ValueError, TypeError, rundir.RunDirError):
                continue  # unreadable: the resume logic deals with it
            if before != clock_of(run.config):
                clash.append(f"{run.run_id} ({before} there, {clock_of(run.config)} now)")
        if clash:
            raise SpecError(
                f"{self.out_dir} holds runs made with another clock: {', '.join(clash[:3])}"
                + (f" and {len(clash) - 3} more" if len(clash) > 3 else "")
                + "; give another --out (or move them away) rather than mix clocks in a campaign"
            )

    def _previous(self, run: RunSpec) -> Outcome | None:
        """The outcome of an earlier invocation, or None if the run must (re)run."""
        run_dir = self.dir.run_dir(run.variant, run.repetition)
        if not run_dir.path.exists():
            return None
        info = run_dir.run_info()
        if info is None:
            run_dir.set_aside("interrupted")
            return None
        if info["status"] != rundir.OK and self.retry_failed:
            run_dir.set_aside("failed")
            return None
        outcome = previous(run, dict(info))
        if outcome.status == rundir.OK and outcome.starved and self.retry_starved:
            run_dir.set_aside("starved")
            return None
        return outcome

    def execute(self, run: RunSpec) -> Outcome:
        return execute(self.dir, run, self.kernel, self.provenance, self.cancel)

    def prepare(self) -> None:
        """Host-side preparation a workload needs before its runs (e.g. media or
        page content made once and cached): ``mptlab.workloads.<type>.prepare(params)``,
        filed under each run's ``content_key`` (``mptlab.campaign.content``).
        The runs' specs are left as the catalog expanded them."""
        for run in self.runs:
            content.prepare(run)

    def run(self) -> CampaignReport:
        """Run every run not finished yet; see the module's doc for stopping and locking."""
        if not self.cluster:
            check_confinement()  # before anything is written: a clear error, not N crashed runs
        with CampaignLock(self.out_dir), self._stop_on_signals():
            t0 = time.monotonic()
            report = self._run()
            report.wall_s = time.monotonic() - t0
            self._record_cost(report)
        report.stopped = self.stopped
        if not confined() and not self.cluster:
            report.notices.append(
                f"guests ran unconfined ({CONFINE_ENV}=off): each could write wherever this "
                "user can (docs/deployment.md)"
            )
        return report

    def _run(self) -> CampaignReport:
        self.check_clocks()
        self.prepare()
        order = self.order()
        self.write_campaign(order)
        report = CampaignReport(total=len(order))
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
                failed[0] += outcome.status != rundir.OK
                if self.on_progress:
                    self.on_progress(outcome, done[0], failed[0], total)

        def crashed(run: RunSpec, why: str) -> Outcome:
            return Outcome(run.run_id, rundir.CRASHED, why)

        def interrupted(run: RunSpec) -> None:
            with self._lock:
                report.interrupted.append(run.run_id)

        slots = Slots(self.jobs)

        def one(run: RunSpec) -> None:
            with slots as limit_then:
                if self.cancel.is_set():
                    return  # stopping: not started
                try:
                    outcome = self.execute(run)
                except Interrupted:
                    # the guest is dead (its process group reaped): set the dir aside now
                    run_dir = self.dir.run_dir(run.variant, run.repetition)
                    if run_dir.path.exists() and not run_dir.finished:
                        run_dir.set_aside("interrupted")
                    interrupted(run)
                    return
                except Exception as exc:  # noqa: BLE001 - a host-side error fails this run only
                    outcome = crashed(run, f"host error: {type(exc).__name__}: {exc}")
            if self.back_off and outcome.starved and (limit := slots.shrink(limit_then)):
                with self._lock:
                    report.notices.append(
                        f"{run.run_id} waited for host CPU {outcome.cpu_wait_share:.0%} of its "
                        f"time: {limit} guest(s) at once from now on"
                    )
            record(outcome)

        if self.cancel.is_set():
            return report
        if self.cluster:
            with scheduler(self.cluster, self.explicit_jobs) as address:
                run_on_cluster(
                    address,
                    self.out_dir,
                    self.kernel,
                    todo,
                    record,
                    crashed,
                    cancel=self.cancel,
                    interrupted=interrupted,
                )
            return report
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(one, run) for run in todo]
            for future in futures:
                # a signal handler runs while this waits (PEP 475) and sets
                # self.cancel: the workers then return within a second
                future.result()
        return report
