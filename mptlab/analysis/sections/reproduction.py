"""The paper's claims (each experiment's ``expect:``) against these runs: the verdicts.

The report's first section: what a reader of a reproduction wants to know
before any table.  ``claims_table`` and ``verdict_pills`` are also the
reproduction page's (``mptlab reproduce --all``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import reproduce
from ..html import Markup, join, render, span, table
from .context import Context
from .parts import left_out

VERDICT_CLASS = {
    "reproduced": "good",
    "direction only": "warn",
    "constant": "muted",
    "opposite": "bad",
    "no effect": "bad",
    "different": "bad",
    "inconclusive": "muted",
    "no ok run": "bad",
    "not run": "muted",
}


def verdict_pills(results: list[reproduce.ClaimResult]) -> Markup:
    """Claims per verdict, as coloured pills."""
    return render(
        "{% for v, n in counts %}{% if not loop.first %} {% endif %}"
        "<span class='pill {{ cls[v] }}'>{{ v }} {{ n }}</span>{% endfor %}",
        counts=list(reproduce.counts(results).items()),
        cls=VERDICT_CLASS,
    )


def quick_warning(quick: list[str]) -> Markup:
    """Campaigns of ``mptlab run --quick``: said in red, they are not the paper's setup."""
    return render(
        "{% if quick %}<p class='bad'>{{ quick|join(', ') }}: --quick runs (shortened "
        "workload, no warm-up), not the paper's setup.</p>{% endif %}",
        quick=quick,
    )


def left_out_words(side: reproduce.Side) -> str:
    """``"1 of 3 runs not ok, left out (1 stalled)"``, or "" when every run of the
    variant ended ok: the count next to the statistics, never dropped silently."""
    if not side.not_ok:
        return ""
    # side.not_ok is rundir.breakdown's "2 failed, 1 stalled": the counts lead each part
    k = sum(int(part.split(" ", 1)[0]) for part in side.not_ok.split(", "))
    return f"{k} of {side.runs} runs not ok, left out ({side.not_ok})"


def _ours(side: reproduce.Side, paper_value, scale) -> Markup:
    level = reproduce.level_text(side, paper_value, scale)
    return render(
        "<b>{{ name }}</b><br>{{ text }}"
        "{% if level %} <span class='muted'>({{ level }} paper)</span>{% endif %}",
        name=side.variant or side.entry,
        text=reproduce.ours_text(side),
        level=level,
    )


def _left_out_cell(r: reproduce.ClaimResult) -> Markup:
    sides = [s for s in (r.subject, r.baseline) if s.variant]
    left = [
        render("{{ v }}: {{ w }}", v=s.variant, w=left_out(left_out_words(s)))
        for s in sides
        if s.not_ok
    ]
    if not left and sides:
        left = [Markup("none")]
    left += [span("muted", f"{s.variant}: {s.starved} starved") for s in sides if s.starved]
    left += [
        span("muted", f"{s.variant}: {s.late_starts} with a SYN back-off")
        for s in sides
        if s.late_starts
    ]
    return join(left, "<br>") if left else Markup("-")


def _claim_row(r: reproduce.ClaimResult) -> list:
    cl = r.claim
    vals = cl.paper_values() or (None, None)
    ours = [
        _ours(side, pv, cl.scale) for side, pv in zip((r.subject, r.baseline), vals, strict=True)
    ]
    return [
        render(
            "<span class='{{ cls }}'><b>{{ r.verdict }}</b></span>"
            "{% if r.why %}<br><span class='muted'>{{ r.why }}</span>{% endif %}",
            cls=VERDICT_CLASS[r.verdict],
            r=r,
        ),
        render(
            "{{ cl.claim }}<br><span class='muted'>{{ src }}</span>"
            "{% if cl.note %}<br><span class='muted'>{{ cl.note }}</span>{% endif %}",
            cl=cl,
            src=cl.source + (" (derived)" if cl.derived else ""),
        ),
        render(
            "{{ kind }}{% if cell %}<br><span class='muted'>judged: {{ cell }}</span>{% endif %}",
            kind=r.kind,
            cell=r.cell,
        ),
        cl.metric,
        reproduce.paper_text(cl),
        ours[0],
        ours[1],
        reproduce.diff_text(r),
        _left_out_cell(r),
    ]


def claims_table(results: list[reproduce.ClaimResult]) -> Markup:
    """One row per claim: verdict (and why), claim and source, its kind (and the
    cell judged, over cells), metric, the paper's values, ours per variant (mean [CI] n, level against the paper's), our
    difference, and the runs left out.  The report and ``reproduce --all``'s
    page show the same table."""
    return table(
        [
            "verdict",
            "claim (source)",
            "kind",
            "metric",
            "paper: subject vs baseline",
            "ours: subject, mean [95 % CI] n",
            "ours: baseline",
            "ours: difference [95 % CI]",
            "not ok, left out (starved: kept)",
        ],
        [_claim_row(r) for r in results],
        left=5,
    )


_EXPERIMENT = """\
<h3>{{ exp.experiment }}</h3><p>{{ exp.source }}</p>{{ quick }}<p>{{ pills }}</p>{{ claims }}
{%- if notes %}<p><b>What differs from the paper's setup</b> (the experiment's notes): \
{{ notes }}</p>{% endif %}"""

# the verdict legend only where there are verdicts: with no claims at all the section
# is one line, not a paragraph of legend above the headline figure
_SECTION = """\
<h2 id='reproduction'>Reproduction of the paper</h2>{{ experiments }}\
<p class='muted'>{% if experiments %}Verdicts: {{ legend }} {% endif %}Claims come from each \
experiment's <code>expect:</code> (experiments.yaml or <code>--file</code>); \
<code>mptlab reproduce</code> prints the same.</p>\
{%- if quiet %}<p class='muted'>No claims: {{ quiet|join('; ') }}.</p>{% endif %}"""


def reproduction(all_runs: pd.DataFrame, claims_file: Path | None) -> Markup:
    """Per experiment of the runs with claims: its verdicts and claims table."""
    exps = sorted({str(e) for e in all_runs["experiment"].dropna()}) if len(all_runs) else []
    parts, quiet = [], []
    for exp in reproduce.expectations(exps, claims_file):
        if exp.error or not exp.claims:
            quiet.append(f"{exp.experiment}: {exp.error or 'no expect: list'}")
            continue
        mine = reproduce.experiment_runs(all_runs, exp.experiment)
        results = reproduce.evaluate(exp.claims, mine)
        parts.append(
            render(
                _EXPERIMENT,
                exp=exp,
                quick=quick_warning(reproduce.quick_campaigns(mine)),
                pills=verdict_pills(results),
                claims=claims_table(results),
                notes=" ".join(exp.notes.split()) if exp.notes else "",
            )
        )
    return render(_SECTION, experiments=join(parts), legend=reproduce.VERDICT_LEGEND, quiet=quiet)


def section(ctx: Context) -> Markup:
    # the claims name variants as each campaign does: the raw runs, every attempt
    return reproduction(ctx.raw_runs, ctx.claims_file)
