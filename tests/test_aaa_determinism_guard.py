"""The determinism guard, first half (issue 44): a reference run before the
rest of the suite has touched the machine, and the unit of provenance that
says when a machine's inputs of the guest changed.

pytest runs the files of tests/ in alphabetical order (no ordering plugin;
pyproject's ``addopts`` sets none), so this file runs first and
tests/test_zzz_determinism_guard.py last, after the Docker image, the SLURM
and nightly tests and every other guest: the late test reruns this run and
asserts the same result.json, guest-provenance.json and traces.  A
virtual-time run is a deterministic but chaotic function of everything the
guest reads; on a fresh machine the host's /run/mount, created by the suite's
first root ``mount``, once made the same seeded runs another realisation
(docs/notebook.md, 2026-11-28), which only a run before and a run after the
suite shows.

The run: tests/test_kernel_determinism.py's CBR with background flows over a
lossy and a clean path (6 s of guest time, ~2-5 s of wall time here), the
run /run/mount moved by 6 us at its first sample; a bulk download over the
same paths did not move.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_kernel_determinism import CAMPAIGN, _record, _run

from mptlab.campaign import provenance
from mptlab.campaign.kernel import KernelBuild
from mptlab.nightly import bisect, detect, history

# the early run's dir, for the late test (same process: the stash of its config)
EARLY = pytest.StashKey[Path]()
SKIPPED = ("attempt",)  # result.json / guest-provenance.json: the boot's id differs by design


def reference_run(out: Path) -> Path:
    """The guard's run (``mptlab run`` of the CBR campaign) into ``out``; its run dir."""
    out.mkdir(parents=True, exist_ok=True)
    camp = out / "det.yaml"
    camp.write_text(CAMPAIGN)
    return _run(out / "runs", camp, None)


def record(run_dir: Path) -> tuple[dict, dict, dict[str, bytes]]:
    """What must repeat: result.json and guest-provenance.json without the
    attempt id, every trace file byte for byte."""
    result, traces = _record(run_dir)
    prov = json.loads((run_dir / "guest-provenance.json").read_text())
    for key in SKIPPED:
        prov.pop(key, None)
    return result, prov, traces


@pytest.mark.kernel
def test_a_reference_run_before_the_suite(kernel, request, tmp_path_factory):
    run_dir = reference_run(tmp_path_factory.mktemp("determinism-early"))
    result, _, traces = record(run_dir)
    # a run worth comparing: it ran, moved frames and sampled the subflows
    assert result["status"] == "ok" and result["metrics"]["frames_received"] > 0, result
    assert traces["client-subflows.csv"].count(b"\n") > 10
    info = json.loads((run_dir / "run.json").read_text())
    assert info["clock"] == "virtual" and info["guest_inputs"]["host"], info
    request.config.stash[EARLY] = run_dir


# ------------------------------------------------- the unit of provenance
def fake_kernel(tmp_path: Path) -> KernelBuild:
    """A kernel dir without a binary (no guest boots, no helper is built)."""
    (tmp_path / "k" / "modules" / "m").mkdir(parents=True)
    (tmp_path / "k" / "modules" / "m" / "mptcp_x.ko").write_bytes(b"module")
    return KernelBuild(tmp_path / "k", tmp_path / "k" / "modules" / "m")


def test_guest_inputs_change_with_a_file_the_guest_looks_up(tmp_path, monkeypatch):
    """A file appearing where the guest looks (as the host's /run/mount did)
    changes the digest and its host part, not its code part; a module's
    bytes change the code part, not the host part."""
    probe = tmp_path / "etc-ld.so.preload"
    monkeypatch.setattr(provenance, "GUEST_PATHS", (str(probe),))
    kernel = fake_kernel(tmp_path)
    before = provenance.guest_inputs(kernel)
    assert before["paths"] == {str(probe): "absent"}
    assert before == provenance.guest_inputs(kernel)  # stable: no time, no order in it
    probe.write_text("/usr/lib/libfoo.so\n")
    after = provenance.guest_inputs(kernel)
    assert after["host"] != before["host"] and after["digest"] != before["digest"]
    assert after["code"] == before["code"]
    assert provenance.guest_inputs_changes(before, after) == [
        f"{probe} absent -> {after['paths'][str(probe)]}"
    ]
    (kernel.modules_dir / "mptcp_x.ko").write_bytes(b"another module")
    rebuilt = provenance.guest_inputs(kernel)
    assert rebuilt["code"] != after["code"] and rebuilt["host"] == after["host"]


def test_guest_inputs_name_the_packages_and_the_interpreter(tmp_path):
    g = provenance.guest_inputs(fake_kernel(tmp_path))
    assert set(provenance.GUEST_PACKAGES) <= set(g["packages"])
    for pkg in ("iproute2", "iperf3", "libc6", "bash", "tcpdump"):
        assert pkg in g["packages"]
    assert g["python"].startswith(sys.version.split()[0] + " ")
    if os.path.exists("/var/lib/dpkg/status"):  # a Debian host: versions, not placeholders
        assert g["packages"]["libc6"] not in ("unavailable", "not installed"), g["packages"]


def nights(after_inputs: str) -> pd.DataFrame:
    """Two nights of one experiment whose goodput fell 10 -> 8, with the
    guest inputs each campaign.json recorded (as ``history.load`` reads them)."""
    rows = [
        {
            "stamp": stamp,
            "experiment": "e",
            "variant": "v",
            "metric": "goodput_mbps",
            "better": "higher",
            "clock": "virtual",
            "seeds": "s",
            "n_runs": 2,
            "median": median,
            "values": f"h{median}",
        }
        for stamp, median in (("20260101-000000", 10.0), ("20260102-000000", 8.0))
    ]
    table = pd.DataFrame(rows)
    table.attrs[history.GUEST_INPUTS] = {
        "20260101-000000 e": "aaaa",
        "20260102-000000 e": after_inputs,
    }
    return table


def test_the_nightly_says_when_the_machine_changed_instead_of_a_regression():
    same = detect.exact(nights("aaaa"), "20260102-000000")
    assert [f.kind for f in same] == ["regressed"] and "guest inputs" not in same[0].note
    moved = detect.exact(nights("bbbb"), "20260102-000000")
    assert [f.kind for f in moved] == ["changed"] and not moved[0].is_regression
    assert "guest inputs changed (aaaa -> bbbb): differences may come from the machine" in (
        moved[0].note
    )


def test_history_load_reads_each_nights_guest_inputs(tmp_path):
    """From the night's campaign.json; a night from before the record has none."""
    table = pd.DataFrame(
        {"stamp": ["20260101-000000", "20260102-000000"], "experiment": "e", "campaign": ""}
    )
    table["campaign"] = ["20260101-000000/e", "20260102-000000/e"]
    for i, camp in enumerate(table["campaign"]):
        (tmp_path / camp).mkdir(parents=True)
        info = {"guest_inputs": {"host": "cccc"}} if i else {}
        (tmp_path / camp / "campaign.json").write_text(json.dumps(info))
    assert history.guest_inputs_of(tmp_path, table) == {"20260102-000000 e": "cccc"}


def test_bisect_warns_when_a_probe_ran_on_another_machine_state(tmp_path):
    inputs = {"host": "aaaa", "packages": {"libc6": "2.36-9"}, "paths": {}, "python": "3.11.7 x"}
    good = bisect.Probe("1" * 40, "fp1", tmp_path, {}, inputs)
    later = {**inputs, "host": "bbbb", "packages": {"libc6": "2.36-10"}}
    bad = bisect.Probe("2" * 40, "fp2", tmp_path, {}, later)
    assert bisect.machine_changed(good, [good]) == []
    lines = bisect.machine_changed(good, [good, bad])
    assert lines == [
        "222222222222: guest inputs changed (aaaa -> bbbb): differences may come from the "
        "machine, not the code (libc6 2.36-9 -> 2.36-10)"
    ]
    result = bisect.BisectResult(good.rev, bad.rev, "exact", probes={good.rev: good, bad.rev: bad})
    result.message = "no change"
    assert lines[0] in result.render()
