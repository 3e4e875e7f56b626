"""Key metrics per group (n, mean, median, sd, 95 % CI), every metric folded below.

Values in the metric's unit at a human scale (``units.human``): 8.8 MB, not
8.785e+06.  Host-cost metrics are run health's, not results."""

from __future__ import annotations

from .. import stats
from ..html import Markup, render
from .context import Context
from .parts import bias_warning, summary_table

_SECTION = """\
<h2 id='summary'>Key metrics</h2>{{ bias }}\
{% if key is not none %}{{ key }}{% else %}<p class='muted'>no key metric has values in the \
ok runs.</p>{% endif %}\
<details><summary>All {{ n }} metrics (Summary statistics)</summary>{{ everything }}</details>"""


def section(ctx: Context) -> Markup:
    metrics = [m for m in stats.metric_columns(ctx.ok) if m not in ctx.health]
    summ = stats.summarize(ctx.runs, metrics, by=ctx.by)
    key = summ[summ["metric"].isin(ctx.kmetrics)]
    if len(key):
        rank = {m: i for i, m in enumerate(ctx.kmetrics)}
        key = key.assign(_k=key["metric"].map(rank)).sort_values("_k", kind="stable")
        key = key.drop(columns="_k")
    return render(
        _SECTION,
        bias=bias_warning(ctx.runs, ctx.notok),
        key=summary_table(key, ctx.by, ctx.notok) if len(key) else None,
        n=summ["metric"].nunique(),
        everything=summary_table(summ, ctx.by, ctx.notok),
    )
