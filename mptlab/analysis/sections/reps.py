"""Repetitions per variant needed to see a relative change of the headline metric."""

from __future__ import annotations

import math

import pandas as pd

from .. import stats
from ..html import Markup, render, table
from .context import Context

_SECTION = """\
<h3 id='reps'>Repetitions needed for {{ metric }}</h3><p class='muted'>Per variant, two-sided, \
alpha 0.05, power 0.8, from the pooled coefficient of variation {{ '%.3f'|format(cv) }} \
(n = {{ n }} runs in {{ groups }} groups).</p>{{ t }}"""


def section(ctx: Context) -> Markup | None:
    # shown with a comparison only: it sizes the next campaign for that comparison
    if not ctx.kmetrics or (ctx.pairing is None and ctx.ref is None):
        return None
    metric = ctx.kmetrics[0]
    cvs, ns = [], 0
    for _, sub in ctx.ok.groupby(ctx.by):
        v = pd.to_numeric(sub[metric], errors="coerce").dropna()
        if len(v) >= 2 and v.mean() != 0:
            cvs.append((float(v.std(ddof=1)) / abs(float(v.mean())), len(v)))
            ns += len(v)
    if not cvs:
        return None
    # pooled coefficient of variation (weighted by degrees of freedom)
    cv = math.sqrt(sum(c * c * (n - 1) for c, n in cvs) / sum(n - 1 for _, n in cvs))
    rows = []
    for eff in (0.02, 0.05, 0.10, 0.20):
        if cv == 0:
            rows.append([f"{eff:.0%}", "1", "1"])
            continue
        r = stats.reps_needed(eff, cv)
        rows.append([f"{eff:.0%}", str(r["n_t_test"]), str(r["n_mann_whitney"])])
    t = table(["relative change", "n (t-test)", "n (Mann-Whitney)"], rows)
    return render(_SECTION, metric=metric, cv=cv, n=ns, groups=len(cvs), t=t)
