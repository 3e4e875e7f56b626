"""Analysis of a fresh campaign on the real kernel: ingest of its run dirs and
its packet captures checked against the kernel's counters."""

from pathlib import Path

import pytest
from test_analysis_pcap import assert_agreement

from mptlab.analysis import ingest, pcap

pytestmark = pytest.mark.kernel

CAMPAIGN = Path(__file__).parent / "data" / "analysis" / "pcap-campaign.yaml"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory, mptlab):
    out = tmp_path_factory.mktemp("pcap")
    p = mptlab("run", CAMPAIGN, "--jobs", 2, "--out", out, "--quiet", timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    return out / "pcap-check"


def test_ingest_of_a_fresh_campaign_with_captures(campaign):
    rep = ingest.ingest(campaign)
    assert rep.errors == [] and rep.read == 2
    runs = ingest.load_runs(campaign).set_index("variant")
    assert set(runs.index) == {"scheduler=minrtt", "scheduler=blest"}
    assert (runs["status"] == "ok").all()
    for _v, r in runs.iterrows():
        assert r["k_bytes_received"] >= 4 * 2**20
        assert 0.98 * r["k_ofo_bytes_max"] <= r["pcap_ofo_bytes_max"] <= 1.01 * r["k_ofo_bytes_max"]
        assert r["path1_share"] + r["path2_share"] == pytest.approx(1.0)
    assert len(ingest.load_table(campaign, "pcap_ofo")) > 0
    assert (
        len(ingest.load_table(campaign, "ss")) > 0 and len(ingest.load_table(campaign, "mptcp")) > 0
    )


def test_captures_agree_with_the_kernel_counters(campaign):
    for run_dir in sorted(campaign.glob("runs/*/rep-000")):
        assert_agreement(pcap.kernel_agreement(run_dir))


def test_nightly_makes_a_baseline_then_compares_and_keeps_a_history(tmp_path, mptlab):
    import json

    root = tmp_path / "nightly"
    night = ("nightly", "pcap-check", "--file", CAMPAIGN, "--root", root, "--jobs", 2)
    first = mptlab(*night, timeout=900)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "is now the baseline" in first.stdout
    baseline = (root / "baseline").read_text().strip()
    second = mptlab(*night, timeout=900)
    assert second.returncode in (0, 1), second.stdout + second.stderr
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    assert [h["verdict"] for h in history][0] == "baseline"
    assert history[1]["verdict"] == ("pass" if second.returncode == 0 else "fail")
    assert history[1]["baseline"] == baseline
    night = root / history[1]["stamp"]
    assert (
        "ok_rate" in (night / "pcap-check.compare.txt").read_text()
        and (night / "pcap-check.html").stat().st_size > 10_000
    )
    # the history store holds both nights, every run counted
    from mptlab.nightly import history as store

    past = store.load(root)
    assert sorted(set(past["stamp"])) == [h["stamp"] for h in history[:2]]
    assert (past.loc[past["metric"] == "ok_rate", "n_runs"] == 1).all()
    # accepting the second night makes it the baseline
    acc = mptlab("nightly", "--root", root, "--accept")
    assert acc.returncode == 0, acc.stderr
    assert "baseline of pcap-check is now" in acc.stdout
    assert (root / "baseline").read_text().strip() == history[1]["campaign"]
