"""``mptlab sweep`` without guests: axes, points, what a point changes, the
baseline error and the forest plot."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from mptlab import api
from mptlab.analysis import reproduce
from mptlab.analysis import sweep as asweep
from mptlab.spec.expect import Claim
from mptlab.spec.sweep import Axis, Point, SweepSpec, apply_point, get_key, set_key, split_key
from mptlab.spec.yamlsrc import SpecError
from mptlab.sweeps import current_test, point_experiment, variants_to_run


def test_axis_parses_yaml_values_and_refuses_bad_ones():
    a = Axis.parse("profiles.wlan.loss=0.5%,1%,2%")
    assert a.key == "profiles.wlan.loss" and a.values == ("0.5%", "1%", "2%")
    assert Axis.parse("kernel.sysctls.net.ipv4.tcp_recovery=0,1").values == (0, 1)
    assert Axis.parse("kernel.x=[1, 2],[3]").values == ([1, 2], [3])
    for bad in ("kernel.buffers", "=1,2", "kernel.buffers=", "k=1,1", "k=1,,2"):
        with pytest.raises(SpecError, match="--vary"):
            Axis.parse(bad)


def test_points_one_at_a_time_skip_the_experiments_own_value():
    spec = SweepSpec("e", [Axis("a", (1, 2, 3)), Axis("b", ("x", "y"))], repetitions=2)
    pts = spec.points(lambda key, value: (key, value) in {("a", 2), ("b", "x")})
    assert [p.label for p in pts] == ["as shipped", "a=1", "a=3", "b=y"]
    assert pts[0].is_centre and pts[0].slug == "centre"


def test_grid_points_meet_the_centre_and_do_not_repeat():
    spec = SweepSpec("e", [Axis("a", (1, 2)), Axis("b", ("x", "y"))], grid=True)
    pts = spec.points(lambda key, value: (key, value) in {("a", 1), ("b", "x")})
    assert [p.label for p in pts] == ["as shipped", "b=y", "a=2", "a=2, b=y"]


def test_a_sweep_needs_axes_two_reps_and_distinct_keys():
    with pytest.raises(SpecError, match="at least one --vary"):
        SweepSpec("e", [])
    with pytest.raises(SpecError, match="at least 2 runs"):
        SweepSpec("e", [Axis("a", (1,))], repetitions=1)
    with pytest.raises(SpecError, match="twice"):
        SweepSpec("e", [Axis("a", (1,)), Axis("a", (2,))])
    spec = SweepSpec("e", [Axis("a", (1, "2%"))], claims=[1], targets=["v:m=1"], show=["v:m"])
    assert SweepSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_keys_reach_free_mappings_and_list_entries():
    assert split_key("kernel.sysctls.net.ipv4.tcp_recovery") == [
        "kernel",
        "sysctls",
        "net.ipv4.tcp_recovery",
    ]
    assert split_key("background.0.tcp_greedy") == ["background", 0, "tcp_greedy"]
    data = {"background": [{"tcp_greedy": 0}], "kernel": {}}
    set_key(data, "background.0.tcp_greedy", 1)
    set_key(data, "kernel.sysctls.net.ipv4.tcp_recovery", 1)
    assert data["kernel"]["sysctls"] == {"net.ipv4.tcp_recovery": 1}
    assert get_key(data, "background.0.tcp_greedy") == 1
    set_key(data, "background.0", {"tcp_greedy": 2, "tcp_greedy_window": "64KiB"})
    assert data["background"][0] == {"tcp_greedy": 2, "tcp_greedy_window": "64KiB"}  # merged
    with pytest.raises(SpecError, match="has no entry 3"):
        set_key(data, "background.3.tcp_greedy", 1)
    with pytest.raises(KeyError):
        get_key(data, "kernel.buffers")


def test_scheduler_params_go_to_the_schedulers_that_declare_them():
    raw = {
        "kernel": {"scheduler": "default"},
        "matrix": {"kernel.scheduler": ["minrtt_pr", "blest"]},
    }
    variants = [
        ("scheduler=minrtt_pr", {"kernel.scheduler": "minrtt_pr"}),
        ("scheduler=blest", {"kernel.scheduler": "blest"}),
        ("tcp-wlan", {"kernel.mptcp": False}),
    ]
    point = Point((("kernel.scheduler_params.delta", 5),))
    data, profiles = apply_point(raw, point, variants, ["scheduler=minrtt_pr", "scheduler=blest"])
    assert profiles == {} and data["matrix"] == {}
    by_name = {v["name"]: v for v in data["variants"]}
    assert set(by_name) == {"scheduler=minrtt_pr", "scheduler=blest"}  # only those kept
    assert by_name["scheduler=blest"]["kernel.scheduler_params"] == {"delta": 5}
    assert "kernel.scheduler_params" not in by_name["scheduler=minrtt_pr"]
    both = Point((("kernel.scheduler_params", {"lambda_min": 1000, "lambda_max": 1000}),))
    data, _ = apply_point(raw, both, variants, ["scheduler=minrtt_pr", "scheduler=blest"])
    by_name = {v["name"]: v for v in data["variants"]}
    assert by_name["scheduler=blest"]["kernel.scheduler_params"] == {
        "lambda_min": 1000,
        "lambda_max": 1000,
    }
    assert "kernel.scheduler_params" not in by_name["scheduler=minrtt_pr"]
    with pytest.raises(SpecError, match="no scheduler of the variants run"):
        apply_point(raw, Point((("kernel.scheduler_params.nope", 1),)), variants, ["tcp-wlan"])


def test_a_point_of_a_named_experiment_changes_its_runs_and_keeps_their_seeds():
    exp = api.Experiment.from_yaml("blest-3g-wlan")
    keep = variants_to_run(exp, [1], ["tcp-wlan"])
    assert keep == ["scheduler=minrtt_pr", "scheduler=blest", "tcp-wlan"]
    is_current = current_test(exp, [Axis("profiles.wlan.loss", ("1%", "2%"))])
    assert is_current("profiles.wlan.loss", "1%") and not is_current("profiles.wlan.loss", "2%")
    centre = {r.run_id: r for r in exp.runs(repetitions=1)}
    for point, check in (
        (Point((("profiles.wlan.loss", "2%"),)), lambda r: r.profiles["wlan"]["loss"] == 2.0),
        (
            Point((("kernel.sysctls.net.ipv4.tcp_recovery", 1),)),
            lambda r: r.config["kernel"]["sysctls"]["net.ipv4.tcp_recovery"] == 1,
        ),
        (
            Point((("kernel.buffers", "socket"),)),
            lambda r: r.config["kernel"]["buffers"] == "socket",
        ),
    ):
        moved = point_experiment(exp, point, keep).runs(repetitions=1)
        assert moved and all(check(r) for r in moved)
        assert all(r.seed == centre[r.run_id].seed for r in moved)  # the same draws


def test_bad_profile_axes_are_refused_before_any_run():
    exp = api.Experiment.from_yaml("blest-3g-wlan")
    with pytest.raises(SpecError, match="no field 'los'"):
        current_test(exp, [Axis("profiles.wlan.los", ("1%",))])
    with pytest.raises(SpecError, match="profiles.NAME.FIELD"):
        current_test(exp, [Axis("profiles.nosuch.loss", ("1%",))])
    with pytest.raises(SpecError, match="profiles.wlan.loss=lots"):
        current_test(exp, [Axis("profiles.wlan.loss", ("lots",))])


def _claim(**kw) -> Claim:
    base = {"metric": "goodput_mbps", "compare": ["b", "a"], "claim": "c", "source": "s"}
    return Claim.model_validate({**base, **kw})


def test_targets_are_the_claims_baseline_values_and_the_extra_ones():
    claims = [
        _claim(paper=[0.1, 0.53], scale=1 << 20),
        _claim(change="+12%"),  # no values: no target
        _claim(paper=[0.1, 0.53], scale=1 << 20),  # the same target once
    ]
    t = asweep.targets(claims, ["tcp-wlan:goodput_mbps=3.5"])
    assert [(x.entry, x.metric, x.paper) for x in t] == [
        ("a", "goodput_mbps", 0.53 * (1 << 20)),
        ("tcp-wlan", "goodput_mbps", 3.5),
    ]
    for bad in ("tcp-wlan=3", "x:m=abc", "x:m=0"):
        with pytest.raises(ValueError, match="--target"):
            asweep.Target.parse(bad)


def test_baseline_error_is_the_mean_abs_log_ratio_of_ok_runs():
    runs = pd.DataFrame(
        {
            "variant": ["a", "a", "a", "w", "w"],
            "status": ["ok", "ok", "stalled", "ok", "ok"],
            "goodput_mbps": [2.0, 4.0, 100.0, 1.0, 1.0],
        }
    )
    variants = [("a", {}), ("w", {})]
    wanted = [
        asweep.Target("a", "goodput_mbps", 6.0, "s"),  # ours 3.0 (the stalled run left out)
        asweep.Target("w", "goodput_mbps", 0.5, "s"),  # ours 1.0
        asweep.Target("gone", "goodput_mbps", 1.0, "s"),  # not run: left out, said so
    ]
    err, parts = asweep.baseline_error(runs, variants, wanted)
    assert err == pytest.approx((math.log(2) + math.log(2)) / 2)
    assert parts[0]["n"] == 2 and parts[0]["ours"] == 3.0 and parts[2]["n"] == 0
    assert math.isnan(asweep.baseline_error(runs, variants, [])[0])
    none = pd.DataFrame({"variant": ["a"], "status": ["ok"], "goodput_mbps": [0.0]})
    assert asweep.baseline_error(none, variants, wanted[:1])[0] == math.inf  # none at all


def _table() -> pd.DataFrame:
    rows = []
    for i, (label, mid, verdict, err) in enumerate(
        [
            ("as shipped", -0.05, reproduce.OPPOSITE, 0.4),
            ("k=1", 0.10, reproduce.REPRODUCED, 0.2),
            ("k=2", math.nan, reproduce.NOT_RUN, math.nan),
        ]
    ):
        rows.append(
            {
                "point": label,
                "slug": f"p{i}",
                "centre": i == 0,
                "claim_no": 1,
                "claim": "BLEST +12 %",
                "metric": "goodput_mbps",
                "paper_change": 0.12,
                "rel_diff": mid,
                "ci_low": mid - 0.03,
                "ci_high": mid + 0.03,
                "verdict": verdict,
                "n_subject": 20,
                "n_baseline": 19,
                "runs_not_ok": "scheduler=blest: 1 stalled" if i == 0 else "",
                "subject_mean": 5.0,
                "baseline_mean": 5.2,
                "baseline_error": err,
                "baseline_targets": json.dumps(
                    [{"target": "a:m", "paper": 1.0, "ours": 1.5, "n": 19}] if i < 2 else []
                ),
            }
        )
    return pd.DataFrame(rows)


def test_forest_plot_draws_each_point_with_its_ci_and_the_papers_change(tmp_path):
    fig = asweep.forest(_table(), 1)
    ax, axe = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith("as shipped") and "n=20/19" in labels[0]
    assert ax.get_yticklabels()[0].get_fontweight() == "bold"  # the centre stands out
    # two points with a change (the third was not run): their error bars span the CI
    drawn = [line for line in ax.lines if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
    assert sorted(round(float(line.get_xdata()[0]), 1) for line in drawn) == [-5.0, 10.0]
    verticals = [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"]
    assert verticals == [pytest.approx(12.0)]
    assert [round(p.get_width(), 2) for p in axe.patches] == [0.4, 0.2, 0.0]
    with pytest.raises(ValueError, match="claim 2"):
        asweep.forest(_table(), 2)
    a = asweep.save_forest(asweep.forest(_table(), 1), tmp_path / "a", "f")
    b = asweep.save_forest(asweep.forest(_table(), 1), tmp_path / "b", "f")
    assert a["svg"].read_bytes() == b["svg"].read_bytes()  # the same table, the same bytes


def test_markdown_names_points_verdicts_runs_not_ok_and_errors():
    md = asweep.markdown(_table())
    assert "Claim 1: BLEST +12 % (goodput_mbps; paper +12.0 %)" in md
    assert (
        "| **as shipped** | -5.0 [-8.0, -2.0] | opposite | 20/19 (scheduler=blest: 1 stalled)" in md
    )
    assert "| k=2 | - [-, -] | not run |" in md and "| n/a |" in md
    summary = asweep.summary_markdown(_table())
    assert (
        "| **as shipped** | -5.0 [-8.0, -2.0] opposite | 20/19 (scheduler=blest: 1 stalled) | 0.400 |"
        in summary
    )
    targets = asweep.targets_markdown(_table())
    assert "| as shipped | 0.400 | 1.5 (1.50x, n=19) |" in targets


def test_levels_show_a_variants_mean_per_point():
    runs = pd.DataFrame(
        {"variant": ["w", "w", "g"], "status": ["ok", "failed", "ok"], "goodput_mbps": [2.0, 9, 4]}
    )
    got = asweep.levels(runs, [("w", {}), ("g", {})], ["w:goodput_mbps", "x:goodput_mbps"])
    assert got == {
        "w:goodput_mbps": [2.0, 1],
        "x:goodput_mbps": [pytest.approx(math.nan, nan_ok=True), 0],
    }
    t = _table()
    t["levels"] = json.dumps({"w:goodput_mbps": [2.0, 1]})
    assert "| 1.5 (1.50x, n=19) | 2 (n=1) |" in asweep.targets_markdown(t)


def test_cli_dry_run_lists_the_points_and_bad_input_is_one_line(mptlab):
    done = mptlab(
        "sweep", "blest-3g-wlan", "--claim", "1", "--vary", "profiles.wlan.loss=1%,2%",
        "--vary", "kernel.buffers=socket", "--reps", "2", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1. as shipped" in done.stdout and "profiles.wlan.loss=2%" in done.stdout
    assert "profiles.wlan.loss=1%" not in done.stdout  # the experiment's own value: the centre
    bad = mptlab("sweep", "blest-3g-wlan", "--vary", "kernel.nosuch=1", "--reps", "2", "--dry-run")
    assert bad.returncode == 2 and "nosuch" in bad.stderr and "Traceback" not in bad.stderr
    bad = mptlab("sweep", "blest-3g-wlan", "--claim", "99", "--vary", "kernel.buffers=socket")
    assert bad.returncode == 2 and "claims 1 to" in bad.stderr


def test_forest_draws_an_infinite_error_across_its_axis():
    t = _table()
    t.loc[1, "baseline_error"] = math.inf
    axe = asweep.forest(t, 1).axes[1]
    assert [round(p.get_width(), 2) for p in axe.patches] == [0.4, 0.54, 0.0]
    assert "inf" in [x.get_text().strip() for x in axe.texts]
    assert asweep._err(math.inf) == "inf" and asweep._err(math.nan) == "n/a"


def test_forest_handles_a_sweep_with_no_finite_error():
    t = _table()
    t["baseline_error"] = np.nan
    fig = asweep.forest(t, 1)
    assert fig.axes[1].get_xlim() == (0.0, 1.0)


def test_analyse_a_dir_that_is_not_a_sweep_is_one_line(tmp_path, mptlab):
    done = mptlab("sweep", "--analyse", tmp_path)
    assert done.returncode == 2 and "not a sweep" in done.stderr and "Traceback" not in done.stderr
