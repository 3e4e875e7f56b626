"""TCP-dFEC: the dynamic FEC ratio over time of each variant's most typical run
(runs with ``kernel.fec``; docs/fec.md)."""

from __future__ import annotations

from .. import figures
from ..html import Markup, join, render
from .context import Context
from .parts import representative

_SECTION = """\
<h2 id='fec'>FEC ratio over time</h2><p class='muted'>The dynamic ratio's re-evaluations, \
every 3 RTTs; the run closest to each variant's median {{ metric }}.</p>\
<div class='figs'>{{ figs }}</div>"""


def section(ctx: Context) -> Markup | None:
    fr = ctx.table("fec_ratio")
    if not len(fr):
        return None
    metric = ctx.fmetrics[0] if ctx.fmetrics else None
    with_fec = ctx.runs[ctx.runs["run_id"].isin(set(fr["run_id"]))]
    figs = []
    for g, run_id in representative(with_fec, metric, ctx.by)[: ctx.max_timeseries]:
        fig = figures.fec_ratio(fr, run_id, title=f"{g}: {run_id}")
        name = "fec-ratio-" + run_id.replace("/", "_")
        figs.append(ctx.figure(fig, name, f"FEC ratio, {g}: {run_id}"))
    return render(_SECTION, metric=metric or "", figs=join(figs))
