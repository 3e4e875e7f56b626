"""The nightly trend page (``mptlab.nightly.publish``): a static site over a
synthetic history of 6 nights, 2 experiments (one named ``a/b``), 2 variants,
3 metrics, with a regression in the latest night, an older one, an
improvement and an accepted baseline.  Last, headless Chromium renders the
index and a metric page.  No kernel, no campaign."""

from __future__ import annotations

import datetime as dt
import importlib
import re
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pytest

from mptlab.nightly.detect import Finding

# by its module name: mptlab.nightly also has a function `publish`, which
# `from mptlab.nightly import publish` would give instead of the module
publish = importlib.import_module("mptlab.nightly.publish")

# history.py's schema (its docstring), in its order
COLUMNS = [
    *("stamp", "time", "experiment", "campaign", "report", "commit", "kernel_key"),
    *("modules_key", "clock", "seed", "seeds", "variant", "metric", "better", "n", "n_runs"),
    *("n_failed", "n_stalled", "median", "ci_lo", "ci_hi", "mean", "values"),
]
STAMPS = [f"2024050{d}-020000" for d in range(1, 7)]
BASELINE = STAMPS[2]
NO_REPORT = STAMPS[1]  # a night whose report was not written
EXPERIMENTS = ("blest-3g-wlan", "a/b")
VARIANTS = ("scheduler=blest", "scheduler=minrtt")
METRICS = {"goodput_mbps": "higher", "completion_s": "lower", "ok_rate": "higher"}
GENERATED = dt.datetime(2024, 5, 6, 8, 0, tzinfo=dt.UTC)

# blest's goodput falls from 10 to 8 in the latest night
REGRESSION = Finding(
    "blest-3g-wlan", "scheduler=blest", "goodput_mbps", STAMPS[5], "regressed", "exact",
    10.0, 8.0, -0.2, STAMPS[4], "<i>not html</i>",
)  # fmt: skip
OLD_STEP = Finding(
    "a/b", "scheduler=minrtt", "completion_s", STAMPS[3], "step", "step",
    2.0, 2.5, 0.25, STAMPS[3], "worse: a step up",
)  # fmt: skip
IMPROVED = Finding(
    "blest-3g-wlan", "scheduler=minrtt", "completion_s", STAMPS[4], "improved", "statistical",
    3.0, 2.7, -0.1, BASELINE,
)  # fmt: skip
FINDINGS = [OLD_STEP, IMPROVED, REGRESSION]


def value(exp: str, variant: str, metric: str, night: int) -> float:
    if metric == "ok_rate":
        return 1.0
    if (exp, variant, metric) == ("blest-3g-wlan", "scheduler=blest", "goodput_mbps"):
        return 8.0 if night == 5 else 10.0
    base = {"goodput_mbps": 12.0, "completion_s": 3.0}[metric]
    return base + 0.1 * night + (0.5 if variant.endswith("minrtt") else 0.0)


def row(exp: str, variant: str, metric: str, night: int) -> dict:
    stamp = STAMPS[night]
    median = value(exp, variant, metric, night)
    return dict(
        stamp=stamp,
        time=dt.datetime.strptime(stamp, "%Y%m%d-%H%M%S").isoformat() + "Z",
        experiment=exp,
        campaign=f"{stamp}/{exp.replace('/', '_')}",
        report="" if stamp == NO_REPORT else f"{stamp}/report.html",
        commit=f"{night:x}" * 40 + ("-dirty" if night == 5 else ""),
        kernel_key="k1",
        modules_key="m1",
        clock="virtual",
        seeds="s1",
        variant=variant,
        metric=metric,
        better=METRICS[metric],
        n=5,
        n_runs=5 + (night == 5),
        n_failed=int(night == 5),
        n_stalled=0,
        median=median,
        ci_lo=median * 0.95,
        ci_hi=median * 1.05,
        mean=median,
        values=f"v{night}",
    )


def history() -> pd.DataFrame:
    rows = [
        row(e, v, m, i)
        for i in range(len(STAMPS))
        for e in EXPERIMENTS
        for v in VARIANTS
        for m in METRICS
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def make_root(root: Path) -> Path:
    for stamp in STAMPS:
        if stamp != NO_REPORT:
            (root / stamp).mkdir(parents=True)
            (root / stamp / "report.html").write_text(f"<html>report of {stamp}</html>")
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The nightly root with the built site under ``site/``; returns index.html."""
    root = make_root(tmp_path_factory.mktemp("nightly"))
    return publish.build_site(
        history(), FINDINGS, root / "site", baselines={BASELINE}, generated=GENERATED
    )


def section(text: str, start: str, end: str) -> str:
    """From ``start`` to the first ``end`` after it."""
    i = text.index(start)
    return text[i : text.index(end, i)]


def hrefs(text: str) -> list[str]:
    return re.findall(r"href='([^']*)'", text)


def target(page: Path, href: str) -> Path:
    return (page.parent / unquote(href.split("#")[0])).resolve()


def page_of(index: Path, exp: str, metric: str) -> Path:
    return index.parent / publish.metric_page(exp, metric)


# ------------------------------------------------------------------ the index
def test_the_index_lists_the_latest_regression_first_with_its_numbers(site):
    text = site.read_text()
    regressions = section(text, "<h2 id='regressions'>", "<h2 id='changes'>")
    latest = section(regressions, "<table id='regressions-latest'>", "</table>")
    assert "blest-3g-wlan" in latest and "scheduler=blest" in latest and "goodput_mbps" in latest
    assert "10 → 8" in latest and "-20.0 %" in latest and ">exact<" in latest
    assert "&lt;i&gt;not html&lt;/i&gt;" in latest and "<i>" not in latest  # the note, escaped
    # the older step (a/b, night 4) only after it, folded away
    older = section(regressions, "<table id='regressions-older'>", "</table>")
    assert "a/b" not in latest and "a/b" in older and "2 → 2.5" in older and "+25.0 %" in older
    assert regressions.index("regressions-latest") < regressions.index("regressions-older")
    changes = text[text.index("<h2 id='changes'>") :]
    assert "scheduler=minrtt" in changes and "-10.0 %" in changes and "statistical" in changes
    assert "10 → 8" not in changes


def test_the_regressions_link_to_the_nights_report_and_the_metric_page(site):
    text = site.read_text()
    latest = section(text, "<table id='regressions-latest'>", "</table>")
    links = hrefs(latest)
    assert links == [
        f"../{STAMPS[5]}/report.html",
        f"blest-3g-wlan/goodput_mbps.html#n-{STAMPS[5]}",
    ]
    assert target(site, links[0]).read_text() == f"<html>report of {STAMPS[5]}</html>"
    page = target(site, links[1])
    assert page == page_of(site, "blest-3g-wlan", "goodput_mbps").resolve()
    assert f"id='n-{STAMPS[5]}'" in page.read_text()  # the anchor exists
    # every link of the index leads to a file
    for href in hrefs(text):
        assert target(site, href).exists(), href


def test_the_index_shows_the_latest_night_of_each_experiment(site):
    latest = section(site.read_text(), "<table id='latest'>", "</table>")
    rows = latest.split("<tr>")[2:]
    assert [r.split("</td>")[0] for r in rows] == [
        "<td class='l'>a/b",
        "<td class='l'>blest-3g-wlan",
    ]
    for r in rows:
        assert STAMPS[5] in r and ">5555555555-dirty</code>" in r and ">virtual<" in r
        # runs: 6 per variant, 1 of them failed, none stalled
        assert "<td>12</td><td class='bad'>2</td><td class=''>0</td>" in r
    assert f"generated {GENERATED:%Y-%m-%d %H:%M} UTC" in site.read_text()


def test_the_headline_table_links_each_metric_page_with_a_sparkline(site):
    trends = section(site.read_text(), "<table id='trends'>", "</table>")
    for exp in EXPERIMENTS:
        for metric in METRICS:
            href = publish.metric_page(exp, metric)
            assert f"href='{href}'" in trends and page_of(site, exp, metric).exists()
    assert trends.count("<svg class='spark'") == len(EXPERIMENTS) * len(METRICS)
    # the regression night is a red dot on blest's goodput sparkline
    assert trends.count(f"fill='{publish.BAD}'") == 2  # that one, and a/b's step


def test_the_default_headline_puts_metrics_with_findings_first():
    rows = history()
    rows = rows[rows.experiment == "blest-3g-wlan"]
    extra = pd.DataFrame(
        [dict(row("blest-3g-wlan", "x", "goodput_mbps", 0), metric=f"m{i}") for i in range(6)]
        + [dict(row("blest-3g-wlan", "x", "goodput_mbps", 0), metric="loose", better="")]
    )
    got = publish.default_headline(pd.concat([rows, extra]), [IMPROVED])
    # completion_s has a finding; then 4 more directed metrics; ok_rate last; "loose" none
    assert got == ["completion_s", "goodput_mbps", "m0", "m1", "m2", "ok_rate"]


def test_a_given_headline_replaces_the_default(tmp_path):
    index = publish.build_site(
        history(), [], tmp_path / "site", headline={"a/b": ["ok_rate", "no_such"]}
    )
    trends = section(index.read_text(), "<table id='trends'>", "</table>")
    assert "not in the history" in trends
    assert page_of(index, "a/b", "ok_rate").exists()
    assert not page_of(index, "a/b", "goodput_mbps").exists()
    assert page_of(index, "blest-3g-wlan", "goodput_mbps").exists()  # default for the other


# ------------------------------------------------------------------ a metric's page
def chart(page: Path) -> str:
    text = page.read_text()
    return section(text, "<div class='chart'><svg", "</svg></div>")


def test_each_point_of_the_chart_links_to_its_nights_report(site):
    page = page_of(site, "blest-3g-wlan", "goodput_mbps")
    svg = chart(page)
    links = re.findall(r'<a xlink:href="([^"]*)"', svg)
    with_report = [s for s in STAMPS if s != NO_REPORT]
    # one link per point: 2 variants x 5 nights that have a report
    assert sorted(links) == sorted(f"../../{s}/report.html" for s in with_report for _ in VARIANTS)
    for href in set(links):
        assert target(page, href).read_text().startswith("<html>report of")
    assert "regression" in svg and 'id="regressions"' in svg  # the red rings
    assert publish.BAD.lstrip("#") in svg


def test_baselines_are_marked_on_the_chart_and_in_the_table(site):
    page = page_of(site, "a/b", "completion_s")
    svg = chart(page)
    assert f'id="baseline-{BASELINE}"' in svg and svg.count('id="baseline-') == 1
    assert "accepted baseline" in svg
    table = section(page.read_text(), "<table id='nights'>", "</table>")
    assert f"{BASELINE} <span class='pill'>baseline</span>" in table
    assert table.count("baseline</span>") == 1


def test_the_nights_table_lists_every_night_and_variant_newest_first(site):
    page = page_of(site, "blest-3g-wlan", "goodput_mbps")
    table = section(page.read_text(), "<table id='nights'>", "</table>")
    nights = re.findall(r"id='n-([^']*)'", table)
    assert nights == STAMPS[::-1]
    assert table.count("<tr") == 1 + len(STAMPS) * len(VARIANTS)
    assert "8 [7.6, 8.4]" in table and "5 / 6" in table
    assert "regressed -20.0 %" in table and "(exact, 10 → 8)" in table
    assert "&lt;i&gt;" in table and "<i>" not in table


def test_odd_names_are_escaped_and_file_safe(site):
    page = page_of(site, "a/b", "goodput_mbps")
    assert page.parent.parent == site.parent  # "a/b" is one dir, not two
    assert page.parent.name.startswith("a_b-") and page.exists()
    assert publish.slug("a/b") != publish.slug("a_b") == "a_b"
    assert publish.slug("index.html") != "index.html" and "/" not in publish.slug("../x")
    assert publish.slug("scheduler=blest").startswith("scheduler_blest-")
    text = page.read_text()
    assert "<title>a/b: goodput_mbps</title>" in text
    assert "scheduler=blest" in chart(page)  # the legend, as text


def test_html_in_names_is_escaped(tmp_path):
    frame = history()
    frame = frame[frame.experiment == "a/b"].assign(experiment="<b>x&y</b>")
    frame["variant"] = frame.variant.map({VARIANTS[0]: "$v<1>$", VARIANTS[1]: "w"})
    index = publish.build_site(frame, [], tmp_path / "site")
    text = index.read_text()
    assert "&lt;b&gt;x&amp;y&lt;/b&gt;" in text and "<b>x" not in text
    page = page_of(index, "<b>x&y</b>", "ok_rate")
    assert "$v&lt;1&gt;$" in page.read_text()  # in the table and, not as math, in the legend
    assert chart(page).count("$v&lt;1&gt;$") == 1


# ------------------------------------------------------------------ building
def test_the_same_input_gives_the_same_site(site, tmp_path):
    root = make_root(tmp_path / "nightly")
    again = publish.build_site(
        history(), FINDINGS, root / "site", baselines={BASELINE}, generated=GENERATED
    )
    files = sorted(p.relative_to(site.parent) for p in site.parent.rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(again.parent) for p in again.parent.rglob("*") if p.is_file()
    )
    assert len(files) == 1 + len(EXPERIMENTS) * len(METRICS)
    for f in files:
        assert (site.parent / f).read_bytes() == (again.parent / f).read_bytes(), f
    text = site.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org", "")


def test_an_empty_history_gives_a_readable_page(tmp_path):
    for frame in (pd.DataFrame(), pd.DataFrame(columns=COLUMNS)):
        index = publish.build_site(frame, [], tmp_path / "site")
        text = index.read_text()
        assert "No nights in the history yet" in text
        assert "No regression in the latest nights." in text
        assert [p.name for p in index.parent.iterdir()] == ["index.html"]


def test_the_site_reads_only_columns_of_the_history_schema():
    from mptlab.nightly import history as store

    assert set(publish.NEEDED) <= set(store.COLUMNS) == set(COLUMNS)


def test_a_history_without_the_schema_is_refused():
    frame = history().drop(columns=["median", "clock"])
    with pytest.raises(ValueError, match="lacks the columns clock, median"):
        publish.build_site(frame, [], Path("/nonexistent/site"))


def test_the_site_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    out = tmp_path / "site"
    out.mkdir()
    (out / "stale.html").write_text("old")
    publish.build_site(history(), [], out)
    assert not (out / "stale.html").exists() and (out / "index.html").exists()
    before = sorted(out.rglob("*"))

    def broken(*args, **kwargs):
        raise RuntimeError("matplotlib fell over")

    monkeypatch.setattr(publish, "chart_svg", broken)
    with pytest.raises(RuntimeError, match="fell over"):
        publish.build_site(history(), [], out)
    assert sorted(out.rglob("*")) == before  # the old site, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no temp dir left


# ------------------------------------------------------------------ in a browser
RED = (0xB4, 0x23, 0x18)  # publish.BAD: regression rings, failed counts
BLUE = (0x1F, 0x77, 0xB4)  # tab:blue, the first variant
HEADER = (0xEE, 0xF2, 0xF6)  # th background


def assert_not_blank(chromium, page: Path, img) -> None:
    png = chromium.tmp / f"{page.stem}.png"
    assert png.stat().st_size > 20_000
    ink = (img[:, :, :3] < 200).any(axis=2)
    assert ink.mean() > 0.02, "the page is (nearly) blank"
    assert len({tuple(p) for p in img[::7, ::7, :3].reshape(-1, 3)}) > 20  # not one colour


def test_chromium_renders_the_index_and_a_metric_page(site, chromium):
    dom = chromium.dom(site)
    assert '<table id="regressions-latest">' in dom and "10 → 8" in dom
    assert dom.count('<svg class="spark"') == len(EXPERIMENTS) * len(METRICS)
    img = chromium.screenshot(site, 1280, 1400)
    assert img.shape[:2] == (1400, 1280)
    assert_not_blank(chromium, site, img)
    assert chromium.count(img, HEADER) > 3000
    assert chromium.count(img, RED, tol=30) > 30

    page = page_of(site, "blest-3g-wlan", "goodput_mbps")
    dom = chromium.dom(page)
    assert "<svg" in dom and dom.count("<a xlink:href=") == 10 and 'id="nights"' in dom
    img = chromium.screenshot(page, 1280, 1000)
    assert_not_blank(chromium, page, img)
    # the chart is drawn: blue points and lines, red rings in it, above the table
    assert chromium.count(img, BLUE, tol=20) > 500
    assert chromium.count(img, RED, tol=30) > 100
