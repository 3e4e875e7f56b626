"""Figures of every key metric (bar with CI, box, CDF per group), the path shares,
and per group the time series of its most typical run."""

from __future__ import annotations

from .. import figures
from ..html import Markup, join, render
from .context import Context
from .parts import matrix_axes, representative

_METRIC = "<h3>{{ m }}</h3><div class='figs'>{{ figs }}</div>"
_TIMESERIES = """\
<h3>Per-subflow time series (the run closest to each variant's median {{ metric }})</h3>\
<div class='figs'>{{ figs }}</div>"""


def _metric_figures(ctx: Context, m: str, x_col: str, hue: str | None) -> Markup:
    runs, by, order = ctx.runs, ctx.by, ctx.order
    figs = [
        ctx.figure(fig, f"{kind}-{m}", f"{kind}: {m}")
        for kind, fig in (
            ("bar", figures.bar_ci(runs, m, x=x_col, hue=hue)),
            ("box", figures.box(runs, m, by=by, order=order)),
            ("cdf", figures.cdf(runs, m, by=by, order=order)),
        )
    ]
    return render(_METRIC, m=m, figs=join(figs))


def _timeseries(ctx: Context) -> Markup | None:
    ss, mp = ctx.table("ss"), ctx.table("mptcp")
    if not len(ss) and not len(mp):
        return None
    po, ko = ctx.table("pcap_ofo"), ctx.table("kernel_ofo")
    metric = ctx.fmetrics[0] if ctx.fmetrics else None
    figs = []
    for g, run_id in representative(ctx.runs, metric, ctx.by)[: ctx.max_timeseries]:
        fig = figures.timeseries(
            ss,
            mp,
            run_id,
            pcap_ofo=po if len(po) else None,
            title=f"{g}: {run_id}",
            kernel_ofo=ko if len(ko) else None,
        )
        name = "ts-" + run_id.replace("/", "_")
        figs.append(ctx.figure(fig, name, f"{g}: {run_id}"))
    return render(_TIMESERIES, metric=metric or "", figs=join(figs))


def section(ctx: Context) -> Markup:
    x_col, hue = matrix_axes(ctx.runs, ctx.by)
    parts: list[Markup | None] = [_metric_figures(ctx, m, x_col, hue) for m in ctx.fmetrics]
    if any(c.startswith("path") and c.endswith("_share") for c in ctx.runs.columns):
        fig = figures.path_share(ctx.runs, by=ctx.by, order=ctx.order)
        share = ctx.figure(fig, "path-share", "share of the data bytes per path")
        parts.append(render("<h3>Path share</h3><div class='figs'>{{ f }}</div>", f=share))
    parts.append(_timeseries(ctx))
    return render("<h2 id='figures'>Figures</h2>{{ parts }}", parts=join(parts))
