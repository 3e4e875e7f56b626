"""Reproduction tables: the ``expect:`` claims of the language, their
verdicts against runs, `mptlab reproduce` and the report's sections.  No
kernel: synthetic run tables and the fixture run dirs."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mptlab.analysis import report, reproduce
from mptlab.spec.catalog import Catalog
from mptlab.spec.expect import Claim, resolve
from mptlab.spec.yamlsrc import SpecError

DATA = Path(__file__).parent / "data" / "analysis" / "results"


# ------------------------------------------------------------ verdicts
@pytest.mark.parametrize(
    "direction,lo,hi,tol,want",
    [
        (1, 0.05, 0.20, None, "reproduced"),
        (-1, -0.30, -0.01, None, "reproduced"),
        (-1, 0.05, 0.20, None, "opposite"),
        (1, -0.30, -0.01, None, "opposite"),
        (1, -0.10, 0.20, None, "inconclusive"),
        (-1, -0.10, 0.0, None, "inconclusive"),  # touching zero does not exclude it
        (1, float("nan"), float("nan"), None, "inconclusive"),
        (0, -0.02, 0.03, 0.05, "reproduced"),
        (0, 0.10, 0.20, 0.05, "different"),
        (0, -0.02, 0.08, 0.05, "inconclusive"),
    ],
)
def test_verdict(direction, lo, hi, tol, want):
    assert reproduce.verdict(direction, lo, hi, tol) == want


@pytest.mark.parametrize(
    "paper,ours,lo,hi,band,want",
    [
        (0.12, 0.10, 0.05, 0.15, 0.04, "reproduced"),  # the paper's change inside our CI
        (0.12, 0.15, 0.14, 0.16, 0.04, "reproduced"),  # outside the CI, within the band
        (0.12, 0.30, 0.25, 0.35, 0.04, "direction only"),
        (11.41, 0.61, 0.40, 0.80, 3.8, "direction only"),  # DAPS: +1141 % vs ours +61 %
        (0.12, -0.10, -0.15, -0.05, 0.04, "opposite"),  # the sign decides first
        (0.12, 0.02, -0.02, 0.06, 0.04, "inconclusive"),
    ],
)
def test_a_verdict_weighs_the_size(paper, ours, lo, hi, band, want):
    direction = 1 if paper > 0 else -1
    assert reproduce.verdict(direction, lo, hi, paper=paper, ours=ours, band=band) == want


@pytest.mark.parametrize(
    "paper,ours,lo,hi,band,want",
    [
        # Kubde on saturated links, virtual time: ten identical runs
        (0.86, -0.0002, -0.0002, -0.0002, 0.29, "no effect"),  # was "opposite"
        (0.94, 0.0, 0.0, 0.0, 0.31, "no effect"),  # was "inconclusive"
        (0.08, 0.001, 0.0005, 0.0015, 0.03, "no effect"),  # was "direction only"
        (0.12, 0.0, -0.012, 0.009, 0.04, "inconclusive"),  # the CI leaves +-1 %
        (0.12, -0.02, -0.03, -0.011, 0.04, "opposite"),
        # a claim within its own band of zero is never "no effect"
        (-0.003, -0.002, -0.003, -0.001, 0.03, "reproduced"),
    ],
)
def test_a_change_inside_1_percent_is_no_effect_for_a_larger_claim(paper, ours, lo, hi, band, want):
    direction = 1 if paper > 0 else -1
    got = reproduce.verdict(
        direction, lo, hi, paper=paper, ours=ours, band=band, negligible=reproduce.NEGLIGIBLE
    )
    assert got == want


def test_the_default_size_band_is_a_third_of_the_change_and_at_least_3_points():
    assert claim(paper=None, change="+12%").size_band() == pytest.approx(0.04)
    assert claim(paper=None, change="-65%").size_band() == pytest.approx(0.65 / 3)
    assert claim(paper=None, change="+2%").size_band() == pytest.approx(0.03)
    assert claim(paper=None, change="+12%", size_tolerance="10%").size_band() == 0.1


def runs_table(samples: dict[str, tuple[dict, list]], metric: str = "delay_mean_ms"):
    """A runs table: variant -> (its keys, [value or a status string, ...])."""
    rows = []
    for variant, (keys, vals) in samples.items():
        for i, v in enumerate(vals):
            status = v if isinstance(v, str) else "ok"
            rows.append(
                {
                    "run_id": f"c/{variant}/rep-{i:03d}",
                    "experiment": "e",
                    "variant": variant,
                    "variant_keys": json.dumps(keys, sort_keys=True),
                    "attempt": "current",
                    "status": status,
                    metric: None if isinstance(v, str) else v,
                }
            )
    return pd.DataFrame(rows)


def claim(**kw) -> Claim:
    base = {
        "metric": "delay_mean_ms",
        "compare": ["scheduler=blest", "scheduler=minrtt"],
        "paper": [62.8, 68],
        "unit": "ms",
        "claim": "BLEST -8 % vs minRTT",
        "source": "Table IV",
    }
    return Claim.model_validate({**base, **kw})


RNG = np.random.default_rng(1)
BLEST = {"kernel.scheduler": "blest"}
MINRTT = {"kernel.scheduler": "minrtt"}


def test_claims_take_their_direction_from_the_paper():
    assert claim().direction == -1
    assert claim(paper=None, change="+12%").direction == 1
    assert (
        claim(paper={"scheduler=blest": 1.0, "scheduler=minrtt": 1.0}, tolerance=0.05).direction
        == 0
    )
    assert claim(paper=None, change="-8 %").paper_change() == pytest.approx(-0.08)


def test_a_lower_delay_reproduces_a_higher_one_is_opposite():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, list(62.5 + RNG.normal(0, 1, 10))),
            "scheduler=minrtt": (MINRTT, list(68 + RNG.normal(0, 1, 10))),
        }
    )
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.verdict == "reproduced", r
    assert r.subject.variant == "scheduler=blest" and r.subject.summary.n == 10
    assert -0.15 < r.ci_low < r.rel_diff < r.ci_high < 0
    flipped = claim(compare=["scheduler=minrtt", "scheduler=blest"], paper=[62.8, 68])
    assert reproduce.evaluate_claim(flipped, runs).verdict == "opposite"
    # the paper's -7.6 %, ours about -26 %: the sign, not the size
    runs.loc[runs["variant"] == "scheduler=blest", "delay_mean_ms"] -= 12
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.verdict == "direction only" and "-7.6 % is outside our CI" in r.why
    assert reproduce.to_frame("e", [r])["level_baseline"].iloc[0] == pytest.approx(1, abs=0.02)
    text = reproduce.render_text(reproduce.Expectations("e", [claim()]), [r])
    assert "[direction only]" in text and "size +-3 points" in text


def test_a_statistic_that_is_the_same_in_every_run_is_flagged_not_judged():
    runs = runs_table(
        {"scheduler=blest": (BLEST, [0.0] * 6), "scheduler=minrtt": (MINRTT, [0.0] * 6)},
        metric="k_ofo_bytes_p50",
    )
    c = claim(metric="k_ofo_bytes_p50", paper=None, change="-8%")
    r = reproduce.evaluate_claim(c, runs)
    assert r.verdict == "constant" and "is 0 in every ok run of both variants" in r.why


def test_overlapping_samples_are_inconclusive_and_one_run_has_no_ci():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, [60, 70, 65, 62, 69]),
            "scheduler=minrtt": (MINRTT, [61, 69, 66, 63, 68]),
        }
    )
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.verdict == "inconclusive" and "includes zero" in r.why
    one = runs_table({"scheduler=blest": (BLEST, [60]), "scheduler=minrtt": (MINRTT, [70, 71])})
    r = reproduce.evaluate_claim(claim(), one)
    assert r.verdict == "inconclusive" and "n < 2 in scheduler=blest" in r.why


def test_missing_variants_and_metrics_are_not_run_and_alternatives_fall_back():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, list(62.5 + RNG.normal(0, 1, 5))),
            "scheduler=minrtt": (MINRTT, list(68 + RNG.normal(0, 1, 5))),
        }
    )
    otias = claim(compare=["scheduler=otias", "scheduler=minrtt"], paper=[53.2, 68])
    r = reproduce.evaluate_claim(otias, runs)
    assert r.verdict == "not run" and "scheduler=otias: variant not in this campaign" in r.why
    pr = claim(compare=["scheduler=blest", "scheduler=minrtt_pr | scheduler=minrtt"])
    r = reproduce.evaluate_claim(pr, runs)
    assert r.verdict == "reproduced" and r.baseline.variant == "scheduler=minrtt"
    r = reproduce.evaluate_claim(claim(metric="app_delay_ms"), runs)
    assert r.verdict == "not run" and "app_delay_ms: not a column" in r.why
    text = reproduce.render_text(
        reproduce.Expectations("e", [otias, pr]),
        [
            reproduce.evaluate_claim(otias, runs),
            reproduce.evaluate_claim(pr, runs),
        ],
    )
    assert "[not run] BLEST -8 % vs minRTT" in text and "[reproduced]" in text


def test_failed_and_stalled_runs_are_counted_next_to_the_statistics():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, [*list(60 + RNG.normal(0, 1, 6)), "stalled", "stalled"]),
            "scheduler=minrtt": (MINRTT, [*list(68 + RNG.normal(0, 1, 6)), "failed"]),
        }
    )
    runs["host_cpu_wait_share"] = [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] + [0.2] * 7
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.subject.not_ok == "2 stalled" and r.baseline.not_ok == "1 failed"
    assert r.subject.starved == 1 and r.baseline.starved == 6  # ok runs only
    assert r.subject.summary.n == 6 and r.subject.runs == 8
    text = reproduce.render_text(reproduce.Expectations("e", [claim()]), [r])
    assert "not ok, left out: 2 stalled of 8" in text and "6 starved of host CPU" in text
    assert "biased" in text
    # the same waits under virtual time change nothing: not starved
    runs["clock"] = ["real"] * 8 + ["virtual"] * 7
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.subject.starved == 1 and r.baseline.starved == 0


def test_a_variant_whose_every_run_timed_out_has_no_ok_run_not_not_run():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, ["timeout"] * 9 + ["stalled"]),
            "scheduler=minrtt": (MINRTT, list(68 + RNG.normal(0, 1, 10))),
        }
    )
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.verdict == "no ok run", r
    assert "in scheduler=blest (1 stalled, 9 timeout of 10 runs)" in r.why, r.why
    assert reproduce.diff_text(r) == "-"
    text = reproduce.render_text(reproduce.Expectations("e", [claim()]), [r])
    assert "[no ok run]" in text and "not ok, left out: 1 stalled, 9 timeout of 10" in text
    assert reproduce.counts([r]) == {"no ok run": 1}


def test_ok_runs_that_did_not_record_the_metric_leave_the_claim_not_run():
    # e.g. a campaign run before the sampler recorded the column
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, [math.nan] * 10),
            "scheduler=minrtt": (MINRTT, list(68 + RNG.normal(0, 1, 10))),
        }
    )
    r = reproduce.evaluate_claim(claim(), runs)
    assert r.verdict == "not run", r
    assert "10 ok runs did not record it" in r.why, r.why


def test_web_runs_with_a_syn_back_off_are_counted_next_to_the_statistics():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, list(1.1 + RNG.normal(0, 0.05, 10))),
            "scheduler=minrtt": (MINRTT, list(1.0 + RNG.normal(0, 0.05, 10))),
        },
        metric="page_load_s",
    )
    runs["late_first_request_loads"] = [0] * 7 + [1, 0, 0] + [0] * 10
    c = claim(metric="page_load_s", paper=[1.456, 1.461], unit="s")
    r = reproduce.evaluate_claim(c, runs)
    assert r.subject.late_starts == 1 and r.baseline.late_starts == 0
    text = reproduce.render_text(reproduce.Expectations("e", [c]), [r])
    assert "1 with a SYN back-off (first request >= 1 s late)" in text


def test_a_ratio_metric_and_a_claim_of_no_difference():
    rows = runs_table(
        {
            "congestion_control=reno": ({"kernel.congestion_control": "reno"}, [10, 10.5, 9.5, 10]),
            "congestion_control=olia": ({"kernel.congestion_control": "olia"}, [6, 6.2, 5.8, 6]),
        },
        metric="goodput_mbps",
    )
    rows["bg_received_mbps"] = [10.0, 10.1, 9.9, 10.0, 10.0, 10.1, 9.9, 10.0]
    c = Claim.model_validate(
        {
            "metric": "goodput_mbps / bg_received_mbps",
            "compare": ["congestion_control=olia", "congestion_control=reno"],
            "paper": [0.6, 1.0],
            "claim": "coupled ~0.6 vs Reno ~1",
            "source": "thesis 2.3.2",
        }
    )
    r = reproduce.evaluate_claim(c, rows)
    assert r.verdict == "reproduced" and r.subject.summary.mean == pytest.approx(0.6, rel=1e-3)
    same = Claim.model_validate(
        {**c.model_dump(), "paper": [1.0, 1.0], "tolerance": 0.05, "metric": "bg_received_mbps"}
    )
    assert reproduce.evaluate_claim(same, rows).verdict == "reproduced"


def test_a_zero_baseline_uses_the_difference_of_means():
    runs = runs_table(
        {
            "scheduler=blest": (BLEST, [0.0, 0.0, 0.0]),
            "scheduler=minrtt": (MINRTT, [0.0, 0.0, 0.0]),
        }
    )
    more = runs_table(
        {"scheduler=blest": (BLEST, [5.0, 6.0, 7.0]), "scheduler=minrtt": (MINRTT, [0.0, 0.0, 0.0])}
    )
    c = claim(paper=[0.1, 0.53], metric="delay_mean_ms")
    assert reproduce.evaluate_claim(c, runs).verdict == "constant"
    r = reproduce.evaluate_claim(c, more)
    assert r.absolute and r.verdict == "opposite"
    # the size of a difference from a zero baseline, where the paper gives values
    up = claim(paper=[6.5, 0.5], metric="delay_mean_ms")
    r = reproduce.evaluate_claim(up, more)
    assert r.absolute and r.verdict == "reproduced"
    r = reproduce.evaluate_claim(claim(paper=[20.5, 0.5], metric="delay_mean_ms"), more)
    assert r.verdict == "direction only"
    r = reproduce.evaluate_claim(claim(paper=None, change="+50%"), more)
    assert r.verdict == "direction only" and "no relative size" in r.why


# ------------------------------------------------------------ level claims
SBD = {"kernel.congestion_control": "olia_sbd"}
OLIA = {"kernel.congestion_control": "olia"}


def level_claim(**kw) -> Claim:
    base = {
        "metric": "sbd_accuracy",
        "compare": ["congestion_control=olia_sbd"],
        "value": 0.75,
        "claim": "SBD right in 75 % of its decisions",
        "source": "Table II",
    }
    return Claim.model_validate({**base, **kw})


def sbd_runs(sbd: list, olia: list | None = None) -> pd.DataFrame:
    return runs_table(
        {
            "congestion_control=olia_sbd": (SBD, sbd),
            "congestion_control=olia": (OLIA, olia if olia is not None else [0.1, 0.2, 0.3]),
        },
        metric="sbd_accuracy",
    )


def test_a_level_claim_is_one_variant_against_the_paper_value():
    c = level_claim()
    assert c.is_level and c.baseline is None and c.direction == 0
    assert c.paper_values() is None and math.isnan(c.paper_change())
    assert c.size_band() == pytest.approx(0.10)  # the default band: 0.675 to 0.825
    assert level_claim(size_tolerance="5%").size_band() == pytest.approx(0.05)
    assert level_claim(value=2.5, scale=1024).paper_level() == pytest.approx(2560)
    assert not claim().is_level and claim().baseline == "scheduler=minrtt"


@pytest.mark.parametrize(
    "paper,mean,lo,hi,band,want",
    [
        (0.75, 0.76, 0.74, 0.78, 0.10, "reproduced"),  # the paper's value inside our CI
        (0.75, 0.82, 0.81, 0.83, 0.10, "reproduced"),  # outside the CI, within the band
        (0.75, 0.675, 0.675, 0.675, 0.10, "reproduced"),  # the band's edge
        (0.75, 0.84, 0.83, 0.85, 0.10, "different"),
        (0.75, 0.60, 0.58, 0.62, 0.10, "different"),
        (0.75, 0.70, math.nan, math.nan, 0.10, "inconclusive"),  # n < 2: no CI
        (0.0, 0.0, 0.0, 0.0, 0.10, "reproduced"),
        (0.0, 0.01, 0.005, 0.015, 0.10, "different"),  # a band around 0 has no width
    ],
)
def test_level_verdict(paper, mean, lo, hi, band, want):
    assert reproduce.level_verdict(paper, mean, lo, hi, band) == want


@pytest.mark.parametrize(
    "bound,mean,want",
    [
        ("at least", 0.74, "reproduced"),  # "over 60 %": far above is still right
        ("at least", 0.50, "different"),
        ("at most", 0.50, "reproduced"),
        ("at most", 0.74, "different"),
        (None, 0.74, "different"),
    ],
)
def test_a_bound_is_met_from_its_side(bound, mean, want):
    assert reproduce.level_verdict(0.60, mean, mean - 0.02, mean + 0.02, 0.10, bound) == want


def test_a_bound_lies_on_the_papers_side_of_zero():
    # a two-variant claim takes a bound too since issue 40 (tests/test_claim_kinds.py);
    # the paper's -7.6 % can only be "at most" (a fall of more than 7.6 %)
    with pytest.raises(ValueError, match="allowed here: 'at most'"):
        claim(bound="at least")
    assert claim(bound="at most").kind == "at most"
    assert level_claim(bound="at least").bound == "at least"


def test_a_level_inside_our_ci_is_reproduced_and_shown_without_a_baseline():
    vals = [0.765 + d for d in (-0.05, -0.04, -0.02, -0.01, 0.0, 0.0, 0.01, 0.02, 0.04, 0.05)]
    runs = sbd_runs(vals)
    # a 1 % band: 0.765 is 2 % above the paper's 0.75, only the CI takes it in
    c = level_claim(size_tolerance="1%")
    r = reproduce.evaluate_claim(c, runs)
    assert r.verdict == "reproduced", r
    s = r.subject.summary
    assert s.n == 10 and s.ci_low <= 0.75 <= s.ci_high
    assert abs(s.mean - 0.75) > 0.01 * 0.75
    assert s.mean == pytest.approx(np.mean(vals))
    assert r.baseline.variant is None and r.baseline.summary is None and r.sides == (r.subject,)
    assert r.rel_diff == pytest.approx(s.mean / 0.75 - 1)
    assert r.ci_low == pytest.approx(s.ci_low / 0.75 - 1)
    assert r.ci_low < 0 < r.ci_high
    text = reproduce.render_text(reproduce.Expectations("e", [c]), [r])
    assert "[reproduced] SBD right in 75 % of its decisions  (Table II)" in text
    assert "metric sbd_accuracy: congestion_control=olia_sbd  (a level claim)" in text
    assert "paper: 0.75 (level, band +-1 %)" in text
    assert f"ours congestion_control=olia_sbd: {reproduce.ours_text(r.subject)}" in text
    # no baseline line: one line for the subject, one for the difference to the paper's
    assert "  vs  " not in text and "ours congestion_control=olia:" not in text
    assert [ln.split(":")[0] for ln in text.splitlines() if ln.startswith("  ours")] == [
        "  ours congestion_control=olia_sbd",
        "  ours",
    ]
    assert reproduce.diff_text(r).endswith("vs the paper's")
    df = reproduce.to_frame("e", [r])
    assert list(df.columns) == list(
        reproduce.to_frame(
            "e",
            [
                reproduce.evaluate_claim(
                    claim(),
                    runs_table(
                        {"scheduler=blest": (BLEST, [1, 2]), "scheduler=minrtt": (MINRTT, [1, 3])}
                    ),
                )
            ],
        ).columns
    )  # the same columns as a comparison's
    row = df.iloc[0]
    assert row["baseline"] is None and row["not_ok_baseline"] is None
    assert all(math.isnan(row[f"{k}_baseline"]) for k in ("n", "mean", "level", "ci_low"))
    assert math.isnan(row["paper_baseline"]) and math.isnan(row["paper_change"])
    assert row["paper_subject"] == 0.75 and row["size_band"] == pytest.approx(0.01)
    assert row["n_subject"] == 10 and row["level_subject"] == pytest.approx(s.mean / 0.75)
    assert reproduce.counts([r]) == {"reproduced": 1}


@pytest.mark.parametrize(
    "centre,word,rel", [(0.90, "higher", "+20.0 %"), (0.60, "lower", "-20.0 %")]
)
def test_a_level_away_from_the_paper_is_different_and_why_says_which_way(centre, word, rel):
    runs = sbd_runs([centre - 0.01, centre, centre + 0.01] * 3)
    r = reproduce.evaluate_claim(level_claim(), runs)
    assert r.verdict == "different", r
    assert f"ours is {word} than the paper's 0.75 by 0.15 ({rel})" in r.why, r.why
    assert "beyond the +-10 % band" in r.why
    assert r.rel_diff == pytest.approx(centre / 0.75 - 1)
    # a wider band takes it in
    wide = reproduce.evaluate_claim(level_claim(size_tolerance="25%"), runs)
    assert wide.verdict == "reproduced" and not wide.why


def test_a_level_in_the_paper_unit_is_scaled_before_it_is_judged():
    runs = sbd_runs([2500.0, 2600.0, 2550.0, 2580.0, 2520.0])  # bytes
    r = reproduce.evaluate_claim(level_claim(value=2.5, unit="KiB", scale=1024), runs)
    assert r.verdict == "reproduced", r  # 2.5 KiB = 2560 B, inside our CI
    r = reproduce.evaluate_claim(level_claim(value=3.5, unit="KiB", scale=1024), runs)
    assert r.verdict == "different" and "ours is lower than the paper's 3584 by" in r.why


def test_a_level_from_one_run_is_inconclusive():
    r = reproduce.evaluate_claim(level_claim(), sbd_runs([0.80]))
    assert r.verdict == "inconclusive" and "n < 2 in congestion_control=olia_sbd: no CI" in r.why
    assert r.subject.summary.n == 1 and math.isnan(r.ci_low)
    assert reproduce.diff_text(r).startswith("+0.05 (+6.7 % [-, -])")


def test_a_constant_level_is_held_against_the_band():
    same = reproduce.evaluate_claim(level_claim(), sbd_runs([0.75] * 6))
    assert same.verdict == "reproduced"
    assert "sbd_accuracy is 0.75 in every ok run (n=6)" in same.why
    near = reproduce.evaluate_claim(level_claim(), sbd_runs([0.70] * 6))
    assert near.verdict == "reproduced"  # within 10 % of 0.75
    zero = reproduce.evaluate_claim(level_claim(), sbd_runs([0.0] * 6))
    assert zero.verdict == "different", zero
    assert "sbd_accuracy is 0 in every ok run (n=6)" in zero.why
    assert "ours is lower than the paper's 0.75 by 0.75 (-100.0 %)" in zero.why
    # a paper's 0: the difference, not a ratio
    nil = reproduce.evaluate_claim(level_claim(value=0), sbd_runs([0.0] * 6))
    assert nil.verdict == "reproduced" and nil.absolute and nil.rel_diff == 0


def test_a_level_claim_of_a_missing_variant_or_metric_is_not_run():
    runs = sbd_runs([0.7, 0.8])
    r = reproduce.evaluate_claim(level_claim(compare=["congestion_control=lia"]), runs)
    assert r.verdict == "not run"
    assert r.why == "congestion_control=lia: variant not in this campaign"
    assert reproduce.diff_text(r) == "-" and r.subject.summary is None
    r = reproduce.evaluate_claim(level_claim(metric="sbd_precision"), runs)
    assert r.verdict == "not run" and "sbd_precision: not a column" in r.why
    text = reproduce.render_text(reproduce.Expectations("e", [r.claim]), [r])
    assert "[not run]" in text and "ours congestion_control=olia_sbd: -" in text


def test_a_level_claims_failed_runs_are_counted_not_dropped():
    vals = [0.73, 0.74, 0.75, 0.76, 0.77, "failed", "stalled", "failed"]
    r = reproduce.evaluate_claim(level_claim(), sbd_runs(vals, olia=["failed"] * 3))
    assert r.subject.not_ok == "2 failed, 1 stalled" and r.subject.runs == 8
    assert r.subject.summary.n == 5
    assert r.notes == ["congestion_control=olia_sbd: 2 failed, 1 stalled left out"]
    assert reproduce.to_frame("e", [r])["not_ok_subject"].iloc[0] == "2 failed, 1 stalled"
    text = reproduce.render_text(reproduce.Expectations("e", [r.claim]), [r])
    assert "not ok, left out: 2 failed, 1 stalled of 8" in text and "biased" in text
    # every run failed: no ok run, with the statuses
    r = reproduce.evaluate_claim(level_claim(), sbd_runs(["failed"] * 3 + ["stalled"]))
    assert r.verdict == "no ok run", r
    assert "in congestion_control=olia_sbd (3 failed, 1 stalled of 4 runs)" in r.why, r.why


@pytest.mark.parametrize(
    "kw,want",
    [
        ({"value": None}, "compare with one entry is a level claim: give value"),
        ({"change": "+5%"}, "a level claim: give value (the paper's value of "),
        ({"change": "+5%"}, "not change"),
        ({"paper": [0.7, 0.8]}, "not paper"),
        ({"tolerance": 0.05}, "not tolerance"),
        (
            {"compare": ["congestion_control=olia_sbd", "congestion_control=olia"]},
            "value is a level claim's, with one compare entry",
        ),
        ({"compare": []}, "at least 1 item"),
    ],
)
def test_a_bad_level_claim_is_an_error(kw, want):
    with pytest.raises(ValueError, match=re.escape(want)):
        level_claim(**kw)


LEVEL = (
    "      - {metric: goodput_mbps, compare: [scheduler=blest], value: 9.4, "
    'claim: "BLEST at 9.4 Mbit/s", source: "made up"}\n'
)


@pytest.mark.parametrize(
    "bad,want",
    [
        (LEVEL.replace("value: 9.4, ", ""), "compare with one entry is a level claim: give value"),
        (LEVEL.replace("value: 9.4", 'value: 9.4, change: "+5%"'), "not change"),
        (
            LEVEL.replace("[scheduler=blest]", "[scheduler=blest, scheduler=minrtt]"),
            "value is a level claim's",
        ),
        (LEVEL.replace("[scheduler=blest]", "[blest]"), "'blest' is not a variant of mine"),
    ],
)
def test_a_bad_level_claim_names_file_line_and_field(tmp_path, bad, want):
    msg = errors(tmp_path, GOOD + bad)
    assert want in msg, msg
    assert "mine.yaml:7: experiments.mine.expect.1" in msg, msg


def test_a_good_level_claim_validates(tmp_path):
    (good, level) = Catalog.load(campaign(tmp_path, GOOD + LEVEL)).claims("mine")
    assert not good.is_level and level.is_level and level.value == 9.4


# ------------------------------------------------------------ the language
def campaign(tmp_path: Path, expect: str, extra: str = "") -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "experiments:\n"
        "  mine:\n"
        "    extends: blest-3g-wlan-cbr\n"
        "    repetitions: 2\n"
        f"    expect:\n{expect}"
        f"{extra}"
    )
    return path


def errors(tmp_path, expect: str) -> str:
    path = campaign(tmp_path, expect)
    with pytest.raises(SpecError) as exc:
        Catalog.load(path).expand("mine")
    return str(exc.value)


GOOD = (
    "      - {metric: delay_mean_ms, compare: [scheduler=blest, scheduler=minrtt], "
    'paper: [62.8, 68], claim: "BLEST -8 %", source: "Table IV"}\n'
)


def test_a_good_expect_list_validates_and_is_not_part_of_a_run(tmp_path):
    cat = Catalog.load(campaign(tmp_path, GOOD))
    assert [c.claim for c in cat.claims("mine")] == ["BLEST -8 %"]
    runs = cat.expand("mine")
    assert "expect" not in runs[0].config
    future = GOOD.replace("scheduler=blest,", "scheduler=daps,")  # a scheduler still to come
    assert Catalog.load(campaign(tmp_path, future)).claims("mine")[0].compare[0] == "scheduler=daps"


@pytest.mark.parametrize(
    "bad,want",
    [
        (
            GOOD.replace("claim:", "clam:"),
            "mine.yaml:6: experiments.mine.expect.0.clam: unknown field",
        ),
        (
            GOOD.replace("scheduler=blest,", "schedulr=blest,"),
            "'schedulr' is not a variant key of mine",
        ),
        (GOOD.replace("scheduler=blest,", "blest,"), "'blest' is not a variant of mine; variants:"),
        (GOOD.replace("[62.8, 68]", "[62.8, 68, 70]"), "paper: two values"),
        (GOOD.replace("[62.8, 68]", "[68, 68]"), "give tolerance"),
        (
            GOOD.replace("[62.8, 68]", "[62.8, 68], tolerance: 5%"),
            "the paper's own difference is -7.6%",
        ),
        (GOOD.replace("paper: [62.8, 68], ", ""), "give the paper's values (paper) or"),
        (GOOD.replace("delay_mean_ms", "delay mean"), "a runs column, or the ratio of two"),
        (GOOD.replace("scheduler=minrtt]", "scheduler=blest]"), "the two entries are the same"),
        (
            GOOD.replace("paper: [62.8, 68]", 'paper: [62.8, 68], change: "+8%"'),
            "disagree in direction",
        ),
    ],
)
def test_a_bad_expect_names_file_line_and_field(tmp_path, bad, want):
    msg = errors(tmp_path, bad)
    assert want in msg, msg
    assert "mine.yaml:" in msg


def test_an_entry_matching_several_variants_is_an_error(tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(
        "experiments:\n  web:\n    extends: blest-3g-wlan-web\n    expect:\n"
        "      - {metric: page_load_s, compare: [scheduler=blest, scheduler=minrtt], "
        'paper: [0.337, 0.421], claim: "x", source: "Table III"}\n'
    )
    with pytest.raises(SpecError, match="ambiguous: it matches page=wikipedia,scheduler=blest"):
        Catalog.load(path).claims("web")


def test_expect_is_inherited_only_by_the_same_scenario(tmp_path):
    extra = (
        "  same:\n    extends: mine\n    repetitions: 3\n"
        "  other-paths:\n    extends: mine\n    paths: [wlan, wlan]\n"
        "  dropped:\n    extends: mine\n    expect: []\n"
        "  one-variant:\n    extends: mine\n    matrix: {}\n    variants: []\n"
    )
    cat = Catalog.load(campaign(tmp_path, GOOD, extra))
    assert len(cat.claims("same")) == 1
    assert cat.claims("other-paths") == [] and cat.claims("dropped") == []
    # inherited claims naming variants this one lacks: not an error, "not run"
    (c,) = cat.claims("one-variant")
    assert len(cat.expand("one-variant")) == 2
    assert "variant not in this campaign" in resolve(c.compare[0], cat.variants("one-variant"))[1]


def test_the_shipped_experiments_claims_validate():
    cat = Catalog.load()
    total = 0
    for name in cat.names():
        total += len(cat.claims(name))
    assert total >= 40
    # the scenarios the MPT-BM paper's Tables II and III give, each with its own
    for name in ("mptbm-3g1-3g2", "mptbm-3g1-wlan", "mptbm-3g2-wlan"):
        sources = {c.source for c in cat.claims(name)}
        assert {"Table II", "Table III"} <= sources, name


def test_resolve_prefers_an_exact_name():
    variants = [
        ("scheduler=blest", {"kernel.scheduler": "blest"}),
        ("blest-reno", {"kernel.scheduler": "blest", "kernel.congestion_control": "reno"}),
    ]
    assert resolve("scheduler=blest", variants) == ("scheduler=blest", "")
    assert resolve("scheduler=blest,congestion_control=reno", variants)[0] == "blest-reno"
    assert "ambiguous" in resolve("kernel.scheduler=blest", variants)[1]


# ------------------------------------------------------------ CLI and report
FIXTURE_CLAIMS = """experiments:
  fixture:
    extends: blest-3g-wlan
    notes: "the fixture's runs are 2 per variant"
    matrix: {kernel.scheduler: [minrtt, blest]}
    variants:
      - {name: tcp-wlan, kernel.mptcp: false, kernel.tcp_path: 1}
    expect:
      - {metric: goodput_mbps, compare: [scheduler=blest, tcp-wlan], paper: [11.5, 9], unit: Mbit/s, claim: "BLEST beats TCP on WLAN", source: "Fig. 8"}
      - {metric: goodput_mbps, compare: [scheduler=blest, tcp-wlan], change: "-20%", claim: "BLEST below TCP on WLAN", source: "made up"}
      - {metric: goodput_mbps, compare: [scheduler=blest, scheduler=minrtt], change: "+12%", claim: "BLEST +12 % vs minRTT", source: "Sec. VI-A"}
      - {metric: goodput_mbps, compare: [scheduler=otias, scheduler=minrtt], change: "+6%", claim: "OTIAS +6 % vs minRTT", source: "Sec. IV-C"}
      - {metric: goodput_mbps, compare: [scheduler=blest, tcp-wlan], paper: [12, 6], unit: Mbit/s, claim: "BLEST twice TCP on WLAN", source: "made up"}
"""


@pytest.fixture(scope="module")
def fixture_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("repro")
    shutil.copytree(DATA / "fixture", root / "fixture")
    claims = root / "claims.yaml"
    claims.write_text(FIXTURE_CLAIMS)
    return root, claims


def test_mptlab_reproduce_prints_each_claim_with_its_verdict(fixture_results, mptlab):
    root, claims = fixture_results
    p = mptlab("reproduce", "fixture", root / "fixture", "--file", claims, "--no-pcap")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "fixture: 5 claims" in out
    assert "1 reproduced, 1 direction only, 1 opposite, 1 inconclusive, 1 not run" in out
    assert "[reproduced] BLEST beats TCP on WLAN  (Fig. 8)" in out
    assert "paper: 11.5 vs 9 Mbit/s (+27.8 %, size +-9 points)" in out
    assert "[direction only] BLEST twice TCP on WLAN" in out
    assert "ours tcp-wlan: 7.316 [6.905, 7.727] n=2  (1.22x the paper's value)" in out
    assert "[opposite] BLEST below TCP on WLAN" in out
    assert "[inconclusive] BLEST +12 % vs minRTT" in out
    assert (
        "[not run] OTIAS +6 % vs minRTT" in out
        and "scheduler=otias: variant not in this campaign" in out
    )
    assert "ours scheduler=blest: 9.445 [9.143, 9.747] n=2" in out
    assert "the fixture's runs are 2 per variant" in out
    # DIR alone: every experiment there; NAME with no runs there: a clear error
    p = mptlab("reproduce", root / "fixture", "--file", claims, "--no-pcap")
    assert p.returncode == 0 and "fixture: 5 claims" in p.stdout
    p = mptlab("reproduce", "blest-3g-wlan", root / "fixture", "--no-pcap")
    assert p.returncode == 2 and "no runs of blest-3g-wlan; experiments there: fixture" in p.stderr


def test_the_report_leads_with_the_verdicts_and_headline_figure_and_has_run_health(
    fixture_results,
):
    """Like a paper (issue 25): the reproduction's verdicts, the headline figure,
    then the key metrics, the comparisons and, further down, run health."""
    root, claims = fixture_results
    html = report.build(root / "fixture", out=root / "r.html", pcap=False, claims_file=claims)
    text = html.read_text()
    order = [
        text.index("<h2 id='reproduction'>Reproduction of the paper"),
        text.index("<h2 id='headline'>goodput_mbps per variant"),
        text.index("<h2 id='summary'>Key metrics"),
        text.index("<h2 id='compare'>"),
        text.index("<h2 id='health'>Run health"),
    ]
    assert order == sorted(order)
    assert "data:image/png;base64," in text[order[1] : order[2]]  # the box plot
    key = text[order[2] : order[3]]
    assert key.index("goodput_mbps") < key.index("<details>")  # the workload's metric leads
    assert "host_cpu_s" not in key[: key.index("<details>")]  # host CPU is run health
    assert "host_cpu_wait_share" in text[order[4] :]
    assert "BLEST beats TCP on WLAN" in text and ">reproduced<" in text
    assert "not ok, left out" in text
    # without claims for the experiment: said so, quietly
    html = report.build(
        root / "fixture", out=root / "r2.html", pcap=False, metrics=["goodput_mbps"]
    )
    assert (
        "No claims: fixture: fixture is not an experiment of experiments.yaml" in html.read_text()
    )


def test_the_report_warns_when_runs_are_left_out(tmp_path):
    shutil.copytree(DATA / "fixture-fail", tmp_path / "ff")
    text = report.build(tmp_path / "ff", out=tmp_path / "r.html", pcap=False).read_text()
    assert "did not end ok and are left out of every statistic" in text
    assert "biased" in text


def test_key_metrics_follow_the_workload():
    ok = {"status": "ok", "attempt": "current", "variant": "v"}
    cbr = pd.DataFrame(
        [
            {
                **ok,
                "workload": "cbr",
                "delay_mean_ms": 60.0 + i,
                "jitter_ms": 1.0,
                "host_cpu_s": 9.0,
                "k_ofo_bytes_max": 1000.0 * i,
                "path1_share": 0.9,
                "path2_share": 0.1,
            }
            for i in range(3)
        ]
    )
    km = report.key_metrics(cbr)
    assert km[0] == "delay_mean_ms" and "host_cpu_s" not in km
    assert {"k_ofo_bytes_max", "path1_share", "path2_share", "jitter_ms"} <= set(km)
    dash = cbr.assign(workload="dash", avg_bitrate_mbps=3.0, switches=2, stalls=0)
    assert report.key_metrics(dash)[:3] == ["avg_bitrate_mbps", "switches", "stalls"]
    assert report.key_metrics(cbr, ["jitter_ms"]) == ["jitter_ms"]


def test_results_reproduce_gives_one_row_per_claim(fixture_results, tmp_path):
    import mptlab

    root, claims = fixture_results
    exp = mptlab.Experiment.from_yaml(claims, "fixture")
    res = mptlab.Results(root / "fixture", pcap=False)
    df = res.reproduce(exp)
    assert list(df["verdict"]) == [
        "reproduced",
        "opposite",
        "inconclusive",
        "not run",
        "direction only",
    ]
    assert df.loc[0, "n_subject"] == 2 and df.loc[0, "paper_change"] == pytest.approx(11.5 / 9 - 1)
    assert df.loc[4, "level_baseline"] == pytest.approx(7.316 / 6, abs=0.01)
