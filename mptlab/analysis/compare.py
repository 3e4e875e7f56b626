"""Compare a campaign with a baseline, metric by metric, for nightly regression checks.

    mptlab compare BASELINE CURRENT [--rules compare-rules.yaml] [--strict]

Rules (YAML)::

    defaults:              # optional, apply to every rule
      tolerance: 0.05      # relative change in the worse direction that still passes
      alpha: 0.05          # Mann-Whitney U significance level; null: tolerance only
      stat: mean           # mean | median
    rules:
      - metric: goodput_mbps
        better: higher     # higher | lower
      - metric: k_ofo_bytes_max
        better: lower
        tolerance: 0.25
        variants: [scheduler=blest]   # optional: only these variants
        required: true     # optional: fail if the metric is missing (default false)

For every rule and every variant present in the baseline: the relative change
of the statistic (current / baseline - 1) and the two-sided Mann-Whitney U
p-value.  A rule fails (``REGRESSED``) when the change is worse than the
tolerance and (alpha given) p < alpha.  Worse than the tolerance but not
significant is ``unsure`` (a failure with ``--strict``); a metric or a variant
the baseline has and the current campaign lacks is ``MISSING`` (a failure).
A rule's metric must be a declared one and its ``better`` the metric's
declared direction (``mptlab.spec.metrics``), else the rules file is an error
naming the file, line and field.
``ok_rate`` (share of a variant's runs whose status is ok) is always available
as a metric.

When both campaigns ran on virtual time and every variant has the same runs
(repetitions with the same seeds) in both, the runs are deterministic
(docs/experiments.md, "The guest's clock") and the comparison is exact: a
variant whose values are the same run for run says ``same``, with
certainty, however few the runs.  Values that differ mean the behaviour
changed, and a changed run re-draws every random event, so it carries the
spread of repetitions: such a variant is tested like real-time runs (noted
"changed run for run"), except under ``tolerance: 0``, which fails any
change in the worse direction.  The result says which mode it used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mptlab.spec import metrics as registry
from mptlab.spec.metrics import Metric
from mptlab.spec.yamlsrc import Source, SpecError, load

from . import ingest, stats

# computed here from the runs' statuses (mptlab.spec.metrics collects it)
METRICS = (
    Metric("ok_rate", "", "higher", "share of a variant's runs whose status is ok (compare)"),
)

RULE_FIELDS = {"metric", "better", "tolerance", "alpha", "stat", "variants", "required"}
DEFAULT_FIELDS = {"tolerance", "alpha", "stat"}
BETTER = ("higher", "lower")
STATS = ("mean", "median")
FAILING = ("REGRESSED", "MISSING")


class RulesError(SpecError):
    """A rules file that cannot be used: names the file, line, field and what is allowed."""


@dataclass
class Rule:
    metric: str
    better: str
    tolerance: float = 0.05
    alpha: float | None = 0.05
    stat: str = "mean"
    variants: list[str] | None = None
    required: bool = False
    where: str = ""


@dataclass
class Check:
    rule: Rule
    variant: str
    n_base: int = 0
    n_cur: int = 0
    base: float = math.nan
    cur: float = math.nan
    change: float = math.nan  # cur / base - 1
    p_value: float = math.nan
    verdict: str = "ok"
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict in FAILING


@dataclass
class CompareResult:
    checks: list[Check] = field(default_factory=list)
    strict: bool = False
    exact: bool = False  # virtual time, same runs and seeds: identical values are `same`
    mode: str = "statistical (Mann-Whitney U)"

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.failed or (self.strict and c.verdict == "unsure")]

    @property
    def ok(self) -> bool:
        return not self.failed


# ------------------------------------------------------------------ rules
def _number(
    src: Source, loc: tuple, value, name: str, lo: float, hi: float | None, allow_null=False
):
    if value is None and allow_null:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        allowed = f"a number {'>= ' + str(lo) if hi is None else f'in ({lo}, {hi})'}"
        raise RulesError(
            f"{src.where(loc)}: {name}: {value!r} is not allowed; allowed: {allowed}"
            + (" or null" if allow_null else "")
        )
    if value < lo or (hi is not None and not (lo < value < hi)):
        allowed = f">= {lo}" if hi is None else f"strictly between {lo} and {hi}"
        raise RulesError(
            f"{src.where(loc)}: {name}: {value!r} is out of range; allowed: {allowed}"
            + (" or null" if allow_null else "")
        )
    return float(value)


def _choice(src: Source, loc: tuple, value, name: str, allowed: tuple) -> str:
    if value not in allowed:
        raise RulesError(
            f"{src.where(loc)}: {name}: {value!r} is not allowed; allowed: {', '.join(allowed)}"
        )
    return value


def load_rules(path: Path) -> list[Rule]:
    """Parse and check a rules file."""
    try:
        src = load(Path(path))
    except SpecError as exc:
        raise RulesError(str(exc)) from None
    data = src.data
    if not isinstance(data, dict):
        raise RulesError(
            f"{src.where(())}: expected a mapping with 'rules' (and optional 'defaults')"
        )
    unknown = set(data) - {"rules", "defaults"}
    if unknown:
        key = sorted(unknown, key=str)[0]
        raise RulesError(f"{src.where((key,))}: {key}: unknown field; allowed: defaults, rules")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise RulesError(
            f"{src.where(('defaults',))}: defaults: expected a mapping of "
            f"{', '.join(sorted(DEFAULT_FIELDS))}"
        )
    for k in defaults:
        if k not in DEFAULT_FIELDS:
            raise RulesError(
                f"{src.where(('defaults', k))}: defaults.{k}: unknown field; allowed: "
                f"{', '.join(sorted(DEFAULT_FIELDS))}"
            )
    rules_raw = data.get("rules")
    if not isinstance(rules_raw, list) or not rules_raw:
        raise RulesError(
            f"{src.where(('rules',))}: rules: expected a non-empty list of rules "
            "(each with metric and better)"
        )
    rules = []
    for i, raw in enumerate(rules_raw):
        loc = ("rules", i)
        name = f"rules[{i}]"
        if not isinstance(raw, dict):
            raise RulesError(f"{src.where(loc)}: {name}: expected a mapping with metric and better")
        for k in raw:
            if k not in RULE_FIELDS:
                raise RulesError(
                    f"{src.where(loc + (k,))}: {name}.{k}: unknown field; allowed: "
                    f"{', '.join(sorted(RULE_FIELDS))}"
                )
        for k in ("metric", "better"):
            if k not in raw:
                raise RulesError(
                    f"{src.where(loc)}: {name}.{k}: missing (required: metric, better)"
                )
        merged = {**defaults, **raw}
        if not isinstance(raw["metric"], str) or not raw["metric"]:
            raise RulesError(
                f"{src.where(loc + ('metric',))}: {name}.metric: expected a metric name "
                "(a column of the runs table, or ok_rate)"
            )
        rule = Rule(
            metric=raw["metric"],
            better=_choice(src, loc + ("better",), raw["better"], f"{name}.better", BETTER),
            where=src.where(loc),
        )
        fl = loc + ("tolerance",) if "tolerance" in raw else ("defaults", "tolerance")
        rule.tolerance = _number(
            src, fl, merged.get("tolerance", 0.05), f"{name}.tolerance", 0, None
        )
        fl = loc + ("alpha",) if "alpha" in raw else ("defaults", "alpha")
        rule.alpha = _number(
            src, fl, merged.get("alpha", 0.05), f"{name}.alpha", 0, 1, allow_null=True
        )
        fl = loc + ("stat",) if "stat" in raw else ("defaults", "stat")
        rule.stat = _choice(src, fl, merged.get("stat", "mean"), f"{name}.stat", STATS)
        if "variants" in raw:
            v = raw["variants"]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v) or not v:
                raise RulesError(
                    f"{src.where(loc + ('variants',))}: {name}.variants: expected a "
                    "non-empty list of variant names"
                )
            rule.variants = v
        if "required" in raw:
            if not isinstance(raw["required"], bool):
                raise RulesError(
                    f"{src.where(loc + ('required',))}: {name}.required: "
                    f"{raw['required']!r} is not allowed; allowed: true, false"
                )
            rule.required = raw["required"]
        _check_registry(src, loc, name, rule)
        rules.append(rule)
    return rules


def _check_registry(src: Source, loc: tuple, name: str, rule: Rule) -> None:
    """A rule's metric is a declared one and its direction the registry's
    (``mptlab.spec.metrics``): a misspelled metric would be skipped silently
    (no campaign has it), a wrong direction would call a regression an
    improvement."""
    why = registry.unknown(rule.metric)
    if why:
        raise RulesError(f"{src.where(loc + ('metric',))}: {name}.metric: {why}")
    declared = registry.better(rule.metric)
    if declared is not None and declared != rule.better:
        raise RulesError(
            f"{src.where(loc + ('better',))}: {name}.better: {rule.better!r} disagrees with "
            f"the metric's declared direction ({declared!r}, {registry.home(rule.metric)})"
        )


# ------------------------------------------------------------------ data
def _runs(root: Path, pcap: bool) -> pd.DataFrame:
    ingest.ingest(root, pcap=pcap)
    runs = ingest.load_runs(root)
    if not len(runs):
        raise SpecError(
            f"{root}: no run dirs found (expected a campaign dir with runs/<variant>/rep-NNN)"
        )
    runs = runs.copy()
    runs["ok_rate"] = (runs["status"] == "ok").astype(float)
    return runs


def _values(runs: pd.DataFrame, variant: str, metric: str) -> np.ndarray:
    sub = runs[runs["variant"] == variant]
    sub = sub[sub["attempt"] == "current"] if metric == "ok_rate" else stats.ok_runs(sub)
    if metric not in sub:
        return np.zeros(0)
    v = pd.to_numeric(sub[metric], errors="coerce").to_numpy(dtype=float)
    return v[np.isfinite(v)]


def exact_mode(base: pd.DataFrame, cur: pd.DataFrame) -> tuple[bool, str]:
    """Whether two campaigns can be compared exactly, and why (not)."""
    frames = (base[base["attempt"] == "current"], cur[cur["attempt"] == "current"])
    for f in frames:
        if "clock" not in f or not (f["clock"] == "virtual").all():
            return False, "statistical (Mann-Whitney U): not both on virtual time"

    def runs(f: pd.DataFrame) -> set:
        return set(zip(f["variant"], f["repetition"], f["seed"], strict=True))

    if runs(frames[0]) != runs(frames[1]):
        return False, "statistical (Mann-Whitney U): virtual time, but not the same runs and seeds"
    return True, (
        "exact: both on virtual time with the same runs and seeds "
        "(identical values: same; changed ones tested)"
    )


def check_rule(
    rule: Rule, variant: str, base: np.ndarray, cur: np.ndarray, exact: bool = False
) -> Check:
    c = Check(rule, variant, len(base), len(cur))
    agg = np.mean if rule.stat == "mean" else np.median
    if len(base) == 0 and len(cur) == 0:
        c.verdict = "MISSING" if rule.required else "skipped"
        c.note = "no values in either campaign"
        return c
    if len(base) == 0:
        c.cur = float(agg(cur))
        c.verdict, c.note = "new", "no baseline values"
        return c
    c.base = float(agg(base))
    if len(cur) == 0:
        c.verdict, c.note = "MISSING", "no values in the current campaign"
        return c
    c.cur = float(agg(cur))
    if c.base == 0:
        c.change = 0.0 if c.cur == 0 else math.copysign(math.inf, c.cur)
    else:
        c.change = c.cur / c.base - 1
        if c.base < 0:
            c.change = -c.change
    worse = -c.change if rule.better == "higher" else c.change
    if exact:
        same = len(base) == len(cur) and np.array_equal(np.sort(base), np.sort(cur))
        if same:
            c.verdict, c.note = "same", "identical values, run for run"
            return c
        if rule.tolerance == 0:  # asked for: any change in the worse direction fails
            c.verdict = "REGRESSED" if worse > 0 else "improved" if worse < 0 else "ok"
            c.note = "changed; tolerance 0: exact comparison (virtual time, same seeds)"
            return c
        # Changed: a change in behaviour, however small, re-draws every random
        # event of the run (which packet a loss hits, when a flow starts), so
        # the values now carry the spread of repetitions: a neutral change
        # moved one bulk run by 3 % (docs/analysis.md).  Tested as real time.
        c.note = "changed run for run; "
    _u, c.p_value = stats.mann_whitney(base, cur)
    significant = rule.alpha is None or (math.isfinite(c.p_value) and c.p_value < rule.alpha)
    if worse > rule.tolerance:
        if significant:
            c.verdict = "REGRESSED"
        else:
            c.verdict = "unsure"
            floor = stats.min_p_value(len(base), len(cur))
            alpha = rule.alpha or 0.0  # not None here: significance was asked for
            c.note += f"not significant at alpha {alpha:g}" + (
                f"; n={len(base)}/{len(cur)} cannot reach it (min p {floor:.3g})"
                if floor >= alpha
                else ""
            )
    elif -worse > rule.tolerance and significant:
        c.verdict = "improved"
    else:
        c.verdict = "ok"
    c.note = c.note.removesuffix("; ")
    return c


def compare(
    baseline: Path, current: Path, rules: list[Rule], strict: bool = False, pcap: bool = True
) -> CompareResult:
    base_runs = _runs(Path(baseline), pcap)
    cur_runs = _runs(Path(current), pcap)
    res = CompareResult(strict=strict)
    res.exact, res.mode = exact_mode(base_runs, cur_runs)
    base_vars = list(dict.fromkeys(base_runs["variant"]))
    cur_vars = set(cur_runs["variant"])
    known = set(base_runs.columns) | set(cur_runs.columns)
    for rule in rules:
        if rule.metric not in known and rule.required:
            metrics = sorted(set(stats.metric_columns(base_runs)) | {"ok_rate"})
            raise RulesError(
                f"{rule.where}: metric {rule.metric!r} is in neither campaign; "
                f"metrics: {', '.join(metrics)}"
            )
        variants = rule.variants or base_vars
        for v in variants:
            if rule.variants and v not in base_vars and v not in cur_vars:
                raise RulesError(
                    f"{rule.where}: variant {v!r} is in neither campaign; "
                    f"variants: {', '.join(base_vars)}"
                )
            if v not in cur_vars and v in base_vars:
                c = Check(rule, v, len(_values(base_runs, v, rule.metric)), 0)
                c.verdict, c.note = "MISSING", "variant absent from the current campaign"
                res.checks.append(c)
                continue
            res.checks.append(
                check_rule(
                    rule,
                    v,
                    _values(base_runs, v, rule.metric),
                    _values(cur_runs, v, rule.metric),
                    exact=res.exact,
                )
            )
    return res


def _f(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.4g}"


def render(res: CompareResult) -> str:
    headers = [
        "metric",
        "variant",
        "better",
        "stat",
        "n base",
        "n cur",
        "baseline",
        "current",
        "change",
        "tolerance",
        "p (MWU)",
        "alpha",
        "verdict",
        "note",
    ]
    rows = []
    for c in res.checks:
        r = c.rule
        change = "-" if not math.isfinite(c.change) else f"{c.change * 100:+.1f}%"
        rows.append(
            [
                r.metric,
                c.variant,
                r.better,
                r.stat,
                str(c.n_base),
                str(c.n_cur),
                _f(c.base),
                _f(c.cur),
                change,
                f"{r.tolerance * 100:g}%",
                _f(c.p_value),
                "-" if r.alpha is None else f"{r.alpha:g}",
                c.verdict,
                c.note,
            ]
        )
    widths = [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(headers)
    ]
    lines = [f"comparison: {res.mode}", ""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    failed = res.failed
    lines.append("")
    if failed:
        lines.append(f"FAIL: {len(failed)} of {len(res.checks)} checks failed")
    else:
        unsure = sum(c.verdict == "unsure" for c in res.checks)
        lines.append(f"PASS: {len(res.checks)} checks" + (f" ({unsure} unsure)" if unsure else ""))
    return "\n".join(lines)
