"""Shared-bottleneck detection (runs with ``traces/sbd-scores.csv``): the share of
runs right over time, and per group the run metrics (docs/congestion-control.md)."""

from __future__ import annotations

import pandas as pd

from .. import figures, stats
from ..html import Markup, render, table
from .context import Context
from .parts import left_out, value, with_n

# SBD's per-run metrics next to the accuracy (docs/congestion-control.md, "SBD")
SBD_METRICS = (
    "sbd_accuracy_shared",
    "sbd_accuracy_nonshared",
    "sbd_bottlenecked",
    "sbd_first_correct_s",
    "sbd_transition_delay_s",
)

_SECTION = """\
<h2 id='sbd'>Shared-bottleneck detection</h2><p class='muted'>The main connection's SBD \
decisions judged against the truth (<code>traces/sbd-scores.csv</code>): a decision is right \
when it groups every pair of subflows as the truth says. Shaded: time bins where the truth was \
&ldquo;shared&rdquo; in most decisions. Ok runs only; the table's means are over runs (n where \
fewer runs have a value).</p><div class='figs'>{{ fig }}</div>{{ t }}"""


def _row(g, sub: pd.DataFrame, left: str) -> list:
    acc = stats.describe(sub.get("sbd_accuracy", []))
    mean = value("sbd_accuracy", acc.mean)
    ci = f"[{value('sbd_accuracy', acc.ci_low)}, {value('sbd_accuracy', acc.ci_high)}]"
    cells = [g, str(len(sub)), with_n(f"{mean} {ci}", acc.n, len(sub)) if acc.n else "-"]
    for m in SBD_METRICS:
        v = pd.to_numeric(sub.get(m, pd.Series(dtype=float)), errors="coerce").dropna()
        cells.append(with_n(value(m, float(v.mean())), len(v), len(sub)) if len(v) else "-")
    cells.append(left_out(left))
    return cells


def section(ctx: Context) -> Markup | None:
    scores = ctx.table("sbd_scores")
    if not len(scores):
        return None
    runs, by = ctx.runs, ctx.by
    scores = scores[scores["run_id"].isin(runs["run_id"])]
    if not len(scores):
        return None
    scored = runs.loc[runs["run_id"].isin(scores["run_id"]), by]
    groups = [g for g in ctx.order if scored.eq(g).any()]
    ok_scores = scores.merge(ctx.ok[["run_id", by]], on="run_id")
    fig = ctx.figure(
        figures.sbd_accuracy(ok_scores, groups, by=by), "sbd-accuracy", "SBD accuracy over time"
    )
    rows = [_row(g, ctx.ok[ctx.ok[by] == g], ctx.notok.get(g, "")) for g in groups]
    headers = [by, "n (ok runs)", "sbd_accuracy: mean [95 % CI]", *SBD_METRICS, "not ok, left out"]
    return render(_SECTION, fig=fig, t=table(headers, rows))
