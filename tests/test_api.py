"""The Python API without the kernel: experiments built, loaded, changed and
checked as the YAML would be; results read as tables (docs/python-api.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mptlab

DATA = Path(__file__).parent / "data" / "analysis" / "results"


def test_an_experiment_from_scratch_is_the_yaml_it_stands_for():
    exp = mptlab.Experiment(
        "mine",
        topology="two-path",
        paths=["wlan", "3g"],
        scheduler=["minrtt", "blest"],
        workload=mptlab.Bulk(bytes="64MiB"),
        repetitions=5,
    )
    assert [name for name, _ in exp.variants()] == ["scheduler=minrtt", "scheduler=blest"]
    runs = exp.runs()
    assert len(runs) == 10 and {r.config["kernel"]["scheduler"] for r in runs} == {
        "minrtt",
        "blest",
    }
    assert runs[0].config["workload"] == {
        "type": "bulk",
        "bytes": 64 << 20,
        "duration": None,
        "direction": "download",
        "rcvlowat": 16 << 10,
    }
    assert exp.data == {
        "topology": "two-path",
        "paths": ["wlan", "3g"],
        "matrix": {"kernel.scheduler": ["minrtt", "blest"]},
        "workload": {
            "type": "bulk",
            "bytes": 64 << 20,
            "duration": None,
            "direction": "download",
            "rcvlowat": 16 << 10,
        },
        "repetitions": 5,
    }
    quick = exp.runs(quick=True, repetitions=1)
    assert len(quick) == 2 and quick[0].config["workload"]["bytes"] == 8 << 20


def test_from_yaml_and_replace(tmp_path):
    exp = mptlab.Experiment.from_yaml("blest-3g-wlan").replace(repetitions=5)
    assert exp.spec.repetitions == 5 and len(exp.variants()) == 10
    assert exp.spec.kernel.congestion_control == "olia"  # from the YAML
    changed = exp.replace(kernel={"rmem": "4MiB"}, scheduler="blest", matrix={}, variants=[])
    assert changed.spec.kernel.rmem == 4 << 20 and changed.spec.kernel.wmem == 16 << 20  # merged
    assert changed.spec.kernel.scheduler == "blest" and changed.variants() == [("base", {})]
    assert exp.spec.kernel.rmem == 16 << 20  # the original is left as it was
    one = tmp_path / "one.yaml"
    one.write_text("experiments:\n  mine:\n    extends: blest-wlan-wlan\n    repetitions: 1\n")
    assert mptlab.Experiment.from_yaml(one).name == "mine"
    two = tmp_path / "two.yaml"
    two.write_text(one.read_text() + "  other:\n    extends: mine\n")
    with pytest.raises(mptlab.SpecError, match="holds 2 experiments; say which"):
        mptlab.Experiment.from_yaml(two)
    assert mptlab.Experiment.from_yaml(two, "other").spec.paths == ["wlan", "wlan"]


def test_profiles_inline_and_by_name():
    exp = mptlab.Experiment(
        "p",
        topology="two-path",
        paths=[{"rate": "10mbit", "delay": "5ms", "queue": 50}, "slow"],
        profiles={"slow": {"rate": "1mbit", "delay": "100ms", "queue": "1 bdp"}},
        workload=mptlab.Idle(duration="5s"),
        background=[mptlab.Background(preset="sbd", tcp_flows=1, udp_flows=1, seed=3)],
    )
    (run,) = exp.runs()
    assert run.config["paths"] == ["p-path1", "slow"]
    shaped = {ln["label"]: ln["a_to_b"] for ln in run.plan["links"] if ln["label"]}
    assert shaped["path1"]["rate"] == 10 and shaped["path2"]["queue"] == {
        "packets": None,
        "bytes": None,
        "bdp": 1.0,
    }
    # the background entry reaches the guest with its preset's values filled in
    assert run.config["background"][0]["udp_pps"] == [50.0, 150.0]


def test_wrong_fields_are_named_when_the_experiment_is_made():
    with pytest.raises(
        mptlab.SpecError, match=r"experiments\.x\.kernel\.scheduler: unknown scheduler"
    ):
        mptlab.Experiment(
            "x",
            topology="two-path",
            paths=["wlan", "3g"],
            scheduler="blset",
            workload=mptlab.Bulk(bytes="1MiB"),
        )
    with pytest.raises(mptlab.SpecError, match=r"experiments\.x\.warmup: cannot read duration"):
        mptlab.Experiment(
            "x",
            topology="two-path",
            paths=["wlan", "3g"],
            warmup="soon",
            workload=mptlab.Bulk(bytes="1MiB"),
        )
    with pytest.raises(ValueError, match="give exactly one of bytes"):
        mptlab.Bulk()


def test_results_are_tables(tmp_path):
    shutil.copytree(DATA, tmp_path / "results")
    results = mptlab.Results(tmp_path / "results" / "fixture")
    runs = results.runs
    assert len(runs) == 6 and set(runs["variant"]) == {
        "scheduler=blest",
        "scheduler=minrtt",
        "tcp-wlan",
    }
    stats = results.stats("goodput_mbps")
    assert set(stats["variant"]) == set(runs["variant"]) and (stats["n"] == 2).all()
    assert results.query("SELECT count(*) AS n FROM runs")["n"][0] == 6
    assert len(results.table("ss")) > 0
    assert results.html().exists()


def test_importing_mptlab_costs_nothing_until_the_api_is_used():
    code = (
        "import sys, mptlab\n"
        "print('pydantic' in sys.modules, 'pandas' in sys.modules)\n"
        "mptlab.Bulk\n"
        "print('pydantic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]


def test_run_some_variants_only_and_those_the_claims_compare():
    from mptlab.api import claimed_variants
    from mptlab.spec.yamlsrc import SpecError

    exp = mptlab.Experiment.from_yaml("blest-3g-wlan")
    # every claim of blest-3g-wlan compares a scheduler with minrtt_pr
    assert claimed_variants(exp) == [
        "scheduler=minrtt_pr",
        "scheduler=blest",
        "scheduler=otias",
        "scheduler=daps",
    ]
    with pytest.raises(SpecError, match="no variant 'scheduler=nope'; variants: scheduler="):
        mptlab.run(exp, variants=["scheduler=nope"], progress=False)
