"""mptlab report: the HTML report of real run dirs, rendered by headless Chromium.

The screenshot must show the report's tables and figures: table header
shading, the blue of the bar charts, the red of the failed-runs list, in the
places the DOM puts them, and not an error page."""

import shutil
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data" / "analysis" / "results"

HEADER = (0xEE, 0xF2, 0xF6)  # th background
BAR_BLUE = (31, 119, 180)  # matplotlib tab:blue (bars, first variant)
BAD_RED = (0xB4, 0x23, 0x18)  # failed status text


@pytest.fixture(scope="module")
def report(tmp_path_factory, mptlab):
    results = tmp_path_factory.mktemp("r") / "results"
    shutil.copytree(DATA, results)
    out = results / "report.html"
    p = mptlab("report", results, "--out", out, "--metric", "goodput_mbps")
    assert p.returncode == 0, p.stderr
    return out


def test_the_report_is_self_contained_and_lists_everything(report):
    text = report.read_text()
    assert "src='http" not in text and 'src="http' not in text and "<script" not in text
    assert text.count("data:image/png;base64,") >= 4  # bar, box, CDF, path share, time series
    for want in (
        "Summary statistics",
        "Runs not ok",
        "Provenance",
        "fixture-fail/scheduler=blest/rep-000",
        "killed after",
        "superseded",
        "kernel patches",
        "guest-provenance" if False else "iperf3",
    ):
        assert want in text, want
    assert "n=2" in text or ">2<" in text
    assert (report.parent / "figures" / "bar-goodput_mbps.pdf").stat().st_size > 1000


def test_chromium_renders_tables_and_figures(report, chromium):
    dom = chromium.dom(report)
    assert dom.count("<table") >= 5 and dom.count("<img") >= 4
    img = chromium.screenshot(report, 1280, 5200)
    h, w = img.shape[:2]
    assert (h, w) == (5200, 1280)
    ink = (img[:, :, :3] < 200).any(axis=2)
    assert ink.mean() > 0.02, "the page is (nearly) blank"
    # content all the way down the first screens: no short error page
    rows_with_ink = ink.any(axis=1)
    assert rows_with_ink[: h // 2].mean() > 0.3
    # tables: header shading on many rows; figures: a good amount of bar blue
    assert chromium.count(img, HEADER) > 5000
    assert chromium.count(img, BAR_BLUE) > 3000
    assert chromium.count(img, BAD_RED, tol=20) > 30
    # the figures sit below the tables (the order of the DOM), not on top of them
    blue_rows = np.nonzero(
        (np.abs(img[:, :, :3].astype(int) - BAR_BLUE) <= 6).all(axis=2).any(axis=1)
    )[0]
    header_rows = np.nonzero(
        (np.abs(img[:, :, :3].astype(int) - HEADER) <= 6).all(axis=2).any(axis=1)
    )[0]
    assert header_rows.min() < blue_rows.min()


def fec_like_campaign() -> list[tuple[str, dict]]:
    """campaign.json as the runner writes it for a 2 x 2 matrix plus a named
    variant, runs in a shuffled order that puts a dynamic variant first."""
    keys = [
        {"kernel.fec.mode": m, "paths": p}
        for m in ("off", "dynamic")
        for p in (["a", "b"], ["a-loss", "b"])
    ]
    names = [f"mode={k['kernel.fec.mode']},paths={'+'.join(k['paths'])}" for k in keys]
    variants = [
        {"experiment": "x", "variant": n, "keys": k} for n, k in zip(names, keys, strict=True)
    ]
    variants.append({"experiment": "x", "variant": "tcp", "keys": {"kernel.mptcp": False}})
    order = [f"{names[3]}/rep-000", f"{names[0]}/rep-000", "tcp/rep-000", f"{names[2]}/rep-000"]
    return [("x", {"experiment": ["x"], "order": order, "variants": variants})]


def test_variants_keep_the_experiments_order_and_pair_along_the_first_matrix_key():
    import pandas as pd

    from mptlab.analysis.report import _pairing, _variant_order

    camps = fec_like_campaign()
    names = [v["variant"] for v in camps[0][1]["variants"]]
    runs = pd.DataFrame({"variant": list(reversed(names))})
    order = _variant_order(runs, camps, "variant")
    assert order == [*names[:4], "tcp"]  # definition order, not run order
    axis, base, pairs = _pairing(camps, order)
    assert (axis, base) == ("kernel.fec.mode", "off")
    assert pairs == {names[2]: names[0], names[3]: names[1]}  # same paths, mode off
    # a one-key matrix (a scheduler list): one reference for all, as before
    one = [
        (
            "y",
            {
                "variants": [
                    {"experiment": "y", "variant": f"s={s}", "keys": {"s": s}} for s in ("a", "b")
                ]
            },
        )
    ]
    assert _pairing(one, ["s=a", "s=b"]) is None
    # campaigns written before ``variants`` existed: the run order, no pairing
    old = [("x", {k: v for k, v in camps[0][1].items() if k != "variants"})]
    assert _variant_order(runs, old, "variant")[0] == names[3]
    assert _pairing(old, order) is None


def test_the_report_has_no_sbd_section_without_sbd_scores(report):
    assert "Shared-bottleneck detection" not in report.read_text()


def test_the_report_shows_sbd_accuracy_over_time_and_per_variant(tmp_path):
    """Runs with judged SBD decisions (traces/sbd-scores.csv) and SBD metrics: the
    section with its figure and a row per variant that has them."""
    import json

    from mptlab.analysis import report as rep
    from mptlab.guest.sbdu import Judged, write_scores

    results = tmp_path / "results"
    shutil.copytree(DATA / "fixture", results / "fixture")
    runs = results / "fixture" / "runs"
    for k, run in enumerate(sorted(runs.glob("scheduler=*/rep-*"))):
        judged = [
            Judged(3.5 * (i + 1), i, 3.5 * (i + 1) < 30, (i + k) % 4 != 0, 2, 2) for i in range(17)
        ]
        write_scores(run / "traces" / "sbd-scores.csv", judged)
        result = json.loads((run / "result.json").read_text())
        result["metrics"].update(
            sbd_accuracy=0.75, sbd_accuracy_shared=0.8, sbd_bottlenecked=1.0, sbd_decisions=17
        )
        if k % 2:
            result["metrics"]["sbd_first_correct_s"] = 7.0
        (run / "result.json").write_text(json.dumps(result))
    out = rep.build(
        results / "fixture",
        tmp_path / "r.html",
        metrics=["goodput_mbps"],
        pcap=False,
        max_timeseries=0,
    )
    text = out.read_text()
    assert "<h2 id='sbd'>Shared-bottleneck detection</h2>" in text
    sbd = text.split("<h2 id='sbd'>", 1)[1].split("<h2", 1)[0]
    assert "data:image/png;base64," in sbd
    assert (tmp_path / "figures" / "sbd-accuracy.pdf").stat().st_size > 1000
    for variant in ("scheduler=blest", "scheduler=minrtt"):
        assert f"<td class='l'>{variant}</td><td class=''>2</td><td class=''>0.75 [0.75, 0.75]" in (
            sbd
        )
    assert "7 s <span class='muted'>(n=1)</span>" in sbd  # one run of two detected, in s
    assert "tcp-wlan" not in sbd  # no SBD in its runs
