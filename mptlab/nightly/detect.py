"""Regression detection over the nightly history (``mptlab.nightly.history``).

Three ways a night's value is found to have moved (issue 24):

- ``exact``: both nights ran on virtual time with the same runs and seeds, so
  a run is deterministic and any change of a variant's values between the two
  nights was caused by the code: reported whatever its size; unless the
  machine's inputs of the guest changed between them (campaign.json
  ``guest_inputs.host``: a Debian package, the loader's cache, ...), when a
  change is reported as ``changed`` with a note that says so, never as a
  regression;
- ``statistical``: the accepted-baseline comparison of ``compare-rules.yaml``
  (``mptlab.analysis.compare``), for real-time runs or different seeds;
- ``step``: a piecewise-constant fit over many nights, each point weighted by
  its CI, for slow drifts that no single night shows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import pandas as pd

from ..analysis import stats
from ..analysis.compare import CompareResult
from ..campaign.provenance import guest_inputs_note

Kind = Literal["changed", "regressed", "improved", "step"]
Method = Literal["exact", "statistical", "step"]


@dataclass(frozen=True)
class Finding:
    """One moved value: ``metric`` of ``variant`` of ``experiment`` in night ``stamp``.

    ``kind``: ``regressed`` / ``improved`` when the metric has a better
    direction (compare-rules.yaml) and moved that way, ``changed`` when it has
    none, ``step`` for a step of the multi-night fit (``note`` says which way).
    ``before`` / ``after``: the medians compared (for a step: the fitted
    levels before and after it); ``change``: (after - before) / |before|
    (NaN when before is 0); ``since``: the night compared with (the previous
    night, the baseline, or the first night of the step's new level).
    """

    experiment: str
    variant: str
    metric: str
    stamp: str
    kind: Kind
    method: Method
    before: float
    after: float
    change: float
    since: str
    note: str = ""

    @property
    def is_regression(self) -> bool:
        return self.kind == "regressed" or (self.kind == "step" and "worse" in self.note)

    def as_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------ shared
Z95 = 1.959963984540054  # a 95 % interval's half-width in standard deviations


def change_of(before: float, after: float) -> float:
    """(after - before) / |before|; NaN when before is 0 or unknown."""
    if not (math.isfinite(before) and math.isfinite(after)) or before == 0:
        return math.nan
    return (after - before) / abs(before)


def direction(better: str, before: float, after: float) -> str:
    """``better`` / ``worse`` for a move in or against the metric's better
    direction, ``moved`` when it has none, ``same`` when nothing moved."""
    if not (math.isfinite(before) and math.isfinite(after)) or before == after:
        return "same" if before == after else "moved"
    if better not in ("higher", "lower"):
        return "moved"
    return "better" if (after > before) == (better == "higher") else "worse"


def _kind(better: str, before: float, after: float) -> Kind:
    way = direction(better, before, after)
    return "improved" if way == "better" else "regressed" if way == "worse" else "changed"


# ------------------------------------------------------------------ exact
EXACT_NOTE = "exact: values differ run for run (virtual time, same seeds)"


def _night(history: pd.DataFrame, stamp: str, experiment: str | None) -> pd.DataFrame:
    rows = history[history["stamp"] == stamp]
    return rows if experiment is None else rows[rows["experiment"] == experiment]


def previous_night(history: pd.DataFrame, stamp: str, experiment: str) -> str | None:
    """The last night of ``experiment`` before ``stamp``."""
    earlier = history[(history["experiment"] == experiment) & (history["stamp"] < stamp)]
    return str(earlier["stamp"].max()) if len(earlier) else None


def _runs_per_variant(rows: pd.DataFrame) -> dict:
    return dict(
        zip(zip(rows["experiment"], rows["variant"], strict=True), rows["n_runs"], strict=True)
    )


def exact_comparable(
    history: pd.DataFrame, stamp: str, previous: str, experiment: str | None = None
) -> tuple[bool, str]:
    """Whether night ``stamp`` can be compared exactly with night ``previous``
    (of ``experiment``, or of all experiments), and why (not)."""
    cur, prev = _night(history, stamp, experiment), _night(history, previous, experiment)
    for night, rows in ((stamp, cur), (previous, prev)):
        if not len(rows):
            return False, f"night {night} has no rows" + (f" of {experiment}" if experiment else "")
        clocks = sorted(set(rows["clock"]))
        if clocks != ["virtual"]:
            return False, f"night {night} ran on {'/'.join(clocks)} time, not virtual"
    if set(zip(cur["experiment"], cur["seeds"], strict=True)) != set(
        zip(prev["experiment"], prev["seeds"], strict=True)
    ):
        return False, f"nights {previous} and {stamp} ran other runs or seeds"
    if _runs_per_variant(cur) != _runs_per_variant(prev):
        return False, f"nights {previous} and {stamp} have other numbers of runs per variant"
    return True, "exact: both on virtual time with the same runs and seeds"


# An exact change whose median moved by less than this (relative) is
# "changed", not a regression or an improvement: a fixed-length workload's
# duration_s moves by microseconds when anything changes (seen: 4.00005 s
# "regressed" by +0.0 % beside a -27 % goodput), which is no direction.
NEGLIGIBLE = 1e-4


def _exact_kind(better: str, before: float, after: float) -> Kind:
    if (
        math.isfinite(before)
        and math.isfinite(after)
        and math.isclose(before, after, rel_tol=NEGLIGIBLE, abs_tol=0.0)
    ):
        return "changed"
    return _kind(better, before, after)


def guest_inputs_changed(history: pd.DataFrame, stamp: str, previous: str, experiment: str) -> str:
    """The note for a comparison of two nights of ``experiment`` whose
    machines gave the guest other inputs (``provenance.guest_inputs_note``;
    the digests: ``history.attrs``, put there by ``history.load``), "" when
    they are the same or either night did not record them."""
    known = history.attrs.get("guest_inputs") or {}
    before, after = known.get(f"{previous} {experiment}"), known.get(f"{stamp} {experiment}")
    if before and after and before != after:
        return guest_inputs_note(before, after)
    return ""


def _exact_pair(history: pd.DataFrame, stamp: str, previous: str, experiment: str) -> list[Finding]:
    # Another machine state between the two nights (issue 44: the host's
    # /run/mount alone moved a seeded run) is another realisation of every
    # run: a difference is then no evidence against the code.
    machine = guest_inputs_changed(history, stamp, previous, experiment)
    cur = _night(history, stamp, experiment).set_index(["variant", "metric"])
    prev = _night(history, previous, experiment).set_index(["variant", "metric"])
    both = cur.merge(prev, how="inner", left_index=True, right_index=True, suffixes=("", "_prev"))
    found = []
    for (variant, metric), r in both.iterrows():
        if r["values"] == r["values_prev"] or metric in stats.HOST_MEASURED:
            continue
        before, after = float(r["median_prev"]), float(r["median"])
        found.append(
            Finding(
                experiment=experiment,
                variant=str(variant),
                metric=str(metric),
                stamp=stamp,
                kind="changed" if machine else _exact_kind(r["better"], before, after),
                method="exact",
                before=before,
                after=after,
                change=change_of(before, after),
                since=previous,
                note=f"{EXACT_NOTE}; {machine}" if machine else EXACT_NOTE,
            )
        )
    return found


def exact(history: pd.DataFrame, stamp: str) -> list[Finding]:
    """Every value of night ``stamp`` that differs run for run from the
    previous night of its experiment, where the two can be compared exactly
    (``exact_comparable``); nothing for the nights that cannot."""
    found: list[Finding] = []
    for experiment in sorted(set(_night(history, stamp, None)["experiment"])):
        previous = previous_night(history, stamp, experiment)
        if previous is None or not exact_comparable(history, stamp, previous, experiment)[0]:
            continue
        found += _exact_pair(history, stamp, previous, experiment)
    return found


# ------------------------------------------------------------------ statistical
def from_compare(result: CompareResult, experiment: str, stamp: str, since: str) -> list[Finding]:
    """The baseline comparison's regressed and improved checks as findings
    (``since``: the baseline's night)."""
    kinds: dict[str, Kind] = {"REGRESSED": "regressed", "improved": "improved"}
    found = []
    for c in result.checks:
        if c.verdict not in kinds:
            continue
        note = f"{result.mode}; {c.rule.stat}, tolerance {c.rule.tolerance:g}"
        if math.isfinite(c.p_value):
            note += f", p {c.p_value:.3g}"
        found.append(
            Finding(
                experiment=experiment,
                variant=c.variant,
                metric=c.rule.metric,
                stamp=stamp,
                kind=kinds[c.verdict],
                method="statistical",
                before=c.base,
                after=c.cur,
                change=change_of(c.base, c.cur),
                since=since,
                note=note + (f"; {c.note}" if c.note else ""),
            )
        )
    return found


# ------------------------------------------------------------------ steps
SIGMA_FLOOR = 1e-9  # relative to the level: identical deterministic nights weigh a lot, not inf


@dataclass(frozen=True)
class Level:
    """A segment of a series: points ``start`` to ``end`` (exclusive), its
    fitted level and the 95 % half-width of that level."""

    start: int
    end: int
    value: float
    half: float


def bic_penalty(n: int) -> float:
    """The default cost of one more segment: BIC with known variances, where
    the weighted SSE is -2 log L; a segment adds two parameters (its level and
    where it starts), each costing ln(n)."""
    return 2 * math.log(max(n, 2))


def sigmas(median: np.ndarray, ci_lo: np.ndarray, ci_hi: np.ndarray) -> np.ndarray:
    """Each night's standard error of its median, from its 95 % CI.

    A night without a CI (fewer than two runs) takes the series' typical one.
    When the nights scatter more than their CIs say (real-time nights on a
    host busy one night and idle the next), that excess is a night's own
    noise and is added to every night's (a random effect per night), or a
    busy night would weigh as a step.  Every sigma is floored at SIGMA_FLOOR
    of the level so that zero-width CIs (deterministic runs) do not divide
    by zero."""
    half = (ci_hi - ci_lo) / 2
    sigma = np.where(np.isfinite(half) & (half >= 0), half / Z95, np.nan)
    known = np.isfinite(sigma)
    typical = float(np.median(sigma[known])) if known.any() else 0.0
    sigma[~known] = typical
    excess = max(0.0, _scatter(median) ** 2 - typical**2)
    sigma = np.sqrt(sigma**2 + excess)
    scale = float(np.max(np.abs(median))) or 1.0
    floor = SIGMA_FLOOR * np.where(median != 0, np.abs(median), scale)
    return np.maximum(sigma, floor)


def _scatter(x: np.ndarray) -> float:
    """A robust standard deviation of one night from the differences of
    successive nights, about their median: a step moves one difference only,
    and a steady drift moves them all alike, so neither counts as noise."""
    if len(x) < 3:
        return 0.0
    d = np.diff(x)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def segment_costs(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``cost[i, j]``: weighted SSE of ``x[i:j]`` about its weighted mean
    (inf where j <= i).  Sums run over differences to ``x[i]``, which keeps
    the subtraction exact for the huge weights of deterministic nights."""
    n = len(x)
    cost = np.full((n, n + 1), np.inf)
    for i in range(n):
        d = x[i:] - x[i]
        s0 = np.cumsum(w[i:])
        s1 = np.cumsum(w[i:] * d)
        s2 = np.cumsum(w[i:] * d * d)
        cost[i, i + 1 :] = np.maximum(s2 - s1 * s1 / s0, 0.0)
    return cost


def segment(x: np.ndarray, w: np.ndarray, penalty: float) -> list[int]:
    """The optimal piecewise-constant fit (dynamic programming over every
    segmentation): minimum of weighted SSE + ``penalty`` per segment.  Returns
    the first index of each segment."""
    n = len(x)
    cost = segment_costs(x, w)
    best = np.zeros(n + 1)  # best[j]: the best fit of x[:j]
    cut = np.zeros(n + 1, dtype=int)  # where the last segment of that fit starts
    for j in range(1, n + 1):
        total = best[:j] + cost[:j, j]
        cut[j] = int(np.argmin(total))
        best[j] = total[cut[j]] + penalty
    starts = []
    j = n
    while j > 0:
        starts.append(int(cut[j]))
        j = cut[j]
    return starts[::-1]


def levels(x: np.ndarray, w: np.ndarray, starts: list[int]) -> list[Level]:
    """Each segment's weighted mean and its 95 % half-width; when the nights
    scatter more than their CIs say (reduced chi-square above 1, e.g.
    real-time nights on a busy host), the half-width grows with that
    scatter."""
    out = []
    for start, end in zip(starts, [*starts[1:], len(x)], strict=True):
        xs, ws = x[start:end], w[start:end]
        value = float(np.sum(ws * xs) / np.sum(ws))
        half = Z95 / math.sqrt(float(np.sum(ws)))
        if end - start > 1:
            chi2 = float(np.sum(ws * (xs - value) ** 2)) / (end - start - 1)
            half *= math.sqrt(max(1.0, chi2))
        out.append(Level(start, end, value, half))
    return out


def _moved(ref: Level, new: Level, min_change: float) -> bool:
    """asv's rule: a step counts above max(its error, min_change)."""
    return abs(new.value - ref.value) > max(min_change * abs(ref.value), ref.half + new.half)


def _step_note(way: str, ref: Level, new: Level, stamps: list[str]) -> str:
    change = change_of(ref.value, new.value)
    pct = f" ({change:+.1%})" if math.isfinite(change) else ""
    return (
        f"{way}: level {ref.value:.4g} ({stamps[ref.start]}..{stamps[ref.end - 1]}) "
        f"-> {new.value:.4g} from {stamps[new.start]}{pct}"
    )


def fit(series: pd.DataFrame, penalty: float | None = None) -> list[Level]:
    """The levels of one series (rows of one experiment, variant and metric,
    in night order, finite medians)."""
    x = series["median"].to_numpy(dtype=float)
    ci = (series["ci_lo"].to_numpy(dtype=float), series["ci_hi"].to_numpy(dtype=float))
    w = 1 / sigmas(x, *ci) ** 2
    return levels(x, w, segment(x, w, bic_penalty(len(x)) if penalty is None else penalty))


def _series_steps(
    key: tuple[str, str, str], g: pd.DataFrame, min_change: float, penalty: float | None
) -> list[Finding]:
    g = g[np.isfinite(g["median"].to_numpy(dtype=float))].sort_values("stamp")
    if len(g) < 3:
        return []
    stamps = [str(s) for s in g["stamp"]]
    better = str(g["better"].iloc[-1])  # the latest rules' word
    experiment, variant, metric = key
    found = []
    segments = fit(g, penalty)
    ref = segments[0]
    # each level is held against the last one reported, not only its
    # neighbour: a slow drift shows once it has accumulated beyond the threshold
    for new in segments[1:]:
        if not _moved(ref, new, min_change):
            continue
        way = direction(better, ref.value, new.value)
        found.append(
            Finding(
                experiment=experiment,
                variant=variant,
                metric=metric,
                stamp=stamps[new.start],
                kind="step",
                method="step",
                before=ref.value,
                after=new.value,
                change=change_of(ref.value, new.value),
                since=stamps[new.start],
                note=_step_note(way, ref, new, stamps),
            )
        )
        ref = new
    return found


def steps(
    history: pd.DataFrame, *, min_change: float = 0.05, penalty: float | None = None
) -> list[Finding]:
    """Steps of every (experiment, variant, metric) series of medians over the
    nights (three nights at least): the optimal piecewise-constant fit, each
    night weighted by 1/sigma^2 of its CI, ``penalty`` per extra segment
    (default ``bic_penalty``); a step is reported when its levels differ by
    more than max(``min_change`` of the level before, their combined 95 %
    half-widths)."""
    found: list[Finding] = []
    for (experiment, variant, metric), g in history.groupby(
        ["experiment", "variant", "metric"], sort=True
    ):
        found += _series_steps((str(experiment), str(variant), str(metric)), g, min_change, penalty)
    return sorted(found, key=lambda f: (f.stamp, f.experiment, f.variant, f.metric))


def latest_findings(history: pd.DataFrame, stamp: str) -> list[Finding]:
    """What night ``stamp`` found, from what was known that night: its exact
    findings and the steps that start with it (the caller adds the baseline
    comparison's, ``from_compare``)."""
    known = history[history["stamp"] <= stamp]
    return exact(known, stamp) + [f for f in steps(known) if f.stamp == stamp]
