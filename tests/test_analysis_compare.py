"""mptlab compare: rules files, verdicts, exit codes."""

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mptlab.analysis import compare

DATA = Path(__file__).parent / "data" / "analysis" / "results"


def rules_file(tmp_path, text: str) -> Path:
    p = tmp_path / "rules.yaml"
    p.write_text(textwrap.dedent(text))
    return p


@pytest.fixture
def campaigns(tmp_path):
    base = tmp_path / "base"
    cur = tmp_path / "cur"
    shutil.copytree(DATA / "fixture", base)
    shutil.copytree(DATA / "fixture", cur)
    return base, cur


TOLERANCE_ONLY = """\
rules:
  - metric: goodput_mbps
    better: higher
    tolerance: 0.10
    alpha: null
  - metric: ok_rate
    better: higher
    tolerance: 0
    alpha: null
"""


def test_identical_campaigns_pass(campaigns, tmp_path, mptlab):
    base, cur = campaigns
    p = mptlab("compare", base, cur, "--rules", rules_file(tmp_path, TOLERANCE_ONLY), "--no-pcap")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS" in p.stdout and "REGRESSED" not in p.stdout
    # the default rules shipped with mptlab pass too
    p = mptlab("compare", base, cur, "--no-pcap")
    assert p.returncode == 0, p.stdout + p.stderr


def _scale_goodput(campaign: Path, variant: str, factor: float) -> None:
    for res in (campaign / "runs" / variant).glob("rep-*/result.json"):
        data = json.loads(res.read_text())
        data["metrics"]["goodput_mbps"] *= factor
        res.write_text(json.dumps(data))
        run_json = res.parent / "run.json"
        run_json.write_text(run_json.read_text())  # a changed run: re-ingested


def test_an_injected_regression_fails_and_names_the_metric(campaigns, tmp_path, mptlab):
    base, cur = campaigns
    _scale_goodput(cur, "scheduler=blest", 0.7)
    p = mptlab("compare", base, cur, "--rules", rules_file(tmp_path, TOLERANCE_ONLY), "--no-pcap")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = [line for line in p.stdout.splitlines() if "REGRESSED" in line]
    assert len(lines) == 1 and "goodput_mbps" in lines[0] and "scheduler=blest" in lines[0]
    assert "-30.0%" in lines[0] and "FAIL: 1 of" in p.stdout
    # a change inside the tolerance passes
    _scale_goodput(cur, "scheduler=blest", 0.95 / 0.7)
    p = mptlab("compare", base, cur, "--rules", rules_file(tmp_path, TOLERANCE_ONLY), "--no-pcap")
    assert p.returncode == 0, p.stdout


def test_a_failed_run_lowers_ok_rate(campaigns, tmp_path, mptlab):
    base, cur = campaigns
    rj = cur / "runs" / "tcp-wlan" / "rep-001" / "run.json"
    info = json.loads(rj.read_text())
    info.update(status="timeout", reason="killed")
    rj.write_text(json.dumps(info))
    p = mptlab("compare", base, cur, "--rules", rules_file(tmp_path, TOLERANCE_ONLY), "--no-pcap")
    assert p.returncode == 1
    assert any(
        "ok_rate" in line and "tcp-wlan" in line and "REGRESSED" in line
        for line in p.stdout.splitlines()
    )


def test_a_vanished_variant_is_missing(campaigns, tmp_path, mptlab):
    base, cur = campaigns
    shutil.rmtree(cur / "runs" / "scheduler=minrtt")
    p = mptlab("compare", base, cur, "--rules", rules_file(tmp_path, TOLERANCE_ONLY), "--no-pcap")
    assert p.returncode == 1 and "MISSING" in p.stdout


def _rule(**kw) -> compare.Rule:
    return compare.Rule(**{"metric": "m", "better": "higher", **kw})


def test_significance_decides_beyond_the_tolerance():
    rng = np.random.default_rng(3)
    base = rng.normal(100, 3, 12)
    # 10 % worse, clearly separated: regression
    c = compare.check_rule(_rule(tolerance=0.05, alpha=0.05), "v", base, base * 0.9)
    assert c.verdict == "REGRESSED" and c.p_value < 0.05 and c.change == pytest.approx(-0.1)
    # the same drop in "lower is better" is an improvement
    c = compare.check_rule(_rule(better="lower", tolerance=0.05), "v", base, base * 0.9)
    assert c.verdict == "improved"
    # beyond the tolerance but noise: unsure, which fails only with --strict
    noisy = rng.normal(100, 40, 3)
    c = compare.check_rule(_rule(tolerance=0.01), "v", noisy, noisy[::-1] * 0.97)
    assert c.verdict == "unsure" and "cannot reach" in c.note
    res = compare.CompareResult([c])
    assert res.ok and not compare.CompareResult([c], strict=True).ok


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rules:\n  - metric: goodput_mbps\n    better: up\n",
            "rules.yaml:3: rules[0].better: 'up' is not allowed; allowed: higher, lower",
        ),
        ("rules:\n  - metric: goodput_mbps\n", "rules.yaml:2: rules[0].better: missing"),
        (
            "rules:\n  - metric: g\n    better: lower\n    tolerance: -1\n",
            "rules.yaml:4: rules[0].tolerance: -1 is out of range; allowed: >= 0",
        ),
        (
            "rules:\n  - metric: g\n    better: lower\n    alpha: 2\n",
            "rules.yaml:4: rules[0].alpha: 2 is out of range; allowed: strictly between 0 and 1 or null",
        ),
        (
            "rules:\n  - metric: g\n    better: lower\n    toleranse: 0.1\n",
            "rules.yaml:4: rules[0].toleranse: unknown field; allowed: alpha, better, metric",
        ),
        (
            "rules:\n  - metric: g\n    better: lower\n    stat: mode\n",
            "rules.yaml:4: rules[0].stat: 'mode' is not allowed; allowed: mean, median",
        ),
        (
            "defaults:\n  alpha: 0.5\n  colour: red\nrules: []\n",
            "rules.yaml:3: defaults.colour: unknown field; allowed: alpha, stat, tolerance",
        ),
        ("rules: []\n", "rules.yaml:1: rules: expected a non-empty list"),
        ("rulez:\n  - {}\n", "rules.yaml:1: rulez: unknown field; allowed: defaults, rules"),
        ("rules:\n  - metric: g\n    better: [higher\n", "rules.yaml:4: invalid YAML"),
    ],
)
def test_bad_rules_name_file_line_field_and_what_is_allowed(tmp_path, text, message):
    path = rules_file(tmp_path, text)
    with pytest.raises(compare.RulesError) as exc:
        compare.load_rules(path)
    assert str(exc.value) == f"{tmp_path}/{message}" or str(exc.value).startswith(
        f"{tmp_path}/{message}"
    )


def test_bad_rules_exit_2_from_the_command(campaigns, tmp_path, mptlab):
    base, cur = campaigns
    p = mptlab(
        "compare",
        base,
        cur,
        "--rules",
        rules_file(tmp_path, "rules:\n  - metric: g\n    better: up\n"),
    )
    assert (
        p.returncode == 2 and "rules[0].better" in p.stderr and "allowed: higher, lower" in p.stderr
    )


def test_the_default_rules_file_is_valid():
    rules = compare.load_rules(Path(__file__).parent.parent / "compare-rules.yaml")
    assert {r.metric for r in rules} >= {"ok_rate", "goodput_mbps"}


def _virtual(campaign: Path) -> None:
    """Mark every run of a campaign as run on virtual time."""
    for spec in (campaign / "runs").glob("*/rep-*/spec.json"):
        data = json.loads(spec.read_text())
        data["config"]["clock"] = "virtual"
        spec.write_text(json.dumps(data))
        run_json = spec.parent / "run.json"
        run_json.write_text(run_json.read_text())  # re-ingested


STRICT_STATS = """\
rules:
  - metric: goodput_mbps
    better: higher
    tolerance: 0.005
    alpha: 0.05
"""


def test_virtual_time_campaigns_with_the_same_seeds_compare_exactly(campaigns, tmp_path, mptlab):
    base, cur = campaigns
    rules = rules_file(tmp_path, STRICT_STATS)
    # real time: a 1 % drop over 2 runs per variant cannot be significant
    _scale_goodput(cur, "scheduler=blest", 0.99)
    p = mptlab("compare", base, cur, "--rules", rules, "--no-pcap")
    assert "comparison: statistical" in p.stdout and p.returncode == 0, p.stdout
    assert "unsure" in p.stdout
    # virtual time, same runs and seeds: identical values are certainly the
    # same; changed ones carry the spread of repetitions and are tested
    _virtual(base)
    _virtual(cur)
    p = mptlab("compare", base, cur, "--rules", rules, "--no-pcap")
    assert "comparison: exact" in p.stdout and p.returncode == 0, p.stdout
    line = next(ln for ln in p.stdout.splitlines() if "scheduler=blest" in ln)
    assert "unsure" in line and "changed run for run" in line, p.stdout
    other = next(ln for ln in p.stdout.splitlines() if "scheduler=minrtt" in ln)
    assert "same" in other, p.stdout
    # tolerance 0: any change in the worse direction fails
    zero = rules_file(tmp_path, STRICT_STATS.replace("tolerance: 0.005", "tolerance: 0"))
    p = mptlab("compare", base, cur, "--rules", zero, "--no-pcap")
    assert p.returncode == 1, p.stdout
    line = next(ln for ln in p.stdout.splitlines() if "scheduler=blest" in ln)
    assert "REGRESSED" in line and "tolerance 0" in line, p.stdout
