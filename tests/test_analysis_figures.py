"""mptlab.analysis.figures: every figure is written as PNG and PDF and shows n."""

import numpy as np
import pandas as pd
import pytest
from matplotlib import image

from mptlab.analysis import figures


@pytest.fixture
def runs():
    rng = np.random.default_rng(1)
    rows = []
    for sched in ("minrtt", "blest"):
        for pages in ("small", "large"):
            for _rep in range(4):
                rows.append(
                    {
                        "variant": f"scheduler={sched},pages={pages}",
                        "kernel_scheduler": sched,
                        "workload_pages": pages,
                        "status": "ok",
                        "attempt": "current",
                        "plt_s": rng.normal(2 if pages == "small" else 5, 0.2),
                        "path1_share": 0.4,
                        "path2_share": 0.6,
                    }
                )
    rows.append({**rows[0], "status": "failed", "plt_s": 99.0})
    return pd.DataFrame(rows)


def test_each_figure_is_saved_as_png_and_pdf(runs, tmp_path):
    for name, fig in {
        "cdf": figures.cdf(runs, "plt_s"),
        "box": figures.box(runs, "plt_s"),
        "bar": figures.bar_ci(runs, "plt_s", x="workload_pages", hue="kernel_scheduler"),
        "share": figures.path_share(runs),
    }.items():
        paths = figures.save(fig, tmp_path, name)
        assert paths["pdf"].read_bytes()[:5] == b"%PDF-"
        img = image.imread(paths["png"])
        assert img.shape[0] > 300 and img.shape[1] > 500
        assert (img[:, :, :3] < 0.5).any()  # something drawn


def test_grouped_bars_show_mean_and_n_of_ok_runs(runs):
    fig = figures.bar_ci(runs, "plt_s", x="workload_pages", hue="kernel_scheduler")
    ax = fig.axes[0]
    bars = ax.patches
    assert len(bars) == 4  # 2 page sets x 2 schedulers
    ok = runs[runs.status == "ok"]
    expect = ok.groupby(["kernel_scheduler", "workload_pages"], sort=False)["plt_s"].mean()
    heights = sorted(b.get_height() for b in bars)
    assert heights == pytest.approx(sorted(expect.to_numpy()))
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("n=4") == 4  # the failed run is not counted
    assert [t.get_text() for t in ax.get_xticklabels()] == ["small", "large"]


def _scores():
    """Judged SBD decisions of 3 + 2 runs: the truth shared for 30 s, then not."""
    rows = []
    for variant, runs, p_right in (("sbd", 3, 0.9), ("nosbd", 2, 0.4)):
        rng = np.random.default_rng(len(variant))
        for r in range(runs):
            for i in range(17):
                t = 3.5 * (i + 1) + rng.uniform(0, 0.3)
                rows.append(
                    {
                        "run_id": f"x/{variant}/rep-{r:03d}",
                        "variant": variant,
                        "t": t,
                        "decision": i,
                        "shared": int(t < 30),
                        "right": int(rng.random() < p_right),
                        "bottlenecked": 2,
                        "subflows": 2,
                    }
                )
    return pd.DataFrame(rows)


def test_sbd_accuracy_over_time_one_line_per_variant_with_n_and_shaded_shared_phase(tmp_path):
    fig = figures.sbd_accuracy(_scores(), ["sbd", "nosbd"])
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 2
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["truth: shared", "sbd (n=3)", "nosbd (n=2)"]
    for line in lines:
        y = line.get_ydata()
        assert ((y >= 0) & (y <= 1)).all()
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= 1
    # one shaded span: the 3.5 s bins of the decisions taken while shared (t < 30 s:
    # the first at 3.5 s, the last at 28.x s, in the bin [28, 31.5))
    spans = [p for p in ax.patches if p.get_width() > 0]
    assert len(spans) == 1
    assert spans[0].get_x() == 3.5 and spans[0].get_x() + spans[0].get_width() == 31.5
    paths = figures.save(fig, tmp_path, "sbd-accuracy")
    assert paths["pdf"].read_bytes()[:5] == b"%PDF-"


def test_sbd_accuracy_without_data_says_so():
    for empty in (pd.DataFrame(), _scores().iloc[:0]):
        fig = figures.sbd_accuracy(empty, [])
        ax = fig.axes[0]
        assert not ax.get_lines() and any("no data" in t.get_text() for t in ax.texts)
