"""A self-contained HTML report of a campaign (or of every campaign below a dir).

    mptlab report RESULTS_DIR [--out FILE] [--metric M ...] [--reference VARIANT]

The report reads like a paper, top down (``sections.SECTIONS``, one small
function each): the reproduction of the paper first (each experiment's
``expect:`` claims and their verdicts, ``mptlab.analysis.reproduce``), the
headline figure (the workload's headline metric per variant, a box plot),
an overview (runs per variant and status), key metrics (the workload's
headline ones, MPTCP's retransmissions and OFO queue, path shares; every
metric folded below) per variant (n, mean, median, sd, 95 % bootstrap CI,
and the runs left out because they did not end ok), each variant against a
reference or its matrix partner (relative difference with CI, Mann-Whitney
U p-value), repetitions needed for a given effect, figures (PNG embedded;
PDFs written next to the report), the instruments' sections (FEC ratio,
shared-bottleneck detection), then the long tables: run health (statuses,
host CPU and wait, starved runs), packet traces against the kernel
counters, the kernel's drop/prune/OFO/retransmission counters per variant
(nstat), every run that is not ok with its reason, and provenance
(campaign.json, each variant's spec, the guests' tool versions and module
hashes).  Figures and tables show n everywhere; values are in the metric's
unit at a human scale (``units.human``: 8.8 MB, 250 ms).

``build`` prepares one ``sections.Context`` and renders the sections into
one page through the templating layer (``html``, Jinja2 with autoescaping).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd

from ..rundir import CampaignDir, RunDirError, breakdown
from . import ingest, stats
from .html import Markup, render
from .sections import SECTIONS, Context, render_sections
from .sections.nstat import NSTAT_PATTERNS
from .sections.parts import fmt, pct
from .sections.reproduction import (
    VERDICT_CLASS,
    claims_table,
    left_out_words,
    quick_warning,
    verdict_pills,
)
from .sections.sbd import SBD_METRICS
from .units import declare_user_workloads, headline_metrics

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;
 color:#1b1f24;font-size:14px;line-height:1.4;padding:0 16px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;border-bottom:2px solid #d0d7de;padding-bottom:4px;
 margin-top:32px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:12.5px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#eef2f6}td.l,th.l{text-align:left}tr.first td{border-top:2px solid #8c959f}
.muted{color:#57606a}.bad{color:#b42318;font-weight:600}.good{color:#1a7f37}.warn{color:#9a6700;font-weight:600}
.figs{display:flex;flex-wrap:wrap;gap:12px}.fig{border:1px solid #d0d7de;padding:6px;background:#fff}
.fig img{width:540px;display:block}.fig .cap{font-size:12px;color:#57606a;margin-top:4px}
pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;max-height:420px}
details{margin:4px 0 8px}summary{cursor:pointer;color:#0969da}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;background:#eef2f6;margin-right:4px}
"""


# MPTCP's own, whatever the workload: retransmissions, reinjections, the OFO
# queue's peak and size, the receiver's allocated memory, how long data
# waited in the OFO queue
MPTCP_METRICS = (
    "k_tcp_retrans",
    "k_reinjected_share",
    "k_ofo_bytes_max",
    "k_ofo_bytes_p95",
    "k_rmem_bytes_p95",
    "pcap_hol_delay_mean_ms",
    "pcap_hol_delay_p95_ms",
)
# TCP-dFEC's, in runs with kernel.fec (absent, not 0, without FEC: docs/fec.md)
FEC_METRICS = (
    "fec_overhead",
    "fec_ratio_mean",
    "fec_sent",
    "fec_recovered",
    "fec_failed",
    "fec_residual",
)
# what a run cost the host: emulator health, not a result ("Run health")
HEALTH_METRICS = ("host_cpu_s", "host_cpu_wait_s", "host_cpu_wait_share")


def _has_values(ok: pd.DataFrame, col: str) -> bool:
    return col in ok and pd.to_numeric(ok[col], errors="coerce").notna().any()


def key_metrics(runs: pd.DataFrame, wanted: list[str] | None = None) -> list[str]:
    """The workload's headline metrics (``units.headline_metrics``), MPTCP's
    (retransmissions, OFO) and the path shares, those with values; ``wanted``
    overrides."""
    if wanted:
        return [m for m in wanted if m in runs.columns]
    ok = stats.ok_runs(runs)
    workloads = [w for w in dict.fromkeys(runs.get("workload", pd.Series(dtype=object)).dropna())]
    primary = [m for w in workloads for m in headline_metrics(str(w))]
    primary = [m for m in dict.fromkeys(primary) if _has_values(ok, m)]
    if not primary:  # a workload mptlab does not know: its varying metrics
        cols = stats.metric_columns(ok)
        skip_words = ("bytes_received", "bytes_sent", "analysis_window", "total")
        primary = [
            c
            for c in cols
            if not c.startswith(("k_", "path", "pcap_", "bg_", "host_"))
            and not any(w in c for w in skip_words)
            and pd.to_numeric(ok[c], errors="coerce").nunique() > 1
        ][:3]
    shares = sorted(
        (c for c in runs.columns if c.startswith("path") and c.endswith("_share")),
        key=lambda c: (len(c), c),
    )
    extra = [c for c in (*FEC_METRICS, *MPTCP_METRICS, *shares) if _has_values(ok, c)]
    return primary + extra


def figure_metrics(runs: pd.DataFrame, wanted: list[str] | None = None) -> list[str]:
    """The key metrics worth a figure (at most 6; path shares have their own)."""
    if wanted:
        return [m for m in wanted if m in runs.columns]
    ok = stats.ok_runs(runs)
    out = [
        m
        for m in key_metrics(runs)
        if not (m.startswith("path") and m.endswith("_share"))
        and pd.to_numeric(ok[m], errors="coerce").nunique() > 1
    ]
    return out[:6]


def not_ok_by_group(runs: pd.DataFrame, by: str) -> dict:
    """Per group: its runs that did not end ok, in words ("1 stalled, 2 failed")."""
    return {g: breakdown(sub["status"]) for g, sub in runs.groupby(by, sort=False)}


def _reference(runs: pd.DataFrame, by: str, reference: str | None) -> str | None:
    groups = list(dict.fromkeys(stats.ok_runs(runs)[by]))
    if reference is not None:
        if reference not in groups:
            raise ValueError(
                f"--reference {reference!r} is not a {by} with ok runs; "
                f"allowed: {', '.join(map(str, groups))}"
            )
        return reference
    return groups[0] if groups else None


def _defined_variants(campaigns: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """(variant as the report names it, {key: value} in the matrix's order), in the
    order the experiments define them (campaign.json ``variants``; campaigns
    written before it existed give none)."""
    out = []
    for _name, camp in campaigns:
        for v in camp.get("variants") or []:
            name = v["variant"]
            if len(campaigns) > 1 or len(camp.get("experiment") or []) > 1:
                name = f"{v['experiment']}:{name}"
            out.append((name, dict(v.get("keys") or {})))
    return out


def _pairing(
    campaigns: list[tuple[str, dict]], groups: list
) -> tuple[str, object, dict[str, str]] | None:
    """Pairs along the first matrix key: (key, its first value, {variant: the
    variant with that value and the same other keys}) when the matrix has two
    keys or more, e.g. FEC mode x path pair -> each ``mode=dynamic,paths=X``
    against ``mode=off,paths=X``; None otherwise (one reference for all)."""
    defined = [(v, k) for v, k in _defined_variants(campaigns) if v in groups]
    if not defined or len(defined[0][1]) < 2:
        return None
    axes = list(defined[0][1])
    axis = axes[0]
    base = defined[0][1][axis]

    def rest(keys: dict) -> str:
        return json.dumps({k: keys[k] for k in axes[1:]}, sort_keys=True, default=str)

    grid = [(v, k) for v, k in defined if list(k) == axes]
    bases = {rest(k): v for v, k in grid if k[axis] == base}
    pairs = {v: bases[rest(k)] for v, k in grid if k[axis] != base and rest(k) in bases}
    return (axis, base, pairs) if pairs else None


def _variant_order(runs: pd.DataFrame, campaigns: list[tuple[str, dict]], by: str) -> list:
    """Groups in the order the experiment defines them (campaign.json ``variants``,
    else the order runs first appear in the run order), else sorted."""
    seen = list(dict.fromkeys(runs[by])) if len(runs) else []
    if by != "variant":
        return seen
    order = [v for v, _ in _defined_variants(campaigns)]
    for _name, camp in campaigns:
        for run_id in camp.get("order", []):
            v = run_id.rsplit("/", 1)[0]
            if len(campaigns) > 1 and camp.get("experiment"):
                v = f"{camp['experiment'][0]}:{v}"
            if v not in order:
                order.append(v)
    # matrix variants first (as the experiment lists them), then named ones
    ranked = sorted(seen, key=lambda v: (order.index(v) if v in order else len(order), str(v)))
    mx = [v for v in ranked if "=" in str(v)]
    return mx + [v for v in ranked if v not in mx]


def _campaigns(root: Path) -> list[tuple[str, dict]]:
    """(campaign dir name, its campaign.json or {} when unreadable) below ``root``."""
    out = []
    for camp in ingest.campaign_dirs(root):
        try:
            info = CampaignDir(camp).info()
        except RunDirError:
            info = None
        out.append((camp.name, info or {}))
    return out


def _current_runs(root: Path, by: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(runs of the current attempt, every attempt, every attempt with the variants
    as each campaign names them); an error that says what is missing."""
    raw_runs = ingest.load_table(root, "runs")
    if not len(raw_runs):
        raise ValueError(
            f"{root}: no run dirs found (expected runs/<variant>/rep-NNN below a campaign dir)"
        )
    all_runs = stats.qualify_variants(raw_runs)
    runs = all_runs[all_runs["attempt"].isin(["current", "incomplete"])].reset_index(drop=True)
    if by not in runs:
        raise ValueError(
            f"--by {by!r} is not a column of the runs table; e.g. variant, scheduler, "
            f"{', '.join(c for c in runs.columns if c.startswith('kernel_'))}"
        )
    return runs, all_runs, raw_runs


def context(
    root: Path,
    out: Path,
    metrics: list[str] | None = None,
    reference: str | None = None,
    by: str = "variant",
    max_timeseries: int = 8,
    claims_file: Path | None = None,
) -> Context:
    """What the sections read, derived once from the ingested tables of ``root``."""
    declare_user_workloads(root)  # their metrics' units and headlines
    runs, all_runs, raw_runs = _current_runs(root, by)
    campaigns = _campaigns(root)
    order = _variant_order(runs, campaigns, by)
    rank = runs[by].map({v: i for i, v in enumerate(order)})
    runs = runs.assign(_o=rank).sort_values(["_o", "repetition"]).drop(columns="_o")
    runs = runs.reset_index(drop=True)
    ok = stats.ok_runs(runs)
    if metrics:
        missing = [m for m in metrics if m not in runs.columns]
        if missing:
            raise ValueError(
                f"--metric {', '.join(missing)}: not a column of the runs table; metrics: "
                f"{', '.join(stats.metric_columns(ok))}"
            )
    return Context(
        root=root,
        out=out,
        runs=runs,
        all_runs=all_runs,
        raw_runs=raw_runs,
        ok=ok,
        by=by,
        order=order,
        campaigns=campaigns,
        kmetrics=key_metrics(runs, metrics),
        fmetrics=figure_metrics(runs, metrics),
        health=[m for m in HEALTH_METRICS if m in runs.columns],
        notok=not_ok_by_group(runs, by),
        ref=_reference(runs, by, reference),
        pairing=_pairing(campaigns, order) if by == "variant" and reference is None else None,
        claims_file=claims_file,
        max_timeseries=max_timeseries,
    )


_PAGE = """\
<!doctype html><html><head><meta charset='utf-8'><title>mptlab report: {{ root.name }}</title>\
<style>{{ css }}</style></head><body><h1>mptlab report: {{ title }}</h1>\
<p class='muted'>{{ where }} &middot; generated {{ stamp }} &middot; {{ n }} runs, {{ n_ok }} ok, \
{{ n - n_ok }} not ok{% if not_ok %} ({{ not_ok }}){% endif %}\
{% if earlier %}, {{ earlier }} earlier attempts{% endif %}</p>\
<p class='muted'>Statistics use the ok runs of each run's current attempt; n is the number of \
those runs with a value. CIs: 95 % percentile bootstrap of the mean (10000 resamples, seed 0). \
p: two-sided Mann-Whitney U.</p>{{ sections }}</body></html>"""


def page(ctx: Context, sections: tuple = SECTIONS) -> Markup:
    """The whole page: title, what the statistics are, and the rendered sections."""
    runs = ctx.runs
    exps = sorted({e for e in runs["experiment"].dropna()})
    return render(
        _PAGE,
        root=ctx.root,
        css=Markup(CSS),
        title=", ".join(exps) or ctx.root.name,
        where=ctx.root.resolve(),
        stamp=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        n=len(runs),
        n_ok=len(ctx.ok),
        not_ok=breakdown(runs["status"]),
        earlier=len(ctx.all_runs) - len(runs),
        sections=Markup("").join(render_sections(ctx, sections)),
    )


def build(
    root: Path,
    out: Path | None = None,
    metrics: list[str] | None = None,
    reference: str | None = None,
    by: str = "variant",
    do_ingest: bool = True,
    pcap: bool = True,
    max_timeseries: int = 8,
    claims_file: Path | None = None,
) -> Path:
    """Write the report; returns the path of the HTML file."""
    root = Path(root)
    if do_ingest:
        ingest.ingest(root, pcap=pcap)
    out = Path(out) if out else ingest.store_dir(root) / "report" / "report.html"
    ctx = context(root, out, metrics, reference, by, max_timeseries, claims_file)
    text = page(ctx)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


def unique_values(df: pd.DataFrame, col: str) -> list:
    return list(dict.fromkeys(df[col].dropna())) if col in df else []


__all__ = [
    "CSS",
    "NSTAT_PATTERNS",
    "SBD_METRICS",
    "VERDICT_CLASS",
    "build",
    "claims_table",
    "context",
    "figure_metrics",
    "fmt",
    "key_metrics",
    "left_out_words",
    "page",
    "pct",
    "quick_warning",
    "verdict_pills",
]
