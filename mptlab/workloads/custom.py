"""Workloads of your own: the base class and the lifecycle they share with ``command``.

    # mywork.py, next to the campaign file
    from mptlab.workloads.custom import Metric, Workload

    class Ping(Workload):
        \"\"\"ping from the client to the server.\"\"\"
        count: int = 5
        METRICS = (Metric("rtt_avg_ms", "ms", "lower", "mean RTT ping reports"),)
        HEADLINE = ("rtt_avg_ms",)
        QUICK = {"count": 2}

        def client(self, ctx):
            return f"ping -c {self.count} -i 0.2 $SERVER_ADDR"

        def metrics(self, ctx, out):
            return {"rtt_avg_ms": out.number(r"= [\\d.]+/([\\d.]+)/")}

and ``workload: {type: "mywork:Ping", count: 10}`` (docs/workloads.md,
"Your own workloads").  The host checks the fields (the class's
annotations, ``mptlab.spec.usercode``); the guest makes the class with them
and calls ``run(ctx)``, which is ``run_pair``:

1. ``server(ctx)`` (if not None) starts in the server's namespace; the
   client waits until something listens on ``PORT`` there (or the server's
   output matches ``READY``; or neither: until the server has run 0.2 s),
   at most ``READY_TIMEOUT`` s; a server that exits first fails the run
   with its output;
2. ``client(ctx)`` runs in the client's namespace between the
   ``workload_start`` and ``workload_end`` marks, at most ``timeout(ctx)``
   s (default: the run's timeout); past that it is killed and the run fails;
3. the server gets ``SERVER_GRACE`` s to exit by itself, then SIGTERM;
4. a client that exited non-zero fails the run (``WorkloadError``, with
   its exit status and the end of its error output), else
   ``metrics(ctx, out)`` gives the run's metrics.

A command is a list (run as is) or a string (``sh -c``) with
``$SERVER_ADDR`` (the address to connect to: the server's first for
MPTCP, the ``tcp_path``'s for TCP), ``$CLIENT_ADDR`` (the client's, bind to
it for TCP), ``$PORT`` and ``$TRACE_DIR`` in its environment.  Both run
through ``mptcpize`` when the experiment uses MPTCP (``MPTCPIZE = False``:
not).  Their output lands in ``traces/<name>-client.out`` etc., the
evidence of a failed run.  A failed run keeps the metrics the output
allowed (``WorkloadError.metrics``); the stall watchdog stops the pair as it
stops a built-in workload (SIGTERM to both), and ``run_pair`` then kills
what is left of their process groups.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..guest.netlab import listening
from ..guest.workload import WorkloadError, settle_clock
from ..spec.metrics import Metric
from .helpers.common import endpoints, mptcpize

__all__ = ["Metric", "Outputs", "Workload", "WorkloadError", "run_pair"]

# the server's time to come up when there is nothing to wait for (no port,
# no ready line): long enough for a process to exec in UML (~50 ms measured)
SETTLE_S = 0.2
SERVER_GRACE_S = 2.0  # after the client: a one-shot server (iperf3 -s -1) ends by itself
TAIL = 400  # characters of output an error message quotes


@dataclass(frozen=True)
class Outputs:
    """What the pair wrote: the client's stdout (``client``) and stderr
    (``client_err``), the server's output (stdout and stderr: ``server``),
    the client's exit status and the seconds it ran."""

    client: str
    client_err: str
    server: str
    status: int | None
    seconds: float

    def numbers(self, regex: str, output: str = "client") -> list[float]:
        """The first group of every match of ``regex`` in one output, as floats."""
        text = getattr(self, output)
        out = []
        for m in re.finditer(regex, text, re.MULTILINE):
            value = m.group(1) if m.re.groups else m.group(0)
            with contextlib.suppress(TypeError, ValueError):
                out.append(float(value))
        return out

    def number(self, regex: str, output: str = "client") -> float:
        """The last match's first group (``WorkloadError`` when nothing matches)."""
        found = self.numbers(regex, output)
        if not found:
            raise WorkloadError(
                f"no match of {regex!r} in the {output}'s output: {tail(getattr(self, output))}"
            )
        return found[-1]


def tail(text: str, n: int = TAIL) -> str:
    text = text.strip()
    return repr(text[-n:]) if text else "(empty)"


def environment(ctx, port: int | None) -> dict[str, str]:
    server, bind = endpoints(ctx)
    client = bind or ctx.plan.addresses(ctx.client)[0]
    return {
        **os.environ,
        "SERVER_ADDR": server,
        "CLIENT_ADDR": client,
        "PORT": str(port or ""),
        "TRACE_DIR": str(ctx.trace_dir),
    }


def _argv(command: str | list[str] | tuple[str, ...], prefix: list[str]) -> list[str]:
    if isinstance(command, str):
        return [*prefix, "sh", "-c", command]
    return [*prefix, *map(str, command)]


def _kill_group(proc: subprocess.Popen | None, sig: int = signal.SIGKILL) -> None:
    """``sig`` to the process group the command leads (a shell's children too)."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop(proc: subprocess.Popen, grace: float) -> bool:
    """Let ``proc`` end by itself for ``grace`` s, then SIGTERM, then SIGKILL its
    group; whether it ended by itself."""
    ended = True
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        ended = False
        _kill_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
    _kill_group(proc)  # what it left behind
    return ended


def _wait_ready(
    ctx, server: subprocess.Popen, log: Path, port: int | None, ready: str | None, limit: float
) -> None:
    """Until the server listens on ``port``, or its output matches ``ready``,
    or (neither given) it has run ``SETTLE_S``; ``WorkloadError`` with its
    output if it exits first or is not ready within ``limit`` s."""
    start = time.monotonic()
    pattern = re.compile(ready, re.MULTILINE) if ready else None
    ns = ctx.net.ns(ctx.server)
    while True:
        if server.poll() is not None:
            raise WorkloadError(
                f"the server exited ({server.returncode}) before it was ready: "
                f"{tail(log.read_text(errors='replace'))}"
            )
        waited = time.monotonic() - start
        if port is not None and listening(ns, port):
            return
        if pattern is not None and pattern.search(log.read_text(errors="replace")):
            return
        if port is None and pattern is None and waited >= SETTLE_S:
            return
        if waited >= limit:
            what = f"nothing listens on port {port}" if port is not None else f"no {ready!r}"
            raise WorkloadError(
                f"the server was not ready after {limit:g} s ({what}): "
                f"{tail(log.read_text(errors='replace'))}"
            )
        time.sleep(0.02)


def run_pair(
    ctx,
    client: str | list[str],
    server: str | list[str] | None = None,
    *,
    name: str = "command",
    port: int | None = None,
    ready: str | None = None,
    ready_timeout: float = 10.0,
    timeout: float | None = None,
    mptcp: bool = True,
    partial: Callable[[Outputs], dict | None] | None = None,
) -> Outputs:
    """The lifecycle of a client/server pair (the module docstring); its
    outputs.  ``timeout`` (s; None: the run's timeout) bounds the client;
    ``partial``: the metrics a failed run keeps (from its outputs)."""
    settle_clock()  # the user's tools may take an uptime below 1 s for "no time yet"
    limit = timeout if timeout is not None else ctx.config.timeout / 1000
    prefix = mptcpize(ctx) if mptcp else []
    env = environment(ctx, port)
    traces = ctx.trace_dir
    server_log = traces / f"{name}-server.out"
    server_proc = None
    if server is not None:
        argv = _argv(server, prefix)
        ctx.log(f"{name} server: {argv}")
        with open(server_log, "w") as out:
            server_proc = ctx.net.popen(
                ctx.server, argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )  # fmt: skip
    try:
        if server_proc is not None:
            _wait_ready(ctx, server_proc, server_log, port, ready, ready_timeout)
        argv = _argv(client, prefix)
        ctx.log(f"{name} client: {argv}")
        client_out, client_err = traces / f"{name}-client.out", traces / f"{name}-client.err"
        ctx.mark("workload_start")
        started = time.monotonic()
        with open(client_out, "w") as out, open(client_err, "w") as err:
            proc = ctx.net.popen(
                ctx.client, argv, stdout=out, stderr=err, env=env, start_new_session=True
            )
        timed_out = not _stop(proc, limit)
        seconds = time.monotonic() - started
        ctx.mark("workload_end")
    finally:
        if server_proc is not None:
            _stop(server_proc, SERVER_GRACE_S)
    outputs = Outputs(
        client_out.read_text(errors="replace"),
        client_err.read_text(errors="replace"),
        server_log.read_text(errors="replace") if server_proc is not None else "",
        proc.returncode,
        seconds,
    )
    failure = None
    if timed_out:
        failure = f"the client did not finish within {limit:g} s and was killed"
    elif proc.returncode != 0:
        failure = f"the client exited with status {proc.returncode}"
    if failure is not None:
        said = outputs.client_err.strip() or outputs.client
        kept = None
        with contextlib.suppress(Exception):
            kept = partial(outputs) if partial else None
        raise WorkloadError(
            f"{name}: {failure}; its output ends {tail(said)} (traces/{client_out.name}, "
            f"traces/{client_err.name})",
            metrics=kept,
        )
    return outputs


class Workload:
    """The base class of a workload of your own (the module docstring).

    Its fields are class annotations with defaults (``count: int = 5``),
    set on the instance; override ``client`` (and ``server``, ``metrics``),
    or ``run`` for a lifecycle of your own.  ``PORT``: where the server
    listens (the client starts once it does); ``READY``: a regex the
    server's output matches once it is ready; ``READY_TIMEOUT``: seconds;
    ``MPTCPIZE``: run both through ``mptcpize`` under MPTCP."""

    METRICS: ClassVar[tuple[Metric, ...]] = ()
    HEADLINE: ClassVar[tuple[str, ...]] = ()
    QUICK: ClassVar[dict[str, Any]] = {}
    PORT: ClassVar[int | None] = None
    READY: ClassVar[str | None] = None
    READY_TIMEOUT: ClassVar[float] = 10.0
    MPTCPIZE: ClassVar[bool] = True

    def __init__(self, **fields: Any):
        for key, value in fields.items():
            setattr(self, key, value)

    def fields(self) -> dict[str, Any]:
        """The instance's field values (what the Python API puts in the YAML's mapping)."""
        return dict(vars(self))

    def server(self, ctx) -> str | list[str] | None:
        """The server's command (None: no server)."""
        return None

    def client(self, ctx) -> str | list[str]:
        """The client's command."""
        raise NotImplementedError(f"{type(self).__name__}: define client(self, ctx)")

    def timeout(self, ctx) -> float | None:
        """The client's limit in seconds (None: the run's timeout)."""
        return None

    def metrics(self, ctx, out: Outputs) -> dict:
        """The run's metrics from the pair's outputs (``out.number(regex)``)."""
        return {}

    def run(self, ctx) -> dict:
        name = type(self).__name__.lower()
        out = run_pair(
            ctx,
            self.client(ctx),
            self.server(ctx),
            name=name,
            port=self.PORT,
            ready=self.READY,
            ready_timeout=self.READY_TIMEOUT,
            timeout=self.timeout(ctx),
            mptcp=self.MPTCPIZE,
            partial=lambda o: self.metrics(ctx, o),
        )
        return self.metrics(ctx, out)
