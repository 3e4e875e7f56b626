"""Each group against a reference (``--reference``, else the first), or, when the
experiment's matrix has two keys or more, each variant against its partner that
differs in the first key only (same other keys)."""

from __future__ import annotations

from .. import stats
from ..html import Markup, render, table
from .context import Context
from .parts import comparison_cells

_PAIRED = """\
<h2 id='compare'>Along <code>{{ axis }}</code>: each variant against \
<code>{{ axis }}={{ base }}</code> at the same other settings</h2>\
<p class='muted'>The experiment's matrix has more than one key: a variant is compared with its \
partner that differs in the first key only (<code>--reference VARIANT</code> compares every \
variant with one instead).</p>{{ t }}"""

_REFERENCE = "<h2 id='compare'>Against the reference <code>{{ ref }}</code></h2>{{ t }}"


def _paired(ctx: Context) -> Markup:
    assert ctx.pairing is not None
    axis, base, pairs = ctx.pairing
    ok = ctx.ok
    rows = []
    for m in ctx.kmetrics:
        for v, partner in pairs.items():
            c = stats.compare(ok[ok["variant"] == partner][m], ok[ok["variant"] == v][m])
            cells = comparison_cells(m, v, partner, c.as_dict(), ctx.notok)
            rows.append([*cells[:2], partner, *cells[2:]])
    headers = [
        "metric",
        "variant",
        f"against ({axis}={base})",
        "n ref / n",
        "not ok, left out: ref / this",
        "mean ref",
        "mean",
        "rel. diff",
        "95 % CI",
        "p (MWU)",
    ]
    return render(_PAIRED, axis=axis, base=base, t=table(headers, rows, left=3))


def _against_reference(ctx: Context) -> Markup:
    by, ref = ctx.by, ctx.ref
    assert ref is not None
    rows = []
    for m in ctx.kmetrics:
        for _, r in stats.pairwise(ctx.runs, m, ref, by=by).iterrows():
            rows.append(comparison_cells(m, r[by], ref, r, ctx.notok))
    headers = [
        "metric",
        by,
        "n ref / n",
        "not ok, left out: ref / this",
        f"mean {ref}",
        "mean",
        "rel. diff",
        "95 % CI",
        "p (MWU)",
    ]
    return render(_REFERENCE, ref=ref, t=table(headers, rows, left=2))


def section(ctx: Context) -> Markup | None:
    if not ctx.kmetrics:
        return None
    if ctx.pairing is not None:
        return _paired(ctx)
    if ctx.ref is not None:
        return _against_reference(ctx)
    return None
