"""One run: write its spec, boot a guest that runs the agent, record the outcome.

The same on this machine (``Campaign``) and on a cluster worker
(``mptlab.campaign.cluster``).
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import rundir
from ..guest.modules import ENV as MODULES_ENV
from ..rundir import CampaignDir, Clock, RunDir, RunDirError, RunSpec, RunStatus, clock_of
from ..spec.seeds import derive_seed
from .boot import GUEST_RUN_DIR, boot, wall_limit
from .content import content_dir
from .kernel import KernelBuild

BOOT_MARGIN_S = 20  # on top of the experiment's timeout: boot, topology, teardown
GUEST_AGENT = "mptlab.guest.agent"  # the module the guest runs (python -m)


def wait_share(wait_s: float | None, seconds: float | None) -> float | None:
    return wait_s / seconds if wait_s is not None and seconds else None


@dataclass
class Outcome:
    run_id: str
    status: RunStatus
    reason: str = ""
    seconds: float = 0.0
    previous: bool = False  # finished in an earlier invocation
    cpu_wait_share: float | None = None  # host CPU wait / run time (run.json)
    clock: Clock = "real"
    guest_s: float | None = None  # the experiment's guest time (result.json started -> finished)
    host_cpu_s: float | None = None  # host CPU the guest spent (run.json)

    @property
    def starved(self) -> bool:
        """Its guest waited for a host CPU long enough to have changed its
        results: never under virtual time, where waiting costs no guest time."""
        return rundir.is_starved(self.cpu_wait_share, self.clock)


@dataclass(frozen=True)
class Provenance:
    """What every run.json of a campaign records about where it ran."""

    tools: dict[str, str]
    commit: str
    # provenance.guest_inputs(): the guest's inputs outside its spec, hashed
    guest_inputs: dict = field(default_factory=dict)


def execute(
    campaign: CampaignDir,
    run: RunSpec,
    kernel: KernelBuild,
    provenance: Provenance,
    cancel: threading.Event | None = None,
) -> Outcome:
    """Run ``run`` in a guest, in its own (new) run dir of ``campaign``.
    ``cancel`` set meanwhile: the guest is killed and ``boot.Interrupted``
    raised, the run dir left without ``run.json`` (set aside on resume)."""
    run_dir = campaign.run_dir(run.variant, run.repetition)
    run_dir.create()
    with run_dir.pinned():  # from here on, this attempt writes only into this dir
        return _execute(run_dir, run, kernel, provenance, cancel)


def _execute(
    run_dir: RunDir,
    run: RunSpec,
    kernel: KernelBuild,
    provenance: Provenance,
    cancel: threading.Event | None,
) -> Outcome:
    run_dir.write_spec(run)
    clock = clock_of(run.config)
    # real clock: the host's limit; virtual: the guest's (guest time), the
    # host's limit is wall_limit() of it
    timeout_s = run.config["timeout"] / 1000 + BOOT_MARGIN_S
    # The content cache, where the guest resolves the run's content_key: in
    # the entry, not in boot()'s env, which goes on the kernel's command line.
    # Linux mixes its command line into its randomness: with one more
    # variable there, tests/test_kernel_sbd.py's virtual-time runs (seeded,
    # otherwise the same on every rerun) came out as another realisation.
    entry = run_dir.write_entry(
        f"{rundir.CONTENT_ENV}={shlex.quote(str(content_dir()))}\n"
        f"export {rundir.CONTENT_ENV}\n"
        f"exec {sys.executable} -m {GUEST_AGENT} {GUEST_RUN_DIR}\n"
    )
    started = time.time()
    res = boot(
        kernel,
        run_dir.path,
        entry,
        timeout=timeout_s,
        mem_mb=run.config["kernel"].get("memory", 1 << 30) >> 20,
        env={MODULES_ENV: str(kernel.modules_dir)},
        clock=clock,
        cancel=cancel,
        rng_seed=derive_seed(run.seed, "guest kernel randomness"),
        host_ro=user_code_dirs(run),
    )
    try:
        result = run_dir.result()
    except RunDirError as exc:
        result = {"status": "unreadable", "error": str(exc)}
    status, reason = rundir.outcome(res.status, res.reason, result)
    if result is not None and result.get("attempt", res.attempt) != res.attempt:
        # Cannot happen with confined guests (each writes only its own dir);
        # checked all the same: a result is this attempt's or none.
        status = rundir.CRASHED
        reason = (
            f"{rundir.RESULT} was written by guest attempt {result.get('attempt')}, "
            f"not by this run's {res.attempt}"
        )
    seconds = time.time() - started
    outcome = Outcome(
        run.run_id,
        status,
        reason,
        seconds,
        cpu_wait_share=wait_share(res.cpu_wait_s, seconds),
        clock=clock,
        guest_s=guest_seconds(result),
        host_cpu_s=res.cpu_s,
    )
    run_dir.write_run_info(
        {
            "status": status,
            "reason": reason,
            "started": started,
            "seconds": outcome.seconds,
            "boot_status": res.status,
            "attempt": res.attempt,
            "confined": res.confined,
            "host_cpu_s": res.cpu_s,
            "host_cpu_wait_s": res.cpu_wait_s,
            "timeout_s": timeout_s,
            "wall_timeout_s": wall_limit(timeout_s, clock),
            "clock": clock,
            "host_cpu": res.host_cpu,
            "experiment": run.experiment,
            "variant": run.variant,
            "repetition": run.repetition,
            "seed": run.seed,
            "host": socket.gethostname(),
            # the batch job that ran it (--cluster slurm | pbs), else null
            "batch_job": os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID"),
            "kernel_dir": str(kernel.dir),
            "git_commit": provenance.commit,
            "tools": provenance.tools,
            "guest_inputs": provenance.guest_inputs,
        }
    )
    return outcome


def user_code_dirs(run: RunSpec) -> list[Path]:
    """The dir of the user's module a run imports (a workload class of their
    own, a ``command`` parser: ``config.workload.module_path``): the guest
    sees the host's / read-only, but its /tmp is a tmpfs of its own, so a
    module under /tmp is mounted back (``boot.hidden_host_dirs``)."""
    work = run.config.get("workload", {})
    path = work.get("module_path")
    if not path:
        return []
    ref = work["type"] if ":" in work["type"] else str(work.get("parser") or "")
    depth = ref.partition(":")[0].count(".") + (Path(path).name == "__init__.py")
    return [Path(path).parents[depth]]  # the dir its top package lies in: its siblings too


def guest_seconds(result: dict | None) -> float | None:
    """The guest time the agent spent on the run (boot excluded), from its
    result.json: the experiment's seconds, as the guest's clock counts them."""
    if not result:
        return None
    a, b = result.get("started"), result.get("finished")
    if isinstance(a, int | float) and isinstance(b, int | float) and b >= a:
        return float(b - a)
    return None


def previous(run: RunSpec, info: dict) -> Outcome:
    """The outcome an earlier invocation recorded in ``run.json``."""
    return Outcome(
        run.run_id,
        info["status"],
        info.get("reason", ""),
        info.get("seconds", 0),
        previous=True,
        cpu_wait_share=wait_share(info.get("host_cpu_wait_s"), info.get("seconds")),
        clock=info.get("clock", "real"),
    )
