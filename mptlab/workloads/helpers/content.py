"""Content a workload makes once on the host (web pages, video) and the guest
reads: cached under ``~/.cache/mptlab/content/<kind>-<hash of the inputs>/``.
The host files a workload's ``prepare()`` result under the run's content
key (``mptlab.campaign.content``); the guest reads it back (``prepared(ctx)``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from ... import home

CONTENT_VERSION = 1  # bump when a content generator changes its output


def content_dir(kind: str, inputs: dict) -> Path:
    """The cache directory for content made from ``inputs`` (a JSON-able dict):
    ``<cache>/content/<kind>-<hash>/``; the hash covers the inputs and
    ``CONTENT_VERSION``."""
    key = hashlib.sha256(
        json.dumps([CONTENT_VERSION, kind, inputs], sort_keys=True).encode()
    ).hexdigest()[:16]
    return home.cache_dir() / "content" / f"{kind}-{key}"


def build_once(target: Path, build) -> Path:
    """Make ``target`` with ``build(tmp_dir)`` unless it exists; atomic (a
    temporary sibling renamed into place), safe against concurrent builders."""
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    build(tmp)
    (tmp / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
    try:
        tmp.rename(target)
    except OSError:  # another builder won the race
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / ".complete").exists():
            raise
    return target


def prepared(ctx) -> dict:
    """What the workload's ``prepare()`` returned on the host, found by the
    run's content key (``Context.prepared``: ``mptlab.campaign.content``)."""
    return ctx.prepared()
