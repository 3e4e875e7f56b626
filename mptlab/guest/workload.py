"""What the agent asks of a workload, and how it finds one.

A workload is the module ``mptlab.workloads.<type>`` (the YAML's
``workload.type``; its fields: ``mptlab.spec.workloads``).  The agent knows
workloads only by that name, as a host knows its plugins: the guest layer
never imports the workloads package, the workloads import the guest's
services (``netlab``, ``sockets``) and raise ``WorkloadError``.  The module
provides

- ``run(ctx) -> dict``: in the guest, in a thread of the agent; returns the
  metrics for ``result.json``; ``ctx`` is an ``mptlab.guest.agent.Context``
  (``ctx.net``, ``ctx.plan``, ``ctx.client``, ``ctx.server``, ``ctx.config``,
  ``ctx.workload`` (the validated fields as read-only attributes, in base
  units: ``mptlab.guest.config``),
  ``ctx.trace_dir``, ``ctx.log()``, ``ctx.mark()``);
- optionally ``prepare(params: dict) -> dict``: on the host before the runs
  (content made once and cached); the host files the result under the
  run's ``content_key`` (``mptlab.campaign.content``) and the guest reads
  it back with ``ctx.prepared()``.

When the stall watchdog fires, the processes ``run`` started with
``ctx.net.popen`` in the client's and server's namespaces get SIGTERM and
the sockets it made with ``mptlab.guest.sockets`` are shut down, so that it
comes back (else the agent goes on without it after a grace period).
"""

from __future__ import annotations

import importlib
from types import ModuleType

PACKAGE = "mptlab.workloads"


class WorkloadError(RuntimeError):
    """A workload that could not finish, in words (its tool's own error, not
    an exception from reading its output); ``metrics``: what it measured
    before it failed, if anything (the agent records them)."""

    def __init__(self, message: str, metrics: dict | None = None):
        super().__init__(message)
        self.metrics = metrics


def load(kind: str) -> ModuleType:
    """The module that runs workload type ``kind`` (or ``background``)."""
    if not kind.isidentifier():
        raise ValueError(f"not a workload name: {kind!r}")
    return importlib.import_module(f"{PACKAGE}.{kind}")
