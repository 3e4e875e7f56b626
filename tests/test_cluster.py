"""Campaigns on a Dask cluster (a real local one: worker processes, TCP)."""

import json
from pathlib import Path

import pytest

from mptlab.campaign.cluster import ClusterError
from mptlab.campaign.kernel import KernelBuild, find_kernel
from mptlab.campaign.runner import Campaign
from mptlab.spec.catalog import Catalog

distributed = pytest.importorskip("distributed")

CAMPAIGN = """\
experiments:
  dask:
    topology: two-path
    paths: [wlan, 3g]
    kernel: {path_manager: {subflows: 2, add_addr_accepted: 2}}
    workload: {type: bulk, duration: 3s}
    repetitions: 2
    timeout: 60s
"""


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    ) as c:
        yield c.scheduler_address


def runs(tmp_path):
    path = tmp_path / "dask.yaml"
    path.write_text(CAMPAIGN)
    return Catalog.load(path).expand("dask")


@pytest.mark.kernel
def test_runs_execute_on_the_workers_and_land_in_the_shared_results_dir(tmp_path, cluster):
    out = tmp_path / "out"
    report = Campaign(out, runs(tmp_path), find_kernel(), cluster=cluster).run()
    assert [o.status for o in report.outcomes] == ["ok", "ok"], report.outcomes
    for rep in ("rep-000", "rep-001"):
        run_dir = out / "runs" / "base" / rep
        info = json.loads((run_dir / "run.json").read_text())
        result = json.loads((run_dir / "result.json").read_text())
        assert info["status"] == "ok" and info["host"]
        assert result["metrics"]["goodput_mbps"] > 1
    # resume: nothing is sent to the cluster again
    again = Campaign(out, runs(tmp_path), find_kernel(), cluster=cluster).run()
    assert all(o.previous for o in again.outcomes)


def test_a_worker_with_another_kernel_build_refuses_the_runs(tmp_path, cluster):
    kdir = tmp_path / "kernel-0123456789abcdef"
    fake = KernelBuild(kdir, kdir / "modules" / "fedcba9876543210")
    report = Campaign(tmp_path / "out", runs(tmp_path), fake, cluster=cluster).run()
    assert [o.status for o in report.outcomes] == ["crashed", "crashed"]
    reason = report.outcomes[0].reason
    # either this machine has no kernel at all, or it is not the campaign's
    assert "kernel-0123456789abcdef" in reason or "make kernel" in reason, reason
    assert not list(Path(tmp_path / "out" / "runs").glob("*/*"))  # no run dir written


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("mptlab.campaign.cluster.CONNECT_TIMEOUT_S", 2)
    campaign = Campaign(tmp_path / "out", runs(tmp_path), KernelBuild(tmp_path, tmp_path),
                        cluster="tcp://127.0.0.1:1")  # fmt: skip
    with pytest.raises(ClusterError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        campaign.run()
