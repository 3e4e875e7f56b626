"""A sweep's results: every claim at every point, the baseline error beside it.

A sweep root (``mptlab sweep``) holds ``sweep.json`` and one campaign dir per
point (``points/<slug>/<experiment>/``).  For each point and claim this
module gives what ``mptlab reproduce`` gives for one campaign (our change
with its 95 % bootstrap CI, n, the verdict), and the point's **baseline
error**: the calibration's measure (docs/reproduction.md, "Calibration
protocol"), the mean |log(ours / paper)| over the paper's *baseline*
numbers, taken from the same point's baseline arms.  The baseline numbers
are the claims' own: every claim that gives the paper's two values
(``paper: [subject, baseline]``) contributes its baseline's value (x
``scale``); ``--target VARIANT:METRIC=VALUE`` adds others.  The treatment's
numbers never enter it, so a reader can see which points the paper's
baselines allow and whether a claim holds there.

The forest plot of a claim draws one row per point: our change and its CI
(coloured by verdict), the paper's change as a dashed line, and on the
right the point's baseline error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..spec.expect import Claim, resolve  # noqa: E402
from ..spec.sweep import Point, SweepSpec  # noqa: E402
from . import html, ingest, reproduce  # noqa: E402

VERDICT_COLOURS = {
    reproduce.REPRODUCED: "#2a7d2a",
    reproduce.DIRECTION_ONLY: "#8bb84a",
    reproduce.OPPOSITE: "#c0392b",
    reproduce.INCONCLUSIVE: "#7f7f7f",
}


@dataclass(frozen=True)
class Target:
    """One baseline number of the paper: a variant's mean of a metric."""

    entry: str  # a compare entry (variant name or key=value), as the claim writes it
    metric: str
    paper: float  # in the metric's unit
    source: str

    @classmethod
    def parse(cls, text: str) -> Target:
        """``VARIANT:METRIC=VALUE`` (``tcp-wlan:goodput_mbps=3.1``)."""
        head, sep, value = text.rpartition("=")
        entry, colon, metric = head.partition(":")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not colon or not entry or not metric or not math.isfinite(number):
            raise ValueError(
                f"--target {text!r}: write VARIANT:METRIC=VALUE (e.g. tcp-wlan:goodput_mbps=3.1)"
            )
        if number <= 0:
            raise ValueError(f"--target {text!r}: the error is a log ratio: VALUE must be > 0")
        return cls(entry, metric, number, "--target")


def targets(claims: list[Claim], extra: Sequence[str] = ()) -> list[Target]:
    """The baseline numbers: each two-value claim's baseline value, then ``extra``."""
    out: list[Target] = []
    for c in claims:
        values = None if c.is_level else c.paper_values()
        if values and c.baseline and values[1] > 0:
            t = Target(c.baseline, c.metric, float(values[1]) * c.scale, c.source)
            if t not in out:
                out.append(t)
    out += [Target.parse(t) for t in extra]
    return out


def baseline_error(
    runs: pd.DataFrame, variants: list[tuple[str, dict]], wanted: list[Target]
) -> tuple[float, list[dict]]:
    """The mean |log(ours / paper)| over ``wanted`` (nan without any), and per
    target: our mean over ok runs, n, the ratio.  A target whose variant did not
    run or has no ok run is left out of the mean and said so."""
    parts = []
    logs = []
    for t in wanted:
        label, _ = resolve(t.entry, variants)
        part = {"target": f"{t.entry}:{t.metric}", "paper": t.paper, "ours": math.nan, "n": 0}
        if label is not None and t.metric in runs:
            mine = runs[(runs["variant"] == label) & (runs["status"] == "ok")][t.metric]
            mine = pd.to_numeric(mine, errors="coerce").dropna()
            if len(mine):
                ours = float(mine.mean())
                part.update(ours=ours, n=len(mine), ratio=ours / t.paper)
                # none at all, against a paper's value > 0: as far off as it gets
                logs.append(abs(math.log(ours / t.paper)) if ours > 0 else math.inf)
        parts.append(part)
    return (float(np.mean(logs)) if logs else math.nan), parts


def levels(runs: pd.DataFrame, variants: list[tuple[str, dict]], shown: Sequence[str]) -> dict:
    """``VARIANT:METRIC`` -> [mean over ok runs, n] (a level to show beside the
    error, e.g. the single-path baselines' goodput: which path is the best)."""
    out: dict[str, list] = {}
    for text in shown:
        entry, _, metric = text.partition(":")
        label, _ = resolve(entry, variants)
        mean, n = math.nan, 0
        if label is not None and metric in runs:
            mine = runs[(runs["variant"] == label) & (runs["status"] == "ok")][metric]
            mine = pd.to_numeric(mine, errors="coerce").dropna()
            if len(mine):
                mean, n = float(mine.mean()), len(mine)
        out[text] = [mean, n]
    return out


def point_dir(root: Path, point: Point) -> Path:
    return Path(root) / "points" / point.slug


def load_spec(root: Path) -> SweepSpec:
    path = Path(root) / "sweep.json"
    if not path.exists():
        raise FileNotFoundError(f"{root}: not a sweep (no sweep.json; mptlab sweep makes one)")
    return SweepSpec.from_json(json.loads(path.read_text()))


def load_points(root: Path) -> list[Point]:
    """The points of the sweep, in the order it ran them (``points.json``)."""
    data = json.loads((Path(root) / "points.json").read_text())
    return [Point(tuple((k, v) for k, v in p["assign"])) for p in data]


def evaluate(
    root: Path,
    claims: list[Claim],
    numbers: list[int],
    points: list[Point],
    extra_targets: Sequence[str] = (),
    seed: int = 0,
    shown: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per (point, claim): the claim's numbers at that point, and the
    point's baseline error.  ``numbers``: the claims' 1-based numbers in the
    experiment (as ``mptlab reproduce`` counts them)."""
    wanted = targets(claims, extra_targets)
    rows = []
    for point in points:
        pdir = point_dir(root, point)
        runs = _runs(pdir)
        variants = reproduce.campaign_variants(runs) if len(runs) else []
        err, parts = baseline_error(runs, variants, wanted) if len(runs) else (math.nan, [])
        shown_levels = levels(runs, variants, shown) if len(runs) else {}
        results: list[reproduce.ClaimResult | None] = [None] * len(claims)
        if len(runs):
            results = list(reproduce.evaluate(claims, runs, seed=seed))
        for no, claim, res in zip(numbers, claims, results, strict=True):
            row = {
                "point": point.label,
                "slug": point.slug,
                "centre": point.is_centre,
                **{f"vary:{k}": v for k, v in point.assign},
                "claim_no": no,
                "claim": claim.claim,
                "metric": claim.metric,
                "paper_change": claim.paper_change(),
                "rel_diff": math.nan,
                "ci_low": math.nan,
                "ci_high": math.nan,
                "verdict": reproduce.NOT_RUN,
                "n_subject": 0,
                "n_baseline": 0,
                "runs_not_ok": "",
                "subject_mean": math.nan,
                "baseline_mean": math.nan,
                "baseline_error": err,
                "baseline_targets": json.dumps(parts),
                "levels": json.dumps(shown_levels),
            }
            if res is not None:
                row.update(
                    rel_diff=res.rel_diff,
                    ci_low=res.ci_low,
                    ci_high=res.ci_high,
                    verdict=res.verdict,
                    runs_not_ok="; ".join(
                        f"{s.variant}: {s.not_ok}" for s in res.sides if s.not_ok
                    ),
                )
                for name, side in (("subject", res.subject), ("baseline", res.baseline)):
                    if side.summary is not None:
                        row[f"n_{name}"] = side.summary.n
                        row[f"{name}_mean"] = side.summary.mean
            rows.append(row)
    return pd.DataFrame(rows)


def _runs(campaign_root: Path) -> pd.DataFrame:
    if not campaign_root.exists():
        return pd.DataFrame()
    ingest.ingest(campaign_root)  # with the packet captures: claims read pcap_* metrics
    return ingest.load_runs(campaign_root)


# ------------------------------------------------------------------ figures
def _pct(x: float) -> float:
    return 100.0 * x if math.isfinite(x) else math.nan


def forest(table: pd.DataFrame, claim_no: int):
    """The forest plot of one claim over the sweep's points (a matplotlib Figure)."""
    rows = table[table["claim_no"] == claim_no].reset_index(drop=True)
    if not len(rows):
        raise ValueError(f"claim {claim_no}: not in the sweep's table")
    n = len(rows)
    fig, (ax, axe) = plt.subplots(
        1,
        2,
        sharey=True,
        figsize=(7.6, 1.1 + 0.32 * n),
        gridspec_kw={"width_ratios": [3, 1], "wspace": 0.05},
    )
    y = np.arange(n)[::-1]
    for yi, (_, r) in zip(y, rows.iterrows(), strict=True):
        colour = VERDICT_COLOURS.get(r["verdict"], "#bbbbbb")
        mid, lo, hi = _pct(r["rel_diff"]), _pct(r["ci_low"]), _pct(r["ci_high"])
        if math.isfinite(mid):
            xerr = [[mid - lo], [hi - mid]] if math.isfinite(lo) and math.isfinite(hi) else None
            ax.errorbar(mid, yi, xerr=xerr, fmt="o", color=colour, ms=4, capsize=2, lw=1.2)
        else:
            ax.text(0, yi, r["verdict"], va="center", ha="center", fontsize=7, color="#777")
    paper = _pct(float(rows["paper_change"].iloc[0]))
    ax.axvline(0, color="#444", lw=0.8)
    if math.isfinite(paper):
        ax.axvline(paper, color="#1f5fa8", lw=1, ls="--", label=f"paper {paper:+.0f} %")
        ax.legend(loc="lower right", fontsize=7, frameon=False)
    labels = [
        f"{r['point']}  (n={int(r['n_subject'])}/{int(r['n_baseline'])})"
        for _, r in rows.iterrows()
    ]
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    for tick, (_, r) in zip(ax.get_yticklabels(), rows.iterrows(), strict=True):
        if r["centre"]:
            tick.set_fontweight("bold")
    ax.set_xlabel(f"{rows['metric'].iloc[0]}: change vs baseline [%], 95 % CI")
    ax.set_title(f"claim {claim_no}: {rows['claim'].iloc[0]}", fontsize=8, loc="left")
    err = rows["baseline_error"].to_numpy(dtype=float)
    finite = err[np.isfinite(err)]
    top = max(0.5, float(finite.max()) * 1.35) if len(finite) else 1.0
    # an infinite error (none of a baseline number the paper gives) fills the axis
    shown = np.where(np.isinf(err), top, np.nan_to_num(err))
    axe.barh(y, shown, color="#999999", height=0.5)
    for yi, e in zip(y, err, strict=True):
        text = " n/a" if math.isnan(e) else " inf" if math.isinf(e) else f" {e:.2f}"
        axe.text(0 if math.isnan(e) else min(e, top), yi, text, va="center", fontsize=7)
    axe.set_xlabel("baseline error", fontsize=8)
    axe.set_xlim(0, top * (1.15 if np.isinf(err).any() else 1))
    for a in (ax, axe):
        a.grid(True, axis="x", alpha=0.3)
        a.spines["top"].set_visible(False)
        a.spines["right"].set_visible(False)
    ax.set_ylim(-0.7, n - 0.3)
    return fig


def save_forest(fig, out: Path, name: str) -> dict[str, Path]:
    """SVG (byte-stable: no date, a fixed hash salt) and PNG."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"svg": out / f"{name}.svg", "png": out / f"{name}.png"}
    with plt.rc_context({"svg.hashsalt": "mptlab", "svg.fonttype": "none"}):
        fig.savefig(paths["svg"], bbox_inches="tight", metadata={"Date": None})
    fig.savefig(paths["png"], bbox_inches="tight", dpi=130, metadata={"Software": None})
    plt.close(fig)
    return paths


# ------------------------------------------------------------------ text
def _fmt_pct(x: float) -> str:
    return f"{100 * x:+.1f}" if math.isfinite(x) else "-"


def markdown(table: pd.DataFrame) -> str:
    """Per claim, a table over the points: change [CI], verdict, n, levels, baseline error."""
    out = []
    for no, rows in table.groupby("claim_no", sort=True):
        first = rows.iloc[0]
        paper = first["paper_change"]
        out.append(
            f"Claim {no}: {first['claim']} ({first['metric']}; paper "
            f"{_fmt_pct(paper)} %)\n\n"
            "| point | change % [95 % CI] | verdict | n | subject mean | baseline mean "
            "| baseline error |\n|---|---|---|---|---|---|---|"
        )
        for _, r in rows.iterrows():
            ci = f"[{_fmt_pct(r['ci_low'])}, {_fmt_pct(r['ci_high'])}]"
            label = f"**{r['point']}**" if r["centre"] else r["point"]
            err = _err(r["baseline_error"])
            not_ok = f" ({r['runs_not_ok']})" if r["runs_not_ok"] else ""
            out.append(
                f"| {label} | {_fmt_pct(r['rel_diff'])} {ci} | {r['verdict']} | "
                f"{int(r['n_subject'])}/{int(r['n_baseline'])}{not_ok} | "
                f"{_num(r['subject_mean'])} | {_num(r['baseline_mean'])} | {err} |"
            )
        out.append("")
    return "\n".join(out)


def summary_markdown(table: pd.DataFrame) -> str:
    """One row per point: every claim's change [CI] and verdict, the runs per
    side (and those not ok), the baseline error: the map on one screen."""
    claims = sorted(table["claim_no"].unique())
    head = " | ".join(
        f"claim {no} ({_fmt_pct(table[table['claim_no'] == no]['paper_change'].iloc[0])} %)"
        for no in claims
    )
    lines = [
        f"| point | {head} | n | baseline error |",
        "|---|" + "---|" * len(claims) + "---|---|",
    ]
    for slug in table["slug"].drop_duplicates():
        rows = table[table["slug"] == slug].set_index("claim_no")
        ran = rows[rows["n_subject"] > 0]
        first = ran.iloc[0] if len(ran) else rows.iloc[0]  # n of a claim that ran
        cells = [
            f"{_fmt_pct(rows.loc[no, 'rel_diff'])} [{_fmt_pct(rows.loc[no, 'ci_low'])}, "
            f"{_fmt_pct(rows.loc[no, 'ci_high'])}] {rows.loc[no, 'verdict']}"
            for no in claims
        ]
        not_ok = f" ({first['runs_not_ok']})" if first["runs_not_ok"] else ""
        label = f"**{first['point']}**" if first["centre"] else first["point"]
        err = _err(first["baseline_error"])
        n = f"{int(first['n_subject'])}/{int(first['n_baseline'])}{not_ok}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {n} | {err} |")
    return "\n".join(lines) + "\n"


def _err(x: float) -> str:
    return "n/a" if math.isnan(x) else "inf" if math.isinf(x) else f"{x:.3f}"


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.4g}"


def targets_markdown(table: pd.DataFrame) -> str:
    """The baseline numbers behind each point's error: ours (ratio to the paper's, n)."""
    firsts = table.drop_duplicates("slug")
    parts0 = json.loads(firsts.iloc[0]["baseline_targets"]) if len(firsts) else []
    shown0 = list(json.loads(firsts.iloc[0].get("levels", "{}") or "{}")) if len(firsts) else []
    if not parts0 and not shown0:
        return "No baseline numbers: the claims give no paper values of their baselines.\n"
    # a compare entry's alternatives ("a | b") would split a Markdown cell
    head = " | ".join(h.replace(" | ", " or ") for h in [p["target"] for p in parts0] + shown0)
    lines = [
        f"| point | error | {head} |",
        "|---|---|" + "---|" * (len(parts0) + len(shown0)),
        "| paper | | "
        + " | ".join([f"{p['paper']:.4g}" for p in parts0] + ["" for _ in shown0])
        + " |",
    ]
    for _, r in firsts.iterrows():
        parts = json.loads(r["baseline_targets"])
        cells = []
        for p in parts:
            if p["n"]:
                cells.append(f"{p['ours']:.4g} ({p['ours'] / p['paper']:.2f}x, n={p['n']})")
            else:
                cells.append("-")
        for mean, n in json.loads(r.get("levels", "{}") or "{}").values():
            cells.append(f"{mean:.4g} (n={n})" if n else "-")
        err = _err(r["baseline_error"])
        lines.append(f"| {r['point']} | {err} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{{ title }}</title>"
    "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto;font-size:14px}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 8px;border-bottom:1px solid"
    " #ddd;text-align:right}.l{text-align:left}img{max-width:100%}</style></head><body>"
    "<h1>{{ title }}</h1><p>{{ intro }}</p>"
    "{% for s in sections %}<h2>{{ s.title }}</h2>{{ s.figure }}{{ s.table }}{% endfor %}"
    "<h2>Baseline numbers per point</h2>{{ targets }}</body></html>"
)


def write(root: Path, table: pd.DataFrame, spec: SweepSpec) -> dict[str, Path]:
    """The sweep's outputs under ``root/analysis``: sweep.csv, sweep.md, one forest
    plot per claim (SVG, PNG) and index.html (self-contained)."""
    out = Path(root) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "sweep.csv", index=False)
    md = (
        "The map (change vs baseline, % [95 % CI], verdict):\n\n"
        + summary_markdown(table)
        + "\n"
        + markdown(table)
        + "\nBaseline numbers per point:\n\n"
        + targets_markdown(table)
    )
    (out / "sweep.md").write_text(md)
    sections = []
    for no in sorted(table["claim_no"].unique()):
        paths = save_forest(forest(table, int(no)), out, f"forest-claim{no}")
        rows = table[table["claim_no"] == no]
        cells = [
            [
                r["point"],
                f"{_fmt_pct(r['rel_diff'])} [{_fmt_pct(r['ci_low'])}, {_fmt_pct(r['ci_high'])}]",
                r["verdict"],
                f"{int(r['n_subject'])}/{int(r['n_baseline'])}",
                _err(r["baseline_error"]),
            ]
            for _, r in rows.iterrows()
        ]
        sections.append(
            {
                "title": f"Claim {no}: {rows.iloc[0]['claim']}",
                "figure": html.figure(paths["png"], f"claim {no}", paths["svg"], out),
                "table": html.table(
                    ["point", "change % [95 % CI]", "verdict", "n", "baseline error"], cells
                ),
            }
        )
    page = html.render(
        _PAGE,
        title=f"Sweep of {spec.experiment}",
        intro=(
            f"{spec.repetitions} repetitions per variant and point; "
            + ("every combination" if spec.grid else "one parameter at a time")
            + " of: "
            + "; ".join(f"{a.key} in {list(a.values)}" for a in spec.axes)
            + ".  The baseline error is the calibration's measure on the same runs' "
            "baseline arms (docs/reproduction.md)."
        ),
        sections=sections,
        targets=html.Markup("<pre>") + targets_markdown(table) + html.Markup("</pre>"),
    )
    (out / "index.html").write_text(str(page))
    return {"csv": out / "sweep.csv", "md": out / "sweep.md", "html": out / "index.html"}


def build(root: Path) -> dict[str, Path]:
    """Evaluate and draw the sweep in ``root`` (``mptlab report ROOT`` on a
    sweep, ``mptlab sweep --analyse ROOT``): its claims from the catalog the
    sweep names (experiments.yaml or its campaign file)."""
    spec = load_spec(root)
    exp = reproduce.expectations([spec.experiment], Path(spec.file) if spec.file else None)[0]
    if exp.error:
        raise ValueError(exp.error)
    numbers = spec.claims or list(range(1, len(exp.claims) + 1))
    bad = [n for n in numbers if not 1 <= n <= len(exp.claims)]
    if bad:
        raise ValueError(f"{root}: claim {bad[0]} is not one of {spec.experiment}'s")
    chosen = [exp.claims[n - 1] for n in numbers]
    table = evaluate(root, chosen, numbers, load_points(root), spec.targets, shown=spec.show)
    return write(root, table, spec)


__all__ = [
    "Target",
    "build",
    "baseline_error",
    "evaluate",
    "forest",
    "load_points",
    "load_spec",
    "markdown",
    "point_dir",
    "save_forest",
    "targets",
    "write",
]
