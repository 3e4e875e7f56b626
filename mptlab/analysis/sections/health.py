"""Run health: statuses, the host CPU the runs took and waited for, starved runs."""

from __future__ import annotations

import math

import pandas as pd

from ... import rundir
from ...rundir import breakdown
from .. import stats
from ..html import Markup, render, span, table
from .context import Context
from .parts import fmt, left_out, summary_table

_SECTION = """\
<h2 id='health'>Run health</h2><p class='muted'>What the runs cost the emulator host, not what \
they measured: <code>host_cpu_s</code> (CPU the guest used), <code>host_cpu_wait_s</code> (time \
it waited for a CPU), <code>host_cpu_wait_share</code> (wait / run time; above \
{{ '%.2f'|format(limit) }} a real-time guest was starved and its timings are suspect; a \
virtual-time guest's results do not depend on its wait).</p>{{ t }}{{ cost }}"""


def section(ctx: Context) -> Markup:
    runs, by = ctx.runs, ctx.by
    share = (
        pd.to_numeric(runs["host_cpu_wait_share"], errors="coerce")
        if "host_cpu_wait_share" in runs
        else pd.Series(math.nan, index=runs.index)
    )
    rows = []
    for g in ctx.order:
        sub = runs[runs[by] == g]
        starved = int(stats.starved(sub).sum())
        worst = share.loc[sub.index]
        rows.append(
            [
                g,
                str(len(sub)),
                str(int((sub["status"] == "ok").sum())),
                left_out(breakdown(sub["status"])),
                span("bad" if starved else "", starved),
                fmt(float(worst.max())) if worst.notna().any() else "-",
            ]
        )
    limit = rundir.STARVED_WAIT_SHARE
    headers = [by, "runs", "ok", "not ok", f"starved (wait share > {limit:.2f})", "max wait share"]
    cost = (
        summary_table(stats.summarize(runs, ctx.health, by=by), by, ctx.notok)
        if ctx.health
        else None
    )
    return render(_SECTION, limit=limit, t=table(headers, rows, left=1), cost=cost or "")
