"""Every run that did not end ok (failed, stalled, timeout, ...), every attempt,
with its reason."""

from __future__ import annotations

from ..html import Markup, render, span, table
from .context import Context

_SECTION = """\
<h2 id='failed'>Runs not ok (failed, stalled, timeout, ...)</h2>\
{% if t is none %}<p class='good'>none: every run finished ok.</p>{% else %}{{ t }}{% endif %}"""


def section(ctx: Context) -> Markup:
    bad = ctx.all_runs[ctx.all_runs["status"] != "ok"]
    if not len(bad):
        return render(_SECTION, t=None)
    rows = [
        [
            r["run_id"],
            r["attempt"],
            span("bad", r["status"]),
            r.get("reason") or r.get("result_error") or "",
        ]
        for _, r in bad.iterrows()
    ]
    return render(_SECTION, t=table(["run", "attempt", "status", "reason"], rows, left=4))
