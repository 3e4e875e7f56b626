"""The headline figure: the experiment's headline metric per variant, one box plot.

Right below the verdicts, as a paper puts its main result figure first: the
first figure metric (the workload's headline metric, ``units.headline_metrics``,
unless ``--metric`` names others), every ok run a dot on its variant's box."""

from __future__ import annotations

from .. import figures
from ..html import Markup, render
from .context import Context

_SECTION = """\
<h2 id='headline'>{{ metric }} per {{ by }}</h2><p class='muted'>The headline metric: \
a box per {{ by }} (median, quartiles, whiskers at 1.5 IQR), each ok run a dot. \
Summary statistics and every other metric below.</p><div class='figs'>{{ fig }}</div>"""


def section(ctx: Context) -> Markup | None:
    if not ctx.fmetrics:
        return None
    m = ctx.fmetrics[0]
    fig = ctx.figure(
        figures.box(ctx.runs, m, by=ctx.by, order=ctx.order), f"headline-{m}", f"box: {m}"
    )
    return render(_SECTION, metric=m, by=ctx.by, fig=fig)
