"""Does a campaign reproduce the paper?  The ``expect:`` claims of an
experiment (``mptlab.spec.expect``) against its runs.

    mptlab reproduce NAME [DIR]      claims of NAME against DIR (default results/NAME)
    mptlab reproduce DIR             claims of every experiment with runs in DIR

Per claim: the two variants its ``compare`` entries name in this campaign,
our mean with its 95 % bootstrap CI and n for each (ok runs of the current
attempt, as every statistic), the relative difference subject vs baseline
with its bootstrap CI (``stats.compare``), and a verdict that weighs the
size as well as the sign:

- ``reproduced``: the CI of our difference excludes zero with the paper's
  sign, and the paper's change lies inside that CI or within the claim's
  size band of our difference (``Claim.size_band``: max(3 points, a third
  of the paper's change) unless the claim states ``size_tolerance``); a
  claim of no difference: the CI lies within +-``tolerance``;
- ``direction only``: the paper's sign, but not its size;
- ``opposite``: the CI excludes zero with the other sign;
- ``no effect``: the paper claims a change clearly away from zero (larger
  than its size band) and our whole CI lies within +-1 % (``NEGLIGIBLE``):
  the effect is absent, whatever the sign of a tiny difference.  Under
  virtual time the runs of a setup without randomness are one run, whose
  CI has no width: a -0.02 % difference would otherwise read ``opposite``
  or, at exactly 0, ``inconclusive`` (Kubde's saturated links);
- ``different`` (claims of no difference only): the CI lies outside
  +-``tolerance``;
- ``inconclusive``: anything else (the CI spans zero, n < 2);
- ``constant``: the statistic has one value in every ok run of both
  variants (e.g. an OFO median that is 0 in every run): it cannot decide
  the claim, which is flagged, not judged;
- ``no ok run``: the variants are in the campaign, but one of them has no
  ok run with a value of the metric (every run failed, stalled or timed
  out): a finding about the setup, shown with the runs' statuses;
- ``not run``: a variant or the metric is not in the campaign.

A level claim (``compare: [SUBJECT]`` with the paper's ``value``) has no
baseline: the subject's mean with its 95 % bootstrap CI and n (the same
runs, the same bookkeeping of runs not ok) against the paper's value
(x ``scale``), ``level_verdict``:

- ``reproduced``: the paper's value lies in our CI, or within the claim's
  band of our mean (``size_tolerance``, relative to the paper's value;
  default 10 %: 0.75 is met by 0.675 to 0.825);
- ``different``: neither; ``why`` says whether ours is higher or lower and
  by how much (absolute and relative);
- ``inconclusive``: n < 2 (no CI);
- every ok run with the same value (n >= 2): that value is held against
  the band (reproduced or different), said in ``why``; a level, unlike a
  difference, is decided by a constant;
- ``no ok run`` and ``not run`` as for two variants.

Its relative difference (``rel_diff``, ``ci_low``, ``ci_high``) is ours
against the paper's value: ``mean / paper - 1`` and the CI likewise (a
paper's value of 0: the difference, ``absolute``).

Where the paper gives values, our means stand next to them with their
ratio (``level``): a claim can be reproduced in its change while the
absolute level differs, which the ratio shows.

With each variant, the runs that did not end ok (failed, stalled, ...):
they are left out of the statistics, which can bias the comparison.

Every result shows its claim's kind (``Claim.kind``), the form of the
paper's words, which changes the size test only (the sign, no effect,
inconclusive and constant stay as above):

- ``change``: the paper's change within the size band (above);
- ``at least`` / ``at most`` (``bound``): "more than +100 %": the values
  from the bound outwards; met if that half-line reaches into our CI or
  lies within the band of ours (``verdict``'s ``bound``): the point test
  against a set holding the point, so marking a claim a bound never costs
  it a verdict, and ``direction only`` means our CI falls short of the
  bound by more than the band;
- ``equivalence`` (``tolerance``) and ``level`` as above;
- ``statistic: median``: medians over the runs, with the bootstrap CI of
  the ratio of medians (``compare_medians``); a baseline median of 0 (or
  0 in more of the bootstrap replicates than the CI's tail) makes it the
  difference of medians, said in ``why``;
- ``over``: the best of several cells (``_evaluate_over``), each cell's CI
  widened by Bonferroni so that the chosen one's holds at 95 %; ``cell``
  names it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..rundir import breakdown
from ..spec.expect import Claim, metric_columns, resolve
from . import stats

# The verdicts in the order tables show them.
VERDICTS = (
    "reproduced",
    "direction only",
    "opposite",
    "no effect",
    "different",
    "inconclusive",
    "constant",
    "no ok run",
    "not run",
)
(
    REPRODUCED,
    DIRECTION_ONLY,
    OPPOSITE,
    NO_EFFECT,
    DIFFERENT,
    INCONCLUSIVE,
    CONSTANT,
    NO_OK_RUN,
    NOT_RUN,
) = VERDICTS
# Relative changes inside +-1 % are no effect for a claim of a larger
# change: the smallest change a seed claims beyond its size band is 3.2 %
# (BLEST Table III, wikipedia, OTIAS vs minRTT; 105 such claims), and 1 % is
# below what 10 runs of a noisy seed setup resolve (BLEST bulk: a CI
# half-width of ~6 points).
NEGLIGIBLE = 0.01
VERDICT_LEGEND = (
    "reproduced: the 95 % CI of our relative difference excludes zero with the paper's sign "
    "and the paper's change lies inside it or within the claim's size band (default max(3 "
    "points, a third of the paper's change)); a claim of no difference: the CI lies within "
    "its tolerance. direction only: the paper's sign, not its size. opposite: the CI "
    "excludes zero with the other sign. no effect: the paper claims a change beyond its size "
    "band, our CI lies within +-1 %. different: a claim of no difference whose CI lies "
    "outside its tolerance. A claim marked at least / at most is met when the values beyond "
    "its bound reach into our CI or within its size band of ours (a median claim compares "
    "medians, a claim over cells its best cell, each CI Bonferroni-widened). "
    "A level claim (one variant against the paper's value) is "
    "reproduced if the paper's value lies in our CI of the mean or within its band (default "
    "+-10 %) of our mean, else different. inconclusive: the CI includes zero (or n < 2). "
    "constant: the statistic has "
    "one value in every run, it cannot decide the claim. no ok run: a variant ran, but "
    "none of its runs ended ok with a value (failed, stalled or timed out: see why). "
    "not run: a variant or the metric is not in these runs."
)
FEW = 5  # fewer runs per variant: a verdict's CI is rough, said next to it


@dataclass
class Side:
    """One variant of a claim in this campaign."""

    entry: str  # the compare entry as written
    variant: str | None = None  # the campaign's variant it names (None: not run)
    summary: stats.Summary | None = None
    runs: int = 0  # runs of the variant (current attempt, any status)
    not_ok: str = ""  # "1 stalled, 2 failed"
    no_value: int = 0  # ok runs without a value of the metric
    starved: int = 0  # ok real-time runs that waited for a host CPU (rundir.is_starved)
    late_starts: int = 0  # ok web runs with a load whose first request waited a SYN back-off
    statistic: str = "mean"  # the claim's: the statistic shown and judged
    median_ci: tuple[float, float] = (math.nan, math.nan)  # bootstrap CI (statistic median)

    def point(self) -> float:
        """The claim's statistic of this variant (mean or median); nan without runs."""
        s = self.summary
        if s is None:
            return math.nan
        return s.median if self.statistic == "median" else s.mean


@dataclass
class ClaimResult:
    claim: Claim
    subject: Side
    baseline: Side  # a level claim: Side("") with no variant, never evaluated
    verdict: str = NOT_RUN
    why: str = ""  # why not run / inconclusive, in words
    rel_diff: float = math.nan  # ours: mean(subject) / mean(baseline) - 1
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    absolute: bool = False  # baseline mean (median) 0: the CI is of the difference
    notes: list[str] = field(default_factory=list)
    cell: str = ""  # a claim over cells: the over entry judged (the best cell)
    cells: int = 0  # ... of how many cells with a difference

    @property
    def paper_change(self) -> float:
        return self.claim.paper_change()

    @property
    def kind(self) -> str:
        """The claim's kind (``Claim.kind``): change, at least, equivalence, level, ..."""
        return self.claim.kind

    @property
    def sides(self) -> tuple[Side, ...]:
        """The sides the claim has: (subject, baseline), or (subject,) for a level claim."""
        return (self.subject,) if self.claim.is_level else (self.subject, self.baseline)


def sides_of(claim: Claim) -> tuple[Side, Side]:
    """Fresh (subject, baseline) sides of a claim (a level claim's baseline: ``Side("")``)."""
    return Side(claim.compare[0]), Side(claim.baseline or "")


def verdict(
    direction: int,
    lo: float,
    hi: float,
    tolerance: float | None = None,
    *,
    paper: float | None = None,
    ours: float | None = None,
    band: float = 0.0,
    negligible: float = 0.0,
    bound: str | None = None,
) -> str:
    """The verdict from the paper's direction (+1, -1; 0: no difference within
    ``tolerance``) and the CI [lo, hi] of our relative difference.  With the
    paper's change (``paper``) and our point estimate (``ours``), a right
    sign is ``reproduced`` only if the paper's change lies in [lo, hi] or
    within ``band`` of ours, else ``direction only``; without them the sign
    alone decides (``reproduced``).  With ``negligible`` > 0, a paper's
    change larger than ``band`` against a CI within +-``negligible`` is
    ``no effect``.

    With ``bound`` (``at least`` / ``at most``) the paper's change is the
    near end of the values its words allow ("more than +100 %": +100 % and
    beyond), and the size test holds that half-line where it held the
    point: reproduced if it reaches into our CI (``hi >= paper`` for at
    least) or our estimate lies within ``band`` of it (``ours >= paper -
    band``).  The same test as for the point, against a set that contains
    the point: a claim never loses a verdict by being marked a bound; only
    a CI wholly short of the bound, by more than the band, is ``direction
    only``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return INCONCLUSIVE
    if direction == 0:
        tol = tolerance or 0.0
        if -tol <= lo and hi <= tol:
            return REPRODUCED
        if lo > tol or hi < -tol:
            return DIFFERENT
        return INCONCLUSIVE
    if (
        negligible > 0
        and paper is not None
        and math.isfinite(paper)
        and abs(paper) > band
        and -negligible <= lo
        and hi <= negligible
    ):
        return NO_EFFECT
    if not (lo > 0 or hi < 0):
        return INCONCLUSIVE
    if (1 if lo > 0 else -1) != direction:
        return OPPOSITE
    if paper is None or ours is None or not math.isfinite(paper):
        return REPRODUCED
    if bound == "at least":
        met = hi >= paper or ours >= paper - band
    elif bound == "at most":
        met = lo <= paper or ours <= paper + band
    else:
        met = lo <= paper <= hi or abs(ours - paper) <= band
    return REPRODUCED if met else DIRECTION_ONLY


def level_verdict(
    paper: float, mean: float, lo: float, hi: float, band: float, bound: str | None = None
) -> str:
    """A level claim's verdict: the paper's value ``paper`` (in the metric's
    unit) against our mean and its CI [lo, hi]: ``reproduced`` if it lies in
    the CI or within ``band`` (relative to the paper's value) of the mean,
    or, for a bound (``at least`` / ``at most``), if our mean lies beyond it
    on that side; else ``different``; ``inconclusive`` without a CI (n < 2).
    A constant (lo = hi = mean) is held against the band alone."""
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(mean)):
        return INCONCLUSIVE
    if lo <= paper <= hi:
        return REPRODUCED
    if (bound == "at least" and mean >= paper) or (bound == "at most" and mean <= paper):
        return REPRODUCED
    # the slack: 0.675 against 0.75 +-10 % is inside, whatever the rounding
    if abs(mean - paper) <= band * abs(paper) + 1e-12 * max(1.0, abs(paper)):
        return REPRODUCED
    return DIFFERENT


def _quantiles(reps: np.ndarray, conf: float, **kw) -> tuple[float, float]:
    lo, hi = np.quantile(reps, [(1 - conf) / 2, 1 - (1 - conf) / 2], **kw)
    return float(lo), float(hi)


def compare_medians(
    base: pd.Series, subj: pd.Series, conf: float, n_boot: int, seed: int
) -> tuple[float, float, float, bool]:
    """(change, lo, hi, absolute): ``median(subj) / median(base) - 1`` with the
    percentile bootstrap CI of the ratio of medians (each sample resampled on
    its own, the seeds of ``stats.compare``).

    A median of 0 is common (an out-of-order queue empty in most runs), and
    then no ratio exists: if the baseline's median is 0, or more than the
    CI's tail share of its replicates are (the ratio's CI would have no
    bound), the change is the difference of the medians with its bootstrap
    CI (``absolute`` True), as a zero baseline mean is judged.  The few zero
    replicates below that share count as an infinite change (0 if the
    subject's is 0 too) and fall in the tail the CI leaves out, without
    interpolation."""
    if len(base) < 2 or len(subj) < 2:
        return math.nan, math.nan, math.nan, False
    mb, ms = float(np.median(base)), float(np.median(subj))
    rb = stats.bootstrap(base, np.median, n_boot, seed)
    rs = stats.bootstrap(subj, np.median, n_boot, seed + 1)
    zero = rb == 0
    if mb == 0 or zero.mean() > (1 - conf) / 2:
        lo, hi = _quantiles(rs - rb, conf)
        return ms - mb, lo, hi, True
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(zero, np.sign(rs) * np.inf, rs / np.where(zero, 1, rb) - 1)
    ratio = np.nan_to_num(ratio, nan=0.0, posinf=np.inf, neginf=-np.inf)
    lo, hi = _quantiles(ratio, conf, method="inverted_cdf")
    return ms / mb - 1, lo, hi, False


def values(runs: pd.DataFrame, metric: str) -> pd.Series | None:
    """The metric per run (a column, or the ratio of two), None if a column is missing."""
    num, den = metric_columns(metric)
    if num not in runs or (den is not None and den not in runs):
        return None
    a = pd.to_numeric(runs[num], errors="coerce")
    if den is None:
        return a
    b = pd.to_numeric(runs[den], errors="coerce")
    return (a / b.where(b != 0)).astype(float)


def campaign_variants(runs: pd.DataFrame) -> list[tuple[str, dict]]:
    """(variant, its keys) of a campaign's runs, in the order they appear."""
    out: dict[str, dict] = {}
    for _, r in runs.iterrows():
        v = str(r["variant"])
        if v not in out:
            keys = r.get("variant_keys")
            out[v] = json.loads(keys) if isinstance(keys, str) and keys else {}
    return list(out.items())


def _side(entry: str, runs: pd.DataFrame, variants, metric_values) -> Side:
    side = Side(entry)
    label, why = resolve(entry, variants)
    if label is None:
        side.summary = None
        side.not_ok = why
        return side
    side.variant = label
    mine = runs[runs["variant"] == label]
    side.runs = len(mine)
    side.not_ok = breakdown(mine["status"])
    ok = stats.ok_runs(mine)
    if metric_values is not None:
        v = metric_values.loc[ok.index]
        side.no_value = int(v.isna().sum())
    side.starved = int(stats.starved(ok).sum())
    if "late_first_request_loads" in ok:
        # a lost SYN costs a page load the 1 s initial RTO whatever the
        # scheduler: one such run in 10 moves a mean by ~10 % (BLEST WLAN + WLAN amazon)
        late = pd.to_numeric(ok["late_first_request_loads"], errors="coerce")
        side.late_starts = int((late > 0).sum())
    return side


def _no_ok_run(res: ClaimResult, sides: list[Side]) -> bool:
    """Does a side have no ok run with a value?  Then ``res`` says why (and is
    ``no ok run`` if every such side ran and recorded the metric)."""
    empty = [s for s in sides if s.summary is not None and s.summary.n == 0]
    if not empty:
        return False
    metric = res.claim.metric
    res.why = "; ".join(
        f"no ok run with a value of {metric} in {s.variant} "
        + (f"({s.not_ok} of {s.runs} runs" if s.not_ok else f"({s.runs} runs")
        + (f"; {s.no_value} ok runs did not record it)" if s.no_value else ")")
        for s in empty
    )
    if all(s.runs and not s.no_value for s in empty):
        # it ran and every run failed: a finding about the setup, not a
        # gap.  Ok runs without the value (e.g. recorded before the
        # metric existed) leave it "not run": a rerun decides it.
        res.verdict = NO_OK_RUN
    return True


def _paper_unit(claim: Claim) -> str:
    """The paper's unit where it is the metric's (no ``scale``), for words."""
    return f" {claim.unit}" if claim.unit and claim.scale == 1 else ""


def _evaluate_level(
    res: ClaimResult, runs: pd.DataFrame, metric_values: pd.Series, conf, n_boot, seed
) -> ClaimResult:
    """A level claim (``res.subject`` resolved, the metric a column): our mean
    (median) and its CI against the paper's value (``level_verdict``)."""
    claim, subj = res.claim, res.subject
    ok = stats.ok_runs(runs)
    v = metric_values.loc[ok.index[ok["variant"] == subj.variant]].dropna()
    s = subj.summary = stats.describe(v, conf, n_boot, seed)
    if claim.statistic == "median":
        subj.median_ci = stats.bootstrap_ci(v, np.median, conf, n_boot, seed)
    if subj.not_ok:
        res.notes.append(f"{subj.variant}: {subj.not_ok} left out")
    if _no_ok_run(res, [subj]):
        return res
    paper, band = claim.paper_level(), claim.size_band()
    unit = _paper_unit(claim)
    ours = subj.point()
    constant = s.n >= 2 and v.nunique() == 1
    ci = subj.median_ci if claim.statistic == "median" else (s.ci_low, s.ci_high)
    lo, hi = (ours, ours) if constant else ci
    # ours against the paper's value: relative, or (a paper's 0) the difference
    if paper:
        res.rel_diff = ours / paper - 1
        ends = sorted((lo / paper - 1, hi / paper - 1))
    else:
        res.absolute = True
        res.rel_diff = ours - paper
        ends = [lo - paper, hi - paper]
    if math.isfinite(lo) and math.isfinite(hi):
        res.ci_low, res.ci_high = ends
    res.verdict = level_verdict(paper, ours, lo, hi, band, claim.bound)
    what = f"the paper's {_num(paper)}{unit}"
    if res.verdict == INCONCLUSIVE:
        res.why = f"n < 2 in {subj.variant}: no CI"
        return res
    words = []
    if constant:
        words.append(f"{claim.metric} is {_num(float(v.iloc[0]))} in every ok run (n={s.n})")
    if res.verdict == DIFFERENT:
        d = ours - paper
        rel = f" ({pct(d / paper)})" if paper else ""
        where = "beyond" if constant else "outside our CI and beyond"
        words.append(
            f"ours is {'higher' if d > 0 else 'lower'} than {what} by {_num(abs(d))}{unit}"
            f"{rel}: {where} the +-{band * 100:.3g} % band"
        )
    elif s.n < FEW and not constant:
        words.append(f"few runs (n < {FEW}): the bootstrap CI is rough")
    res.why = "; ".join(words)
    return res


def evaluate_claim(
    claim: Claim,
    runs: pd.DataFrame,
    conf: float = stats.CONF,
    n_boot: int = stats.N_BOOT,
    seed: int = stats.SEED,
) -> ClaimResult:
    """One claim against the runs of one experiment (variant names as its campaign has them)."""
    if claim.over:
        return _evaluate_over(claim, runs, conf, n_boot, seed)
    variants = campaign_variants(runs) if len(runs) else []
    metric_values = values(runs, claim.metric) if len(runs) else None
    subj = _side(claim.compare[0], runs, variants, metric_values)
    if claim.baseline is None:  # a level claim: no baseline
        base = Side("")
    else:
        base = _side(claim.baseline, runs, variants, metric_values)
    subj.statistic = base.statistic = claim.statistic
    res = ClaimResult(claim, subj, base)
    missing = [s for s in res.sides if s.variant is None]
    if missing:
        res.why = "; ".join(s.not_ok for s in missing)
        for s in missing:
            s.not_ok = ""
        return res
    if metric_values is None:
        num, den = metric_columns(claim.metric)
        absent = [c for c in (num, den) if c and c not in runs]
        res.why = f"{', '.join(absent)}: not a column of the runs table"
        return res
    if claim.is_level:
        return _evaluate_level(res, runs, metric_values, conf, n_boot, seed)
    ok = stats.ok_runs(runs)
    samples = []
    for side in (subj, base):
        v = metric_values.loc[ok.index[ok["variant"] == side.variant]].dropna()
        side.summary = stats.describe(v, conf, n_boot, seed)
        if claim.statistic == "median":
            side.median_ci = stats.bootstrap_ci(v, np.median, conf, n_boot, seed)
        samples.append(v)
    if subj.summary is None or base.summary is None:  # for mypy
        return res
    if _no_ok_run(res, [subj, base]):
        return res
    both = pd.concat(samples)
    if len(both) >= 2 and both.nunique() == 1:
        res.verdict = CONSTANT
        res.why = (
            f"{claim.metric} is {_num(float(both.iloc[0]))} in every ok run of both variants "
            f"(n={len(samples[0])}, {len(samples[1])}): it cannot decide this claim"
        )
        return res
    paper, band = claim.paper_change(), claim.size_band()
    if claim.statistic == "median":
        res.rel_diff, lo, hi, res.absolute = compare_medians(
            samples[1], samples[0], conf, n_boot, seed
        )
        res.ci_low, res.ci_high = lo, hi
        res.p_value = stats.mann_whitney(samples[1], samples[0])[1]
    else:
        c = stats.compare(samples[1], samples[0], conf, n_boot, seed)
        res.rel_diff, res.ci_low, res.ci_high = c.rel_diff, c.ci_low, c.ci_high
        res.p_value = c.p_value
        lo, hi = c.ci_low, c.ci_high
        if base.summary.mean == 0 and len(samples[0]) >= 2 and len(samples[1]) >= 2:
            # no relative difference from a zero baseline: the sign from the difference of means
            res.absolute = True
            d = stats.bootstrap(samples[0], np.mean, n_boot, seed + 1) - stats.bootstrap(
                samples[1], np.mean, n_boot, seed
            )
            lo, hi = _quantiles(d, conf)
            res.ci_low, res.ci_high = lo, hi
            res.rel_diff = subj.summary.mean - base.summary.mean
    if res.absolute:
        # the size, where the paper gives values: its difference in our unit
        vals = claim.paper_values()
        if vals is not None:
            paper = (vals[0] - vals[1]) * claim.scale
            band = abs(paper) * band / max(abs(claim.paper_change()), 1e-9)
        else:
            paper = math.nan  # a relative change cannot be held against a zero baseline
    res.verdict = verdict(
        claim.direction,
        lo,
        hi,
        claim.tolerance,
        paper=paper,
        ours=res.rel_diff,
        band=band,
        negligible=0.0 if res.absolute else NEGLIGIBLE,
        bound=claim.bound,
    )
    if res.verdict == REPRODUCED and res.absolute and not math.isfinite(paper):
        res.verdict = DIRECTION_ONLY
        res.why = (
            f"the baseline's {claim.statistic} is 0: no relative size to hold against the paper's"
        )
    if res.verdict == NO_EFFECT:
        res.why = (
            f"our CI lies within +-{NEGLIGIBLE:.0%}, the paper's change is "
            f"{_size(paper, res.absolute)}"
        )
    if res.verdict == DIRECTION_ONLY and not res.why:
        if claim.bound:
            short = "below" if claim.bound == "at least" else "above"
            res.why = (
                f"the paper's {claim.bound} {_size(paper, res.absolute)}: our CI lies wholly "
                f"{short} it and ours is more than {_size(band, res.absolute, sign=False)} short"
            )
        else:
            res.why = (
                f"the paper's {_size(paper, res.absolute)} is outside our CI and more than "
                f"{_size(band, res.absolute, sign=False)} from ours"
            )
    if res.verdict == INCONCLUSIVE:
        small = [s.variant for s in (subj, base) if s.summary is not None and s.summary.n < 2]
        if small:
            res.why = f"n < 2 in {', '.join(map(str, small))}: no CI"
        elif claim.direction == 0:
            res.why = f"the CI straddles the +-{claim.tolerance:.0%} band"
        else:
            res.why = "the CI includes zero"
    elif min(len(samples[0]), len(samples[1])) < FEW and not res.why:
        res.why = f"few runs (n < {FEW}): the bootstrap CI is rough"
    for side in (subj, base):
        if side.not_ok:
            res.notes.append(f"{side.variant}: {side.not_ok} left out")
    if res.absolute and claim.statistic == "median":
        # said first: why the change is a difference, not a ratio as the paper's
        zero = (
            "is 0"
            if base.summary.median == 0
            else f"is 0 in more than {(1 - conf) / 2:.1%} of the bootstrap replicates"
        )
        said = f"the baseline's median {zero}: the difference of medians is judged"
        res.why = "; ".join(w for w in (said, res.why) if w)
    return res


def _evaluate_over(
    claim: Claim, runs: pd.DataFrame, conf: float, n_boot: int, seed: int
) -> ClaimResult:
    """ "Up to X over these cells": each cell of ``claim.over`` evaluated as a
    claim of its own, the verdict that of the cell whose difference lies
    furthest in the paper's direction (the paper's "up to" is its best cell).

    Picking the largest of k noisy estimates favours one that is too large
    by chance (the winner's curse), more so the more cells and the fewer
    runs; each cell's CI is therefore taken at 1 - (1 - conf) / k
    (Bonferroni), so that the CIs of all k cells hold at once with ``conf``
    and the chosen one's is a ``conf`` CI whichever it is.  Relative
    differences rank before differences from a zero baseline (another
    unit); cells not run, with no ok run or constant have no difference and
    are counted, not ranked.  With no cell to rank, the first cell's result
    stands, and why gives every cell's."""
    assert claim.over is not None
    k = len(claim.over)
    cell_conf = 1 - (1 - conf) / k
    results = [evaluate_claim(claim.cell(i), runs, cell_conf, n_boot, seed) for i in range(k)]
    ranked = [
        (not r.absolute, claim.direction * r.rel_diff, -i)
        for i, r in enumerate(results)
        if math.isfinite(r.rel_diff) and r.verdict not in (NOT_RUN, NO_OK_RUN, CONSTANT)
    ]
    best = -max(ranked)[2] if ranked else 0
    res = results[best]
    res.claim, res.cell, res.cells = claim, claim.over[best], len(ranked)
    if not ranked:
        res.why = "no cell has a difference: " + "; ".join(
            f"{cell}: {r.verdict}" + (f" ({r.why})" if r.why else "")
            for cell, r in zip(claim.over, results, strict=True)
        )
        return res
    unjudged = [
        f"{cell}: {r.verdict}"
        for cell, r in zip(claim.over, results, strict=True)
        if not (math.isfinite(r.rel_diff) and r.verdict not in (NOT_RUN, NO_OK_RUN, CONSTANT))
    ]
    said = (
        f"best of {len(ranked)} cells: {res.cell} (each CI at {cell_conf:.2%}, Bonferroni "
        f"over {k}: a {conf:.0%} CI for the cell chosen)"
    )
    if unjudged:
        said += f"; not ranked: {', '.join(unjudged)}"
    res.why = "; ".join(w for w in (said, res.why) if w)
    return res


def evaluate(
    claims: list[Claim],
    runs: pd.DataFrame,
    conf: float = stats.CONF,
    n_boot: int = stats.N_BOOT,
    seed: int = stats.SEED,
) -> list[ClaimResult]:
    return [evaluate_claim(c, runs, conf, n_boot, seed) for c in claims]


def counts(results: list[ClaimResult]) -> dict[str, int]:
    return {
        v: sum(r.verdict == v for r in results)
        for v in VERDICTS
        if any(r.verdict == v for r in results)
    }


def experiment_runs(runs: pd.DataFrame, experiment: str) -> pd.DataFrame:
    """The current runs of one experiment, variants named as its campaign names them."""
    if not len(runs):
        return runs
    keep = runs["attempt"].isin(["current", "incomplete"]) if "attempt" in runs else True
    if "experiment" in runs:
        keep = keep & (runs["experiment"] == experiment)
    return runs[keep]


def quick_campaigns(runs: pd.DataFrame) -> list[str]:
    """The campaigns among ``runs`` that ``mptlab run --quick`` made (named
    ``...-quick``): shortened workloads, no warm-up, not the paper's setup."""
    if not len(runs) or "campaign" not in runs:
        return []
    return sorted({str(c) for c in runs["campaign"].dropna() if str(c).endswith("-quick")})


@dataclass
class Expectations:
    """What the catalog says about an experiment: its claims, notes, source."""

    experiment: str
    claims: list[Claim] = field(default_factory=list)
    notes: str = ""
    source: str = ""
    error: str = ""  # the catalog could not give them (not in it, a bad file)


def expectations(experiments: list[str], file: Path | None = None) -> list[Expectations]:
    """The claims of each experiment, from experiments.yaml (or ``file``)."""
    from ..spec.catalog import Catalog
    from ..spec.yamlsrc import SpecError

    try:
        cat = Catalog.load(Path(file) if file else None)
    except SpecError as exc:
        return [Expectations(e, error=str(exc)) for e in experiments]
    out = []
    for e in experiments:
        if e not in cat.experiments:
            where = file or "experiments.yaml"
            hint = "" if file else "; the campaign file it came from: --file FILE"
            out.append(Expectations(e, error=f"{e} is not an experiment of {where}{hint}"))
            continue
        try:
            spec = cat.spec(e)
            out.append(Expectations(e, cat.claims(e), spec.notes.strip(), spec.source))
        except SpecError as exc:
            out.append(Expectations(e, error=str(exc)))
    return out


def to_frame(experiment: str, results: list[ClaimResult]) -> pd.DataFrame:
    """One row per claim: what the table shows, as numbers."""
    rows = []
    for r in results:
        cl = r.claim
        vals = cl.paper_values() or (math.nan, math.nan)
        if cl.is_level:
            vals = (float(cl.value), math.nan) if cl.value is not None else vals
        row = {
            "experiment": experiment,
            "claim": cl.claim,
            "kind": cl.kind,
            "statistic": cl.statistic,
            "cell": r.cell or None,
            "source": cl.source,
            "derived": cl.derived,
            "metric": cl.metric,
            "subject": r.subject.variant or r.subject.entry,
            "baseline": (r.baseline.variant or r.baseline.entry) if not cl.is_level else None,
            "paper_subject": vals[0],
            "paper_baseline": vals[1],
            "paper_change": cl.paper_change(),
            "size_band": cl.size_band() if cl.direction or cl.is_level else math.nan,
            "direction": cl.direction,
        }
        for name, side, pv in (
            ("subject", r.subject, vals[0]),
            ("baseline", r.baseline, vals[1]),
        ):
            if name == "baseline" and cl.is_level:  # no baseline: its columns empty
                row.update(
                    {
                        f"{k}_baseline": math.nan
                        for k in (
                            "n",
                            "mean",
                            "level",
                            "ci_low",
                            "ci_high",
                            "median",
                            "median_ci_low",
                            "median_ci_high",
                        )
                    }
                )
                row["not_ok_baseline"] = None
                continue
            s = side.summary
            row[f"n_{name}"] = s.n if s else 0
            row[f"mean_{name}"] = s.mean if s else math.nan
            row[f"level_{name}"] = level(side, pv, cl.scale)
            row[f"ci_low_{name}"] = s.ci_low if s else math.nan
            row[f"ci_high_{name}"] = s.ci_high if s else math.nan
            # the median's CI only where the claim is about medians (computed then)
            row[f"median_{name}"] = s.median if s else math.nan
            row[f"median_ci_low_{name}"], row[f"median_ci_high_{name}"] = side.median_ci
            row[f"not_ok_{name}"] = side.not_ok
        row.update(
            rel_diff=r.rel_diff,
            ci_low=r.ci_low,
            ci_high=r.ci_high,
            absolute=r.absolute,
            verdict=r.verdict,
            why=r.why,
        )
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ text
def _num(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    if 1e4 <= abs(x) < 1e10:
        return f"{x:.0f}"
    return f"{x:.4g}"


def pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.1f} %"


def _size(x: float, absolute: bool, sign: bool = True) -> str:
    """A change in words: relative (points of %) or a difference of means."""
    if absolute:
        return f"{x:+.4g}" if sign else f"{x:.4g}"
    return pct(x) if sign else f"{x * 100:.1f} points"


def ours_text(side: Side) -> str:
    s = side.summary
    if s is None or side.variant is None:
        return "-"
    if side.statistic == "median":
        lo, hi = side.median_ci
        ci = f" [{_num(lo)}, {_num(hi)}]" if math.isfinite(lo) else ""
        return f"median {_num(s.median)}{ci} n={s.n}"
    ci = f" [{_num(s.ci_low)}, {_num(s.ci_high)}]" if math.isfinite(s.ci_low) else ""
    return f"{_num(s.mean)}{ci} n={s.n}"


def _signed(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return ("+" if x >= 0 else "") + _num(x)


def diff_text(r: ClaimResult) -> str:
    if r.verdict in (NOT_RUN, NO_OK_RUN):
        return "-"
    if r.claim.is_level:
        # ours against the paper's value: the difference, and relative with its CI
        if r.absolute:
            return (
                f"{_signed(r.rel_diff)} [{_signed(r.ci_low)}, {_signed(r.ci_high)}] "
                "vs the paper's 0"
            )
        d = r.subject.point() - r.claim.paper_level()
        return (
            f"{_signed(d)}{_paper_unit(r.claim)} ({pct(r.rel_diff)} [{pct(r.ci_low)}, "
            f"{pct(r.ci_high)}]) vs the paper's"
        )
    stat = r.claim.statistic
    if r.absolute:
        return (
            f"{_num(r.rel_diff)} [{_num(r.ci_low)}, {_num(r.ci_high)}] "
            f"(difference of {stat}s: baseline {stat} 0)"
        )
    of = " (of medians)" if stat == "median" else ""
    return f"{pct(r.rel_diff)} [{pct(r.ci_low)}, {pct(r.ci_high)}]{of}"


def paper_text(claim: Claim) -> str:
    vals = claim.paper_values()
    unit = f" {claim.unit}" if claim.unit else ""
    if claim.is_level and claim.value is not None:
        bound = f"{claim.bound} " if claim.bound else ""
        return f"{bound}{_num(claim.value)}{unit} (level, band +-{claim.size_band() * 100:.3g} %)"
    change = pct(claim.paper_change())
    if claim.direction == 0:
        change = f"no difference (+-{claim.tolerance:.0%})"
    elif claim.bound:
        change = f"{claim.bound} {change}, band {claim.size_band() * 100:.0f} points"
    else:
        change += f", size +-{claim.size_band() * 100:.0f} points"
    if claim.statistic != "mean":
        change += f", {claim.statistic}s"
    if claim.over:
        change += f", best of {len(claim.over)} cells"
    if vals is None:
        return change
    return f"{_num(vals[0])} vs {_num(vals[1])}{unit} ({change})"


def level(side: Side, paper: float | None, scale: float) -> float:
    """Our mean (the claim's statistic) over the paper's value (both in the
    metric's unit); nan without one."""
    s = side.summary
    if s is None or paper is None or not paper or not math.isfinite(paper):
        return math.nan
    ours = side.point()
    if not math.isfinite(ours):
        return math.nan
    return ours / (paper * scale)


def level_text(side: Side, paper: float | None, scale: float) -> str:
    """Our mean over the paper's value, as '0.34x'; '' without one."""
    ratio = level(side, paper, scale)
    if not math.isfinite(ratio):
        return ""
    if abs(ratio) >= 10:
        return f"{ratio:.0f}x"
    return f"{ratio:.2f}x" if abs(ratio) >= 1 else f"{ratio:.2g}x"


def render_text(
    exp: Expectations, results: list[ClaimResult], quick: list[str] | None = None
) -> str:
    lines = [f"{exp.experiment}: {len(results)} claims"]
    if exp.source:
        lines.append(f"  source: {exp.source}")
    if quick:
        lines.append(
            f"  warning: {', '.join(quick)}: --quick runs (shortened workload, no warm-up), "
            "not the paper's setup"
        )
    c = counts(results)
    if c:
        lines.append("  " + ", ".join(f"{n} {v}" for v, n in c.items()))
    for r in results:
        cl = r.claim
        lines.append("")
        src = cl.source + (" (derived)" if cl.derived else "")
        lines.append(f"[{r.verdict}] {cl.claim}  ({src})  kind: {r.kind}")
        if cl.baseline is None:
            lines.append(f"  metric {cl.metric}: {cl.compare[0]}  (a level claim)")
        else:
            lines.append(f"  metric {cl.metric}: {cl.compare[0]}  vs  {cl.baseline}")
        if cl.over:
            lines.append(f"  over: {', '.join(cl.over)}  (judged: {r.cell or '-'})")
        lines.append(f"  paper: {paper_text(cl)}")
        vals: tuple[float | None, ...] | None = cl.paper_values()
        if cl.is_level:
            vals = (cl.value,)
        for side, pv in zip(r.sides, vals or (None, None), strict=True):
            name = side.variant or side.entry
            extra = []
            if side.not_ok:
                extra.append(f"not ok, left out: {side.not_ok} of {side.runs}")
            if side.no_value:
                extra.append(f"{side.no_value} ok runs without a value")
            if side.starved:
                extra.append(f"{side.starved} starved of host CPU")
            if side.late_starts:
                extra.append(f"{side.late_starts} with a SYN back-off (first request >= 1 s late)")
            lv = level_text(side, pv, cl.scale)
            if lv:
                extra.append(f"{lv} the paper's value")
            tail = f"  ({'; '.join(extra)})" if extra else ""
            lines.append(f"  ours {name}: {ours_text(side)}{tail}")
        if r.verdict not in (NOT_RUN, NO_OK_RUN):
            lines.append(f"  ours: {diff_text(r)}")
        if r.why:
            lines.append(f"  why: {r.why}")
        if cl.note:
            lines.append(f"  note: {cl.note}")
    if any(s.not_ok for r in results for s in r.sides):
        lines.append("")
        lines.append(
            "  warning: runs that did not end ok are left out of every statistic; if a "
            "variant's runs fail or stall more often, its numbers are biased (survivors only)."
        )
    if exp.notes:
        lines.append("")
        lines.append("what differs from the paper's setup (the experiment's notes):")
        lines.append("  " + " ".join(exp.notes.split()))
    return "\n".join(lines)


__all__ = [
    "ClaimResult",
    "Expectations",
    "Side",
    "VERDICTS",
    "counts",
    "evaluate",
    "level",
    "level_verdict",
    "evaluate_claim",
    "sides_of",
    "expectations",
    "quick_campaigns",
    "render_text",
    "to_frame",
    "verdict",
]
