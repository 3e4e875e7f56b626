"""One self-contained page over every experiment with claims: ``mptlab reproduce --all``.

    mptlab reproduce --all [--results ROOT] [--out FILE] [--markdown FILE] [--file F]

Every experiment of the catalog (experiments.yaml, or the experiments of a
campaign file) with an ``expect:`` list, its claims evaluated as ``mptlab
reproduce NAME`` evaluates them (``reproduce.evaluate``) against the runs of
its campaign dir below ROOT: ``ROOT/NAME`` if it holds run dirs, else
``ROOT/NAME-quick`` (flagged: ``mptlab run --quick``, not the paper's setup),
else every claim is ``not run``, so that the page shows what is still to
run as well as what was.  Experiments are grouped by the publication they
reproduce (their ``paper:``).

The page: a summary per paper (claims per verdict, total, the range of n),
then per paper and experiment the claims table of the campaign report
(``report.claims_table``), a link to that campaign's report when it has
one, the runs per variant (those not ok are left out of every statistic)
and the experiment's notes (what differs from the paper's setup).  The
same tables as Markdown (``markdown``) for docs/reproduction.md.

Running what is missing (``--run``) is the CLI's and the API's job
(``mptlab.api.reproduce_all``): this module only reads run dirs.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from ..rundir import CampaignDir, breakdown
from ..spec.catalog import Catalog
from ..spec.yamlsrc import SpecError
from . import ingest, reproduce
from .html import Markup, join, render, span, table
from .report import CSS
from .sections.reproduction import (
    VERDICT_CLASS,
    claims_table,
    left_out_words,
    quick_warning,
    verdict_pills,
)

PAGE = "reproduction.html"  # default name, in the results root
NO_PAPER = "(no paper: given)"  # the group of experiments without a ``paper:`` field
QUICK = "-quick"  # the suffix of `mptlab run --quick`'s campaign dirs (api.run)
REPORT = Path(ingest.STORE) / "report" / "report.html"  # `mptlab report`'s default, per campaign


@dataclass
class Entry:
    """One experiment of the page: its claims and what its campaign dir made of them."""

    expectations: reproduce.Expectations
    paper: str
    campaign_dir: Path | None = None
    quick: bool = False  # the campaign dir is NAME-quick
    results: list[reproduce.ClaimResult] = field(default_factory=list)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)  # its runs, current attempt
    errors: list[str] = field(default_factory=list)  # run dirs the ingest could not read

    @property
    def experiment(self) -> str:
        return self.expectations.experiment


@dataclass
class Page:
    """What ``build`` made: one row per claim, the per-paper summary, the files written."""

    frame: pd.DataFrame
    summary: pd.DataFrame
    entries: list[Entry]
    out: Path | None = None
    markdown: Path | None = None


# ------------------------------------------------------------------ gather
def claimed(file: Path | None = None) -> list[tuple[reproduce.Expectations, str]]:
    """Every experiment with claims, in the catalog's order, with its paper:
    those of experiments.yaml, or (``file``) those the campaign file defines."""
    cat = Catalog.load(Path(file) if file else None)
    names = cat.names(Path(file)) if file else cat.names()
    out = []
    for name in names:
        claims = cat.claims(name)  # a claim naming no variant: SpecError with file:line
        if not claims:
            continue
        spec = cat.spec(name)
        exp = reproduce.Expectations(name, claims, spec.notes.strip(), spec.source)
        out.append((exp, spec.paper.strip() or NO_PAPER))
    if not out:
        where = file or "experiments.yaml"
        raise SpecError(f"{where}: no experiment has claims (expect:): nothing to reproduce")
    return out


def campaign_of(root: Path, name: str) -> tuple[Path | None, bool, str]:
    """(ROOT/NAME, False) if it holds run dirs, else (ROOT/NAME-quick, True),
    else (None, False, why not)."""
    for cand, quick in ((root / name, False), (root / f"{name}{QUICK}", True)):
        if CampaignDir(cand).run_dirs():
            return cand, quick, ""
    full = root / name
    if full.is_dir():
        return None, False, f"{full} holds no run dirs (nor {name}{QUICK}): mptlab run {name}"
    return None, False, f"no campaign dir {full} (nor {name}{QUICK}): mptlab run {name}"


def to_run(root: Path, file: Path | None = None, quick: bool = False) -> list[str]:
    """The experiments with claims that ``--run`` runs, or resumes (finished
    runs are not redone, so a campaign stopped half-way is completed): every
    one but those whose campaign dir is of the other kind (only NAME-quick
    when running in full, only NAME with ``--quick``)."""
    out = []
    for exp, _ in claimed(file):
        path, is_quick, _ = campaign_of(Path(root), exp.experiment)
        if path is None or is_quick == quick:
            out.append(exp.experiment)
    return out


def not_run(claims, why: str) -> list[reproduce.ClaimResult]:
    """Every claim ``not run``, for an experiment without runs."""
    return [reproduce.ClaimResult(c, *reproduce.sides_of(c), why=why) for c in claims]


def collect(
    root: Path,
    file: Path | None = None,
    pcap: bool = True,
    seed: int = 0,
    do_ingest: bool = True,
) -> list[Entry]:
    """Every experiment with claims, evaluated against its campaign dir below ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise SpecError(
            f"{root}: no such directory (the results root: --results ROOT; to run every "
            "experiment with claims first: --run --reps N)"
        )
    entries = []
    for exp, paper in claimed(file):
        entry = Entry(exp, paper)
        entries.append(entry)
        camp, quick, why = campaign_of(root, exp.experiment)
        if camp is None:
            entry.results = not_run(exp.claims, why)
            continue
        entry.campaign_dir, entry.quick = camp, quick
        if do_ingest:
            entry.errors = list(ingest.ingest(camp, pcap=pcap).errors)
        runs = ingest.load_table(camp, "runs")
        entry.runs = reproduce.experiment_runs(runs, exp.experiment)
        if not len(entry.runs):
            there = sorted({str(e) for e in runs.get("experiment", pd.Series()).dropna()})
            entry.results = not_run(
                exp.claims,
                f"{camp}: no runs of {exp.experiment}; experiments there: "
                f"{', '.join(there) or 'none'}"
                + ("" if do_ingest else " (--no-ingest: is it ingested?)"),
            )
            continue
        entry.results = reproduce.evaluate(exp.claims, entry.runs, seed=seed)
    return entries


def to_frame(entries: list[Entry]) -> pd.DataFrame:
    """One row per claim: ``reproduce.to_frame``'s columns, with the experiment's
    paper, its campaign dir (None: not run) and whether that is a --quick one."""
    frames = [
        reproduce.to_frame(e.experiment, e.results).assign(
            paper=e.paper,
            campaign_dir=str(e.campaign_dir) if e.campaign_dir else None,
            quick=e.quick,
        )
        for e in entries
        if e.results
    ]
    df = pd.concat(frames, ignore_index=True)
    first = ["experiment", "paper", "campaign_dir", "quick"]
    return df[first + [c for c in df.columns if c not in first]]


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per paper (in the catalog's order): claims per verdict, total, the range
    of n (ok runs with a value per variant, over the claims that have runs; a
    level claim's baseline n is NaN, not counted),
    experiments with runs, of them --quick, and without runs."""
    rows = []
    for paper, sub in frame.groupby("paper", sort=False):
        ns = pd.concat([sub["n_subject"], sub["n_baseline"]])
        ns = ns[ns > 0]
        exps = sub.drop_duplicates("experiment")
        row: dict = {"paper": paper}
        row.update({v: int((sub["verdict"] == v).sum()) for v in reproduce.VERDICTS})
        row.update(
            total=len(sub),
            n_min=int(ns.min()) if len(ns) else 0,
            n_max=int(ns.max()) if len(ns) else 0,
            experiments=len(exps),
            with_runs=int(exps["campaign_dir"].notna().sum()),
            quick=int(exps["quick"].sum()),
        )
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ words
def n_range(lo: int, hi: int) -> str:
    if not hi:
        return "-"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _counts_words(row) -> str:
    return ", ".join(f"{row[v]} {v}" for v in reproduce.VERDICTS if row[v])


def text_summary(frame: pd.DataFrame, root: Path) -> str:
    """Per paper: its claims per verdict (what ``mptlab reproduce --all`` prints)."""
    summ = summarize(frame)
    exps = frame.drop_duplicates("experiment")
    run = int(exps["campaign_dir"].notna().sum())
    quick = int(exps["quick"].sum())
    lines = [
        f"{root}: {len(exps)} experiments with claims, {run} with runs"
        + (f" ({quick} of them --quick, not the paper's setup)" if quick else "")
        + f", {len(exps) - run} not run; {len(frame)} claims"
    ]
    for _, r in summ.iterrows():
        lines.append(
            f"  {r['paper']}: {r['total']} claims: {_counts_words(r)}"
            f" (n {n_range(r['n_min'], r['n_max'])})"
        )
    return "\n".join(lines)


def _anchor(prefix: str, name: str) -> str:
    return prefix + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _link(target: Path, page: Path) -> str:
    """``target`` relative to the page's dir, as a URL path (the page moves with ROOT)."""
    rel = os.path.relpath(target.resolve(), page.parent.resolve())
    return quote(Path(rel).as_posix())


def _runs_line(runs: pd.DataFrame) -> Markup:
    """Runs per variant, those not ok in red: left out of every statistic."""
    groups = (
        [(v, len(sub), breakdown(sub["status"])) for v, sub in runs.groupby("variant", sort=False)]
        if len(runs)
        else []
    )
    return render(
        "{% if groups %}<p class='muted'>runs per variant: {% for v, n, bad in groups %}"
        "{% if not loop.first %}; {% endif %}{{ v }}: {{ n }}"
        "{% if bad %} <span class='bad'>({{ bad }}: left out)</span>{% endif %}"
        "{% endfor %}</p>{% endif %}",
        groups=groups,
    )


_EXPERIMENT = """\
<h3 id='{{ anchor }}'>{% if report %}<a href='{{ report }}'>{{ e.experiment }}</a>\
{% else %}{{ e.experiment }}{% endif %}</h3>\
{% if exp.source %}<p class='muted'>{{ exp.source }}</p>{% endif %}\
{% if e.campaign_dir is not none %}<p>runs: <code>{{ e.campaign_dir }}</code>\
{% if report %} &middot; <a href='{{ report }}'>its report</a>{% endif %}</p>{% endif %}\
{{ quick }}<p>{{ pills }}</p>{{ runs }}\
{% if e.errors %}<p class='bad'>run dirs the ingest could not read (left out): \
{{ e.errors|join('; ') }}</p>{% endif %}{{ claims }}\
{% if notes %}<details><summary>What differs from the paper's setup (the experiment's notes)\
</summary><p>{{ notes }}</p></details>{% endif %}"""


def _experiment_html(e: Entry, page: Path) -> Markup:
    exp = e.expectations
    report = e.campaign_dir / REPORT if e.campaign_dir else None
    return render(
        _EXPERIMENT,
        e=e,
        exp=exp,
        anchor=_anchor("exp-", e.experiment),
        report=_link(report, page) if report is not None and report.exists() else "",
        quick=quick_warning([e.campaign_dir.name] if e.quick and e.campaign_dir else []),
        pills=verdict_pills(e.results),
        runs=_runs_line(e.runs),
        claims=claims_table(e.results),
        notes=" ".join(exp.notes.split()) if exp.notes else "",
    )


def _summary_row(r) -> list:
    verdicts = list(reproduce.VERDICTS)
    cells: list = [
        render(
            "<a href='#{{ anchor }}'>{{ paper }}</a>",
            anchor=_anchor("paper-", r["paper"]),
            paper=r["paper"],
        )
    ]
    cells += [span(VERDICT_CLASS[v], r[v]) if r[v] else "0" for v in verdicts]
    exps = render(
        "{{ with_runs }} of {{ n }}{% if quick %} <span class='bad'>({{ quick }} --quick)</span>"
        "{% endif %}",
        with_runs=r["with_runs"],
        n=r["experiments"],
        quick=r["quick"],
    )
    cells += [render("<b>{{ t }}</b>", t=r["total"]), n_range(r["n_min"], r["n_max"]), exps]
    return cells


def _summary_html(summ: pd.DataFrame) -> Markup:
    verdicts = list(reproduce.VERDICTS)
    rows = [_summary_row(r) for _, r in summ.iterrows()]
    total = summ[verdicts + ["total", "experiments", "with_runs", "quick"]].sum()
    lo = summ.loc[summ["n_max"] > 0, "n_min"]
    cells: list = [Markup("<b>all papers</b>")] + [str(int(total[v])) for v in verdicts]
    cells += [
        render("<b>{{ t }}</b>", t=int(total["total"])),
        n_range(int(lo.min()) if len(lo) else 0, int(summ["n_max"].max())),
        f"{int(total['with_runs'])} of {int(total['experiments'])}",
    ]
    rows.append(cells)
    return table(
        ["paper", *verdicts, "claims", "n per variant", "experiments with runs"], rows, left=1
    )


_PAGE = """\
<!doctype html><html><head><meta charset='utf-8'>\
<title>mptlab: reproduction of the papers</title><style>{{ css }}</style></head><body>\
<h1>Reproduction of the papers' claims</h1>\
<p class='muted'>{{ root }} &middot; generated {{ stamp }} &middot; {{ n_entries }} experiments \
with claims, {{ n_claims }} claims. n: ok runs of the current attempt with a value, per variant; \
runs that did not end ok are left out of every statistic and counted next to it.</p>\
<h2 id='summary'>Summary</h2>{{ summary }}\
<p class='muted'>Verdicts: {{ legend }} Below {{ few }} runs per variant a bootstrap CI is rough. \
Claims come from each experiment's <code>expect:</code>; <code>mptlab reproduce NAME</code> \
prints one experiment's.</p>\
{% for paper, anchor, experiments in papers %}<h2 id='{{ anchor }}'>{{ paper }}</h2>\
{{ experiments }}{% endfor %}</body></html>"""


def render_html(entries: list[Entry], frame: pd.DataFrame, root: Path, out: Path) -> str:
    """The whole page (inline CSS, no script, no external asset)."""
    summ = summarize(frame)
    papers = [
        (
            paper,
            _anchor("paper-", paper),
            join(_experiment_html(e, out) for e in entries if e.paper == paper),
        )
        for paper in summ["paper"]
    ]
    return str(
        render(
            _PAGE,
            css=Markup(CSS),
            root=Path(root).resolve(),
            stamp=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            n_entries=len(entries),
            n_claims=len(frame),
            summary=_summary_html(summ),
            legend=reproduce.VERDICT_LEGEND,
            few=reproduce.FEW,
            papers=papers,
        )
    )


def _md(x) -> str:
    """A Markdown table cell: one line, pipes escaped."""
    return " ".join(str(x).split()).replace("|", "\\|")


def _md_table(headers: list[str], rows: list[list], left: int | None = None) -> list[str]:
    """``left``: columns left-aligned, the others (counts) right-aligned; None: all left."""
    left = len(headers) if left is None else left
    rule = "".join("---|" if i < left else "--:|" for i in range(len(headers)))
    lines = ["| " + " | ".join(headers) + " |", "|" + rule]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines


def _md_n(r: reproduce.ClaimResult) -> str:
    """n per variant (subject / baseline; a level claim: the subject's), and the
    runs left out."""
    ns = [s.summary.n if s.summary else 0 for s in r.sides]
    if not any(ns) and not any(s.not_ok for s in r.sides):
        return "-"
    tail = "".join(
        f" ({s.variant}: {left_out_words(s)})" for s in r.sides if s.variant and s.not_ok
    )
    return " / ".join(map(str, ns)) + tail


def render_markdown(entries: list[Entry], frame: pd.DataFrame, root: Path) -> str:
    """The per-paper verdict counts and, per paper, one row per claim (Markdown)."""
    summ = summarize(frame)
    verdicts = list(reproduce.VERDICTS)
    stamp = dt.date.today().isoformat()
    lines = [
        f"Claims per verdict ({root}, {stamp}; n: ok runs per variant with a value; "
        "(--quick): runs of `mptlab run --quick`, not the paper's setup):",
        "",
    ]
    rows = [
        [r["paper"], *(r[v] for v in verdicts), r["total"], n_range(r["n_min"], r["n_max"])]
        for _, r in summ.iterrows()
    ]
    total = summ[verdicts + ["total"]].sum()
    rows.append(["**all**", *(int(total[v]) for v in verdicts), int(total["total"]), ""])
    lines += _md_table(["paper", *verdicts, "claims", "n"], rows, left=1)
    for paper in summ["paper"]:
        lines += ["", f"**{_md(paper)}**", ""]
        rows = []
        for e in entries:
            if e.paper != paper:
                continue
            name = e.experiment + (" (--quick)" if e.quick else "")
            for r in e.results:
                src = r.claim.source + (" (derived)" if r.claim.derived else "")
                rows.append(
                    [
                        name,
                        f"{r.claim.claim} ({src})",
                        r.kind + (f" ({r.cell})" if r.cell else ""),
                        reproduce.paper_text(r.claim),
                        reproduce.diff_text(r),
                        r.verdict,
                        _md_n(r),
                    ]
                )
        lines += _md_table(["experiment", "claim", "kind", "paper", "ours", "verdict", "n"], rows)
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ all of it
def build(
    root: Path,
    out: Path | None = None,
    markdown: Path | None = None,
    file: Path | None = None,
    pcap: bool = True,
    seed: int = 0,
    do_ingest: bool = True,
) -> Page:
    """Evaluate every experiment with claims against its runs below ``root``;
    write the page to ``out`` and the Markdown tables to ``markdown`` (each if given)."""
    root = Path(root)
    entries = collect(root, file, pcap=pcap, seed=seed, do_ingest=do_ingest)
    frame = to_frame(entries)
    page = Page(frame, summarize(frame), entries)
    if out is not None:
        page.out = Path(out)
        page.out.parent.mkdir(parents=True, exist_ok=True)
        page.out.write_text(render_html(entries, frame, root, page.out))
    if markdown is not None:
        page.markdown = Path(markdown)
        page.markdown.parent.mkdir(parents=True, exist_ok=True)
        page.markdown.write_text(render_markdown(entries, frame, root))
    return page


__all__ = [
    "PAGE",
    "Entry",
    "Page",
    "build",
    "campaign_of",
    "claimed",
    "collect",
    "to_run",
    "render_html",
    "render_markdown",
    "summarize",
    "text_summary",
    "to_frame",
]
