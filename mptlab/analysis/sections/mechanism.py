"""The scheduler's mechanism in bulk runs (issue 39): how long the MPTCP send window
blocked and on which path's data, what the opportunistic re-sends answered, and
BLEST's lambda, per group (mean and 95 % CI); the counters are the scheduler
module's (docs/schedulers.md, "Mechanism counters")."""

from __future__ import annotations

import re

import pandas as pd

from .. import stats
from ..html import Markup, render, table
from .context import Context
from .parts import value, with_n

MECHANISM_METRICS = (
    "sndwnd_blocked_share",
    "sndwnd_blocked_share_path{n}",
    "sndwnd_blocked_unheld_share",
    "or_resends_lost",
    "or_resends_queued",
    "rto_resends",
    "blest_lambda_mean",
    "blest_lambda_at_min_share",
    "blest_lambda_at_max_share",
    "blest_slow_skips",
    "blest_slow_sends",
)

_SECTION = """\
<h2 id='mechanism'>Scheduler mechanism (bulk runs)</h2><p class='muted'>From the scheduler \
module's counters (docs/schedulers.md, &ldquo;Mechanism counters&rdquo;). \
<code>sndwnd_blocked_share</code>: share of the time with more than a segment waiting to be sent \
during which data waited, a subflow had cwnd room and the MPTCP send window had none; per path: whose subflow held \
the oldest unacknowledged data. Re-sends: opportunistic ones while the blocking data's subflow \
was in loss recovery (<code>lost</code>) or not (<code>queued</code>), and MPTCP-level timeouts. \
BLEST's lambda: mean over that time and the share at each bound; its decisions on the slow \
subflow (scheduler calls). Ok bulk runs; mean [95 % CI]; &ldquo;-&rdquo;: the scheduler keeps \
no such counter.</p>{{ t }}"""


def _columns(ok: pd.DataFrame) -> list[str]:
    """MECHANISM_METRICS present in ``ok`` with a value, families expanded in path order."""
    out = []
    for name in MECHANISM_METRICS:
        if "{" in name:
            pattern = re.compile(re.escape(name).replace(r"\{n\}", r"(\d+)") + "$")
            found = sorted(
                (c for c in ok.columns if pattern.match(c)),
                key=lambda c: int(pattern.match(c).group(1)),  # type: ignore[union-attr]
            )
        else:
            found = [name] if name in ok.columns else []
        out += [c for c in found if pd.to_numeric(ok[c], errors="coerce").notna().any()]
    return out


def _cell(metric: str, values: pd.Series, of: int) -> Markup | str:
    s = stats.describe(pd.to_numeric(values, errors="coerce"))
    if not s.n:
        return "-"
    text = f"{value(metric, s.mean)} [{value(metric, s.ci_low)}, {value(metric, s.ci_high)}]"
    return with_n(text, s.n, of)


def section(ctx: Context) -> Markup | None:
    ok = ctx.ok
    if "workload" in ok.columns:
        ok = ok[ok["workload"] == "bulk"]
    cols = _columns(ok)
    if not len(ok) or not cols:
        return None
    groups = [g for g in ctx.order if ok[ctx.by].eq(g).any()]
    rows = []
    for metric in cols:
        cells: list = [metric]
        for g in groups:
            sub = ok.loc[ok[ctx.by] == g, metric]
            cells.append(_cell(metric, sub, len(sub)))
        rows.append(cells)
    headers = ["metric", *[str(g) for g in groups]]
    return render(_SECTION, t=table(headers, rows))
