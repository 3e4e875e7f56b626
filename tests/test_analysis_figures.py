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
