"""Statistics over repetitions.  Every result carries its n.

- :func:`describe`: n, mean, median, sample standard deviation (ddof=1) and a
  percentile-bootstrap confidence interval of the mean (seeded, so a report
  is reproducible);
- :func:`compare`: relative difference of the means of two variants
  (``mean(b) / mean(a) - 1``) with a bootstrap CI (both samples resampled
  independently) and the two-sided Mann-Whitney U test (exact p-value for
  small samples without ties, normal approximation with tie correction
  otherwise, as scipy chooses);
- :func:`reps_needed`: repetitions per variant for a two-sided two-sample
  t-test to detect an effect (Cohen's d, or a relative effect and the
  coefficient of variation) with a given power, from the noncentral t
  distribution; the Mann-Whitney figure divides by its asymptotic relative
  efficiency under normality (3/pi).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .. import rundir
from . import readers

CONF = 0.95
N_BOOT = 10_000
SEED = 0

# columns of the runs table that describe a run rather than measure it: every
# attribute a reader writes (one list, the readers'), and the metrics that
# are the run's bookkeeping rather than its outcome (its wall time, the
# analysis window, the stall watchdog's record, the capture's size)
ID_COLUMNS = set(readers.attributes()) | {
    "seconds",
    "analysis_window_s",
    "pcap_packets",
    "stall_timeout_s",
    "stall_frozen_s",
    "stall_after_s",
    "stall_bytes_acked",
}


def _clean(values) -> np.ndarray:
    a = pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce").to_numpy(dtype=float)
    return a[np.isfinite(a)]


@dataclass
class Summary:
    n: int
    mean: float
    median: float
    std: float
    ci_low: float
    ci_high: float
    conf: float = CONF

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"n={self.n} mean={_fmt(self.mean)} median={_fmt(self.median)} sd={_fmt(self.std)} "
            f"{self.conf:.0%} CI [{_fmt(self.ci_low)}, {_fmt(self.ci_high)}]"
        )


def _fmt(x: float) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.4g}"


def bootstrap(values, stat=np.mean, n_boot: int = N_BOOT, seed: int = SEED) -> np.ndarray:
    """``n_boot`` bootstrap replicates of ``stat`` (resampling with replacement)."""
    x = _clean(values)
    if len(x) == 0:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    return stat(x[idx], axis=1)


def bootstrap_ci(
    values, stat=np.mean, conf: float = CONF, n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval (NaN for fewer than 2 values)."""
    x = _clean(values)
    if len(x) < 2:
        return (math.nan, math.nan)
    reps = bootstrap(x, stat, n_boot, seed)
    lo, hi = np.quantile(reps, [(1 - conf) / 2, 1 - (1 - conf) / 2])
    return float(lo), float(hi)


def describe(values, conf: float = CONF, n_boot: int = N_BOOT, seed: int = SEED) -> Summary:
    x = _clean(values)
    n = len(x)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan, math.nan, conf)
    lo, hi = bootstrap_ci(x, np.mean, conf, n_boot, seed)
    std = float(np.std(x, ddof=1)) if n > 1 else math.nan
    return Summary(n, float(np.mean(x)), float(np.median(x)), std, lo, hi, conf)


@dataclass
class Comparison:
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    rel_diff: float  # mean_b / mean_a - 1
    ci_low: float
    ci_high: float
    u: float  # Mann-Whitney U of b against a
    p_value: float
    conf: float = CONF

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"n={self.n_a} vs n={self.n_b}: {_pct(self.rel_diff)} "
            f"({self.conf:.0%} CI [{_pct(self.ci_low)}, {_pct(self.ci_high)}]), "
            f"Mann-Whitney U={_fmt(self.u)} p={_fmt(self.p_value)}"
        )


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x * 100:+.1f} %"


def mann_whitney(a, b) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: (U of b, p).  NaN if a sample is empty."""
    from scipy.stats import mannwhitneyu

    x, y = _clean(a), _clean(b)
    if len(x) == 0 or len(y) == 0:
        return math.nan, math.nan
    if np.all(np.concatenate([x, y]) == x[0]):
        return float(len(x) * len(y) / 2), 1.0  # all equal: no evidence of a difference
    res = mannwhitneyu(y, x, alternative="two-sided", method="auto")
    return float(res.statistic), float(res.pvalue)


def compare(a, b, conf: float = CONF, n_boot: int = N_BOOT, seed: int = SEED) -> Comparison:
    """Variant b relative to reference a."""
    x, y = _clean(a), _clean(b)
    ma = float(np.mean(x)) if len(x) else math.nan
    mb = float(np.mean(y)) if len(y) else math.nan
    rel = mb / ma - 1 if len(x) and len(y) and ma != 0 else math.nan
    lo = hi = math.nan
    if len(x) >= 2 and len(y) >= 2 and ma != 0:
        ra = bootstrap(x, np.mean, n_boot, seed)
        rb = bootstrap(y, np.mean, n_boot, seed + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = rb / ra - 1
        ratio = ratio[np.isfinite(ratio)]
        if len(ratio):
            lo, hi = (float(v) for v in np.quantile(ratio, [(1 - conf) / 2, 1 - (1 - conf) / 2]))
    u, p = mann_whitney(x, y)
    return Comparison(len(x), len(y), ma, mb, rel, lo, hi, u, p, conf)


def min_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney test can give."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def reps_needed(
    effect: float,
    sd: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    max_n: int = 100_000,
) -> dict:
    """Repetitions per variant to detect ``effect`` with a two-sided two-sample t-test.

    ``effect`` is Cohen's d if ``sd`` is None, else an absolute difference in the
    metric's unit with ``sd`` its standard deviation (for a relative effect pass
    the relative change and the coefficient of variation).
    """
    from scipy.stats import nct, norm
    from scipy.stats import t as t_dist

    if not (0 < alpha < 1) or not (0 < power < 1):
        raise ValueError("alpha and power must lie strictly between 0 and 1")
    d = abs(effect) / sd if sd else abs(effect)
    if not math.isfinite(d) or d <= 0:
        raise ValueError("the effect size must be a non-zero finite number (and sd > 0)")
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    approx = math.ceil(2 * (z / d) ** 2)

    def achieved(n: int) -> float:
        df = 2 * n - 2
        nc = d * math.sqrt(n / 2)
        tc = t_dist.ppf(1 - alpha / 2, df)
        return float(1 - nct.cdf(tc, df, nc) + nct.cdf(-tc, df, nc))

    n = max(2, approx - 2)
    while achieved(n) < power and n < max_n:
        n += 1
    while n > 2 and achieved(n - 1) >= power:
        n -= 1
    return {
        "d": d,
        "alpha": alpha,
        "power": power,
        "n_t_test": n,
        "n_normal_approx": approx,
        "n_mann_whitney": math.ceil(n / (3 / math.pi)),
        "achieved_power": achieved(n),
    }


# ------------------------------------------------------------ tables of runs
# Measured on the host, not in the guest: they differ between runs that are
# otherwise identical under virtual time (the host's load), so comparisons
# that mean "the same numbers" (nightly's exact check, bisect) leave them out.
HOST_MEASURED = frozenset({"host_cpu_s", "host_cpu_wait_s", "host_cpu_wait_share"})


def metric_columns(runs: pd.DataFrame) -> list[str]:
    """Numeric measurement columns of a runs table (workload metrics first)."""
    if not len(runs):
        return []
    vkeys = set()
    if "variant_keys" in runs:
        import json

        for v in runs["variant_keys"].dropna().unique():
            vkeys |= {
                "".join(c if c.isalnum() or c == "_" else "_" for c in k) for k in json.loads(v)
            }
    cols = []
    for c in runs.columns:
        if c in ID_COLUMNS or c in vkeys:
            continue
        s = pd.to_numeric(runs[c], errors="coerce")
        if s.notna().any() and (
            runs[c].dtype != object or s.notna().sum() == runs[c].notna().sum()
        ):
            cols.append(c)

    def rank(c: str) -> tuple:
        return (c.startswith("k_") + 2 * c.startswith("path") + 3 * c.startswith("pcap_"), 0)

    return sorted(cols, key=rank)


def qualify_variants(runs: pd.DataFrame) -> pd.DataFrame:
    """With runs of several experiments, name variants ``experiment:variant`` so
    that same-named variants of different experiments are never pooled."""
    if len(runs) and "experiment" in runs and runs["experiment"].nunique(dropna=True) > 1:
        runs = runs.copy()
        runs["variant"] = runs["experiment"].astype(str) + ":" + runs["variant"].astype(str)
    return runs


def starved(runs: pd.DataFrame) -> pd.Series:
    """Per run: starved of host CPU (real time only; ``rundir.is_starved``)."""
    if "host_cpu_wait_share" not in runs:
        return pd.Series(False, index=runs.index)
    share = pd.to_numeric(runs["host_cpu_wait_share"], errors="coerce")
    clock = runs["clock"] if "clock" in runs else pd.Series("real", index=runs.index)
    return pd.Series(
        [rundir.is_starved(s, c) for s, c in zip(share, clock, strict=True)],
        index=runs.index,
        dtype=bool,
    )


def ok_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that count for statistics: the current attempt, status ok."""
    if not len(runs):
        return runs
    keep = runs["status"].eq("ok")
    if "attempt" in runs:
        keep &= runs["attempt"].eq("current")
    return runs[keep]


def summarize(
    runs: pd.DataFrame,
    metrics: list[str] | None = None,
    by: str = "variant",
    conf: float = CONF,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> pd.DataFrame:
    """One row per (metric, group): n, mean, median, std, CI (ok runs only)."""
    runs = ok_runs(runs)
    metrics = metrics or metric_columns(runs)
    rows = []
    for m in metrics:
        if m not in runs:
            continue
        for g, sub in runs.groupby(by, sort=False, dropna=False):
            s = describe(sub[m], conf, n_boot, seed)
            rows.append({"metric": m, by: g, **s.as_dict()})
    return pd.DataFrame(
        rows, columns=["metric", by, "n", "mean", "median", "std", "ci_low", "ci_high", "conf"]
    )


def pairwise(
    runs: pd.DataFrame,
    metric: str,
    reference: str,
    by: str = "variant",
    conf: float = CONF,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> pd.DataFrame:
    """Every group against ``reference`` for one metric."""
    runs = ok_runs(runs)
    ref = runs[runs[by] == reference][metric]
    rows = []
    for g, sub in runs.groupby(by, sort=False):
        if g == reference:
            continue
        c = compare(ref, sub[metric], conf, n_boot, seed)
        rows.append({"metric": metric, "reference": reference, by: g, **c.as_dict()})
    return pd.DataFrame(rows)
