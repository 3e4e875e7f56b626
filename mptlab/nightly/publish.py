"""The nightly trend page: a static HTML site over the history (issue 24).

    build_site(history, findings, root / "site", baselines={...}) -> site/index.html

The site, under ``out`` (normally ``<nightly root>/site``)::

    index.html                      latest night per experiment, regressions first,
                                    then improvements and changes, a table of the
                                    headline metrics with sparklines
    <experiment>/<metric>.html      one page per charted metric: a chart of the
                                    median over the nights (95 % CI bars, one series
                                    per variant, each point linking to its night's
                                    report), then a table of the nights

Names become file names through :func:`slug` (safe characters only, a hash
added when anything had to change, so two names never share a file).

Charted metrics (``headline``, per experiment; the default when an experiment
is not given): every metric with a better direction that has a finding, then
up to ``EXTRA_HEADLINE`` further metrics with a direction (in the history's
column order), then ``ok_rate``.  A metric page is written for every charted
metric and for every metric a finding names, so each link of the findings
lists leads somewhere.

Everything is self-contained (one CSS block, inline SVG, no script, nothing
fetched) and deterministic: the same input gives the same files except for the
one "generated" line of the index.  The site is built in a temporary dir next
to ``out`` and swapped in at the end, so a reader never sees half a site.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import io
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.colors  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd

    from .detect import Finding

INDEX = "index.html"
OK_RATE = "ok_rate"
EXTRA_HEADLINE = 4  # directed metrics charted besides those with findings
SPARK_NIGHTS = 30  # nights a sparkline covers (the latest ones)
MAX_TICKS = 12  # night labels on a chart's x axis, at most
# the columns of history.py's schema that the site reads
NEEDED = (
    *("stamp", "time", "experiment", "report", "commit", "clock", "variant", "metric"),
    *("better", "n", "n_runs", "n_failed", "n_stalled", "median", "ci_lo", "ci_hi"),
)

BAD = "#b42318"  # regressions
GOOD = "#1a7f37"  # improvements
MUTED = "#57606a"  # baselines, secondary text
# the variants' colours, the same on charts and sparklines (and whatever matplotlibrc says)
PALETTE = [matplotlib.colors.to_hex(matplotlib.colormaps["tab10"](i)) for i in range(10)]

METHODS = {
    "exact": "same runs and seeds on virtual time: any change is the code's",
    "statistical": "compared with the accepted baseline (compare-rules.yaml)",
    "step": "a step of the fit over many nights",
}

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;
 color:#1b1f24;font-size:14px;line-height:1.4;padding:0 16px}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;border-bottom:2px solid #d0d7de;padding-bottom:4px;margin-top:32px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:12.5px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:middle}
th{background:#eef2f6}td.l,th.l{text-align:left}td{white-space:nowrap}td.w{white-space:normal;min-width:12em}tr.night td{border-top:2px solid #8c959f}
.muted{color:#57606a}.bad{color:#b42318;font-weight:600}.good{color:#1a7f37}
.pill{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;background:#eef2f6}
.sw{display:inline-block;width:9px;height:9px;border-radius:2px;margin-right:4px}
.chart svg{max-width:100%;height:auto}details{margin:4px 0 8px}summary{cursor:pointer;color:#0969da}
"""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_RESERVED = {INDEX, "", ".", ".."}


def slug(name: str) -> str:
    """``name`` as a file name: unsafe characters become ``_`` and, when
    anything changed, a hash of ``name`` is added so that ``a/b`` and ``a_b``
    still get different files."""
    safe = _UNSAFE.sub("_", name)[:80]
    if safe == name and name not in _RESERVED and not name.startswith("."):
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{safe.lstrip('.') or 'x'}-{digest}"


def metric_page(experiment: str, metric: str) -> str:
    """The page of ``metric`` of ``experiment``, relative to the site (posix)."""
    return f"{slug(experiment)}/{slug(metric)}.html"


# ------------------------------------------------------------------ small formatting
def esc(x: object) -> str:
    return html.escape("" if x is None else str(x))


def _finite(x: object) -> bool:
    try:
        return math.isfinite(float(x))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def num(x: object) -> str:
    return f"{float(x):.4g}" if _finite(x) else "–"  # type: ignore[arg-type]


def count(x: object) -> str:
    return str(int(float(x))) if _finite(x) else "–"  # type: ignore[arg-type]


def percent(change: float) -> str:
    return f"{change * 100:+.1f} %" if _finite(change) else "n/a"


def short_commit(commit: str) -> str:
    # a full hash says nothing more to a reader; the "-dirty" mark does
    dirty = "-dirty" if commit.endswith("-dirty") else ""
    return commit[: len(commit) - len(dirty)][:10] + dirty


def _href(target: Path, page_dir: Path) -> str:
    """The relative URL of ``target`` from a page in ``page_dir`` (not yet
    HTML-escaped: matplotlib escapes its own attributes)."""
    rel = os.path.relpath(os.path.abspath(target), os.path.abspath(page_dir))
    return quote(rel.replace(os.sep, "/"))


def _link(href: str | None, text: str) -> str:
    return f"<a href='{esc(href)}'>{esc(text)}</a>" if href else ""


# ------------------------------------------------------------------ the data
@dataclass
class _Site:
    """The input, indexed once for all pages."""

    history: pd.DataFrame
    findings: list[Finding]
    out: Path
    root: Path
    baselines: set[str]
    nights: dict[str, list[str]] = field(default_factory=dict)  # experiment -> stamps, in time
    reports: dict[tuple[str, str], str] = field(default_factory=dict)  # (exp, stamp) -> report
    headline: dict[str, list[str]] = field(default_factory=dict)
    pages: set[tuple[str, str]] = field(default_factory=set)  # (exp, metric) with a page

    def latest(self, experiment: str) -> str | None:
        stamps = self.nights.get(experiment)
        return stamps[-1] if stamps else None

    def report_href(self, experiment: str, stamp: str, page_dir: Path) -> str | None:
        report = self.reports.get((experiment, stamp), "")
        return _href(self.root / report, page_dir) if report else None

    def page_href(self, experiment: str, metric: str, page_dir: Path) -> str | None:
        if (experiment, metric) not in self.pages:
            return None
        return _href(self.out / metric_page(experiment, metric), page_dir)

    def variants(self, experiment: str) -> list[str]:
        # sorted, so that a variant keeps its colour when others come and go
        return sorted(self.history.loc[self.history.experiment == experiment, "variant"].unique())


def _checked(history: pd.DataFrame) -> pd.DataFrame:
    """The history sorted by night, or a ValueError naming missing columns."""
    if history.empty:
        return history
    missing = [c for c in NEEDED if c not in history.columns]
    if missing:
        raise ValueError(
            f"history lacks the columns {', '.join(missing)} "
            "(the schema is in mptlab/nightly/history.py)"
        )
    frame = history.copy()
    for col in ("stamp", "experiment", "variant", "metric", "better", "report", "commit", "clock"):
        frame[col] = frame[col].fillna("").astype(str)
    # one row per night x experiment x variant x metric; should a night have been
    # recorded twice, its last record counts (a page must not fail over it)
    frame = frame.drop_duplicates(["stamp", "experiment", "variant", "metric"], keep="last")
    return frame.sort_values("stamp", kind="stable").reset_index(drop=True)


def default_headline(rows: pd.DataFrame, findings: Iterable[Finding]) -> list[str]:
    """The metrics to chart of one experiment's ``rows``: directed metrics with
    a finding, then up to ``EXTRA_HEADLINE`` more directed ones, then ok_rate."""
    order = list(dict.fromkeys(rows.metric))  # the runs table's column order
    directed = {m for m, b in zip(rows.metric, rows.better, strict=True) if b}
    found = {f.metric for f in findings}
    with_findings = [m for m in order if m in directed and m in found and m != OK_RATE]
    others = [m for m in order if m in directed and m not in found and m != OK_RATE]
    chosen = with_findings + others[:EXTRA_HEADLINE]
    return chosen + ([OK_RATE] if OK_RATE in order else [])


def _index(site: _Site, headline: Mapping[str, list[str]] | None) -> None:
    h = site.history
    if h.empty:
        return
    for exp, rows in h.groupby("experiment", sort=True):
        exp = str(exp)
        site.nights[exp] = list(dict.fromkeys(rows.stamp))
        for stamp, report in zip(rows.stamp, rows.report, strict=True):
            if report:
                site.reports.setdefault((exp, stamp), report)
        mine = [f for f in site.findings if f.experiment == exp]
        metrics = set(rows.metric)
        if headline is not None and exp in headline:
            site.headline[exp] = list(headline[exp])
        else:
            site.headline[exp] = default_headline(rows, mine)
        charted = set(site.headline[exp]) | {f.metric for f in mine}
        site.pages |= {(exp, m) for m in charted & metrics}


# ------------------------------------------------------------------ findings lists
def _order(site: _Site, findings: Iterable[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(those of each experiment's latest night, the older ones newest first)."""
    latest: list[Finding] = []
    older: list[Finding] = []
    for f in findings:
        (latest if f.stamp == site.latest(f.experiment) else older).append(f)
    latest.sort(key=lambda f: (f.experiment, f.metric, f.variant))
    older.sort(key=lambda f: (f.experiment, f.metric, f.variant))
    older.sort(key=lambda f: f.stamp, reverse=True)  # stable: newest night first
    return latest, older


def _finding_row(site: _Site, f: Finding, page_dir: Path) -> str:
    tone = "bad" if f.is_regression else "good" if f.kind == "improved" else ""
    report = site.report_href(f.experiment, f.stamp, page_dir)
    page = site.page_href(f.experiment, f.metric, page_dir)
    chart = f"{page}#n-{quote(f.stamp)}" if page else None  # the night's row on the page
    links = " · ".join(x for x in (_link(report, "report"), _link(chart, "chart")) if x)
    since = f" <span class='muted'>since {esc(f.since)}</span>" if f.since else ""
    return (
        f"<tr><td class='l'>{esc(f.stamp)}</td><td class='l'>{esc(f.experiment)}</td>"
        f"<td class='l'>{esc(f.variant)}</td><td class='l'>{esc(f.metric)}</td>"
        f"<td>{num(f.before)} → {num(f.after)}{since}</td>"
        f"<td class='{tone}'>{percent(f.change)}</td><td class='l'>{esc(f.kind)}</td>"
        f"<td class='l' title='{esc(METHODS.get(f.method, ''))}'>{esc(f.method)}</td>"
        f"<td class='l w'>{esc(f.note)}</td><td class='l'>{links}</td></tr>"
    )


def _findings_table(site: _Site, findings: list[Finding], page_dir: Path, css_id: str) -> str:
    left = "".join(f"<th class='l'>{h}</th>" for h in ("night", "experiment", "variant", "metric"))
    right = "".join(f"<th class='l'>{h}</th>" for h in ("kind", "method", "note", "links"))
    head = f"{left}<th>before → after</th><th>change</th>{right}"
    rows = "".join(_finding_row(site, f, page_dir) for f in findings)
    return f"<table id='{css_id}'><tr>{head}</tr>{rows}</table>"


def _findings_section(site: _Site, findings: list[Finding], name: str, none: str) -> str:
    latest, older = _order(site, findings)
    parts = []
    if latest:
        parts.append(_findings_table(site, latest, site.out, f"{name}-latest"))
    else:
        parts.append(f"<p class='muted'>{esc(none)}</p>")
    if older:
        parts.append(
            f"<details><summary>{len(older)} in earlier nights, newest first</summary>"
            f"{_findings_table(site, older, site.out, f'{name}-older')}</details>"
        )
    return "".join(parts)


# ------------------------------------------------------------------ the index
def _night_cells(site: _Site, exp: str, stamp: str, page_dir: Path) -> str:
    """stamp, time, commit, clock, runs, failed, stalled, report of one night."""
    rows = site.history[(site.history.experiment == exp) & (site.history.stamp == stamp)]
    # n_runs & co are per variant and repeated on each metric's row
    per_variant = rows.groupby("variant")[["n_runs", "n_failed", "n_stalled"]].max()
    runs, failed, stalled = (int(per_variant[c].fillna(0).sum()) for c in per_variant.columns)
    first = rows.iloc[0]
    clocks = "/".join(sorted(set(rows.clock) - {""}))
    mark = " <span class='pill'>baseline</span>" if stamp in site.baselines else ""
    return (
        f"<td class='l'>{esc(stamp)}{mark}</td><td class='l'>{esc(first.time)}</td>"
        f"<td class='l'><code title='{esc(first.commit)}'>{esc(short_commit(first.commit))}"
        f"</code></td><td class='l'>{esc(clocks)}</td><td>{runs}</td>"
        f"<td class='{_bad_if(failed)}'>{failed}</td>"
        f"<td class='{_bad_if(stalled)}'>{stalled}</td>"
        f"<td class='l'>{_link(site.report_href(exp, stamp, page_dir), 'report')}</td>"
    )


def _latest_table(site: _Site) -> str:
    head = (
        "".join(
            f"<th class='l'>{h}</th>" for h in ("experiment", "night", "time", "commit", "clock")
        )
        + "<th>runs</th><th>failed</th><th>stalled</th><th class='l'>report</th>"
    )
    rows = "".join(
        f"<tr><td class='l'>{esc(exp)}</td>{_night_cells(site, exp, stamps[-1], site.out)}</tr>"
        for exp, stamps in site.nights.items()
    )
    return f"<table id='latest'><tr>{head}</tr>{rows}</table>"


def sparkline(series: list[list[float]], colours: list[str], marks: Iterable[int] = ()) -> str:
    """A small inline SVG: one polyline per series (NaN breaks it), red dots at
    the night indices ``marks`` (on the first series that has a value there)."""
    w, h, pad = 120, 28, 3
    values = [v for s in series for v in s if _finite(v)]
    n = max((len(s) for s in series), default=0)
    if not values or n == 0:
        return "<span class='muted'>no data</span>"
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0

    def xy(i: int, v: float) -> str:
        x = pad + (w - 2 * pad) * (i / (n - 1) if n > 1 else 0.5)
        y = h - pad - (h - 2 * pad) * ((v - lo) / span if hi > lo else 0.5)
        return f"{x:.1f},{y:.1f}"

    shapes = []
    for s, colour in zip(series, colours, strict=True):
        run: list[str] = []
        for i, v in enumerate([*s, math.nan]):  # the NaN closes the last run
            if _finite(v):
                run.append(xy(i, v))
                continue
            if len(run) > 1:
                shapes.append(
                    f"<polyline points='{' '.join(run)}' fill='none' stroke='{colour}' "
                    "stroke-width='1.3'/>"
                )
            elif run:
                x, y = run[0].split(",")
                shapes.append(f"<circle cx='{x}' cy='{y}' r='1.5' fill='{colour}'/>")
            run = []
    for i in sorted(set(marks)):
        at = [s[i] for s in series if i < len(s) and _finite(s[i])]
        if at:
            x, y = xy(i, at[0]).split(",")
            shapes.append(f"<circle cx='{x}' cy='{y}' r='2.6' fill='{BAD}'/>")
    return (
        f"<svg class='spark' width='{w}' height='{h}' viewBox='0 0 {w} {h}' "
        f"xmlns='http://www.w3.org/2000/svg'>{''.join(shapes)}</svg>"
    )


def _trend_row(site: _Site, exp: str, metric: str) -> str:
    h = site.history
    rows = h[(h.experiment == exp) & (h.metric == metric)]
    nights = site.nights[exp][-SPARK_NIGHTS:]
    variants = site.variants(exp)
    medians = rows.set_index(["variant", "stamp"])["median"]
    series = [[float(medians.get((v, s), math.nan)) for s in nights] for v in variants]
    colours = [PALETTE[i % len(PALETTE)] for i in range(len(variants))]
    bad = {
        f.stamp
        for f in site.findings
        if f.is_regression and f.experiment == exp and f.metric == metric
    }
    bad_at = [i for i, s in enumerate(nights) if s in bad]
    latest = rows[rows.stamp == site.nights[exp][-1]]
    now = "<br>".join(
        f"<span class='sw' style='background:{colours[variants.index(r.variant)]}'></span>"
        f"{esc(r.variant)} {num(r.median)}"
        for r in latest.sort_values("variant").itertuples()
    )
    found = sum(f.experiment == exp and f.metric == metric for f in site.findings)
    better = rows.better[rows.better != ""]
    page = site.page_href(exp, metric, site.out)
    name = _link(page, metric) if page else esc(metric)
    return (
        f"<td class='l'>{name}</td><td class='l'>{esc(better.iloc[-1] if len(better) else '')}"
        f"</td><td class='l'>{now or '–'}</td><td>{sparkline(series, colours, bad_at)}</td>"
        f"<td>{found or ''}</td>"
    )


def _trends_table(site: _Site) -> str:
    head = (
        "<tr><th class='l'>experiment</th><th class='l'>metric</th><th class='l'>better</th>"
        f"<th class='l'>latest median</th><th>last {SPARK_NIGHTS} nights</th>"
        "<th>findings</th></tr>"
    )
    rows = []
    for exp in site.nights:
        known = set(site.history.metric[site.history.experiment == exp])
        metrics = site.headline.get(exp, [])
        for i, metric in enumerate(metrics):
            cell = f"<td class='l' rowspan='{len(metrics)}'>{esc(exp)}</td>" if i == 0 else ""
            body = (
                _trend_row(site, exp, metric)
                if metric in known
                else f"<td class='l'>{esc(metric)}</td><td colspan='5' class='l muted'>"
                "not in the history</td>"
            )
            rows.append(f"<tr class='{'night' if i == 0 else ''}'>{cell}{body}</tr>")
    return f"<table id='trends'>{head}{''.join(rows)}</table>"


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def index_html(site: _Site, generated: dt.datetime) -> str:
    when = generated.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<h1>mptlab nightly: trends</h1>",
        f"<p class='muted'>generated {when} &middot; {len(site.nights)} experiments, "
        f"{site.history.stamp.nunique() if not site.history.empty else 0} nights, "
        f"{len(site.findings)} findings</p>",
    ]
    if site.history.empty:
        parts.append(
            "<p id='empty'>No nights in the history yet: run <code>mptlab nightly NAME</code> "
            "and build the page again.</p>"
        )
    else:
        parts += ["<h2 id='latest-nights'>Latest nights</h2>", _latest_table(site)]
    bad = [f for f in site.findings if f.is_regression]
    other = [f for f in site.findings if not f.is_regression]
    legend = "; ".join(f"<b>{esc(k)}</b>: {esc(v)}" for k, v in METHODS.items())
    parts += [
        "<h2 id='regressions'>Regressions</h2>",
        _findings_section(site, bad, "regressions", "No regression in the latest nights."),
        "<h2 id='changes'>Improvements and changes</h2>",
        _findings_section(site, other, "changes", "Nothing else moved in the latest nights."),
        f"<p class='muted'>Methods: {legend}. Change: (after - before) / |before|.</p>",
    ]
    if not site.history.empty:
        parts += ["<h2 id='trends-h'>Headline metrics</h2>", _trends_table(site)]
    return _page("mptlab nightly: trends", "".join(parts))


# ------------------------------------------------------------------ a metric's page
def night_labels(stamps: list[str]) -> list[str]:
    """Readable x labels: the date, with the time when a day has two nights."""
    try:
        times = [dt.datetime.strptime(s, "%Y%m%d-%H%M%S") for s in stamps]
    except ValueError:
        return list(stamps)  # not a stamp of the usual form: show it as it is
    days = [t.strftime("%Y-%m-%d") for t in times]
    if len(set(days)) == len(days):
        return days
    return [t.strftime("%Y-%m-%d %H:%M") for t in times]


def _text(s: str) -> str:
    # matplotlib reads $...$ as math: a variant's name is plain text
    return s.replace("$", r"\$")


def chart_svg(site: _Site, exp: str, metric: str, page_dir: Path) -> str:
    """The chart of ``metric`` of ``exp`` as an inline ``<svg>`` element."""
    h = site.history
    rows = h[(h.experiment == exp) & (h.metric == metric)]
    nights = site.nights[exp]
    x_of = {s: i for i, s in enumerate(nights)}
    variants = site.variants(exp)
    # svg.hashsalt: matplotlib's clip-path ids are hashes, salted randomly unless set;
    # svg.fonttype none: text stays text (small, selectable, searchable)
    with matplotlib.rc_context({"svg.hashsalt": "mptlab-nightly", "svg.fonttype": "none"}):
        fig = Figure(figsize=(9.5, 4.0))
        ax = fig.subplots()
        # variants side by side around each night, so that CI bars do not hide each other
        offset = {v: (i - (len(variants) - 1) / 2) * 0.06 for i, v in enumerate(variants)}
        for i, variant in enumerate(variants):
            own = rows[rows.variant == variant]
            colour = PALETTE[i % len(PALETTE)]
            _series(site, ax, own, x_of, offset[variant], colour, variant, page_dir)
        _marks(site, ax, rows, exp, metric, x_of, offset)
        _axes(ax, nights, metric, rows)
        out = io.StringIO()
        fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = out.getvalue()
    return svg[svg.index("<svg") :].strip()  # inline: no XML declaration or doctype


def _series(site, ax, own, x_of, offset, colour, variant, page_dir) -> None:
    own = own[[_finite(m) for m in own["median"]]]
    if own.empty:
        return
    x = [x_of[s] + offset for s in own.stamp]
    y = own["median"].astype(float).to_numpy()
    # a CI that misses its median (or is NaN) draws no bar rather than failing
    lo = np.nan_to_num(y - own.ci_lo.astype(float).to_numpy(), nan=0.0).clip(min=0)
    hi = np.nan_to_num(own.ci_hi.astype(float).to_numpy() - y, nan=0.0).clip(min=0)
    ax.errorbar(x, y, yerr=[lo, hi], fmt="-", color=colour, lw=1.2, capsize=3, elinewidth=0.9)
    # one <a> per point in the SVG: the night's report
    urls = [site.report_href(own.experiment.iloc[0], s, page_dir) for s in own.stamp]
    ax.scatter(x, y, s=24, color=colour, zorder=3, urls=urls)
    ax.plot([], [], "-o", color=colour, ms=4, label=_text(variant))


def _marks(site, ax, rows, exp, metric, x_of, offset) -> None:
    """Red rings on regressions, green on improvements, dashed baselines."""
    at = rows.set_index(["variant", "stamp"])["median"]
    for is_bad, colour, gid, label in (
        (True, BAD, "regressions", "regression"),
        (False, GOOD, "improvements", "improvement"),
    ):
        pts = [
            (x_of[f.stamp] + offset.get(f.variant, 0.0), float(at[(f.variant, f.stamp)]))
            for f in site.findings
            if f.experiment == exp
            and f.metric == metric
            and f.stamp in x_of
            and (f.is_regression if is_bad else f.kind == "improved")
            and _finite(at.get((f.variant, f.stamp)))
        ]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(
                xs, ys, s=150, facecolors="none", edgecolors=colour, linewidths=2,
                zorder=4, label=label, gid=gid,
            )  # fmt: skip
    base = [s for s in x_of if s in site.baselines]
    for s in base:
        ax.axvline(x_of[s], color=MUTED, ls="--", lw=1, zorder=1, gid=f"baseline-{s}")
    if base:
        ax.add_line(Line2D([], [], color=MUTED, ls="--", lw=1, label="accepted baseline"))


def _axes(ax, nights: list[str], metric: str, rows) -> None:
    step = max(1, math.ceil(len(nights) / MAX_TICKS))
    ticks = list(range(0, len(nights), step))
    labels = night_labels(nights)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([labels[i] for i in ticks], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(nights) - 0.5)
    better = [b for b in rows.better if b]
    ax.set_ylabel(_text(metric) + (f" ({better[-1]} is better)" if better else ""))
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _night_table(site: _Site, exp: str, metric: str, page_dir: Path) -> str:
    h = site.history
    rows = h[(h.experiment == exp) & (h.metric == metric)].sort_values("variant", kind="stable")
    colour = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(site.variants(exp))}
    moved: dict[tuple[str, str], list[Finding]] = {}
    for f in site.findings:
        if f.experiment == exp and f.metric == metric:
            moved.setdefault((f.stamp, f.variant), []).append(f)
    head = "".join(f"<th class='l'>{c}</th>" for c in ("night", "commit", "clock", "variant")) + (
        "<th>median [95 % CI]</th><th>n / runs</th><th>failed</th><th>stalled</th>"
        "<th class='l'>findings</th><th class='l'>report</th>"
    )
    by_night = dict(list(rows.groupby("stamp", sort=False)))  # one pass, not one per night
    body = []
    for stamp in reversed(site.nights[exp]):  # newest first
        if stamp not in by_night:
            continue
        mark = " <span class='pill'>baseline</span>" if stamp in site.baselines else ""
        report = _link(site.report_href(exp, stamp, page_dir), "report")
        for j, r in enumerate(by_night[stamp].itertuples()):
            # the night's own cells on its first row only: the rows below are its variants
            night = (f"{esc(stamp)}{mark}", short_commit(r.commit), r.clock, report)
            cells = night if j == 0 else ("", "", "", "")
            found = moved.get((stamp, r.variant), [])
            body.append(
                (f"<tr class='night' id='n-{esc(stamp)}'>" if j == 0 else "<tr>")
                + _night_row(r, cells, colour[r.variant], found)
            )
    return f"<table id='nights'><tr>{head}</tr>{''.join(body)}</table>"


def _night_row(r, night: tuple[str, str, str, str], colour: str, found: list[Finding]) -> str:
    """The cells of one variant in one night; ``night``: its stamp (HTML),
    commit, clock and report link (HTML), empty but on the night's first row."""
    stamp, commit, clock, report = night
    return (
        f"<td class='l'>{stamp}</td><td class='l'><code title='{esc(r.commit)}'>"
        f"{esc(commit)}</code></td><td class='l'>{esc(clock)}</td>"
        f"<td class='l'><span class='sw' style='background:{colour}'></span>{esc(r.variant)}</td>"
        f"<td>{num(r.median)} [{num(r.ci_lo)}, {num(r.ci_hi)}]</td>"
        f"<td>{count(r.n)} / {count(r.n_runs)}</td>"
        f"<td class='{_bad_if(r.n_failed)}'>{count(r.n_failed)}</td>"
        f"<td class='{_bad_if(r.n_stalled)}'>{count(r.n_stalled)}</td>"
        f"<td class='l w'>{'<br>'.join(_moved(f) for f in found)}</td>"
        f"<td class='l'>{report}</td></tr>"
    )


def _bad_if(n: object) -> str:
    return "bad" if _finite(n) and float(n) > 0 else ""  # type: ignore[arg-type]


def _moved(f: Finding) -> str:
    tone = "bad" if f.is_regression else "good" if f.kind == "improved" else ""
    note = f" <span class='muted'>{esc(f.note)}</span>" if f.note else ""
    return (
        f"<span class='{tone}'>{esc(f.kind)} {percent(f.change)}</span> "
        f"({esc(f.method)}, {num(f.before)} → {num(f.after)}){note}"
    )


def metric_html(site: _Site, exp: str, metric: str) -> str:
    page_dir = (site.out / metric_page(exp, metric)).parent
    back = _href(site.out / INDEX, page_dir)
    body = (
        f"<p>{_link(back, '← all experiments')}</p>"
        f"<h1>{esc(exp)}: {esc(metric)}</h1>"
        "<p class='muted'>The median of each variant per night, with its 95 % bootstrap CI; "
        "a point links to its night's report. Red rings: regressions, green rings: "
        "improvements, dashed lines: accepted baselines.</p>"
        f"<div class='chart'>{chart_svg(site, exp, metric, page_dir)}</div>"
        "<h2>Nights</h2>"
        f"{_night_table(site, exp, metric, page_dir)}"
    )
    return _page(f"{exp}: {metric}", body)


# ------------------------------------------------------------------ writing the site
def _swap(tmp: Path, out: Path) -> None:
    """Put the finished ``tmp`` in place of ``out``: two renames, so a reader
    sees the old site or the new one (or, for a moment, none), never a mix."""
    old = None
    if out.exists():
        if not out.is_dir():
            raise NotADirectoryError(f"{out}: exists and is not a directory; cannot hold the site")
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        out.rename(old / out.name)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_site(
    history: pd.DataFrame,
    findings: list[Finding],
    out: Path,
    *,
    baselines: set[str] | frozenset[str] = frozenset(),
    root: Path | None = None,
    headline: dict[str, list[str]] | None = None,
    generated: dt.datetime | None = None,
) -> Path:
    """Write the trend site to ``out`` (see the module's doc); returns its index.html.

    ``history``: rows of history.py's schema; ``report`` paths are relative to
    ``root`` (default: ``out``'s parent, the nightly root).  ``baselines``: the
    stamps of accepted baselines.  ``headline``: {experiment: [metrics]} to
    chart, instead of the default choice.  ``generated``: the time on the
    index (default: now), the only thing that differs between two builds.
    """
    out = Path(out)
    site = _Site(
        history=_checked(history),
        findings=list(findings),
        out=out,
        root=Path(root) if root is not None else out.parent,
        baselines=set(baselines),
    )
    _index(site, headline)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; a web server must read the site
        (tmp / INDEX).write_text(index_html(site, generated or dt.datetime.now(dt.UTC)))
        for exp, metric in sorted(site.pages):
            page = tmp / metric_page(exp, metric)
            page.parent.mkdir(exist_ok=True)
            page.write_text(metric_html(site, exp, metric))
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / INDEX
