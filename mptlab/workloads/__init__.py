"""Workloads, run inside the guest between the hosts of a built topology.

A workload is a module ``traffic/<type>.py`` (the YAML's ``workload.type``) with

- ``Params``: a pydantic model of its YAML fields (besides ``type``); the host
  validates the experiment's ``workload`` with it, so that errors name the
  file, the line and the field;
- ``run(ctx) -> dict``: runs in the guest and returns the metrics for
  ``result.json``; ``ctx`` is an ``mptlab.guest.agent.Context`` (``ctx.net``,
  ``ctx.plan``, ``ctx.client``, ``ctx.server``, ``ctx.config``,
  ``ctx.trace_dir``, ``ctx.log()``, ``ctx.mark()``; ``ctx.workload`` holds
  the validated params as attributes);
  it runs in a thread of the agent, and raises ``mptlab.workloads.helpers.common.WorkloadError``
  with its tool's own words (and any ``metrics`` measured so far) when it
  cannot finish; when the stall watchdog fires, the processes it started
  with ``ctx.net.popen`` in the client's and server's namespaces get
  SIGTERM and the sockets it made with ``mptlab.workloads.helpers.common`` are shut down,
  so that it comes back (else the agent goes on without it after 5 s);
- optionally ``quick(params: dict) -> dict``: the shortened version used by
  ``mptlab run --quick``;
- optionally ``prepare(params: dict) -> dict``: runs on the host before the
  runs (content made once and cached, e.g. web pages, video); the guest sees
  the result as ``config.workload.prepared``.

``traffic/background.py`` is not a workload: it starts and stops the
experiment's ``background:`` flows around the workload.  ``pages``,
``media`` and ``dash_player`` are helpers; modules starting with ``_`` too.
docs/workloads.md documents every workload's parameters and metrics.

``available()`` lists the workload types.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

_NOT_WORKLOADS = {"background", "helpers"}  # not workloads


def available() -> list[str]:
    """Workload types: the modules of this package that define ``run``."""
    names = []
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("_") or info.name in _NOT_WORKLOADS:
            continue
        names.append(info.name)
    return sorted(names)


def load(kind: str):
    """The workload module for ``kind`` (ValueError naming the allowed types)."""
    if kind not in available():
        raise ValueError(f"unknown workload type {kind!r}; allowed: {', '.join(available())}")
    return importlib.import_module(f"mptlab.workloads.{kind}")
