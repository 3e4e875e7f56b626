"""Idle: the workload does nothing for ``duration``.

For measuring what runs beside a workload on its own (background traffic,
the traces of an idle network), e.g. the background presets' load.
Metric: ``duration_s`` (the measured idle time).
"""

from __future__ import annotations

import time

from ..spec.metrics import Metric

HEADLINE = ("duration_s",)
METRICS: tuple[Metric, ...] = ()  # duration_s: helpers.common


def run(ctx) -> dict:
    ctx.mark("workload_start")
    t = time.time()
    time.sleep(ctx.workload.duration / 1000)
    ctx.mark("workload_end")
    return {"duration_s": time.time() - t}
