"""What the agent asks of a workload, and how it finds one.

(A workload class of the user's own, ``type: "module:Class"``: ``load``
imports it from the file the host resolved, ``config.workload.module_path``.)

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
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

PACKAGE = "mptlab.workloads"


# The least guest uptime a program of the user's own starts at.  A
# virtual-time guest boots in ~0 s of guest time, and iputils' ping
# (20221126) takes a clock reading whose tv_sec is 0 for "not started yet":
# below 1 s of uptime every reply restarted its pacing and `ping -c 3` sent
# its probes back to back (3 in 150 ms on blest-3g-wlan, strace: no wait
# between a reply and the next send); from 1 s on, 1 s apart.  Other tools
# may share the habit.  Under virtual time the wait is free; under real
# time it is what is left of the first 1.5 s.  (Built-in workloads start
# later than this anyway: network build, warm-up; they are left as they are,
# so that their realisations stay.)
SETTLE_S = 1.5


def settle_clock(at_least: float = SETTLE_S) -> None:
    """Sleep until the guest's monotonic clock reads ``at_least`` s."""
    left = at_least - time.monotonic()
    if left > 0:
        time.sleep(left)


class WorkloadError(RuntimeError):
    """A workload that could not finish, in words (its tool's own error, not
    an exception from reading its output); ``metrics``: what it measured
    before it failed, if anything (the agent records them)."""

    def __init__(self, message: str, metrics: dict | None = None):
        super().__init__(message)
        self.metrics = metrics


def load(kind: str, module_path: str | None = None) -> Any:
    """What runs workload type ``kind`` (or ``background``): its module, with
    ``run(ctx)``; for a workload class of the user's own (``module:Class``,
    its module's file ``module_path``), an object whose ``run(ctx)`` makes
    the class with the run's fields and runs it."""
    if ":" in kind:
        return UserWorkload(kind, import_ref(kind, module_path))
    if not kind.isidentifier():
        raise ValueError(f"not a workload name: {kind!r}")
    return importlib.import_module(f"{PACKAGE}.{kind}")


# the host's module names aside, a module imported by its file; a script's
# __main__ is imported under this name, so its `if __name__ == "__main__"`
# part (the experiment it runs) does not run again in the guest
MAIN_ALIAS = "mptlab_user_main"


def import_ref(ref: str, module_path: str | None) -> Any:
    """The object ``module:Name`` names, its module imported from the file
    ``module_path`` (the host's, seen read-only through hostfs), the dir
    its top package lies in on ``sys.path`` so that it can import its
    siblings."""
    module_name, _, name = ref.partition(":")
    if module_path is None:
        raise ValueError(f"{ref}: no module_path: the host resolves the module's file")
    path = Path(module_path)
    depth = module_name.count(".") + (1 if path.name == "__init__.py" else 0)
    root = path.parents[depth]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if module_name == "__main__":
        module_name = MAIN_ALIAS
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"{path}: not a Python module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    found = Path(getattr(module, "__file__", "") or "").resolve()
    if found != path.resolve():
        raise ImportError(
            f"{ref}: the guest imported {module_name} from {found}, not from {path} "
            "(another module of that name comes first on the path)"
        )
    try:
        return getattr(module, name)
    except AttributeError:
        raise ImportError(f"{ref}: {path} has no {name!r}") from None


class UserWorkload:
    """A workload class of the user's own, as the agent runs a workload module:
    ``run(ctx)`` makes ``cls(**fields)`` (the run's ``config.workload`` but
    ``type`` and ``module_path``) and returns its ``run(ctx)``."""

    def __init__(self, ref: str, cls: Any):
        self.ref = ref
        self.cls = cls

    def run(self, ctx) -> dict:
        fields = {
            k: v for k, v in ctx.workload.fields().items() if k not in ("type", "module_path")
        }
        return self.cls(**fields).run(ctx)
