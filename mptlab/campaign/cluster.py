"""Runs on a Dask cluster: beyond one machine, every run is one task.

    mptlab run blest-3g-wlan --cluster tcp://scheduler:8786

Runs are independent, so a campaign hands them to an existing engine
(Dask distributed) instead of a home-made one.  The client keeps what it does
on one machine (seeded order, resume, progress, the starved-run warning);
each worker executes a run exactly as ``Campaign.execute`` does locally and
returns its ``Outcome``.  A worker runs as many guests at once as it has
Dask threads (``dask worker --nthreads N``; 2 per CPU is the local default).

What the workers need (each checked, with a clear error, before a run):

- the same mptlab checkout, installed, and the same kernel build (same key:
  run ``make kernel`` on each machine; the cache is keyed by its inputs);
- the campaign's results dir at the same path (a shared filesystem), since
  the worker writes the run dir and the client reads it.

See docs/deployment.md for starting a scheduler and workers.
"""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Callable, Iterable
from pathlib import Path

from ..rundir import RunSpec

CONNECT_TIMEOUT_S = 30


class ClusterError(RuntimeError):
    """The cluster cannot run this campaign (unreachable, wrong kernel, no shared dir)."""


def kernel_id(kernel) -> dict:
    """What identifies a kernel build across machines: its cache keys."""
    return {"kernel": kernel.dir.name, "modules": kernel.modules_dir.name}


@functools.lru_cache(maxsize=8)
def _worker_campaign(out_dir: str, want: tuple[tuple[str, str], ...]):
    """This worker's executor for a campaign (built once per worker process)."""
    from .kernel import KernelNotBuilt, find_kernel
    from .runner import Campaign

    host = socket.gethostname()
    if not (Path(out_dir) / "campaign.json").exists():
        raise ClusterError(
            f"worker {host}: results dir {out_dir} is not visible here; the client and the "
            "workers need it at the same path (a shared filesystem)"
        )
    try:
        kernel = find_kernel()
    except KernelNotBuilt as exc:
        raise ClusterError(f"worker {host}: {exc}") from None
    have = kernel_id(kernel)
    if have != dict(want):
        raise ClusterError(
            f"worker {host} has kernel build {have}, the campaign uses {dict(want)}: use the "
            "same checkout and run `make kernel` on every worker"
        )
    return Campaign(Path(out_dir), [], kernel, jobs=1)


@functools.lru_cache(maxsize=64)
def _prepared_here(workload_json: str) -> dict:
    """The workload's host-side content (web pages, video) made or found in
    this machine's cache: the client's paths mean nothing here."""
    from .. import workloads as traffic

    work = json.loads(workload_json)
    module = traffic.load(work["type"])
    return module.prepare({k: v for k, v in work.items() if k != "type"})


def execute_on_worker(out_dir: str, want: dict, run_json: dict):
    """The Dask task: one run on this worker; returns its ``Outcome``."""
    campaign = _worker_campaign(out_dir, tuple(sorted(want.items())))
    run = RunSpec.from_json(run_json)
    work = run.config["workload"]
    if "prepared" in work:
        bare = {k: v for k, v in work.items() if k != "prepared"}
        prepared = _prepared_here(json.dumps(bare, sort_keys=True))
        run.config = {**run.config, "workload": {**bare, "prepared": prepared}}
    return campaign.execute(run)


def run_on_cluster(
    address: str,
    out_dir: Path,
    kernel,
    runs: Iterable[RunSpec],
    record: Callable,
    crashed: Callable[[RunSpec, str], object],
) -> None:
    """Submit every run to the Dask scheduler at ``address``; ``record(outcome)``
    each as it finishes (a task that raised becomes ``crashed(run, reason)``)."""
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - a dependency of mptlab
        raise ClusterError(
            "--cluster needs the `distributed` package (pip install distributed)"
        ) from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except OSError as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    want = kernel_id(kernel)
    try:
        futures = {}
        for run in runs:
            future = client.submit(
                execute_on_worker, str(Path(out_dir).resolve()), want, run.to_json(),
                key=f"mptlab-{out_dir.name}-{run.run_id}-{id(run)}", pure=False,
                retries=0,
            )  # fmt: skip
            futures[future] = run
        for future in as_completed(futures):
            run = futures[future]
            if future.status == "finished":
                record(future.result())
            else:
                exc = future.exception()
                record(crashed(run, f"cluster: {type(exc).__name__}: {exc}"))
    finally:
        client.close()
