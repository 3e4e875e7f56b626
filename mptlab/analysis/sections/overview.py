"""Runs per group and their status (ok, failed, stalled, ...)."""

from __future__ import annotations

from ..html import Markup, join, render, table
from .context import Context


def section(ctx: Context) -> Markup:
    runs, by = ctx.runs, ctx.by
    rows = []
    for g in ctx.order:
        sub = runs[runs[by] == g]
        pills = join(
            (
                render("<span class='pill'>{{ s }} {{ n }}</span>", s=s, n=n)
                for s, n in sub["status"].value_counts().items()
            ),
            " ",
        )
        vk = (
            sub["variant_keys"].dropna().iloc[0]
            if "variant_keys" in sub and sub["variant_keys"].notna().any()
            else ""
        )
        rows.append([g, vk, str(len(sub)), str(int((sub["status"] == "ok").sum())), pills])
    return render(
        "<h2 id='overview'>Overview</h2>{{ t }}",
        t=table([by, "variant keys", "runs", "ok", "status"], rows, left=2),
    )
