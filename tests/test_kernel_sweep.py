"""``mptlab sweep`` on the real kernel: a tiny sweep (2 values x 2 repetitions)
runs every point as a campaign, evaluates the claims at each, draws the
forest plots, and a second call resumes without running anything again."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

pytestmark = pytest.mark.kernel

CAMPAIGN = """\
experiments:
  tiny-sweep:
    extends: blest-3g-wlan
    description: "a 4 MiB download over 3G + WLAN, minrtt_pr vs blest, no background"
    workload: {type: bulk, bytes: 4MiB, direction: download}
    background: []
    warmup: 0s
    timeout: 120s
    repetitions: 2
    matrix: {kernel.scheduler: [minrtt_pr, blest]}
    variants: []
    expect:
      - {metric: goodput_mbps, compare: [scheduler=blest, scheduler=minrtt_pr], change: "+12%",
         claim: "goodput", source: "test"}
      - {metric: duration_s, compare: [scheduler=blest, scheduler=minrtt_pr], paper: [1.0, 2.0],
         claim: "time", source: "test"}
"""


def test_a_two_point_sweep_runs_evaluates_draws_and_resumes(tmp_path, kernel, mptlab):
    camp = tmp_path / "camp.yaml"
    camp.write_text(CAMPAIGN)
    out = tmp_path / "sweep"
    args = [
        "sweep", "tiny-sweep", "--file", camp, "--vary", "profiles.wlan.loss=1%,2%",
        "--reps", 2, "--jobs", 2, "--out", out,
    ]  # fmt: skip
    done = mptlab(*args, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (
        "2 points x 2 variants (scheduler=minrtt_pr, scheduler=blest) x 2 = 8 runs" in done.stdout
    )
    points = json.loads((out / "points.json").read_text())
    assert [p["slug"] for p in points] == ["centre", "profiles.wlan.loss=2%"]
    for p in points:
        runs = sorted((out / "points" / p["slug"] / "tiny-sweep" / "runs").glob("*/rep-*"))
        assert len(runs) == 4
        for run in runs:
            spec = json.loads((run / "spec.json").read_text())
            # the point's setting reached the run: WLAN's loss in its profile
            assert spec["profiles"]["wlan"]["loss"] == (2.0 if "2%" in p["slug"] else 1.0)
    table = pd.read_csv(out / "analysis" / "sweep.csv")
    assert len(table) == 4 and set(table["claim_no"]) == {1, 2}
    ok = table[table["verdict"] != "not run"]
    assert len(ok) == 4 and (ok["n_subject"] == 2).all() and (ok["n_baseline"] == 2).all()
    assert all(math.isfinite(x) for x in ok["rel_diff"])
    # claim 2 gives the paper's baseline value (2.0 s): every point has a baseline error
    errors = table.drop_duplicates("slug")["baseline_error"]
    assert all(math.isfinite(e) and e >= 0 for e in errors)
    # more WLAN loss slows minRTT's baseline down: the point moves the baseline's level
    base = table[table["claim_no"] == 1].set_index("slug")["baseline_mean"]
    assert base["profiles.wlan.loss=2%"] < base["centre"]
    for no in (1, 2):
        svg = (out / "analysis" / f"forest-claim{no}.svg").read_text()
        assert "<svg" in svg and "as shipped" in svg and "profiles.wlan.loss=2%" in svg
    assert (
        "forest-claim1" in (out / "analysis" / "index.html").read_text()
        or "data:image/png" in (out / "analysis" / "index.html").read_text()
    )

    stamps = {p: p.stat().st_mtime_ns for p in out.glob("points/*/*/runs/*/rep-*/result.json")}
    again = mptlab(*args, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    # resumed: nothing finished is run again or overwritten
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert pd.read_csv(out / "analysis" / "sweep.csv")["rel_diff"].tolist() == pytest.approx(
        table["rel_diff"].tolist(), nan_ok=True
    )
    # the report of a sweep root is its page of forest plots
    page = mptlab("report", out, timeout=300)
    assert page.returncode == 0 and page.stdout.strip().endswith("index.html"), page.stderr
