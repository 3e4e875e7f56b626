"""A command pair of your own: ``workload: {type: command, client: ..., metrics: ...}``.

    workload:
      type: command
      server: iperf3 -s -1 -p $PORT
      port: 5201
      client: iperf3 -c $SERVER_ADDR -p $PORT -t 5 -f m
      metrics:
        iperf_mbps: {regex: '([\\d.]+) Mbits/sec.*receiver', unit: Mbit/s, better: higher}

The pair runs with the lifecycle of ``mptlab.workloads.custom.run_pair``
(server, readiness on ``port`` or a ``ready`` regex, client bounded by
``timeout``, failure with the output as evidence).  Each metric is a regex
over the client's (or ``output: server``) output, whose first group is the
value (``match``: the last match, or the first, their mean, sum, min, max,
or how many there are; times ``scale``); a required metric (the default)
that matches nothing fails the run, quoting the output.  ``parser:
"module:function"`` (the user's module, ``config.workload.module_path``)
gets the client's output (and the server's, if it takes two arguments) and
returns a dict of numbers, merged over the regexes' metrics.  The host
checks the fields and declares the metrics (``mptlab.spec.workloads.Command``).
"""

from __future__ import annotations

import inspect
import re

from ..guest.workload import WorkloadError, import_ref
from .custom import Outputs, run_pair, tail

# the metrics are the experiment's own: mptlab.spec.catalog declares them per experiment
METRICS = ()


def value(out: Outputs, m) -> float | None:
    """A metric (its spec ``m``: regex, output, match, scale) from the
    outputs; None when nothing matches."""
    if m.match == "count":
        return float(len(re.findall(m.regex, getattr(out, m.output), re.MULTILINE)))
    found = out.numbers(m.regex, m.output)
    if not found:
        return None
    pick = {
        "last": found[-1],
        "first": found[0],
        "mean": sum(found) / len(found),
        "sum": sum(found),
        "min": min(found),
        "max": max(found),
    }[m.match]
    return pick * m.scale


def parse(ctx, out: Outputs, strict: bool = True) -> dict:
    """Every metric of the workload from the outputs; ``strict``: a required
    metric that matches nothing, or a parser that fails, is a ``WorkloadError``."""
    w = ctx.workload
    result: dict = {}
    missing = []
    for name, m in w.metrics.fields().items():
        if m.regex is None:
            continue
        v = value(out, m)
        result[name] = v
        if v is None and m.required:
            missing.append(f"{name} ({m.regex!r} in the {m.output}'s output)")
    if w.parser is not None:
        result.update(_parsed(ctx, out))
    if missing and strict:
        raise WorkloadError(
            f"command: no match for {', '.join(missing)}; the client's output ends "
            f"{tail(out.client)}",
            metrics=result,
        )
    return result


def _parsed(ctx, out: Outputs) -> dict:
    w = ctx.workload
    func = import_ref(w.parser, w.fields().get("module_path"))
    try:
        takes_two = len(inspect.signature(func).parameters) >= 2
    except (TypeError, ValueError):
        takes_two = False
    try:
        got = func(out.client, out.server) if takes_two else func(out.client)
    except Exception as exc:  # noqa: BLE001 - the user's parser: its failure is the run's
        raise WorkloadError(
            f"command: parser {w.parser} failed: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(got, dict):
        raise WorkloadError(f"command: parser {w.parser} returned {type(got).__name__}, not a dict")
    result = {}
    for key, v in got.items():
        if v is not None and not isinstance(v, int | float | list):
            raise WorkloadError(
                f"command: parser {w.parser}: {key} is {type(v).__name__}, not a number"
            )
        result[str(key)] = v
    return result


def run(ctx) -> dict:
    w = ctx.workload
    out = run_pair(
        ctx,
        w.client,
        w.server,
        name="command",
        port=w.port,
        ready=w.ready,
        ready_timeout=w.ready_timeout / 1000,
        timeout=w.timeout / 1000 if w.timeout is not None else None,
        mptcp=w.mptcp,
        partial=lambda o: parse(ctx, o, strict=False),
    )
    metrics = parse(ctx, out)
    metrics.setdefault("duration_s", out.seconds)
    return metrics
