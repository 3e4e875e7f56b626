"""Pieces several sections share: numbers in cells, the runs left out, the summary
and comparison tables."""

from __future__ import annotations

import json
import math

import pandas as pd

from .. import stats
from ..html import Markup, render, span, table
from ..units import human, unit_of


def fmt(x, digits: int = 4) -> str:
    """A number without a unit (p-values, wait shares): ``digits`` significant
    digits, e-notation only outside [1e-3, 1e6); "-" for None/NaN."""
    if x is None:
        return "-"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not math.isfinite(f):
        return "-"
    if f != 0 and (abs(f) >= 1e6 or abs(f) < 1e-3):
        return f"{f:.{digits - 1}e}"
    if f == int(f) and abs(f) < 1e6:
        return f"{int(f)}"
    return f"{f:.{digits}g}"


def pct(x) -> str:
    """A relative difference: ``+12.3 %``."""
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.1f} %"


def value(metric: str, x) -> str:
    """``x`` in ``metric``'s unit at a human scale (``units.human``)."""
    return human(x, unit_of(metric))


def left_out(words: str) -> Markup | str:
    """The runs of a group left out of its statistics, in red; "0" when none."""
    return span("bad", words) if words else "0"


def with_n(text: str, n: int, of: int) -> Markup:
    """``text`` and, when fewer than ``of`` runs have a value, ``(n=…)``."""
    return render(
        "{{ text }}{% if 0 < n < of %} <span class='muted'>(n={{ n }})</span>{% endif %}",
        text=text,
        n=n,
        of=of,
    )


_BIAS = (
    "{% if not n %}<p class='good'>every run ended ok: no run is left out of the "
    "statistics.</p>{% else %}<p class='bad'>{{ n }} runs did not end ok and are left out "
    "of every statistic (per variant in the column &ldquo;not ok, left out&rdquo;). If a "
    "variant's runs fail or stall because of the variant (a scheduler that deadlocks, a path "
    "it overloads), its numbers describe only its survivors and the comparison is biased in "
    "its favour.</p>{% endif %}"
)


def bias_warning(runs: pd.DataFrame, notok: dict) -> Markup:
    """Said once above the statistics: runs not ok are left out, which can flatter
    the variant that made them fail."""
    n = int((runs["status"] != "ok").sum()) if any(notok.values()) else 0
    return render(_BIAS, n=n)


def summary_table(summ: pd.DataFrame, by: str, notok: dict | None = None) -> Markup:
    """One row per metric and group of ``stats.summarize``: n, mean, median, sd and
    the CI of the mean in the metric's unit, and the group's runs left out."""
    notok = notok or {}
    rows, first = [], []
    for m, sub in summ.groupby("metric", sort=False):
        for k, (_, r) in enumerate(sub.iterrows()):
            first.append(k == 0)
            rows.append(
                [
                    render("<b>{{ m }}</b>", m=m) if k == 0 else "",
                    r[by],
                    str(r["n"]),
                    value(m, r["mean"]),
                    value(m, r["median"]),
                    value(m, r["std"]),
                    f"[{value(m, r['ci_low'])}, {value(m, r['ci_high'])}]",
                    left_out(notok.get(r[by], "")),
                ]
            )
    return table(
        ["metric", by, "n", "mean", "median", "sd", "95 % CI of the mean", "not ok, left out"],
        rows,
        left=2,
        row_class=lambda i: "first" if first[i] else "",
    )


def comparison_cells(metric: str, group, ref, r, notok: dict) -> list:
    """A row of a comparison table: ``r`` is a ``stats.compare`` result (a dict
    or a ``stats.pairwise`` row) of ``group`` against ``ref``."""
    sig = r["p_value"] < 0.05 if math.isfinite(r["p_value"]) else False
    return [
        metric,
        group,
        f"{r['n_a']} / {r['n_b']}",
        render(
            "{{ a }} / {{ b }}", a=left_out(notok.get(ref, "")), b=left_out(notok.get(group, ""))
        ),
        value(metric, r["mean_a"]),
        value(metric, r["mean_b"]),
        pct(r["rel_diff"]),
        f"[{pct(r['ci_low'])}, {pct(r['ci_high'])}]",
        span("bad" if sig else "", fmt(r["p_value"], 3)),
    ]


def matrix_axes(runs: pd.DataFrame, by: str) -> tuple[str, str | None]:
    """Bars like the papers' tables: with a matrix of two or more keys (every run has
    both), one group per value of the second key and one bar per value of the first
    (e.g. page set x scheduler); otherwise one bar per group."""
    if by != "variant" or "variant_keys" not in runs:
        return by, None
    keys = []
    for v in runs["variant_keys"].dropna().unique():
        for k in json.loads(v):
            col = "".join(c if c.isalnum() or c == "_" else "_" for c in k)
            if col not in keys:
                keys.append(col)
    dims = [k for k in keys if k in runs and runs[k].notna().all() and runs[k].nunique() > 1]
    if len(dims) >= 2:
        return dims[1], dims[0]
    return by, None


def representative(runs: pd.DataFrame, metric: str | None, by: str) -> list[tuple[str, str]]:
    """Per group, the ok run closest to the group's median of ``metric``."""
    ok = stats.ok_runs(runs)
    out = []
    for g, sub in ok.groupby(by, sort=False):
        if metric and metric in sub and pd.to_numeric(sub[metric], errors="coerce").notna().any():
            v = pd.to_numeric(sub[metric], errors="coerce")
            i = (v - v.median()).abs().idxmin()
        else:
            i = sub.index[0]
        out.append((g, sub.loc[i, "run_id"]))
    return out
