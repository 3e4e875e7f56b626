"""Content a workload needs made on the host, filed under the run's content key.

A workload module with ``prepare(params) -> dict`` (web pages, DASH and
live video: ``mptlab.workloads.helpers.content``) makes its content once
into the content cache and returns where it is.  That answer is a fact of
the machine, not of the experiment (another worker of a cluster has its
own cache), so it is not written into the run's spec: the host files it as
``<cache>/content/prepared/<content_key>.json`` (``rundir.content_manifest``)
and the guest, told the cache's path (``rundir.CONTENT_ENV``, set in its
entry script by ``mptlab.campaign.execute``), reads it by the key its
spec.json carries.  The spec stays what the catalog expanded.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from .. import home, rundir
from ..guest import workload as workloads
from ..rundir import RunSpec


def content_dir() -> Path:
    """This machine's content cache (``<cache>/content``), which the guest is told of."""
    return home.cache_dir() / "content"


def prepare(run: RunSpec) -> Path | None:
    """Make (or find) the content ``run``'s workload needs and file what
    ``prepare()`` returned under the run's content key; the manifest's
    path, or None when the workload prepares nothing."""
    if run.content_key is None:
        return None
    work = run.config["workload"]
    return _prepare(content_dir(), run.content_key, json.dumps(work, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _prepare(cache: Path, key: str, workload_json: str) -> Path | None:
    """Once per key and process: content generators are cached on disk
    (``build_once``) but still cost a hash and a stat per file to find."""
    work = json.loads(workload_json)
    if ":" in work["type"]:  # a workload class of the user's own: it prepares nothing
        return None
    module = workloads.load(work["type"])
    if not hasattr(module, "prepare"):
        return None
    data = module.prepare({k: v for k, v in work.items() if k != "type"})
    manifest = rundir.content_manifest(cache, key)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    # atomic: guests of a running campaign may read the manifest this
    # invocation rewrites (same key, same content)
    rundir.write_json(manifest, {"key": key, "workload": work, "prepared": data})
    return manifest
