"""A self-contained HTML report of a campaign (or of every campaign below a dir).

    mptlab report RESULTS_DIR [--out FILE] [--metric M ...] [--reference VARIANT]

Sections, the science first: overview (runs per variant and status), key
metrics (the workload's primary ones, MPTCP's retransmissions and OFO
queue, path shares; every metric folded below) per variant (n, mean,
median, sd, 95 % bootstrap CI, and the runs left out because they did not
end ok), the reproduction of the paper (each experiment's ``expect:``
claims, ``mptlab.analysis.reproduce``), each variant against a reference
(relative difference with CI, Mann-Whitney U p-value), repetitions needed
for a given effect, figures (PNG embedded; PDFs written next to the
report), run health (statuses, host CPU and wait, starved runs), the
kernel's drop/prune/OFO/retransmission counters per variant (nstat), every
run that is not ok (failed, stalled, timeout, ...) with its reason, and
provenance (campaign.json, each variant's spec, the guests' tool versions
and module hashes).  Figures and tables show n everywhere.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import rundir
from ..rundir import CampaignDir, RunDir, RunDirError, breakdown
from . import figures, ingest, reproduce, stats

# kernel counters worth a look per variant: drops, pruning, out-of-order
# queueing, retransmissions, timeouts, MPTCP reinjections (name patterns)
NSTAT_PATTERNS = (
    "prune",
    "drop",
    "ofo",
    "retrans",
    "timeout",
    "reinject",
    "collapse",
    "overflow",
    "fec",  # TCP-dFEC: TCPFECSent, TCPFECRecovered, TCPFECFailed (docs/fec.md)
)

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


def _read(read) -> tuple[dict | None, str]:
    try:
        return read(), ""
    except RunDirError as exc:
        return None, str(exc)


def esc(x) -> str:
    return html.escape("" if x is None else str(x))


def fmt(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return esc(x)
    if not math.isfinite(f):
        return "-"
    if f != 0 and (abs(f) >= 1e6 or abs(f) < 1e-3):
        return f"{f:.{digits - 1}e}"
    if f == int(f) and abs(f) < 1e6:
        return f"{int(f)}"
    return f"{f:.{digits}g}"


def pct(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.1f} %"


def table(headers: list[str], rows: list[list], left: int = 1, row_class=None) -> str:
    out = ["<table>"]
    if any(headers):
        out.append("<tr>")
        out += [
            f"<th class='{'l' if i < left else ''}'>{esc(h)}</th>" for i, h in enumerate(headers)
        ]
        out.append("</tr>")
    for r, row in enumerate(rows):
        cls = f" class='{row_class(r)}'" if row_class and row_class(r) else ""
        out.append(f"<tr{cls}>")
        for i, cell in enumerate(row):
            c = "l" if i < left else ""
            out.append(f"<td class='{c}'>{cell}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _img(path: Path, caption: str, pdf: Path, base: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    try:
        rel = pdf.relative_to(base)
    except ValueError:
        rel = pdf
    return (
        f"<div class='fig'><img alt='{esc(caption)}' src='data:image/png;base64,{data}'>"
        f"<div class='cap'>{esc(caption)} &middot; <a href='{esc(rel)}'>PDF</a></div></div>"
    )


# the workload's primary metrics (docs/workloads.md), as the papers report them
WORKLOAD_METRICS = {
    "bulk": ("goodput_mbps", "goodput_cov", "duration_s", "retransmits"),
    "cbr": ("delay_mean_ms", "delay_p95_ms", "jitter_ms", "frames_lost"),
    "blocks": ("delay_mean_ms", "delay_p95_ms", "worst_delay_increase_pct"),
    "web": ("page_load_s",),
    "dash": ("avg_bitrate_mbps", "switches", "stalls", "stall_s"),
    "live": ("in_time_ratio", "frames_in_time", "frames_dropped"),
    "idle": ("duration_s",),
}
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
    """The workload's primary metrics, MPTCP's (retransmissions, OFO) and the
    path shares, those with values; ``wanted`` overrides."""
    if wanted:
        return [m for m in wanted if m in runs.columns]
    ok = stats.ok_runs(runs)
    workloads = [w for w in dict.fromkeys(runs.get("workload", pd.Series(dtype=object)).dropna())]
    primary = [m for w in workloads for m in WORKLOAD_METRICS.get(str(w), ())]
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


def _matrix_axes(runs: pd.DataFrame, by: str) -> tuple[str, str | None]:
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


def _representative(runs: pd.DataFrame, metric: str | None, by: str) -> list[tuple[str, str]]:
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


def _comparison_cells(metric: str, group, ref, r, notok: dict) -> list[str]:
    """A row of a comparison table: ``r`` is a ``stats.compare`` result (a dict
    or a ``stats.pairwise`` row) of ``group`` against ``ref``."""
    sig = r["p_value"] < 0.05 if math.isfinite(r["p_value"]) else False
    return [
        esc(metric),
        esc(group),
        f"{r['n_a']} / {r['n_b']}",
        _left_out(notok.get(ref, "")) + " / " + _left_out(notok.get(group, "")),
        fmt(r["mean_a"]),
        fmt(r["mean_b"]),
        pct(r["rel_diff"]),
        f"[{pct(r['ci_low'])}, {pct(r['ci_high'])}]",
        f"<span class='{'bad' if sig else ''}'>{fmt(r['p_value'], 3)}</span>",
    ]


def _paired_section(
    runs: pd.DataFrame, kmetrics: list[str], pairing: tuple[str, object, dict], notok: dict
) -> str:
    """Each variant against its partner along the matrix's first key (same other keys)."""
    axis, base, pairs = pairing
    ok = stats.ok_runs(runs)
    rows = []
    for m in kmetrics:
        for v, partner in pairs.items():
            c = stats.compare(ok[ok["variant"] == partner][m], ok[ok["variant"] == v][m])
            cells = _comparison_cells(m, v, partner, c.as_dict(), notok)
            rows.append([*cells[:2], esc(partner), *cells[2:]])
    return (
        f"<h2 id='compare'>Along <code>{esc(axis)}</code>: each variant against "
        f"<code>{esc(axis)}={esc(base)}</code> at the same other settings</h2>"
        "<p class='muted'>The experiment's matrix has more than one key: a variant is "
        "compared with its partner that differs in the first key only (<code>--reference "
        "VARIANT</code> compares every variant with one instead).</p>"
        + table(
            [
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
            ],
            rows,
            left=3,
        )
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
    fig_dir = out.parent / "figures"
    all_runs = ingest.load_table(root, "runs")
    if not len(all_runs):
        raise ValueError(
            f"{root}: no run dirs found (expected runs/<variant>/rep-NNN below a campaign dir)"
        )
    raw_runs = all_runs  # variants as each campaign names them (the claims name those)
    all_runs = stats.qualify_variants(all_runs)
    runs = all_runs[all_runs["attempt"].isin(["current", "incomplete"])].reset_index(drop=True)
    if by not in runs:
        raise ValueError(
            f"--by {by!r} is not a column of the runs table; e.g. variant, scheduler, "
            f"{', '.join(c for c in runs.columns if c.startswith('kernel_'))}"
        )
    campaigns = []
    for camp in ingest.campaign_dirs(root):
        info, _ = _read(CampaignDir(camp).info)
        campaigns.append((camp.name, info or {}))
    order = _variant_order(runs, campaigns, by)
    runs = runs.assign(_o=runs[by].map({v: i for i, v in enumerate(order)})).sort_values(
        ["_o", "repetition"]
    )
    runs = runs.drop(columns="_o").reset_index(drop=True)
    ok = stats.ok_runs(runs)
    ref = _reference(runs, by, reference)
    pairing = _pairing(campaigns, order) if by == "variant" and reference is None else None
    kmetrics = key_metrics(runs, metrics)
    fmetrics = figure_metrics(runs, metrics)
    if metrics:
        missing = [m for m in metrics if m not in runs.columns]
        if missing:
            raise ValueError(
                f"--metric {', '.join(missing)}: not a column of the runs table; metrics: "
                f"{', '.join(stats.metric_columns(ok))}"
            )
    notok = not_ok_by_group(runs, by)
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>mptlab report: {esc(root.name)}"
        f"</title><style>{CSS}</style></head><body>"
    ]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    exps = sorted({e for e in runs["experiment"].dropna()})
    parts.append(f"<h1>mptlab report: {esc(', '.join(exps) or root.name)}</h1>")
    not_ok = breakdown(runs["status"])
    parts.append(
        f"<p class='muted'>{esc(root.resolve())} &middot; generated {stamp} &middot; "
        f"{len(runs)} runs, {len(ok)} ok, {len(runs) - len(ok)} not ok"
        f"{f' ({esc(not_ok)})' if not_ok else ''}"
        f"{f', {len(all_runs) - len(runs)} earlier attempts' if len(all_runs) > len(runs) else ''}"
        "</p>"
    )
    parts.append(
        "<p class='muted'>Statistics use the ok runs of each run's current attempt; "
        "n is the number of those runs with a value. CIs: 95 % percentile bootstrap of the "
        "mean (10000 resamples, seed 0). p: two-sided Mann-Whitney U.</p>"
    )
    # ---- overview
    parts.append("<h2 id='overview'>Overview</h2>")
    rows = []
    for g in order:
        sub = runs[runs[by] == g]
        counts = sub["status"].value_counts()
        status = " ".join(f"<span class='pill'>{esc(s)} {n}</span>" for s, n in counts.items())
        vk = (
            sub["variant_keys"].dropna().iloc[0]
            if "variant_keys" in sub and sub["variant_keys"].notna().any()
            else ""
        )
        rows.append(
            [esc(g), esc(vk), str(len(sub)), str(int((sub["status"] == "ok").sum())), status]
        )
    parts.append(table([by, "variant keys", "runs", "ok", "status"], rows, left=2))
    # ---- key metrics: the science first
    parts.append("<h2 id='summary'>Key metrics</h2>")
    parts.append(_bias_warning(runs, notok))
    health = [m for m in HEALTH_METRICS if m in runs.columns]
    summ = stats.summarize(runs, [m for m in stats.metric_columns(ok) if m not in health], by=by)
    key = summ[summ["metric"].isin(kmetrics)]
    if len(key):
        key = key.assign(_k=key["metric"].map({m: i for i, m in enumerate(kmetrics)}))
        key = key.sort_values("_k", kind="stable").drop(columns="_k")
        parts.append(_summary_table(key, by, notok))
    else:
        parts.append("<p class='muted'>no key metric has values in the ok runs.</p>")
    parts.append(
        f"<details><summary>All {summ['metric'].nunique()} metrics (Summary statistics)"
        f"</summary>{_summary_table(summ, by, notok)}</details>"
    )
    # ---- the paper's claims
    parts.append(_reproduction_section(raw_runs, claims_file))
    # ---- comparisons
    if pairing is not None and kmetrics:
        parts.append(_paired_section(runs, kmetrics, pairing, notok))
    elif ref is not None and kmetrics:
        parts.append(f"<h2 id='compare'>Against the reference <code>{esc(ref)}</code></h2>")
        rows = []
        for m in kmetrics:
            pw = stats.pairwise(runs, m, ref, by=by)
            for _, r in pw.iterrows():
                rows.append(_comparison_cells(m, r[by], ref, r, notok))
        parts.append(
            table(
                [
                    "metric",
                    by,
                    "n ref / n",
                    "not ok, left out: ref / this",
                    f"mean {ref}",
                    "mean",
                    "rel. diff",
                    "95 % CI",
                    "p (MWU)",
                ],
                rows,
                left=2,
            )
        )
    if (pairing is not None or ref is not None) and kmetrics:
        parts.append(_reps_section(ok, kmetrics[0], by))
    # ---- figures
    parts.append("<h2 id='figures'>Figures</h2>")
    x_col, hue = _matrix_axes(runs, by)
    for m in fmetrics:
        parts.append(f"<h3>{esc(m)}</h3><div class='figs'>")
        for kind, fig in (
            ("bar", figures.bar_ci(runs, m, x=x_col, hue=hue)),
            ("box", figures.box(runs, m, by=by, order=order)),
            ("cdf", figures.cdf(runs, m, by=by, order=order)),
        ):
            p = figures.save(fig, fig_dir, f"{kind}-{m}")
            parts.append(_img(p["png"], f"{kind}: {m}", p["pdf"], out.parent))
        parts.append("</div>")
    if any(c.startswith("path") and c.endswith("_share") for c in runs.columns):
        parts.append("<h3>Path share</h3><div class='figs'>")
        p = figures.save(figures.path_share(runs, by=by, order=order), fig_dir, "path-share")
        parts.append(_img(p["png"], "share of the data bytes per path", p["pdf"], out.parent))
        parts.append("</div>")
    ss = ingest.load_table(root, "ss")
    mp = ingest.load_table(root, "mptcp")
    po = ingest.load_table(root, "pcap_ofo")
    ko = ingest.load_table(root, "kernel_ofo")
    if len(ss) or len(mp):
        parts.append(
            "<h3>Per-subflow time series (the run closest to each variant's median "
            f"{esc(fmetrics[0] if fmetrics else '')})</h3><div class='figs'>"
        )
        for g, run_id in _representative(runs, fmetrics[0] if fmetrics else None, by)[
            :max_timeseries
        ]:
            fig = figures.timeseries(
                ss,
                mp,
                run_id,
                pcap_ofo=po if len(po) else None,
                title=f"{g}: {run_id}",
                kernel_ofo=ko if len(ko) else None,
            )
            p = figures.save(fig, fig_dir, "ts-" + run_id.replace("/", "_"))
            parts.append(_img(p["png"], f"{g}: {run_id}", p["pdf"], out.parent))
        parts.append("</div>")
    fr = ingest.load_table(root, "fec_ratio")
    if len(fr):
        parts.append(
            "<h3>FEC ratio over time (the dynamic ratio's re-evaluations, every 3 RTTs; "
            "the run closest to each variant's median "
            f"{esc(fmetrics[0] if fmetrics else '')})</h3><div class='figs'>"
        )
        with_fec = set(fr["run_id"])
        reps = _representative(
            runs[runs["run_id"].isin(with_fec)], fmetrics[0] if fmetrics else None, by
        )
        for g, run_id in reps[:max_timeseries]:
            fig = figures.fec_ratio(fr, run_id, title=f"{g}: {run_id}")
            p = figures.save(fig, fig_dir, "fec-ratio-" + run_id.replace("/", "_"))
            parts.append(_img(p["png"], f"FEC ratio, {g}: {run_id}", p["pdf"], out.parent))
        parts.append("</div>")
    # ---- shared-bottleneck detection (runs with kernel.sbd)
    parts.append(_sbd_section(root, runs, order, by, notok, fig_dir, out.parent))
    # ---- run health: what the runs cost the host, and which did not end ok
    parts.append(_health_section(runs, order, by, health))
    # ---- pcap cross-check
    parts.append(_pcap_section(runs))
    # ---- kernel counters
    parts.append(_nstat_section(root, runs, order, by))
    # ---- runs that are not ok
    parts.append("<h2 id='failed'>Runs not ok (failed, stalled, timeout, ...)</h2>")
    bad = all_runs[all_runs["status"] != "ok"]
    if len(bad):
        rows = [
            [
                esc(r["run_id"]),
                esc(r["attempt"]),
                f"<span class='bad'>{esc(r['status'])}</span>",
                esc(r.get("reason") or r.get("result_error") or ""),
            ]
            for _, r in bad.iterrows()
        ]
        parts.append(table(["run", "attempt", "status", "reason"], rows, left=4))
    else:
        parts.append("<p class='good'>none: every run finished ok.</p>")
    # ---- provenance
    parts.append(_provenance(root, runs, campaigns, order, by))
    parts.append("</body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(parts))
    return out


def _left_out(words: str) -> str:
    return f"<span class='bad'>{esc(words)}</span>" if words else "0"


def _bias_warning(runs: pd.DataFrame, notok: dict) -> str:
    bad = {g: w for g, w in notok.items() if w}
    if not bad:
        return "<p class='good'>every run ended ok: no run is left out of the statistics.</p>"
    n = int((runs["status"] != "ok").sum())
    return (
        f"<p class='bad'>{n} runs did not end ok and are left out of every statistic "
        "(per variant in the column &ldquo;not ok, left out&rdquo;). If a variant's runs fail "
        "or stall because of the variant (a scheduler that deadlocks, a path it overloads), "
        "its numbers describe only its survivors and the comparison is biased in its "
        "favour.</p>"
    )


def _summary_table(summ: pd.DataFrame, by: str, notok: dict | None = None) -> str:
    notok = notok or {}
    rows, first = [], []
    for m, sub in summ.groupby("metric", sort=False):
        for k, (_, r) in enumerate(sub.iterrows()):
            first.append(k == 0)
            rows.append(
                [
                    f"<b>{esc(m)}</b>" if k == 0 else "",
                    esc(r[by]),
                    str(r["n"]),
                    fmt(r["mean"]),
                    fmt(r["median"]),
                    fmt(r["std"]),
                    f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
                    _left_out(notok.get(r[by], "")),
                ]
            )
    return table(
        ["metric", by, "n", "mean", "median", "sd", "95 % CI of the mean", "not ok, left out"],
        rows,
        left=2,
        row_class=lambda i: "first" if first[i] else "",
    )


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


def verdict_pills(results: list[reproduce.ClaimResult]) -> str:
    """Claims per verdict, as coloured pills."""
    return " ".join(
        f"<span class='pill {VERDICT_CLASS[v]}'>{esc(v)} {n}</span>"
        for v, n in reproduce.counts(results).items()
    )


def quick_warning(quick: list[str]) -> str:
    """Campaigns of ``mptlab run --quick``: said in red, they are not the paper's setup."""
    if not quick:
        return ""
    return (
        f"<p class='bad'>{esc(', '.join(quick))}: --quick runs (shortened workload, "
        "no warm-up), not the paper's setup.</p>"
    )


def left_out_words(side: reproduce.Side) -> str:
    """``"1 of 3 runs not ok, left out (1 stalled)"``, or "" when every run of the
    variant ended ok: the count next to the statistics, never dropped silently."""
    if not side.not_ok:
        return ""
    # side.not_ok is rundir.breakdown's "2 failed, 1 stalled": the counts lead each part
    k = sum(int(part.split(" ", 1)[0]) for part in side.not_ok.split(", "))
    return f"{k} of {side.runs} runs not ok, left out ({side.not_ok})"


def claims_table(results: list[reproduce.ClaimResult]) -> str:
    """One row per claim: verdict (and why), claim and source, metric, the paper's
    values, ours per variant (mean [CI] n, level against the paper's), our
    difference, and the runs left out.  The report and ``reproduce --all``'s
    page show the same table."""
    rows = []
    for r in results:
        cl = r.claim
        vals = cl.paper_values() or (None, None)
        ours = []
        for side, pv in zip((r.subject, r.baseline), vals, strict=True):
            lv = reproduce.level_text(side, pv, cl.scale)
            ours.append(
                f"<b>{esc(side.variant or side.entry)}</b><br>{esc(reproduce.ours_text(side))}"
                + (f" <span class='muted'>({esc(lv)} paper)</span>" if lv else "")
            )
        left = [
            f"{esc(s.variant)}: {_left_out(left_out_words(s))}"
            for s in (r.subject, r.baseline)
            if s.variant and s.not_ok
        ]
        if not left and (r.subject.variant or r.baseline.variant):
            left = ["none"]
        left += [
            f"<span class='muted'>{esc(s.variant)}: {s.starved} starved</span>"
            for s in (r.subject, r.baseline)
            if s.variant and s.starved
        ]
        left += [
            f"<span class='muted'>{esc(s.variant)}: {s.late_starts} with a SYN back-off</span>"
            for s in (r.subject, r.baseline)
            if s.variant and s.late_starts
        ]
        src = cl.source + (" (derived)" if cl.derived else "")
        why = f"<br><span class='muted'>{esc(r.why)}</span>" if r.why else ""
        note = f"<br><span class='muted'>{esc(cl.note)}</span>" if cl.note else ""
        rows.append(
            [
                f"<span class='{VERDICT_CLASS[r.verdict]}'><b>{esc(r.verdict)}</b></span>{why}",
                f"{esc(cl.claim)}<br><span class='muted'>{esc(src)}</span>{note}",
                esc(cl.metric),
                esc(reproduce.paper_text(cl)),
                ours[0],
                ours[1],
                esc(reproduce.diff_text(r)),
                "<br>".join(left) or "-",
            ]
        )
    return table(
        [
            "verdict",
            "claim (source)",
            "metric",
            "paper: subject vs baseline",
            "ours: subject, mean [95 % CI] n",
            "ours: baseline",
            "ours: difference [95 % CI]",
            "not ok, left out (starved: kept)",
        ],
        rows,
        left=4,
    )


def _reproduction_section(all_runs: pd.DataFrame, claims_file: Path | None) -> str:
    """The papers' claims (each experiment's ``expect:``) against these runs."""
    head = "<h2 id='reproduction'>Reproduction of the paper</h2>"
    exps = sorted({str(e) for e in all_runs["experiment"].dropna()}) if len(all_runs) else []
    parts = [head]
    quiet = []
    for exp in reproduce.expectations(exps, claims_file):
        if exp.error or not exp.claims:
            quiet.append(f"{exp.experiment}: {exp.error or 'no expect: list'}")
            continue
        mine = reproduce.experiment_runs(all_runs, exp.experiment)
        results = reproduce.evaluate(exp.claims, mine)
        parts.append(
            f"<h3>{esc(exp.experiment)}</h3><p>{esc(exp.source)}</p>"
            + quick_warning(reproduce.quick_campaigns(mine))
            + f"<p>{verdict_pills(results)}</p>"
        )
        parts.append(claims_table(results))
        if exp.notes:
            parts.append(
                "<p><b>What differs from the paper's setup</b> (the experiment's notes): "
                f"{esc(' '.join(exp.notes.split()))}</p>"
            )
    parts.append(
        f"<p class='muted'>Verdicts: {esc(reproduce.VERDICT_LEGEND)} Claims come from each "
        "experiment's <code>expect:</code> (experiments.yaml or <code>--file</code>); "
        "<code>mptlab reproduce</code> prints the same.</p>"
    )
    if quiet:
        parts.append("<p class='muted'>No claims: " + "; ".join(esc(q) for q in quiet) + ".</p>")
    return "".join(parts)


def _health_section(runs: pd.DataFrame, order: list, by: str, health: list[str]) -> str:
    """Run health: statuses, the host CPU the runs took and waited for, starved runs."""
    parts = ["<h2 id='health'>Run health</h2>"]
    parts.append(
        "<p class='muted'>What the runs cost the emulator host, not what they measured: "
        "<code>host_cpu_s</code> (CPU the guest used), <code>host_cpu_wait_s</code> (time it "
        "waited for a CPU), <code>host_cpu_wait_share</code> (wait / run time; above "
        f"{rundir.STARVED_WAIT_SHARE:.2f} a real-time guest was starved and its timings are suspect; "
        "a virtual-time guest's results do not depend on its wait).</p>"
    )
    rows = []
    share = (
        pd.to_numeric(runs["host_cpu_wait_share"], errors="coerce")
        if "host_cpu_wait_share" in runs
        else pd.Series(math.nan, index=runs.index)
    )
    for g in order:
        sub = runs[runs[by] == g]
        starved = int(stats.starved(sub).sum())
        rows.append(
            [
                esc(g),
                str(len(sub)),
                str(int((sub["status"] == "ok").sum())),
                _left_out(breakdown(sub["status"])),
                f"<span class='{'bad' if starved else ''}'>{starved}</span>",
                fmt(float(share.loc[sub.index].max()))
                if share.loc[sub.index].notna().any()
                else "-",
            ]
        )
    parts.append(
        table(
            [
                by,
                "runs",
                "ok",
                "not ok",
                f"starved (wait share > {rundir.STARVED_WAIT_SHARE:.2f})",
                "max wait share",
            ],
            rows,
            left=1,
        )
    )
    if health:
        parts.append(
            _summary_table(stats.summarize(runs, health, by=by), by, not_ok_by_group(runs, by))
        )
    return "".join(parts)


# SBD's per-run metrics next to the accuracy (docs/congestion-control.md, "SBD")
SBD_METRICS = (
    "sbd_accuracy_shared",
    "sbd_accuracy_nonshared",
    "sbd_bottlenecked",
    "sbd_first_correct_s",
    "sbd_transition_delay_s",
)


def _sbd_section(
    root: Path, runs: pd.DataFrame, order: list, by: str, notok: dict, fig_dir: Path, base: Path
) -> str:
    """Shared-bottleneck detection (runs with ``traces/sbd-scores.csv``): the
    share of runs right over time, and per group the run metrics."""
    scores = ingest.load_table(root, "sbd_scores")
    if not len(scores):
        return ""
    scores = scores[scores["run_id"].isin(runs["run_id"])]
    if not len(scores):
        return ""
    ok = stats.ok_runs(runs)
    groups = [g for g in order if runs.loc[runs["run_id"].isin(scores["run_id"]), by].eq(g).any()]
    ok_scores = scores.merge(ok[["run_id", by]], on="run_id")
    parts = [
        "<h2 id='sbd'>Shared-bottleneck detection</h2>",
        "<p class='muted'>The main connection's SBD decisions judged against the truth "
        "(<code>traces/sbd-scores.csv</code>): a decision is right when it groups every pair "
        "of subflows as the truth says. Shaded: time bins where the truth was &ldquo;shared"
        "&rdquo; in most decisions. Ok runs only; the table's means are over runs "
        "(n where fewer runs have a value).</p><div class='figs'>",
    ]
    p = figures.save(figures.sbd_accuracy(ok_scores, groups, by=by), fig_dir, "sbd-accuracy")
    parts.append(_img(p["png"], "SBD accuracy over time", p["pdf"], base))
    parts.append("</div>")
    rows = []
    for g in groups:
        sub = ok[ok[by] == g]
        acc = stats.describe(sub.get("sbd_accuracy", []))
        cells = [
            esc(g),
            str(len(sub)),
            f"{fmt(acc.mean)} [{fmt(acc.ci_low)}, {fmt(acc.ci_high)}]"
            + (f" <span class='muted'>(n={acc.n})</span>" if acc.n < len(sub) else "")
            if acc.n
            else "-",
        ]
        for m in SBD_METRICS:
            v = pd.to_numeric(sub.get(m, pd.Series(dtype=float)), errors="coerce").dropna()
            more = f" <span class='muted'>(n={len(v)})</span>" if 0 < len(v) < len(sub) else ""
            cells.append(fmt(float(v.mean())) + more if len(v) else "-")
        cells.append(_left_out(notok.get(g, "")))
        rows.append(cells)
    parts.append(
        table(
            [
                by,
                "n (ok runs)",
                "sbd_accuracy: mean [95 % CI]",
                *SBD_METRICS,
                "not ok, left out",
            ],
            rows,
        )
    )
    return "".join(parts)


def _reps_section(ok: pd.DataFrame, metric: str, by: str) -> str:
    """Repetitions per variant needed to see a relative change of the main metric."""
    cvs, ns = [], 0
    for _, sub in ok.groupby(by):
        v = pd.to_numeric(sub[metric], errors="coerce").dropna()
        if len(v) >= 2 and v.mean() != 0:
            cvs.append((float(v.std(ddof=1)) / abs(float(v.mean())), len(v)))
            ns += len(v)
    if not cvs:
        return ""
    # pooled coefficient of variation (weighted by degrees of freedom)
    cv = math.sqrt(sum(c * c * (n - 1) for c, n in cvs) / sum(n - 1 for _, n in cvs))
    rows = []
    for eff in (0.02, 0.05, 0.10, 0.20):
        if cv == 0:
            rows.append([f"{eff:.0%}", "1", "1"])
            continue
        r = stats.reps_needed(eff, cv)
        rows.append([f"{eff:.0%}", str(r["n_t_test"]), str(r["n_mann_whitney"])])
    return (
        f"<h3>Repetitions needed for {esc(metric)}</h3><p class='muted'>Per variant, two-sided, "
        f"alpha 0.05, power 0.8, from the pooled coefficient of variation {cv:.3f} "
        f"(n = {ns} runs in {len(cvs)} groups).</p>"
        + table(["relative change", "n (t-test)", "n (Mann-Whitney)"], rows)
    )


def _pcap_section(runs: pd.DataFrame) -> str:
    if "pcap_ofo_bytes_max" not in runs or runs["pcap_ofo_bytes_max"].isna().all():
        return ""
    sub = runs[runs["pcap_ofo_bytes_max"].notna()]
    rows = []
    for _, r in sub.iterrows():
        k = r.get("k_ofo_bytes_max")
        diff = (
            (r["pcap_ofo_bytes_max"] / k - 1)
            if k and isinstance(k, float) and math.isfinite(k) and k
            else math.nan
        )
        rows.append(
            [
                esc(r["run_id"]),
                fmt(k),
                fmt(r["pcap_ofo_bytes_max"]),
                pct(diff),
                fmt(r.get("k_tcp_retrans")),
                fmt(r.get("pcap_retrans_segs")),
                fmt(r.get("k_bytes_reinjected")),
                fmt(r.get("pcap_reinjected_bytes")),
                fmt(r.get("pcap_hol_delay_mean_ms")),
            ]
        )
    return "<h2 id='pcap'>Packet traces against the kernel counters</h2>" + table(
        [
            "run",
            "OFO max (kernel)",
            "OFO max (pcap)",
            "diff",
            "TCP retrans (kernel)",
            "retrans segs (pcap)",
            "reinjected (kernel)",
            "reinjected (pcap)",
            "HOL delay mean ms (pcap)",
        ],
        rows,
    )


def _provenance(root: Path, runs, campaigns, order, by) -> str:
    parts = ["<h2 id='provenance'>Provenance</h2>"]
    for name, camp in campaigns:
        k = camp.get("kernel") or {}
        inv = camp.get("invocations") or []
        started = ", ".join(
            dt.datetime.fromtimestamp(i.get("started", 0), dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            + f" (jobs {i.get('jobs')})"
            for i in inv
        )
        rows = [
            ["campaign", esc(name)],
            ["experiment", esc(", ".join(camp.get("experiment", [])))],
            ["runs", esc(camp.get("runs"))],
            ["order seed", esc(camp.get("order_seed"))],
            ["git commit", f"<code>{esc(camp.get('git_commit'))}</code>"],
            [
                "kernel",
                esc(
                    f"{k.get('kernel_release', '?')} ({k.get('source_package', '')} "
                    f"{k.get('source_version', '')}, {k.get('arch', '')}), key {k.get('kernel_key', '?')}, "
                    f"built {k.get('built_at', '?')}"
                ),
            ],
            ["kernel patches", esc(", ".join(k.get("patches", [])))],
            ["modules", esc(k.get("modules_dir"))],
            ["invocations", esc(started)],
        ]
        parts.append(f"<h3>{esc(name)}</h3>" + table(["", ""], rows, left=2))
        parts.append(
            f"<details><summary>campaign.json</summary><pre>{esc(json.dumps(camp, indent=1))}</pre></details>"
        )
    commits = runs["git_commit"].dropna().unique() if "git_commit" in runs else []
    if len(commits) > 1:
        parts.append(
            f"<p class='bad'>runs come from {len(commits)} different commits: "
            f"{esc(', '.join(map(str, commits)))}</p>"
        )
    parts.append("<h3>Per variant: configuration and guest</h3>")
    for g in order:
        sub = runs[runs[by] == g]
        okr = sub[sub["status"] == "ok"]
        rd = Path((okr if len(okr) else sub)["run_dir"].iloc[0])
        spec, _ = _read(RunDir(rd).spec)
        prov, _ = _read(RunDir(rd).provenance)
        parts.append(f"<details><summary><b>{esc(g)}</b> &middot; {esc(rd.name)}</summary>")
        if spec:
            shown = {
                k: spec.get(k)
                for k in ("experiment", "variant", "variant_keys", "config", "profiles")
            }
            parts.append(f"<pre>{esc(json.dumps(shown, indent=1, default=str))}</pre>")
        if prov:
            tools = prov.get("tools") or {}
            parts.append(
                table(["tool", "version"], [[esc(t), esc(v)] for t, v in tools.items()], left=2)
            )
            parts.append(
                f"<pre>{esc(json.dumps({k: v for k, v in prov.items() if k != 'tools'}, indent=1))}</pre>"
            )
        parts.append("</details>")
    return "".join(parts)


def _nstat_section(root: Path, runs: pd.DataFrame, order: list, by: str) -> str:
    """Mean per-run change of the notable kernel counters (client and server
    summed), per group: the counters of ``NSTAT_PATTERNS`` that moved in
    some run."""
    ns = ingest.load_table(root, "nstat")
    head = "<h2 id='nstat'>Kernel counters (nstat)</h2>"
    if not len(ns) or "kind" not in ns:
        return head + "<p class='muted'>no nstat counters in these runs.</p>"
    ns = ns[(ns["kind"] == "counter") & ns["run_id"].isin(runs["run_id"])]
    pattern = "|".join(NSTAT_PATTERNS)
    ns = ns[ns["counter"].str.lower().str.contains(pattern) & ns["delta"].fillna(0).ne(0)]
    if not len(ns):
        return (
            head + "<p class='muted'>none of the drop, prune, OFO, retransmission or "
            "timeout counters moved.</p>"
        )
    per_run = ns.groupby(["run_id", "name"])["delta"].sum().unstack(fill_value=0)
    per_run = per_run.reindex(runs["run_id"], fill_value=0)
    groups = runs.set_index("run_id")[by].reindex(per_run.index)
    names = sorted(per_run.columns, key=lambda n: (not n.startswith("MPTcp"), n))
    rows = []
    for g in order:
        sub = per_run[groups == g]
        if len(sub):
            rows.append([esc(g), str(len(sub))] + [fmt(float(sub[n].mean())) for n in names])
    return (
        head
        + (
            "<p class='muted'>Mean change per run (client + server), every run of the "
            "current attempt whatever its status; all counters: the nstat table.</p>"
        )
        + table([by, "runs", *map(esc, names)], rows, left=1)
    )


def unique_values(df: pd.DataFrame, col: str) -> list:
    return list(dict.fromkeys(df[col].dropna())) if col in df else []


__all__ = ["build", "figure_metrics", "fmt", "key_metrics", "np"]
