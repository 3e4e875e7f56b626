"""Idle: the workload does nothing for ``duration``.

For measuring what runs beside a workload on its own (background traffic,
the traces of an idle network), e.g. the background presets' load.
Metric: ``duration_s`` (the measured idle time).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict, Field

from .helpers.common import params
from .helpers.types import Duration


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    duration: Duration = Field(gt=0)


def quick(p: dict) -> dict:
    return {**p, "duration": min(p["duration"], 10_000.0)}


def run(ctx) -> dict:
    p = params(ctx, Params)
    ctx.mark("workload_start")
    t = time.time()
    time.sleep(p.duration / 1000)
    ctx.mark("workload_end")
    return {"duration_s": time.time() - t}
