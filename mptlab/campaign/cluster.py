"""Runs on a Dask cluster: beyond one machine, every run is one task.

    mptlab run blest-3g-wlan --cluster tcp://scheduler:8786

Runs are independent, so a campaign hands them to an existing engine
(Dask distributed) instead of a home-made one.  The client keeps what it does
on one machine (seeded order, resume, progress, the starved-run warning);
each worker executes a run exactly as a local campaign does
(``mptlab.campaign.execute``) and returns its ``Outcome``.  A worker runs as
many guests at once as it has Dask threads (``dask worker --nthreads N``;
1 per CPU is the local default, docs/deployment.md).

What the workers need (each checked, with a clear error, before a run):

- the same mptlab checkout, installed, and the same kernel build (same key:
  run ``make kernel`` on each machine; the cache is keyed by its inputs);
- the campaign's results dir at the same path (a shared filesystem), since
  the worker writes the run dir and the client reads it.

See docs/deployment.md for starting a scheduler and workers.

**Batch systems** (``--cluster slurm`` or ``--cluster pbs``): the workers are
batch jobs that dask-jobqueue submits (``jobqueue()``), one Dask worker per
job, with as many threads (guests at once) as the job has cores; the
scheduler runs in this process.  The site's settings (queue, account,
walltime, cores, memory, the network interface the jobs reach the scheduler
on) come from dask-jobqueue's own configuration (``~/.config/dask/
jobqueue.yaml``, keys ``jobqueue.slurm.*`` / ``jobqueue.pbs.*``); mptlab
sets only what it needs: one worker process per job, this interpreter (the
venv, on the shared filesystem), the job's environment exported.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..rundir import CampaignDir, RunSpec
from . import content
from .boot import ConfinementError, check_confinement
from .execute import Outcome, Provenance, execute
from .kernel import KernelBuild, KernelNotBuilt, find_kernel
from .provenance import git_commit, guest_inputs, host_tools

CONNECT_TIMEOUT_S = 30
# --cluster KIND: a batch system reached through dask-jobqueue (its class)
JOBQUEUES = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
# how long a campaign waits for its first batch job to start and its worker
# to join ($MPTLAB_JOBQUEUE_WAIT_S): a busy queue can take longer, and then
# the campaign should say so rather than hang
JOBQUEUE_WAIT_S = 600
# a guest's memory (kernel.memory, 1 GiB by default) plus the worker's own
JOB_MEMORY_GB_PER_CORE = 2


class ClusterError(RuntimeError):
    """The cluster cannot run this campaign (unreachable, wrong kernel, no shared dir)."""


@functools.lru_cache(maxsize=8)
def _worker_setup(
    out_dir: str, want: tuple[tuple[str, str], ...]
) -> tuple[KernelBuild, Provenance]:
    """This worker's kernel and provenance for a campaign (once per worker process)."""
    host = socket.gethostname()
    if not CampaignDir.is_campaign(Path(out_dir)):
        raise ClusterError(
            f"worker {host}: results dir {out_dir} is not visible here; the client and the "
            "workers need it at the same path (a shared filesystem)"
        )
    try:
        kernel = find_kernel()
    except KernelNotBuilt as exc:
        raise ClusterError(f"worker {host}: {exc}") from None
    try:
        check_confinement()
    except ConfinementError as exc:
        raise ClusterError(f"worker {host}: {exc}") from None
    have = kernel.identity()
    if have != dict(want):
        raise ClusterError(
            f"worker {host} has kernel build {have}, the campaign uses {dict(want)}: use the "
            "same checkout and run `make kernel` on every worker"
        )
    # the worker's own: its packages and files are its guests' inputs
    return kernel, Provenance(host_tools(), git_commit(), guest_inputs(kernel))


STOP_POLL_S = 1.0  # how often a running task asks the scheduler whether its campaign stopped


def _watch_stop(stop, cancel: threading.Event, done: threading.Event) -> None:
    """Set ``cancel`` when the Dask ``Event`` ``stop`` is set (the client stopping)."""
    try:
        while not done.is_set():
            if stop.wait(timeout=STOP_POLL_S):
                cancel.set()
                return
    except Exception:  # noqa: BLE001 - scheduler gone: the run goes on to its own end
        return


def stop_watcher(name: str, cancel: threading.Event, done: threading.Event) -> None:
    """From a task's thread (where the worker's client is found): a thread
    that sets ``cancel`` when the client sets the Dask event ``name``."""
    from distributed import Event, get_client

    stop = Event(name, client=get_client())
    threading.Thread(target=_watch_stop, args=(stop, cancel, done), daemon=True).start()


def execute_on_worker(out_dir: str, want: dict, run_json: dict, stop: str | None = None) -> Outcome:
    """The Dask task: one run on this worker; returns its ``Outcome``.  When
    the Dask event ``stop`` is set (the client was stopped), the guest is
    killed (``boot.Interrupted``; the run dir is set aside on resume)."""
    kernel, provenance = _worker_setup(out_dir, tuple(sorted(want.items())))
    run = RunSpec.from_json(run_json)
    # the workload's content (web pages, video) made or found in this
    # machine's cache, under the run's key: the client's paths mean nothing here
    content.prepare(run)
    cancel, done = threading.Event(), threading.Event()
    if stop:
        stop_watcher(stop, cancel, done)
    try:
        return execute(CampaignDir(out_dir), run, kernel, provenance, cancel)
    finally:
        done.set()


@contextlib.contextmanager
def scheduler(cluster: str, guests: int | None) -> Iterator[str]:
    """The Dask scheduler address of ``--cluster``: as given, or that of a
    batch-job cluster started for the campaign (``slurm``, ``pbs``)."""
    if cluster not in JOBQUEUES:
        yield cluster
        return
    with jobqueue(cluster, guests) as address:
        yield address


@contextlib.contextmanager
def jobqueue(kind: str, guests: int | None, log: Callable[[str], None] = print) -> Iterator[str]:
    """A Dask cluster of ``kind`` batch jobs (``slurm`` or ``pbs``) for one
    campaign: yields its scheduler's address once a worker has joined; the
    jobs are cancelled when the campaign ends, however it ends.  ``guests``:
    guests at once in all (``--jobs``), one job per ``cores`` of them
    (default: one job)."""
    try:
        import dask
        import dask_jobqueue
        from distributed import Client
    except ImportError:  # pragma: no cover - dependencies of mptlab
        raise ClusterError(
            f"--cluster {kind} needs dask-jobqueue (a dependency of mptlab: make venv)"
        ) from None
    cores = int(dask.config.get(f"jobqueue.{kind}.cores", None) or 1)
    options: dict = {
        "cores": cores,
        "processes": 1,  # one worker per job; its threads run the guests
        "memory": dask.config.get(f"jobqueue.{kind}.memory", None)
        or f"{cores * JOB_MEMORY_GB_PER_CORE}GB",
        "python": sys.executable,  # this venv: the workers import the same mptlab
    }
    if kind == "pbs":  # qsub does not pass the environment on unless told to
        extra = list(dask.config.get("jobqueue.pbs.job-extra-directives", None) or [])
        options["job_extra_directives"] = [*extra, "-V"]
    try:
        cluster = getattr(dask_jobqueue, JOBQUEUES[kind])(**options)
    except Exception as exc:  # noqa: BLE001 - the engine's own errors, in words
        raise ClusterError(f"--cluster {kind}: dask-jobqueue cannot start: {exc}") from None
    wait_s = float(os.environ.get("MPTLAB_JOBQUEUE_WAIT_S", JOBQUEUE_WAIT_S))
    try:
        jobs = max(1, math.ceil((guests or cores) / cores))
        cluster.scale(jobs=jobs)
        log(
            f"--cluster {kind}: {jobs} batch job(s) of {cores} core(s) submitted; "
            f"scheduler {cluster.scheduler_address}"
        )
        with Client(cluster.scheduler_address, timeout=CONNECT_TIMEOUT_S) as client:
            try:
                client.wait_for_workers(1, timeout=wait_s)
            except TimeoutError:
                raise ClusterError(
                    f"--cluster {kind}: no batch job started within {wait_s:.0f} s (see the "
                    f"queue: {'squeue' if kind == 'slurm' else 'qstat'}; "
                    f"$MPTLAB_JOBQUEUE_WAIT_S waits longer); the job script was:\n"
                    f"{cluster.job_script()}"
                ) from None
        yield cluster.scheduler_address
    finally:
        cluster.close()


def run_on_cluster(
    address: str,
    out_dir: Path,
    kernel: KernelBuild,
    runs: Iterable[RunSpec],
    record: Callable[[Outcome], None],
    crashed: Callable[[RunSpec, str], Outcome],
    cancel: threading.Event | None = None,
    interrupted: Callable[[RunSpec], None] | None = None,
) -> None:
    """Submit every run to the Dask scheduler at ``address``; ``record(outcome)``
    each as it finishes (a task that raised becomes ``crashed(run, reason)``).
    ``cancel`` set: the tasks not finished are cancelled and returned through
    ``interrupted(run)``, and the tasks running are told through a Dask
    event: each kills its guest within ``STOP_POLL_S`` + 1 s.  Their run
    dirs (no ``run.json``) are set aside when the campaign resumes; a guest
    still dying then writes only into its own dir (``RunDir.pinned``,
    confinement)."""
    try:
        from distributed import Client, Event, as_completed
    except ImportError:  # pragma: no cover - a dependency of mptlab
        raise ClusterError(
            "--cluster needs the `distributed` package (pip install distributed)"
        ) from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    want = kernel.identity()
    finished = threading.Event()
    stop = f"mptlab-stop-{uuid.uuid4().hex}"
    try:
        futures = {}
        for run in runs:
            future = client.submit(
                execute_on_worker,
                str(Path(out_dir).resolve()),
                want,
                run.to_json(),
                stop,
                key=f"mptlab-{out_dir.name}-{run.run_id}-{id(run)}",
                pure=False,
                retries=0,
            )
            futures[future] = run

        def cancel_when_stopped() -> None:
            while cancel is not None and not finished.is_set():
                if cancel.wait(0.5):
                    Event(stop, client=client).set()  # the running tasks kill their guests
                    client.cancel(list(futures))
                    return

        watcher = threading.Thread(target=cancel_when_stopped, daemon=True)
        watcher.start()
        for future in as_completed(futures):
            run = futures[future]
            if future.status == "cancelled":
                if interrupted is not None:
                    interrupted(run)
                continue
            if future.status == "finished":
                record(future.result())
            else:
                error = future.exception()
                record(crashed(run, f"cluster: {type(error).__name__}: {error}"))
    finally:
        finished.set()
        client.close()
