"""mptlab.analysis.stats against values computed by hand."""

import math

import numpy as np
import pandas as pd
import pytest

from mptlab.analysis import stats


def test_describe_matches_hand_computed_moments():
    s = stats.describe([1, 2, 3, 4, 10])
    assert s.n == 5
    assert s.mean == 4.0  # 20 / 5
    assert s.median == 3.0
    # squared deviations 9 + 4 + 1 + 0 + 36 = 50; / (n - 1) = 12.5
    assert s.std == pytest.approx(math.sqrt(12.5))
    assert s.ci_low <= s.mean <= s.ci_high
    # a bootstrap mean can never leave the data's range
    assert s.ci_low >= 1 and s.ci_high <= 10


def test_describe_ignores_missing_values_and_counts_them_out():
    s = stats.describe([2.0, None, float("nan"), "x", 4.0])
    assert s.n == 2 and s.mean == 3.0 and s.std == pytest.approx(math.sqrt(2))


def test_single_value_has_no_spread_or_ci():
    s = stats.describe([7])
    assert s.n == 1 and s.mean == 7 and math.isnan(s.std) and math.isnan(s.ci_low)
    assert "n=1" in str(s)


def test_constant_data_has_a_zero_width_ci():
    s = stats.describe([5, 5, 5, 5])
    assert (s.ci_low, s.ci_high) == (5, 5)


def test_bootstrap_is_seeded_and_the_seed_matters():
    x = [3.1, 4.7, 2.2, 9.0, 5.5, 6.1, 4.4]
    assert stats.bootstrap_ci(x, seed=1) == stats.bootstrap_ci(x, seed=1)
    assert stats.bootstrap_ci(x, seed=1) != stats.bootstrap_ci(x, seed=2)


def test_bootstrap_ci_of_a_large_normal_sample_is_close_to_the_normal_theory_interval():
    rng = np.random.default_rng(42)
    x = rng.normal(100, 10, 400)
    lo, hi = stats.bootstrap_ci(x, n_boot=20_000)
    half = 1.96 * x.std(ddof=1) / math.sqrt(len(x))  # about 0.98
    assert lo == pytest.approx(x.mean() - half, abs=0.15)
    assert hi == pytest.approx(x.mean() + half, abs=0.15)


def test_mann_whitney_exact_p_values():
    # complete separation of 3 vs 3: 2 of C(6,3) = 20 orderings are this extreme
    u, p = stats.mann_whitney([1, 2, 3], [4, 5, 6])
    assert u == 9 and p == pytest.approx(2 / 20)
    # 4 vs 4: 2 / C(8,4) = 2 / 70
    u, p = stats.mann_whitney([1, 2, 3, 4], [5, 6, 7, 8])
    assert u == 16 and p == pytest.approx(2 / 70)
    assert stats.min_p_value(4, 4) == pytest.approx(2 / 70)


def test_mann_whitney_u_with_ties_counts_half():
    # U of b=[2,3,4] against a=[1,2,2]: b=2 beats 1 and ties two 2s (1 + 2 * 0.5),
    # b=3 and b=4 beat all three: 2 + 3 + 3 = 8
    u, p = stats.mann_whitney([1, 2, 2], [2, 3, 4])
    assert u == 8
    assert 0 < p < 1


def test_identical_samples_are_not_different():
    assert stats.mann_whitney([3, 3, 3], [3, 3, 3]) == (4.5, 1.0)


def test_relative_difference_and_its_ci():
    c = stats.compare([10, 11, 12, 13], [12, 13, 14, 15])
    assert (c.n_a, c.n_b) == (4, 4)
    assert c.mean_a == 11.5 and c.mean_b == 13.5
    assert c.rel_diff == pytest.approx(13.5 / 11.5 - 1)
    assert c.ci_low < c.rel_diff < c.ci_high
    assert "n=4 vs n=4" in str(c)
    # the ratio of two bootstrap means is bounded by the extremes of the data
    assert c.ci_low >= 12 / 13 - 1 and c.ci_high <= 15 / 10 - 1


def test_relative_difference_of_a_zero_mean_reference_is_undefined():
    c = stats.compare([0, 0, 0], [1, 2, 3])
    assert math.isnan(c.rel_diff)


@pytest.mark.parametrize(("d", "n"), [(1.0, 17), (0.8, 26), (0.5, 64), (0.2, 394)])
def test_repetitions_needed_match_the_standard_power_tables(d, n):
    # Cohen (1988) / G*Power, two-sided two-sample t-test, alpha 0.05, power 0.8
    r = stats.reps_needed(d)
    assert r["n_t_test"] == n
    assert r["achieved_power"] >= 0.8
    assert r["n_mann_whitney"] >= n


def test_repetitions_needed_for_a_relative_effect_uses_the_coefficient_of_variation():
    # 5 % change with a CV of 10 % is d = 0.5
    assert stats.reps_needed(0.05, 0.10)["n_t_test"] == 64
    # normal approximation 2 (z_.975 + z_.8)^2 / d^2 = 15.7 -> 16 for d = 1
    assert stats.reps_needed(1.0)["n_normal_approx"] == 16
    with pytest.raises(ValueError):
        stats.reps_needed(0)


def test_summarize_uses_ok_current_runs_and_reports_n():
    runs = pd.DataFrame(
        {
            "variant": ["a", "a", "a", "b", "b", "b"],
            "status": ["ok", "ok", "failed", "ok", "ok", "ok"],
            "attempt": ["current", "current", "current", "current", "current", "superseded"],
            "goodput_mbps": [1.0, 3.0, 100.0, 5.0, 7.0, 100.0],
        }
    )
    s = stats.summarize(runs, ["goodput_mbps"]).set_index("variant")
    assert s.loc["a", "n"] == 2 and s.loc["a", "mean"] == 2.0
    assert s.loc["b", "n"] == 2 and s.loc["b", "mean"] == 6.0
    pw = stats.pairwise(runs, "goodput_mbps", "a")
    assert pw.iloc[0]["variant"] == "b" and pw.iloc[0]["rel_diff"] == pytest.approx(2.0)
