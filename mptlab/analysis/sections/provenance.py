"""Provenance: each campaign's campaign.json, kernel and invocations; per group
its spec and the guest's tool versions."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from ...rundir import RunDir, RunDirError
from ..html import Markup, join, render, table
from .context import Context


def _read(read) -> dict | None:
    try:
        return read()
    except RunDirError:
        return None


_CAMPAIGN = """\
<h3>{{ name }}</h3>{{ t }}<details><summary>campaign.json</summary><pre>{{ camp }}</pre></details>"""


def _campaign(name: str, camp: dict) -> Markup:
    k = camp.get("kernel") or {}
    started = ", ".join(
        dt.datetime.fromtimestamp(i.get("started", 0), dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        + f" (jobs {i.get('jobs')})"
        for i in camp.get("invocations") or []
    )
    kernel = (
        f"{k.get('kernel_release', '?')} ({k.get('source_package', '')} "
        f"{k.get('source_version', '')}, {k.get('arch', '')}), key {k.get('kernel_key', '?')}, "
        f"built {k.get('built_at', '?')}"
    )
    rows: list[list] = [
        ["campaign", name],
        ["experiment", ", ".join(camp.get("experiment", []))],
        ["runs", camp.get("runs")],
        ["order seed", camp.get("order_seed")],
        ["git commit", render("<code>{{ c }}</code>", c=camp.get("git_commit") or "")],
        ["kernel", kernel],
        ["kernel patches", ", ".join(k.get("patches", []))],
        ["modules", k.get("modules_dir")],
        ["invocations", started],
    ]
    # None prints as "" (the old esc(None)), not "None"
    rows = [[a, "" if b is None else b] for a, b in rows]
    return render(
        _CAMPAIGN, name=name, t=table(["", ""], rows, left=2), camp=json.dumps(camp, indent=1)
    )


_GROUP = """\
<details><summary><b>{{ g }}</b> &middot; {{ rd.name }}</summary>\
{% if spec %}<pre>{{ spec }}</pre>{% endif %}{% if tools is not none %}{{ tools }}\
<pre>{{ prov }}</pre>{% endif %}</details>"""


def _group(g, rd: Path) -> Markup:
    spec = _read(RunDir(rd).spec)
    prov = _read(RunDir(rd).provenance)
    shown = (
        json.dumps(
            {
                k: spec.get(k)
                for k in ("experiment", "variant", "variant_keys", "config", "profiles")
            },
            indent=1,
            default=str,
        )
        if spec
        else ""
    )
    tools = (
        table(["tool", "version"], list((prov.get("tools") or {}).items()), left=2)
        if prov
        else None
    )
    rest = json.dumps({k: v for k, v in prov.items() if k != "tools"}, indent=1) if prov else ""
    return render(_GROUP, g=g, rd=rd, spec=shown, tools=tools, prov=rest)


_SECTION = """\
<h2 id='provenance'>Provenance</h2>{{ campaigns }}\
{% if commits|length > 1 %}<p class='bad'>runs come from {{ commits|length }} different commits: \
{{ commits|join(', ') }}</p>{% endif %}<h3>Per variant: configuration and guest</h3>{{ groups }}"""


def section(ctx: Context) -> Markup:
    runs, by = ctx.runs, ctx.by
    commits = [str(c) for c in runs["git_commit"].dropna().unique()] if "git_commit" in runs else []
    groups = []
    for g in ctx.order:
        sub = runs[runs[by] == g]
        okr = sub[sub["status"] == "ok"]
        groups.append(_group(g, Path((okr if len(okr) else sub)["run_dir"].iloc[0])))
    return render(
        _SECTION,
        campaigns=join(_campaign(name, camp) for name, camp in ctx.campaigns),
        commits=commits,
        groups=join(groups),
    )
