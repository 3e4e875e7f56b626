"""`mptlab reproduce --all`: one page over every experiment with claims
(``mptlab.analysis.reproduce_page``, ``mptlab.reproduce_all``).  No kernel:
a results root made of the fixture run dirs, with a full campaign, a
``-quick`` one with a stalled run, and an experiment that has no campaign dir;
``--run`` with ``mptlab.run`` replaced by a stand-in that writes run dirs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_reproduce import FIXTURE_CLAIMS

import mptlab
from mptlab import api
from mptlab import cli as mptlab_cli
from mptlab.analysis import reproduce_page
from mptlab.campaign.kernel import KernelNotBuilt
from mptlab.spec.catalog import Catalog
from mptlab.spec.yamlsrc import SpecError

DATA = Path(__file__).parent / "data" / "analysis" / "results"
MADE_UP = "Made-up paper (Nobody, 2099)"
# the fixture's claims (tests/test_reproduce.py) and three experiments more:
# fixture2 has --quick runs only, fixture3 none, no-claims no expect: list
CLAIMS = (
    FIXTURE_CLAIMS
    + f"""
  fixture2:
    extends: fixture
    paper: "{MADE_UP}"
    notes: "quick runs of the fixture, one of them stalled"
  fixture3:
    extends: fixture
    paper: "{MADE_UP}"
  no-claims:
    extends: fixture
    expect: []
"""
)
# the fixture's verdicts, claim by claim (tests/test_reproduce.py)
FIXTURE_VERDICTS = ["reproduced", "opposite", "inconclusive", "not run", "direction only"]


def campaign(dst: Path, experiment: str, stalled: str | None = None) -> Path:
    """The fixture's run dirs as a campaign dir of ``experiment`` (no analysis
    store: ingested afresh); ``stalled``: a run (``variant/rep-NNN``) that stalled."""
    shutil.copytree(DATA / "fixture", dst, ignore=shutil.ignore_patterns("analysis"))
    for path in [dst / "campaign.json", *dst.glob("runs/*/*/run.json")]:
        data = json.loads(path.read_text())
        data["experiment"] = [experiment] if path.name == "campaign.json" else experiment
        path.write_text(json.dumps(data))
    for path in dst.glob("runs/*/*/spec.json"):
        data = json.loads(path.read_text())
        data["experiment"] = experiment
        path.write_text(json.dumps(data))
    if stalled:
        info = dst / "runs" / stalled / "run.json"
        data = json.loads(info.read_text())
        data.update(status="stalled", reason="no data moved for 30 s with data outstanding")
        info.write_text(json.dumps(data))
    return dst


def make_root(root: Path) -> Path:
    """ROOT: fixture (full, with a report), fixture2-quick (one stalled run),
    no fixture3.  Returns the campaign file with the claims."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(DATA / "fixture", root / "fixture")
    report = root / "fixture" / "analysis" / "report" / "report.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html>the fixture's report</html>")
    campaign(root / "fixture2-quick", "fixture2", stalled="scheduler=minrtt/rep-001")
    claims = root.parent / "claims.yaml"
    claims.write_text(CLAIMS)
    return claims


@pytest.fixture(scope="module")
def page(tmp_path_factory, mptlab):
    """``mptlab reproduce --all`` over the fake root: (root, claims file, its stdout)."""
    root = tmp_path_factory.mktemp("all") / "results"
    claims = make_root(root)
    md = root.parent / "reproduction.md"
    p = mptlab(
        "reproduce", "--all", "--results", root, "--file", claims, "--no-pcap", "--markdown", md
    )
    assert p.returncode == 0, p.stderr
    return root, claims, p.stdout


def paper_of_fixture(claims: Path) -> str:
    # inherited from blest-3g-wlan (experiments.yaml), whatever it says there now
    return Catalog.load(claims).spec("fixture").paper or reproduce_page.NO_PAPER


# ------------------------------------------------------------------ finding the runs
def test_the_full_campaign_comes_first_then_the_quick_one(tmp_path):
    (tmp_path / "a" / "runs" / "v" / "rep-000").mkdir(parents=True)
    (tmp_path / "a-quick" / "runs" / "v" / "rep-000").mkdir(parents=True)
    (tmp_path / "b-quick" / "runs" / "v" / "rep-000").mkdir(parents=True)
    (tmp_path / "c").mkdir()  # a dir without run dirs is not a campaign of c
    assert reproduce_page.campaign_of(tmp_path, "a") == (tmp_path / "a", False, "")
    assert reproduce_page.campaign_of(tmp_path, "b") == (tmp_path / "b-quick", True, "")
    camp, quick, why = reproduce_page.campaign_of(tmp_path, "c")
    assert camp is None and not quick and f"{tmp_path / 'c'} holds no run dirs" in why
    assert f"no campaign dir {tmp_path / 'd'}" in reproduce_page.campaign_of(tmp_path, "d")[2]


# ------------------------------------------------------------------ the command
def test_the_command_prints_the_verdicts_per_paper(page):
    root, claims, out = page
    lines = out.splitlines()
    assert lines[0] == (
        f"{root}: 3 experiments with claims, 2 with runs (1 of them --quick, not the "
        "paper's setup), 1 not run; 15 claims"
    )
    assert (
        f"  {paper_of_fixture(claims)}: 5 claims: 1 reproduced, 1 direction only, "
        "1 opposite, 1 inconclusive, 1 not run (n 2)"
    ) in lines
    # fixture2: the fixture's verdicts; fixture3: 5 claims not run; stalled: n = 1
    assert (
        f"  {MADE_UP}: 10 claims: 1 reproduced, 1 direction only, 1 opposite, "
        "1 inconclusive, 6 not run (n 1-2)"
    ) in lines
    assert lines[-2:] == [
        f"page: {root / 'reproduction.html'}",
        f"markdown: {root.parent}/reproduction.md",
    ]


def test_the_page_has_the_summary_then_each_paper_and_experiment(page):
    root, claims, _ = page
    text = (root / "reproduction.html").read_text()
    # self-contained: inline CSS, no script, nothing fetched
    assert "<style>" in text and "<script" not in text and "<link" not in text
    assert "src=" not in text and "href='http" not in text
    order = [
        text.index("<h2 id='summary'>Summary"),
        text.index(f">{paper_of_fixture(claims)}</h2>"),
        text.index(f">{MADE_UP}</h2>"),
        text.index("<h3 id='exp-fixture2'>"),
        text.index("<h3 id='exp-fixture3'>"),
    ]
    assert order == sorted(order)
    summary = text[order[0] : order[1]]
    assert summary.count("<tr>") == 4  # header, two papers, all papers
    assert "<b>15</b>" in summary and "1 of 2 <span class='bad'>(1 --quick)</span>" in summary
    assert "no-claims" not in text  # no expect: list, not on the page
    # the heading links the campaign's report, relative to the page
    assert (
        "<h3 id='exp-fixture'><a href='fixture/analysis/report/report.html'>fixture</a></h3>"
        in text
    )
    assert "<h3 id='exp-fixture2'>fixture2</h3>" in text  # no report: no link
    fixture2 = text[order[3] : order[4]]
    assert "fixture2-quick: --quick runs (shortened workload, no warm-up)" in fixture2
    # the stalled run: counted with its variant, and in each claim row it touches
    assert "scheduler=minrtt: 2 <span class='bad'>(1 stalled: left out)</span>" in fixture2
    assert fixture2.count("1 of 2 runs not ok, left out (1 stalled)") == 2
    assert "n &lt; 2 in scheduler=minrtt: no CI" in fixture2
    assert (
        "<details><summary>What differs from the paper's setup (the experiment's notes)"
        "</summary><p>quick runs of the fixture, one of them stalled</p></details>" in fixture2
    )
    fixture3 = text[order[4] :]
    assert fixture3.count(f"no campaign dir {root / 'fixture3'}") == 5
    assert fixture3.count("<b>not run</b>") == 5
    # one row per claim, coloured as in the report
    assert text.count("BLEST beats TCP on WLAN") == 3
    assert text.count("<span class='good'><b>reproduced</b></span>") == 2


def test_the_markdown_has_the_counts_and_a_row_per_claim(page):
    root, claims, _ = page
    md = (root.parent / "reproduction.md").read_text()
    assert (
        "| paper | reproduced | direction only | opposite | no effect | different | "
        "inconclusive | constant | no ok run | not run | claims | n |"
    ) in md
    assert f"| {MADE_UP} | 1 | 1 | 1 | 0 | 0 | 1 | 0 | 0 | 6 | 10 | 1-2 |" in md
    assert "| **all** | 2 | 2 | 2 | 0 | 0 | 2 | 0 | 0 | 7 | 15 |  |" in md
    assert "| experiment | claim | kind | paper | ours | verdict | n |" in md
    assert (
        "| fixture | BLEST beats TCP on WLAN (Fig. 8) | change | 11.5 vs 9 Mbit/s (+27.8 %, size "
        "+-9 points) | +29.1 % [+18.3 %, +41.2 %] | reproduced | 2 / 2 |"
    ) in md
    assert (
        "| fixture2 (--quick) | BLEST +12 % vs minRTT (Sec. VI-A) | change | +12.0 %, size +-4 points "
        "| +57.1 % [-, -] | inconclusive | 2 / 1 (scheduler=minrtt: 1 of 2 runs not ok, "
        "left out (1 stalled)) |"
    ) in md
    assert md.count("| fixture3 | ") == 5 and "| - | not run | - |" in md
    # the compare entries' "a | b" would break a row: every pipe in a cell is escaped (rows of
    # claims: 7 cells; of counts: 12)
    assert all(line.count(" | ") in (6, 11) for line in md.splitlines() if line.startswith("| "))


def test_all_with_a_name_is_an_error_with_exit_status_2(page, mptlab):
    root, claims, _ = page
    p = mptlab("reproduce", "fixture", "--all", "--results", root, "--file", claims)
    assert p.returncode == 2 and not p.stdout
    assert "--all takes no NAME or DIR (got fixture): it reads every experiment" in p.stderr


@pytest.mark.parametrize(
    "argv,error",
    [
        (["fixture", "ROOT/fixture", "--out", "x.html"], "--out: only with --all"),
        (["--all", "--run"], "--run needs --reps N"),
        (["--all", "--reps", "2"], "--reps, --jobs and --quick are for --run"),
        (["--all", "--results", "ROOT/nope"], "ROOT/nope: no such directory"),
        (["--all", "--file", "NONE"], "no experiment has claims (expect:)"),
        ([], "give an experiment NAME, a results DIR, or --all"),
    ],
)
def test_bad_input_is_named(page, tmp_path, argv, error):
    root, claims, _ = page
    none = tmp_path / "none.yaml"
    none.write_text("experiments:\n  x:\n    extends: blest-3g-wlan\n    expect: []\n")
    argv = [str(a).replace("ROOT", str(root)).replace("NONE", str(none)) for a in argv]
    if "--all" in argv:  # the fake root and its claims unless the case says otherwise
        argv += [] if "--results" in argv else ["--results", str(root)]
        argv += [] if "--file" in argv else ["--file", str(claims)]
    with pytest.raises(SpecError) as exc:
        run_cli("reproduce", *argv)
    assert error.replace("ROOT", str(root)) in str(exc.value)


# ------------------------------------------------------------------ Python
def test_reproduce_all_gives_one_row_per_claim(page, tmp_path):
    root, claims, _ = page
    out = tmp_path / "page.html"
    df = mptlab.reproduce_all(results=root, out=out, file=claims, pcap=False)
    assert out.exists() and "<h2 id='summary'>" in out.read_text()
    assert list(df.columns[:4]) == ["experiment", "paper", "campaign_dir", "quick"]
    assert list(df["experiment"]) == ["fixture"] * 5 + ["fixture2"] * 5 + ["fixture3"] * 5
    fixture = df[df["experiment"] == "fixture"]
    assert list(fixture["verdict"]) == FIXTURE_VERDICTS
    assert set(fixture["paper"]) == {paper_of_fixture(claims)}
    assert set(fixture["campaign_dir"]) == {str(root / "fixture")} and not fixture["quick"].any()
    quick = df[df["experiment"] == "fixture2"].reset_index()
    assert quick["quick"].all() and set(quick["paper"]) == {MADE_UP}
    assert quick.loc[2, "n_baseline"] == 1 and quick.loc[2, "not_ok_baseline"] == "1 stalled"
    none = df[df["experiment"] == "fixture3"]
    assert none["campaign_dir"].isna().all() and (none["verdict"] == "not run").all()
    assert none["why"].str.startswith(f"no campaign dir {root / 'fixture3'}").all()


class FakeRun:
    """``mptlab.run`` without guests: writes the fixture's run dirs where the
    runner would (``out/NAME``, ``-quick``) and records how it was called."""

    def __init__(self, stopped: str | None = None):
        self.calls: list[tuple[str, dict]] = []
        self.stopped = stopped

    def __call__(self, experiment, **kw):
        self.calls.append((experiment.name, kw))
        name = experiment.name + ("-quick" if kw.get("quick") else "")
        if not (Path(kw["out"]) / name).exists():  # resumed: finished runs stay
            campaign(Path(kw["out"]) / name, experiment.name)
        report = SimpleNamespace(stopped=self.stopped, failed=[])
        return SimpleNamespace(report=report)


def run_cli(*argv) -> int:
    """``mptlab ARGV`` in this process (so that ``mptlab.run`` can be replaced),
    without main()'s signal handling; SpecError as main() turns it into 2."""
    args = mptlab_cli.parser().parse_args([str(a) for a in argv])
    return args.func(args)


def test_run_runs_each_experiment_without_a_campaign_dir(tmp_path, monkeypatch, capsys):
    claims = make_root(tmp_path / "results")
    root = tmp_path / "results"
    fake = FakeRun()
    monkeypatch.setattr(api, "run", fake)
    status = run_cli(
        "reproduce", "--all", "--results", root, "--file", claims, "--no-pcap",
        "--run", "--reps", 3, "--jobs", 2, "--quick",
    )  # fmt: skip
    assert status == 0
    # fixture has a full campaign (left alone by --quick), fixture2 a quick one
    # (resumed), fixture3 none (run), as `mptlab run --quick` would, with the
    # variants their claims compare (here every one of the three)
    want = {"out": root, "repetitions": 3, "jobs": 2, "quick": True}
    want["variants"] = ["scheduler=minrtt", "scheduler=blest", "tcp-wlan"]
    assert fake.calls == [("fixture2", want), ("fixture3", want)]
    out = capsys.readouterr().out
    assert "3 experiments with claims, 3 with runs (2 of them --quick" in out
    text = (root / "reproduction.html").read_text()
    assert "fixture3-quick: --quick runs" in text and "no campaign dir" not in text
    # in full: fixture's campaign is resumed (a stopped one is completed), the
    # experiments that have --quick runs only are left alone
    again = ["reproduce", "--all", "--results", root, "--file", claims, "--no-pcap"]
    assert run_cli(*again, "--run", "--reps", 3) == 0
    assert [name for name, _ in fake.calls] == ["fixture2", "fixture3", "fixture"]


def test_a_stopped_or_impossible_run_evaluates_nothing(tmp_path, monkeypatch):
    claims = make_root(tmp_path / "results")
    root = tmp_path / "results"
    monkeypatch.setattr(api, "run", FakeRun(stopped="SIGINT"))
    # the first experiment with claims (its campaign is resumed) is stopped
    with pytest.raises(KeyboardInterrupt, match="fixture: stopped by SIGINT"):
        mptlab.reproduce_all(root, tmp_path / "p.html", file=claims, run_missing=True)
    assert not (tmp_path / "p.html").exists()  # main() says: interrupted, rerun to resume

    def no_kernel(experiment, **kw):
        raise KernelNotBuilt("the kernel is not built: make kernel")

    monkeypatch.setattr(api, "run", no_kernel)
    argv = ["reproduce", "--all", "--results", root, "--file", claims, "--run", "--reps", 1]
    with pytest.raises(SpecError, match="the kernel is not built"):
        run_cli(*argv)


# ------------------------------------------------------------------ level claims
# the fixture's claims and three level claims (one variant against the paper's
# value): reproduced (9.4 in BLEST's CI), different (TCP's 7.3 vs 12), not run
LEVELS = (
    "      - {metric: goodput_mbps, compare: [scheduler=blest], value: 9.4, unit: Mbit/s, "
    'claim: "BLEST at 9.4 Mbit/s", source: "made up"}\n'
    "      - {metric: goodput_mbps, compare: [tcp-wlan], value: 12, unit: Mbit/s, "
    'claim: "TCP on WLAN at 12 Mbit/s", source: "made up"}\n'
    "      - {metric: goodput_mbps, compare: [scheduler=otias], value: 9, unit: Mbit/s, "
    'claim: "OTIAS at 9 Mbit/s", source: "made up"}\n'
    f'  fixture3:\n    extends: fixture\n    paper: "{MADE_UP}"\n'
)


def test_level_claims_on_the_page_in_the_frame_and_the_markdown(tmp_path):
    root = tmp_path / "results"
    make_root(root)
    claims = tmp_path / "levels.yaml"
    claims.write_text(FIXTURE_CLAIMS + LEVELS)
    md = tmp_path / "levels.md"
    page = reproduce_page.build(root, root / "p.html", md, file=claims, pcap=False)
    df = page.frame
    fixture = df[df["experiment"] == "fixture"].reset_index()
    assert list(fixture["verdict"]) == [*FIXTURE_VERDICTS, "reproduced", "different", "not run"]
    level = fixture.iloc[5:]
    assert level["baseline"].isna().all() and level["n_baseline"].isna().all()
    assert list(level["n_subject"]) == [2, 2, 0]
    assert (
        "ours is lower than the paper's 12 Mbit/s by 4.684 Mbit/s (-39.0 %)" in level["why"].iloc[1]
    )
    # fixture3 has no runs: every claim not run, the level ones too
    none = df[df["experiment"] == "fixture3"]
    assert len(none) == 8 and (none["verdict"] == "not run").all()
    # the summary: n over the subjects (a level claim has no baseline n)
    summ = page.summary.set_index("paper")
    row = summ.loc[paper_of_fixture(claims)]
    assert (row["reproduced"], row["different"], row["not run"], row["total"]) == (2, 1, 2, 8)
    assert (row["n_min"], row["n_max"]) == (2, 2)
    text = (root / "p.html").read_text()
    assert "<span class='bad'><b>different</b></span>" in text
    assert text.count("9.4 Mbit/s (level, band +-10 %)") == 2  # fixture, fixture3
    assert (
        "-4.684 Mbit/s (-39.0 % [-42.5 %, -35.6 %]) vs the paper&#39;s" in text
    )  # Jinja2's escape
    lines = md.read_text().splitlines()
    assert (
        "| fixture | TCP on WLAN at 12 Mbit/s (made up) | level | 12 Mbit/s (level, band +-10 %) | "
        "-4.684 Mbit/s (-39.0 % [-42.5 %, -35.6 %]) vs the paper's | different | 2 |"
    ) in lines
    assert (
        "| fixture | OTIAS at 9 Mbit/s (made up) | level | 9 Mbit/s (level, band +-10 %) | - | not run | - |"
        in lines
    )
    assert (
        reproduce_page.text_summary(df, root)
        .splitlines()[1]
        .endswith(
            "8 claims: 2 reproduced, 1 direction only, 1 opposite, 1 different, 1 inconclusive, "
            "2 not run (n 2)"
        )
    )


# ------------------------------------------------------------------ in a browser
def test_chromium_renders_the_page(page, chromium):
    root, _, _ = page
    html = root / "reproduction.html"
    dom = chromium.dom(html)
    assert dom.count("<table") == 4  # the summary, one per experiment
    # a row per claim (15), the summary's 3 and 4 header rows
    assert dom.count("<tr") == 15 + 3 + 4
    assert dom.count("BLEST beats TCP on WLAN") == 3
    img = chromium.screenshot(html, 1280, 2400)
    assert img.shape[:2] == (2400, 1280)
    ink = (img[:, :, :3] < 200).any(axis=2)
    assert ink.mean() > 0.02, "the page is (nearly) blank"
    assert ink.any(axis=1)[:1200].mean() > 0.3  # content down the first screen
    assert chromium.count(img, (0xEE, 0xF2, 0xF6)) > 5000  # table header shading
    assert chromium.count(img, (0x1A, 0x7F, 0x37), tol=30) > 30  # reproduced, green
    assert chromium.count(img, (0xB4, 0x23, 0x18), tol=30) > 30  # --quick, left out: red
