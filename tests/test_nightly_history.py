"""The nightly history store (mptlab.nightly.history) and the regression
detection over it (mptlab.nightly.detect), on synthetic runs tables and
series; one test reads a real campaign's runs when it is there.  No kernel."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mptlab.analysis import ingest
from mptlab.analysis.compare import Check, CompareResult, Rule
from mptlab.nightly import detect, history

REAL_CAMPAIGN = Path("/work/inv/sbdm/sbd-nsb/sbd-nsb")
RULES = [Rule("goodput_mbps", "higher"), Rule("rtt_ms", "lower")]
INFO = {
    "experiment": ["exp"],
    "clocks": ["virtual"],
    "kernel": {"kernel_key": "kkey", "modules_dir": "/cache/kernel/kkey/modules/mkey"},
    "git_commit": "abc123",
}
NIGHT1, NIGHT2, NIGHT3 = "20250101-030000", "20250102-030000", "20250103-030000"


def runs_table(goodput: dict[str, list[float]], **columns) -> pd.DataFrame:
    """A runs table as ``ingest.load_runs`` gives it: per variant, one run per
    goodput value (NaN: the run failed), seeds 100 + repetition."""
    rows = []
    for variant, values in goodput.items():
        for rep, value in enumerate(values):
            rows.append(
                {
                    "run_id": f"{variant}/rep-{rep:03d}",
                    "attempt": "current",
                    "experiment": "exp",
                    "variant": variant,
                    "repetition": rep,
                    "seed": 100 + rep,
                    "status": "ok" if not math.isnan(value) else "failed",
                    "clock": "virtual",
                    "goodput_mbps": value,
                    "k_subflows": 2,
                    "host_cpu_s": 10.0 + rep + len(rows) * 0.1,
                }
            )
    runs = pd.DataFrame(rows)
    for name, value in columns.items():
        runs[name] = value
    return runs


GOODPUT = {"a": [10.0, 11.0, 12.0, 13.0], "b": [20.0, 21.0, 22.0, 23.0]}


def night(stamp: str, goodput=None, info=INFO, **columns) -> pd.DataFrame:
    runs = runs_table(goodput or GOODPUT, **columns)
    return history.table_from_runs(runs, info, stamp=stamp, campaign=f"{stamp}/exp", rules=RULES)


def row(table: pd.DataFrame, variant: str, metric: str) -> pd.Series:
    sel = table[(table["variant"] == variant) & (table["metric"] == metric)]
    assert len(sel) == 1, sel
    return sel.iloc[0]


# ------------------------------------------------------------------ night_table
def test_failed_and_stalled_runs_count_in_n_runs_not_in_the_statistics():
    runs = runs_table({"a": [10.0, 11.0, 12.0, 13.0, 99.0, 98.0]})
    # the stalled and the failed run carry what they measured until they ended
    runs.loc[4, "status"] = "stalled"
    runs.loc[5, "status"] = "failed"
    stats = history.variant_stats(runs)
    good = row(stats, "a", "goodput_mbps")
    assert (good.n_runs, good.n_failed, good.n_stalled, good.n) == (6, 2, 1, 4)
    assert good["median"] == 11.5 and good["mean"] == 11.5
    assert good.ci_lo <= 11.5 <= good.ci_hi
    ok = row(stats, "a", "ok_rate")
    assert ok["median"] == pytest.approx(4 / 6) and ok.n == 6


def test_superseded_attempts_are_not_counted():
    runs = runs_table({"a": [10.0, 11.0, 12.0]})
    again = runs.iloc[[0]].assign(attempt="superseded", status="failed")
    stats = history.variant_stats(pd.concat([runs, again], ignore_index=True))
    assert row(stats, "a", "goodput_mbps").n_runs == 3


def test_values_hash_is_equal_for_equal_numbers_and_differs_when_one_run_differs():
    base = history.variant_stats(runs_table(GOODPUT))
    # the same numbers in another row order and as another dtype
    same_runs = runs_table(GOODPUT).sample(frac=1, random_state=3)
    same_runs["k_subflows"] = same_runs["k_subflows"].astype(float)
    same = history.variant_stats(same_runs)
    one_off = history.variant_stats(runs_table({**GOODPUT, "b": [20.0, 21.0, 22.5, 23.0]}))
    for variant in ("a", "b"):
        for metric in ("goodput_mbps", "k_subflows", "ok_rate"):
            assert row(base, variant, metric)["values"] == row(same, variant, metric)["values"]
    assert row(one_off, "a", "goodput_mbps")["values"] == row(base, "a", "goodput_mbps")["values"]
    assert row(one_off, "b", "goodput_mbps")["values"] != row(base, "b", "goodput_mbps")["values"]
    # the same multiset in another run order is another set of runs
    swapped = history.variant_stats(runs_table({**GOODPUT, "a": [11.0, 10.0, 12.0, 13.0]}))
    assert row(swapped, "a", "goodput_mbps")["values"] != row(base, "a", "goodput_mbps")["values"]


def test_the_table_has_the_schema_provenance_and_stable_dtypes():
    table = night(NIGHT1)
    assert tuple(table.columns) == history.COLUMNS
    assert len(table) == 2 * 4  # variants x (goodput, k_subflows, host_cpu_s, ok_rate)
    first = table.iloc[0]
    assert first.time == "2025-01-01T03:00:00+00:00"
    assert (first.commit, first.kernel_key, first.modules_key) == ("abc123", "kkey", "mkey")
    assert first.clock == "virtual" and first.campaign == f"{NIGHT1}/exp" and first.report == ""
    assert table["seeds"].nunique() == 1
    assert row(table, "a", "goodput_mbps").better == "higher"
    assert row(table, "a", "k_subflows").better == ""
    for c in history.STR_COLUMNS:
        assert table[c].map(type).eq(str).all(), c
    assert all(table[c].dtype == "int64" for c in history.INT_COLUMNS)
    mixed = night(NIGHT1, info={**INFO, "clocks": ["virtual", "real"], "git_commit": None})
    assert mixed.iloc[0].clock == "mixed" and mixed.iloc[0].commit == ""


def test_a_bad_stamp_and_a_dir_without_campaign_are_refused(tmp_path):
    with pytest.raises(ValueError, match="2025-01-01.*YYYYmmdd-HHMMSS"):
        night("2025-01-01")
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no campaign.json"):
        history.night_table(tmp_path, root=tmp_path.parent, stamp=NIGHT1)


@pytest.mark.skipif(not REAL_CAMPAIGN.is_dir(), reason="the sbd-nsb campaign is not here")
def test_night_table_of_a_real_campaign(monkeypatch):
    # read its existing store only: the campaign is not ours to write to
    monkeypatch.setattr(ingest, "ingest", lambda *a, **k: None)
    root = REAL_CAMPAIGN.parent.parent
    table = history.night_table(REAL_CAMPAIGN, root=root, stamp=NIGHT1, rules=RULES)
    assert set(table["variant"]) == {
        "reno",
        "congestion_control=olia",
        "congestion_control=olia_sbd",
    }
    assert (table["n_runs"] == 10).all() and (table["clock"] == "virtual").all()
    assert table.iloc[0].campaign == "sbd-nsb/sbd-nsb"
    assert table.iloc[0].kernel_key == "784556e0370b1926"
    good = table[table["metric"] == "goodput_mbps"]
    assert len(good) == 3 and (good["n"] == 10).all()
    assert (good["ci_lo"] <= good["median"]).all() and (good["median"] <= good["ci_hi"]).all()
    assert table["seeds"].nunique() == 1 and len(table) == 3 * table["metric"].nunique()


# ------------------------------------------------------------------ the store
def test_append_refuses_to_record_a_night_twice_but_adds_another_experiment(tmp_path):
    table = night(NIGHT1)
    path = history.append(tmp_path, table)
    assert path == tmp_path / "history" / f"{NIGHT1}.parquet"
    with pytest.raises(FileExistsError, match=f"{NIGHT1}.parquet: night {NIGHT1} already holds"):
        history.append(tmp_path, table)
    other = table.assign(experiment="exp2")
    history.append(tmp_path, other)
    assert sorted(set(history.load(tmp_path)["experiment"])) == ["exp", "exp2"]
    assert [p.name for p in (tmp_path / "history").iterdir()] == [f"{NIGHT1}.parquet"]


def test_append_checks_columns_and_nights(tmp_path):
    with pytest.raises(ValueError, match="columns differ.*missing: values"):
        history.append(tmp_path, night(NIGHT1).drop(columns=["values"]))
    two = pd.concat([night(NIGHT1), night(NIGHT2)], ignore_index=True)
    with pytest.raises(ValueError, match="one night; stamps: 20250101-030000, 20250102"):
        history.append(tmp_path, two)
    assert not list(tmp_path.glob("history/*"))


def test_load_and_query_round_trip(tmp_path):
    assert history.load(tmp_path).empty
    assert tuple(history.load(tmp_path).columns) == history.COLUMNS
    t2, t1 = night(NIGHT2), night(NIGHT1)
    history.append(tmp_path, t2)  # written out of order: load sorts
    history.append(tmp_path, t1)
    history.append(tmp_path, night(NIGHT3).assign(experiment="other"))
    back = history.load(tmp_path)
    assert list(back["stamp"].unique()) == [NIGHT1, NIGHT2, NIGHT3]
    assert (back.dtypes == night(NIGHT1).dtypes).all()
    mine = history.load(tmp_path, "exp")
    assert len(mine) == len(t1) + len(t2)
    key = ["stamp", "variant", "metric"]
    pd.testing.assert_frame_equal(
        mine.sort_values(key).reset_index(drop=True),
        pd.concat([t1, t2]).sort_values(key).reset_index(drop=True),
    )
    count = history.query(tmp_path, "select count(*) as n from history")
    assert int(count["n"].iloc[0]) == len(back)


def test_query_errors_name_the_root_and_the_problem(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path}: no nightly history yet"):
        history.query(tmp_path, "select 1")
    history.append(tmp_path, night(NIGHT1))
    with pytest.raises(ValueError, match="query failed.*no_such_column"):
        history.query(tmp_path, "select no_such_column from history")
    with pytest.raises(ValueError, match="query failed.*(?i:syntax)"):
        history.query(tmp_path, "selec * from history")


# ------------------------------------------------------------------ exact
def test_exact_finds_the_changed_variant_only():
    hist = pd.concat(
        [night(NIGHT1), night(NIGHT2, {**GOODPUT, "b": [20.0, 19.0, 22.0, 23.0]})],
        ignore_index=True,
    )
    found = detect.exact(hist, NIGHT2)
    assert [(f.variant, f.metric) for f in found] == [("b", "goodput_mbps")]
    f = found[0]
    assert (f.kind, f.method, f.since, f.stamp) == ("regressed", "exact", NIGHT1, NIGHT2)
    assert (f.before, f.after) == (21.5, 21.0) and f.change == pytest.approx(-0.5 / 21.5)
    assert f.note == detect.EXACT_NOTE and f.is_regression


def test_exact_says_changed_without_direction_or_equal_medians():
    # rtt_ms has no better direction here; a swap of two runs keeps the median
    hist = pd.concat(
        [
            night(NIGHT1, rtt_ms=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
            night(NIGHT2, {**GOODPUT, "a": [11.0, 10.0, 12.0, 13.0]}, rtt_ms=9.0),
        ],
        ignore_index=True,
    )
    hist.loc[hist["metric"] == "rtt_ms", "better"] = ""
    kinds = {(f.variant, f.metric): f.kind for f in detect.exact(hist, NIGHT2)}
    assert kinds == {
        ("a", "goodput_mbps"): "changed",
        ("a", "rtt_ms"): "changed",
        ("b", "rtt_ms"): "changed",
    }


def test_exact_finds_nothing_for_identical_nights_real_clocks_or_other_seeds():
    changed = {**GOODPUT, "b": [30.0, 31.0, 32.0, 33.0]}
    # the host's CPU time differs between identical virtual-time runs: not a change
    same = pd.concat([night(NIGHT1), night(NIGHT2, host_cpu_s=55.0)], ignore_index=True)
    assert detect.exact(same, NIGHT2) == []
    real = pd.concat(
        [night(NIGHT1), night(NIGHT2, changed, info={**INFO, "clocks": ["real"]})],
        ignore_index=True,
    )
    assert detect.exact(real, NIGHT2) == []
    ok, why = detect.exact_comparable(real, NIGHT2, NIGHT1)
    assert not ok and why == f"night {NIGHT2} ran on real time, not virtual"
    seeds = night(NIGHT2, changed, seed=list(range(500, 508)))
    reseeded = pd.concat([night(NIGHT1), seeds], ignore_index=True)
    assert detect.exact(reseeded, NIGHT2) == []
    ok, why = detect.exact_comparable(reseeded, NIGHT2, NIGHT1)
    assert not ok and "other runs or seeds" in why
    assert detect.exact_comparable(same, NIGHT2, NIGHT1)[0]


# ------------------------------------------------------------------ statistical
def test_from_compare_keeps_regressed_and_improved_checks():
    rule = Rule("goodput_mbps", "higher", tolerance=0.1)
    checks = [
        Check(rule, "a", 5, 5, base=10.0, cur=8.0, change=-0.2, p_value=0.01, verdict="REGRESSED"),
        Check(rule, "b", 5, 5, base=10.0, cur=12.0, change=0.2, p_value=0.01, verdict="improved"),
        Check(rule, "c", 5, 5, base=10.0, cur=10.1, change=0.01, verdict="ok"),
        Check(rule, "d", 5, 0, base=10.0, verdict="MISSING"),
    ]
    found = detect.from_compare(CompareResult(checks=checks), "exp", NIGHT2, since=NIGHT1)
    assert [(f.variant, f.kind, f.method) for f in found] == [
        ("a", "regressed", "statistical"),
        ("b", "improved", "statistical"),
    ]
    assert (found[0].before, found[0].after, found[0].since) == (10.0, 8.0, NIGHT1)
    assert found[0].change == pytest.approx(-0.2) and "p 0.01" in found[0].note


# ------------------------------------------------------------------ steps
def series(medians, half, better: str = "higher") -> pd.DataFrame:
    """One experiment/variant/metric over nights, each with its CI half-width."""
    medians = np.asarray(medians, dtype=float)
    halves = np.broadcast_to(np.asarray(half, dtype=float), medians.shape)
    return pd.DataFrame(
        {
            "stamp": [f"2025{1 + i // 28:02d}{1 + i % 28:02d}-030000" for i in range(len(medians))],
            "experiment": "exp",
            "variant": "a",
            "metric": "goodput_mbps",
            "better": better,
            "median": medians,
            "ci_lo": medians - halves,
            "ci_hi": medians + halves,
            # what exact() reads: real-time nights, never compared run for run
            "clock": "real",
            "seeds": "",
            "n_runs": 5,
            "values": "",
        }
    )


def noisy(levels, sd: float, seed: int = 7) -> np.ndarray:
    levels = np.asarray(levels, dtype=float)
    return levels * (1 + np.random.default_rng(seed).normal(0, sd, len(levels)))


def test_a_step_of_20_percent_is_found_at_its_night():
    s = series(noisy([100.0] * 8 + [120.0] * 6, 0.01), half=3.0)
    found = detect.steps(s)
    assert len(found) == 1, found
    f = found[0]
    assert f.stamp == s["stamp"].iloc[8] and f.since == f.stamp
    assert (f.kind, f.method) == ("step", "step")
    assert f.before == pytest.approx(100, rel=0.02) and f.after == pytest.approx(120, rel=0.02)
    assert f.note.startswith("better:") and not f.is_regression
    worse = detect.steps(series(noisy([100.0] * 8 + [120.0] * 6, 0.01), 3.0, better="lower"))
    assert worse[0].note.startswith("worse:") and worse[0].is_regression


def test_flat_noise_within_its_cis_is_no_step():
    for seed in range(5):
        assert detect.steps(series(noisy([100.0] * 20, 0.015, seed), half=3.0)) == []


def test_a_slow_drift_shows_as_a_step_once_it_has_accumulated():
    s = series(100 * 1.02 ** np.arange(10), half=0.5)
    found = detect.steps(s)
    assert found, "a drift of +2 % per night over 10 nights went unreported"
    first = found[0]
    # 100 -> 106.1 on the fourth night: the first beyond 5 %
    assert first.stamp == s["stamp"].iloc[3] and first.change > 0.05
    # the next step is measured from the level the first one reached
    assert len(found) > 1 and found[1].before == first.after


def test_a_step_below_5_percent_is_ignored_and_min_change_sets_the_threshold():
    s = series(noisy([100.0] * 8 + [103.0] * 8, 0.001), half=0.5)
    assert detect.steps(s) == []
    assert [f.stamp for f in detect.steps(s, min_change=0.02)] == [s["stamp"].iloc[8]]


def test_a_step_within_the_levels_cis_is_no_step():
    # a penalty of 0 cuts wherever the values move: the CIs alone must hold this back
    s = series([100.0] * 3 + [108.0] * 3, half=10.0)
    assert detect.steps(s, penalty=0.0) == []
    assert len(detect.steps(series([100.0] * 3 + [108.0] * 3, half=1.0), penalty=0.0)) == 1


def test_nights_scattering_beyond_their_cis_are_no_steps():
    # a busy host: nights move by +-3 % while each night's CI says +-1 %
    medians = [97.0, 103.0, 99.0, 104.0, 96.0, 101.0, 97.5, 103.5, 98.0, 102.0, 96.5, 104.0]
    assert detect.steps(series(medians, half=1.0)) == []


def test_nights_of_one_run_have_no_ci_and_still_count():
    # one run a night: no CI; the scatter of the nights stands in for it
    step = noisy([100.0] * 8 + [120.0] * 6, 0.01)
    assert [f.stamp for f in detect.steps(series(step, half=np.nan))] == [
        series(step, 0)["stamp"].iloc[8]
    ]
    assert detect.steps(series(noisy([100.0] * 14, 0.01), half=np.nan)) == []


def test_a_level_is_as_uncertain_as_its_nights_scatter():
    x, w = np.array([99.0, 101.0, 99.0, 101.0]), np.full(4, 100.0)  # sigma 0.1 each
    (level,) = detect.levels(x, w, [0])
    assert level.value == 100.0 and (level.start, level.end) == (0, 4)
    assert level.half == pytest.approx(detect.Z95 * math.sqrt(4 / 3) / 2)  # not 0.098


def test_identical_deterministic_nights_do_not_divide_by_zero():
    s = series([10.0] * 5 + [11.0] * 3, half=0.0)
    found = detect.steps(s)
    assert [(f.stamp, f.before, f.after) for f in found] == [(s["stamp"].iloc[5], 10.0, 11.0)]
    assert detect.steps(series([0.0] * 6, half=0.0)) == []


def test_latest_findings_are_that_nights_exact_and_step_findings():
    nights = [f"202501{d:02d}-030000" for d in range(1, 8)]
    tables = [night(s) for s in nights[:5]]
    tables += [night(s, {**GOODPUT, "a": [20.0, 21.0, 22.0, 23.0]}) for s in nights[5:]]
    hist = pd.concat(tables, ignore_index=True)
    at_jump = detect.latest_findings(hist, nights[5])
    methods = {(f.variant, f.metric, f.method) for f in at_jump}
    assert methods == {("a", "goodput_mbps", "exact"), ("a", "goodput_mbps", "step")}
    assert all(f.stamp == nights[5] for f in at_jump)
    assert detect.latest_findings(hist, nights[6]) == []


def test_latest_findings_judge_a_night_by_what_was_known_that_night():
    # +7 % on night 7 stands out from six quiet nights; the +-8 % nights
    # that came later make it noise, but not in what night 7 reported
    s = series([100.0] * 6 + [107.0] + [92.0, 108.0] * 7, half=1.0)
    seventh = s["stamp"].iloc[6]
    assert [f.stamp for f in detect.latest_findings(s, seventh)] == [seventh]
    assert [f for f in detect.steps(s) if f.stamp == seventh] == []


def test_a_negligible_exact_move_is_a_change_not_a_regression():
    """duration_s of a fixed-length run moves by microseconds when anything
    changes: reported (exact), but as "changed", with no direction."""
    from mptlab.nightly.detect import _exact_kind

    assert _exact_kind("lower", 4.00005, 4.000052) == "changed"
    assert _exact_kind("lower", 4.0, 4.01) == "regressed"
    assert _exact_kind("higher", 6.88, 5.04) == "regressed"
