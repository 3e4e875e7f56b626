"""Reproduction tables: the ``expect:`` claims of the language, their
verdicts against runs, `mptlab reproduce` and the report's sections.  No
kernel: synthetic run tables and the fixture run dirs."""

from __future__ import annotations

import json
import math
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


def test_the_report_leads_with_key_metrics_then_reproduction_and_has_run_health(
    fixture_results,
):
    root, claims = fixture_results
    html = report.build(root / "fixture", out=root / "r.html", pcap=False, claims_file=claims)
    text = html.read_text()
    order = [
        text.index("<h2 id='summary'>Key metrics"),
        text.index("<h2 id='reproduction'>Reproduction of the paper"),
        text.index("<h2 id='compare'>"),
        text.index("<h2 id='health'>Run health"),
    ]
    assert order == sorted(order)
    key = text[order[0] : order[1]]
    assert key.index("goodput_mbps") < key.index("<details>")  # the workload's metric leads
    assert "host_cpu_s" not in key[: key.index("<details>")]  # host CPU is run health
    assert "host_cpu_wait_share" in text[order[3] :]
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
