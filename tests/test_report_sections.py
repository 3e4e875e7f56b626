"""The report's parts: values at a human scale, the section list, the templating layer.

The report reads like a paper (issue 25): the verdicts first, values in the
metric's unit (8.8 MB, not the 8.785e+06 the key-metrics table printed
before), a section with nothing to show left out."""

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mptlab.analysis import report, sections
from mptlab.analysis.html import Markup, render, table
from mptlab.analysis.sections import parts
from mptlab.analysis.units import DASH, GROUP, headline_metrics, human, unit_of

DATA = Path(__file__).parent / "data" / "analysis" / "results"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        # sizes: decimal prefixes, one decimal below 100, none from 100 up
        (8.785e6, "B", "8.8 MB"),
        (512, "B", "512 B"),
        (0, "B", "0 B"),
        (999, "B", "999 B"),
        (1000, "B", "1.0 kB"),
        (293_381.5, "B", "293 kB"),
        (999_999, "B", "1.0 MB"),  # not "1000.0 kB"
        (12_340_000, "B", "12.3 MB"),
        (2.5e9, "B", "2.5 GB"),
        (-4.2e6, "B", "-4.2 MB"),
        # durations: s, or ms below a second
        (1.779, "s", "1.78 s"),
        (0.0805, "s", "80.5 ms"),
        (7.0, "s", "7 s"),
        (0, "s", "0 s"),
        (3725.0, "s", f"3{GROUP}725 s"),  # the integer part is never rounded away
        (60.54, "ms", "60.5 ms"),
        (12345.6, "ms", f"12{GROUP}346 ms"),
        # rates keep their unit
        (9.445, "Mbit/s", "9.45 Mbit/s"),
        (0.0123456, "Mbit/s", "0.0123 Mbit/s"),
        # counts: integers with narrow-space groups, 3 digits when a mean is not whole
        (1234567, "count", f"1{GROUP}234{GROUP}567"),
        (34.5, "count", "34.5"),
        (42.0, "", "42"),
        (1200, "segments", f"1{GROUP}200 segments"),
        # ratios: 3 significant digits, no e-notation
        (0.00703, "ratio", "0.00703"),
        (0.5743, "ratio", "0.574"),
        (1.0, "ratio", "1"),
        (1.5e-7, "ratio", "0.00000015"),
        (12.34, "%", "12.3 %"),
        # no value
        (None, "B", DASH),
        (math.nan, "s", DASH),
        (np.float64("inf"), "ratio", DASH),
        (pd.NA, "count", DASH),
        ("n/a", "B", DASH),
        (np.int64(2048), "B", "2.0 kB"),
    ],
)
def test_human_writes_values_in_their_unit_at_a_human_scale(value, unit, text):
    assert human(value, unit) == text
    assert "e+" not in human(value, unit) and "e-" not in human(value, unit)


def test_units_and_headline_metrics_have_one_home():
    assert unit_of("k_ofo_bytes_max") == "B"  # figures.UNITS says "bytes"
    assert unit_of("k_ofo_bytes_p95") == "B"  # a family member, by its name
    assert unit_of("goodput_mbps") == "Mbit/s"
    assert unit_of("duration_s") == "s" and unit_of("delay_p95_ms") == "ms"
    assert unit_of("path1_share") == "" and unit_of("fec_overhead") == ""  # ratios
    assert unit_of("retransmits") == "segments"
    assert headline_metrics("bulk")[0] == "goodput_mbps"
    assert headline_metrics("no-such-workload") == ()


def test_the_templating_layer_escapes_text_and_keeps_markup():
    t = table(["<h>"], [["<b>x</b>", Markup("<i>y</i>")]], left=1)
    assert "&lt;h&gt;" in t and "&lt;b&gt;x&lt;/b&gt;" in t and "<i>y</i>" in t
    assert render("{{ x }}", x="a'b") == "a&#39;b"
    assert isinstance(render("{{ x }}", x=1), Markup)


def test_the_sections_lead_with_the_verdicts_and_drop_those_with_nothing_to_show():
    names = [s.__module__.rsplit(".", 1)[-1] for s in sections.SECTIONS]
    assert names[:3] == ["reproduction", "headline", "overview"]
    assert names.index("summary") < names.index("compare") < names.index("health")
    assert names[-1] == "provenance"
    ctx = object()  # the stand-in sections below read nothing
    listed = (lambda c: Markup("<p>a</p>"), lambda c: None, lambda c: Markup("<p>b</p>"))
    assert sections.render_sections(ctx, listed) == ["<p>a</p>", "<p>b</p>"]  # type: ignore[arg-type]


def test_the_summary_table_prints_sizes_in_mb_not_in_e_notation():
    summ = pd.DataFrame(
        [
            {
                "metric": "k_ofo_bytes_max",
                "variant": "v",
                "n": 3,
                "mean": 8.785e6,
                "median": 8.7e6,
                "std": 1.2e5,
                "ci_low": 8.6e6,
                "ci_high": 8.9e6,
            }
        ]
    )
    html = parts.summary_table(summ, "variant")
    assert "8.8 MB" in html and "120 kB" in html and "e+0" not in html


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory):
    results = tmp_path_factory.mktemp("s") / "results"
    shutil.copytree(DATA / "fixture", results / "fixture")
    out = report.build(results / "fixture", results / "r.html", pcap=False, max_timeseries=0)
    return out.read_text()


def test_the_key_metrics_of_the_recorded_runs_are_in_their_units(fixture_report):
    start = fixture_report.index("<h2 id='summary'>")
    key = fixture_report[start : fixture_report.index("<details>", start)]
    ofo = key[key.index("<b>k_ofo_bytes_max</b>") :]
    ofo = ofo[: ofo.index("<b>", 3)]
    # before: 2.934e+05 and 1.779e+05 (sd); now kB, as the other sizes
    assert "e+0" not in key and " kB" in ofo and "293 kB" in ofo
    assert "9.45 Mbit/s" in key and "1.78 s" in key


def test_no_section_is_empty_and_each_heading_is_there_once(fixture_report):
    for h in ("reproduction", "headline", "overview", "summary", "compare", "figures"):
        assert fixture_report.count(f"<h2 id='{h}'>") == 1, h
    assert "<h2 id='fec'>" not in fixture_report  # no FEC in these runs: left out
    assert "<h2 id='pcap'>" not in fixture_report  # no captures ingested
