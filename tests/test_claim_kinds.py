"""Claim kinds (issue 40, item 1): one-sided changes (``bound``), claims over
medians (``statistic``), "up to X over these cells" (``over``), equivalence,
and the kind shown with every verdict.  No kernel: synthetic run tables."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from test_reproduce import runs_table as reproduce_runs_table

from mptlab.analysis import reproduce, reproduce_page
from mptlab.analysis.sections import reproduction
from mptlab.spec.catalog import Catalog
from mptlab.spec.expect import Claim
from mptlab.spec.yamlsrc import SpecError

A = {"kernel.scheduler": "blest"}
B = {"kernel.scheduler": "minrtt"}


def runs_table(samples: dict[str, tuple[dict, list]], metric: str = "x") -> pd.DataFrame:
    """variant -> (its keys, [values]): ok runs of one experiment (test_reproduce's table)."""
    return reproduce_runs_table(samples, metric)


def claim(**kw) -> Claim:
    base = {
        "metric": "x",
        "compare": ["scheduler=blest", "scheduler=minrtt"],
        "claim": "c",
        "source": "s",
    }
    return Claim.model_validate({**base, **kw})


def around(mean: float, sd: float, n: int = 10, seed: int = 0) -> list[float]:
    """n values with exactly this mean (the noise centred), so a test's
    point estimate is the one it names."""
    noise = np.random.default_rng(seed).normal(0, sd, n)
    return list(mean + noise - noise.mean())


def two(subject: list, baseline: list, metric: str = "x") -> pd.DataFrame:
    return runs_table({"scheduler=blest": (A, subject), "scheduler=minrtt": (B, baseline)}, metric)


# ------------------------------------------------------------ at least / at most
def test_more_than_100_percent_is_met_by_348_percent():
    # the case: +348 % against the paper's "more than 100 %"
    runs = two(around(4.48, 0.2), around(1.0, 0.05))
    point = reproduce.evaluate_claim(claim(change="+100%"), runs)
    bound = reproduce.evaluate_claim(claim(change="+100%", bound="at least"), runs)
    assert point.rel_diff == pytest.approx(3.48)
    assert point.verdict == "direction only"  # today's encoding: X as a point
    assert bound.verdict == "reproduced", bound.why
    assert bound.kind == "at least" and point.kind == "change"


def test_more_than_30_percent_faster_is_met_by_minus_67_percent():
    # the case: a completion time -67.6 % against "more than 30 % faster"
    runs = two(around(32.4, 1.0), around(100.0, 3.0))
    point = reproduce.evaluate_claim(claim(change="-30%"), runs)
    bound = reproduce.evaluate_claim(claim(change="-30%", bound="at most"), runs)
    assert bound.rel_diff == pytest.approx(-0.676)
    assert point.verdict == "direction only"
    assert bound.verdict == "reproduced", bound.why
    assert bound.kind == "at most"


def test_a_ci_wholly_short_of_the_bound_is_direction_only_and_says_why():
    runs = two(around(1.2, 0.02), around(1.0, 0.02))  # +20 %, CI about +-3 points
    r = reproduce.evaluate_claim(claim(change="+100%", bound="at least"), runs)
    assert r.verdict == "direction only"
    assert "at least +100.0 %: our CI lies wholly below it" in r.why, r.why
    # the sign still decides first
    r = reproduce.evaluate_claim(claim(change="-30%", bound="at most"), runs)
    assert r.verdict == "opposite"
    flat = two(around(1.0, 0.3, seed=1), around(1.0, 0.3, seed=2))
    assert reproduce.evaluate_claim(claim(change="+100%", bound="at least"), flat).verdict in (
        "inconclusive",
        "no effect",
    )


@pytest.mark.parametrize(
    "bound,paper,ours,lo,hi,band,want",
    [
        ("at least", 1.0, 3.48, 3.3, 3.7, 0.33, "reproduced"),  # beyond the bound
        ("at least", 1.0, 0.8, 0.5, 1.1, 0.33, "reproduced"),  # the bound inside our CI
        ("at least", 1.0, 0.7, 0.6, 0.8, 0.33, "reproduced"),  # within the band of it
        ("at least", 1.0, 0.6, 0.5, 0.65, 0.33, "direction only"),  # short by more
        ("at most", -0.3, -0.676, -0.7, -0.65, 0.1, "reproduced"),
        ("at most", -0.3, -0.25, -0.28, -0.22, 0.1, "reproduced"),  # within the band
        ("at most", -0.3, -0.1, -0.15, -0.05, 0.1, "direction only"),
        ("at most", -0.3, 0.1, 0.05, 0.15, 0.1, "opposite"),
    ],
)
def test_the_bound_rule(bound, paper, ours, lo, hi, band, want):
    direction = 1 if paper > 0 else -1
    got = reproduce.verdict(direction, lo, hi, paper=paper, ours=ours, band=band, bound=bound)
    assert got == want


def test_marking_a_claim_a_bound_never_costs_it_a_verdict():
    # the half-line from the paper's change outwards contains the change: every
    # CI that reproduces the point reproduces the bound (over a grid of cases)
    grid = [-0.9, -0.4, -0.1, -0.02, 0.0, 0.02, 0.1, 0.4, 0.9, 2.0, 4.0]
    for paper in (-0.5, -0.1, 0.1, 0.5, 2.0):
        direction = 1 if paper > 0 else -1
        bound = "at least" if paper > 0 else "at most"
        band = max(0.03, abs(paper) / 3)
        for lo, hi in itertools.combinations(grid, 2):
            for ours in (lo, (lo + hi) / 2, hi):
                kw = {"paper": paper, "ours": ours, "band": band, "negligible": 0.01}
                was = reproduce.verdict(direction, lo, hi, **kw)
                now = reproduce.verdict(direction, lo, hi, bound=bound, **kw)
                if was == "reproduced":
                    assert now == "reproduced", (paper, ours, lo, hi)
                if was in ("opposite", "inconclusive", "no effect"):
                    assert now == was  # only the size test differs


@pytest.mark.parametrize(
    "kw,want",
    [
        ({"change": "-30%", "bound": "at least"}, "allowed here: 'at most'"),
        ({"change": "+100%", "bound": "at most"}, "allowed here: 'at least'"),
        ({"paper": [1, 1], "tolerance": "5%", "bound": "at least"}, "not both"),
        ({"change": "+10%", "bound": "more"}, "'at least' or 'at most'"),
        ({"change": "+10%", "statistic": "mode"}, "'mean' or 'median'"),
    ],
)
def test_a_bound_or_statistic_that_does_not_fit_is_refused(kw, want):
    with pytest.raises(ValidationError, match=want):
        claim(**kw)


# ------------------------------------------------------------ equivalence
def test_a_claim_of_no_difference_is_the_equivalence_kind_in_every_table():
    runs = two(around(10.0, 0.1), around(10.1, 0.1))
    c = claim(paper=[1.0, 1.0], tolerance="5%")
    r = reproduce.evaluate_claim(c, runs)
    assert r.verdict == "reproduced" and r.kind == "equivalence"
    assert reproduce.to_frame("e", [r])["kind"].tolist() == ["equivalence"]
    text = reproduce.render_text(reproduce.Expectations("e", [c]), [r])
    assert "[reproduced] c  (s)  kind: equivalence" in text


# ------------------------------------------------------------ mean or median
# an out-of-order queue: empty in most baseline runs (median 0), a few long
# episodes; with dFEC longer ones (the thesis: more out-of-order data on average)
OFO_BASE = [0.0] * 6 + [4000.0, 8000.0, 12000.0, 16000.0]  # mean 4000, median 0
OFO_FEC = [0.0] * 3 + [6000.0, 9000.0, 12000.0, 15000.0, 18000.0, 21000.0, 24000.0]


def test_an_ofo_claim_about_averages_is_judged_on_means_though_the_median_is_0():
    runs = two(OFO_FEC, OFO_BASE, metric="k_ofo_bytes_mean")
    mean = claim(metric="k_ofo_bytes_mean", change="+100%", bound="at least")
    r = reproduce.evaluate_claim(mean, runs)
    assert not r.absolute and r.rel_diff == pytest.approx(10500 / 4000 - 1)
    assert r.ci_low > 0 and r.verdict == "reproduced", (r.verdict, r.why)
    # the same runs as medians: the baseline's is 0, no ratio: the difference
    median = claim(metric="k_ofo_bytes_mean", change="+100%", statistic="median")
    r = reproduce.evaluate_claim(median, runs)
    assert r.absolute and r.rel_diff == pytest.approx(10500.0)  # median(fec) - 0
    assert r.why.startswith("the baseline's median is 0: the difference of medians is judged")
    # half of the baseline's resampled medians exceed 0 and a third of dFEC's are
    # 0: the medians cannot tell, where the means can
    assert r.verdict == "inconclusive" and r.why.endswith("the CI includes zero"), r.why
    assert r.kind == "change, median"
    assert "difference of medians: baseline median 0" in reproduce.diff_text(r)
    assert reproduce.ours_text(r.baseline).startswith("median 0 [")
    # with OFO data in every dFEC run the sign is clear; a relative change has no
    # size against a zero median, which the verdict says rather than guess
    busy = two([x + 6000.0 for x in OFO_FEC], OFO_BASE, metric="k_ofo_bytes_mean")
    r = reproduce.evaluate_claim(median, busy)
    assert r.absolute and r.ci_low > 0
    assert r.verdict == "direction only" and "the baseline's median is 0: no relative" in r.why


def test_a_median_claim_follows_the_medians_where_the_means_disagree():
    # subject: most runs faster, two slow outliers; the means say slower
    subject = [8.0] * 17 + [60.0, 70.0, 80.0]
    baseline = [10.0 + 0.1 * i for i in range(20)]
    runs = two(subject, baseline)
    faster = {"change": "-27%"}
    r = reproduce.evaluate_claim(claim(statistic="median", **faster), runs)
    assert r.rel_diff == pytest.approx(8.0 / np.median(baseline) - 1)
    assert r.ci_high < 0 and r.verdict == "reproduced", (r.verdict, r.ci_low, r.ci_high)
    assert reproduce.evaluate_claim(claim(**faster), runs).verdict in ("opposite", "inconclusive")
    row = reproduce.to_frame("e", [r]).iloc[0]
    assert row["statistic"] == "median" and row["median_subject"] == 8.0
    assert row["median_ci_low_subject"] <= 8.0 <= row["median_ci_high_subject"]
    assert "(of medians)" in reproduce.diff_text(r)


def test_a_baseline_median_that_is_often_0_in_resampling_is_judged_as_a_difference():
    # median 1 (five zeros of eleven): resampled, the median is 0 in about a third
    base = [0.0] * 5 + [1.0] * 6
    runs = two([3.0] * 6 + [4.0] * 5, base)
    rel, lo, hi, absolute = reproduce.compare_medians(
        pd.Series(base), pd.Series([3.0] * 6 + [4.0] * 5), 0.95, 2000, 0
    )
    assert absolute and rel == 2.0 and 0 < lo <= hi
    r = reproduce.evaluate_claim(claim(change="+200%", statistic="median"), runs)
    assert r.absolute and "is 0 in more than 2.5% of the bootstrap replicates" in r.why


def test_the_ratio_of_medians_ci_covers_the_point():
    rng = np.random.default_rng(5)
    base, subj = pd.Series(rng.lognormal(0, 0.3, 30)), pd.Series(rng.lognormal(0.4, 0.3, 30))
    rel, lo, hi, absolute = reproduce.compare_medians(base, subj, 0.95, 4000, 0)
    assert not absolute
    assert rel == pytest.approx(np.median(subj) / np.median(base) - 1)
    assert lo < rel < hi and lo > 0
    assert reproduce.compare_medians(base[:1], subj, 0.95, 100, 0)[1] != 0.0  # nan: n < 2
    assert math.isnan(reproduce.compare_medians(base[:1], subj, 0.95, 100, 0)[1])


def test_a_level_claim_about_a_median():
    vals = [0.75] * 14 + [0.1] * 6  # median 0.75, mean 0.555
    runs = runs_table({"scheduler=blest": (A, vals)})
    lv = {"compare": ["scheduler=blest"], "value": 0.75}
    assert reproduce.evaluate_claim(claim(**lv), runs).verdict == "different"
    r = reproduce.evaluate_claim(claim(statistic="median", **lv), runs)
    assert r.verdict == "reproduced" and r.kind == "level, median"
    assert r.rel_diff == pytest.approx(0.0)


# ------------------------------------------------------------ over cells
FEC_PATHS = ["a+b", "c+b", "d+b"]


def fec_runs(gains: dict[str, float], n: int = 10) -> pd.DataFrame:
    """mode x paths: dFEC's goodput gain per paths cell."""
    samples = {}
    for i, paths in enumerate(FEC_PATHS):
        if paths not in gains:
            continue
        for mode, level in (("off", 10.0), ("dynamic", 10.0 * (1 + gains[paths]))):
            keys = {"kernel.fec.mode": mode, "paths": paths.split("+")}
            samples[f"mode={mode},paths={paths}"] = (keys, around(level, 0.1, n, seed=i))
    return runs_table(samples)


def fec_claim(**kw) -> Claim:
    # compare names one cell in full (the one a claim without over reads at)
    base = {
        "compare": ["mode=dynamic,paths=a+b", "mode=off,paths=a+b"],
        "over": [f"paths={p}" for p in FEC_PATHS],
        "change": "+20%",
        "claim": "dFEC up to +20 %",
    }
    return claim(**{**base, **kw})


def test_up_to_x_over_cells_is_judged_on_the_best_cell():
    runs = fec_runs({"a+b": 0.05, "c+b": 0.2, "d+b": 0.08})
    r = reproduce.evaluate_claim(fec_claim(), runs)
    assert r.verdict == "reproduced" and r.cell == "paths=c+b" and r.cells == 3
    assert r.subject.variant == "mode=dynamic,paths=c+b"
    assert r.baseline.variant == "mode=off,paths=c+b"
    assert r.rel_diff == pytest.approx(0.2)
    assert r.kind == "change, best of 3 cells"
    assert "best of 3 cells: paths=c+b" in r.why
    # the same claim without over reads at compare's cell (today's encoding): size missed
    single = reproduce.evaluate_claim(fec_claim(over=None), runs)
    assert single.verdict == "direction only"
    assert single.subject.variant == "mode=dynamic,paths=a+b"
    row = reproduce.to_frame("e", [r]).iloc[0]
    assert row["cell"] == "paths=c+b" and row["kind"] == "change, best of 3 cells"


def test_the_best_cell_follows_the_papers_direction():
    runs = fec_runs({"a+b": -0.05, "c+b": -0.3, "d+b": 0.1})
    r = reproduce.evaluate_claim(fec_claim(change="-30%"), runs)
    assert r.cell == "paths=c+b" and r.verdict == "reproduced"
    r = reproduce.evaluate_claim(fec_claim(change="+10%"), runs)
    assert r.cell == "paths=d+b"


def test_the_best_cells_ci_is_widened_for_the_choice():
    runs = fec_runs({"a+b": 0.05, "c+b": 0.2, "d+b": 0.08})
    best = reproduce.evaluate_claim(fec_claim(), runs)
    alone = reproduce.evaluate_claim(fec_claim().cell(1), runs)
    assert alone.rel_diff == pytest.approx(best.rel_diff)
    assert best.ci_low < alone.ci_low and best.ci_high > alone.ci_high
    assert "Bonferroni over 3" in best.why and "98.33%" in best.why


def test_cells_not_in_the_campaign_are_counted_not_ranked():
    runs = fec_runs({"a+b": 0.05, "d+b": 0.2})
    r = reproduce.evaluate_claim(fec_claim(), runs)
    assert r.cell == "paths=d+b" and r.cells == 2
    assert "not ranked: paths=c+b: not run" in r.why
    none = reproduce.evaluate_claim(fec_claim(metric="y"), runs)  # no column y
    assert none.verdict == "not run" and none.why.startswith("no cell has a difference")
    assert "paths=a+b: not run (y: not a column" in none.why


def test_a_cell_keeps_alternatives_and_the_papers_values():
    subject = "mode=dynamic,loss=0,paths=a+b | mode=fixed,loss=0,paths=a+b"
    c = claim(
        compare=[subject, "kernel.fec.mode=off,loss=0,paths=a+b"],
        over=["paths=a+b,loss=0", "loss=1,paths=c+b"],
        paper={subject: 12.0, "kernel.fec.mode=off,loss=0,paths=a+b": 10.0},
    )
    cell = c.cell(1)
    assert cell.compare == [
        "mode=dynamic,loss=1,paths=c+b | mode=fixed,loss=1,paths=c+b",
        "kernel.fec.mode=off,loss=1,paths=c+b",
    ]
    assert cell.paper_values() == (12.0, 10.0) and cell.over is None
    assert c.cell(0).compare == c.compare  # compare's own cell
    # what a run of the claim needs: every cell's variants, each once
    assert c.entries() == c.cell(0).compare + c.cell(1).compare
    assert claim(change="+5%").entries() == ["scheduler=blest", "scheduler=minrtt"]


@pytest.mark.parametrize(
    "kw,want",
    [
        ({"over": ["paths=a+b"]}, "at least 2 items"),
        ({"over": ["a+b", "paths=c+b"]}, "not a variant's name"),
        ({"over": ["paths=a+b | paths=c+b", "paths=d+b"]}, "no alternatives"),
        ({"over": ["paths=a+b", "paths=a+b"]}, "listed twice"),
        ({"over": ["paths=a+b", "loss=1"]}, "sets 'loss': each compare entry must set it"),
        ({"over": ["mode=on", "mode=off"]}, "to the same value"),
        (
            {"over": ["paths=c+b", "paths=d+b"]},
            r"the cell compare names \(paths=a\+b\) is not among",
        ),
        ({"compare": ["tcp-wlan", "mode=off,paths=a+b"]}, "is a variant's name"),
        ({"paper": [1, 1], "change": None, "tolerance": "5%"}, "not for a claim of no diff"),
        ({"compare": ["mode=dynamic"], "value": 3, "change": None}, "not for a level claim"),
    ],
)
def test_a_bad_over_is_refused(kw, want):
    with pytest.raises(ValidationError, match=want):
        fec_claim(**kw)


# ------------------------------------------------------------ YAML and tables
def campaign(tmp_path: Path, expect: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "experiments:\n"
        "  mine:\n"
        "    extends: blest-3g-wlan-cbr\n"
        "    repetitions: 2\n"
        f"    expect:\n{expect}"
    )
    return path


KINDS = (
    "      - {metric: delay_mean_ms, compare: [scheduler=blest, scheduler=minrtt], "
    'change: "-30%", bound: at most, claim: "more than 30 % faster", source: "made up"}\n'
    "      - {metric: delay_mean_ms, compare: [scheduler=blest, scheduler=minrtt], "
    'change: "-8%", statistic: median, claim: "median -8 %", source: "made up"}\n'
)


def test_a_claim_over_cells_loads_from_yaml_with_the_catalogs_checks(tmp_path):
    # compare names one full cell, so the catalog's checks (no ambiguous entry,
    # every key a variant key) hold as for any claim; over lists the cells
    cells = "[paths=fec-b1-loss1+fec-b2, paths=fec-b1-loss5+fec-b2]"
    path = tmp_path / "fec.yaml"
    text = (
        "experiments:\n  fec:\n    extends: fec-mptcp-bulk\n    expect:\n"
        '      - {metric: goodput_mbps, compare: ["mode=dynamic,paths=fec-b1-loss5+fec-b2", '
        f'"mode=off,paths=fec-b1-loss5+fec-b2"], over: {cells}, change: "+20%", '
        'claim: "up to +20 %", source: "Fig. 6.10(a)"}\n'
    )
    path.write_text(text)
    (c,) = Catalog.load(path).claims("fec")
    assert c.kind == "change, best of 2 cells"
    assert c.cell(0).compare[1] == "mode=off,paths=fec-b1-loss1+fec-b2"
    path.write_text(text.replace("paths=fec-b1-loss5+fec-b2]", "loss=5]"))
    with pytest.raises(SpecError) as exc:
        Catalog.load(path).claims("fec")
    msg = str(exc.value)
    assert "fec.yaml:5: experiments.fec.expect.0" in msg and "sets 'loss'" in msg, msg


def test_kinds_in_yaml_validate_and_bad_ones_name_file_line_and_field(tmp_path):
    bound, median = Catalog.load(campaign(tmp_path, KINDS)).claims("mine")
    assert (bound.kind, median.kind) == ("at most", "change, median")
    bad = KINDS.replace("statistic: median", "statistic: average")
    with pytest.raises(SpecError) as exc:
        Catalog.load(campaign(tmp_path, bad)).claims("mine")
    msg = str(exc.value)
    assert "mine.yaml:7: experiments.mine.expect.1.statistic" in msg, msg
    assert "'mean' or 'median'" in msg, msg
    bad = KINDS.replace("bound: at most", "bound: at least")
    with pytest.raises(SpecError) as exc:
        Catalog.load(campaign(tmp_path, bad)).claims("mine")
    msg = str(exc.value)
    assert "mine.yaml:6: experiments.mine.expect.0" in msg and "allowed here: 'at most'" in msg


def test_the_shipped_claims_keep_their_kinds():
    # backward compatible: what experiments.yaml says today reads as before
    cat = Catalog.load()
    kinds = {c.kind for n in cat.names() for c in cat.claims(n)}
    assert {"change", "equivalence", "level"} <= kinds
    allowed = {"change", "at least", "at most", "equivalence", "level"}
    allowed |= {"level at least", "level at most"}
    assert {k.split(",")[0] for k in kinds} <= allowed


def test_every_table_shows_the_kind():
    runs = two(around(4.48, 0.2), around(1.0, 0.05))
    c = claim(change="+100%", bound="at least")
    results = [reproduce.evaluate_claim(c, runs)]
    text = reproduce.render_text(reproduce.Expectations("e", [c]), results)
    assert "kind: at least" in text and "paper: at least +100.0 %, band 33 points" in text
    html = str(reproduction.claims_table(results))
    assert "<th class='l'>claim (source)</th><th class='l'>kind</th>" in html
    assert "<td class='l'>at least</td>" in html
    over = reproduce.evaluate_claim(fec_claim(), fec_runs({"a+b": 0.05, "c+b": 0.2, "d+b": 0.1}))
    html = str(reproduction.claims_table([over]))
    assert "change, best of 3 cells<br><span class='muted'>judged: paths=c+b</span>" in html
    entry = reproduce_page.Entry(
        reproduce.Expectations("e", [c]), paper="P", results=results, runs=runs
    )
    md = reproduce_page.render_markdown([entry], reproduce_page.to_frame([entry]), Path("r"))
    assert "| experiment | claim | kind | paper | ours | verdict | n |" in md
    assert "| e | c (s) | at least | at least +100.0 %, band 33 points |" in md
