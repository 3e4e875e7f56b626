"""Campaigns on a Dask cluster (a real local one: worker processes, TCP),
through the Python API."""

import json
from pathlib import Path

import pytest

import mptlab
from mptlab.campaign.cluster import ClusterError
from mptlab.campaign.kernel import KernelBuild

distributed = pytest.importorskip("distributed")

DASK = mptlab.Experiment(
    "dask",
    topology="two-path",
    paths=["wlan", "3g"],
    kernel={"path_manager": {"subflows": 2, "add_addr_accepted": 2}},
    workload=mptlab.Bulk(duration="3s"),
    repetitions=2,
    timeout="60s",
)


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    ) as c:
        yield c.scheduler_address


@pytest.mark.kernel
def test_runs_execute_on_the_workers_and_land_in_the_shared_results_dir(tmp_path, cluster):
    results = mptlab.run(DASK, out=tmp_path, cluster=cluster)
    assert [o.status for o in results.report.outcomes] == ["ok", "ok"], results.report.outcomes
    for rep in ("rep-000", "rep-001"):
        run_dir = results.path / "runs" / "base" / rep
        info = json.loads((run_dir / "run.json").read_text())
        result = json.loads((run_dir / "result.json").read_text())
        assert info["status"] == "ok" and info["host"]
        assert result["metrics"]["goodput_mbps"] > 1
    assert len(results.runs) == 2 and (results.runs["status"] == "ok").all()
    # resume: nothing is sent to the cluster again
    again = mptlab.run(DASK, out=tmp_path, cluster=cluster)
    assert all(o.previous for o in again.report.outcomes)


def test_a_worker_with_another_kernel_build_refuses_the_runs(tmp_path, cluster):
    kdir = tmp_path / "kernel-0123456789abcdef"
    fake = KernelBuild(kdir, kdir / "modules" / "fedcba9876543210")
    results = mptlab.run(DASK, out=tmp_path / "out", cluster=cluster, kernel=fake)
    assert [o.status for o in results.report.outcomes] == ["crashed", "crashed"]
    reason = results.report.outcomes[0].reason
    # either this machine has no kernel at all, or it is not the campaign's
    assert "kernel-0123456789abcdef" in reason or "make kernel" in reason, reason
    assert not list(Path(results.path / "runs").glob("*/*"))  # no run dir written


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("mptlab.campaign.cluster.CONNECT_TIMEOUT_S", 2)
    with pytest.raises(ClusterError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        mptlab.run(
            DASK,
            out=tmp_path / "out",
            cluster="tcp://127.0.0.1:1",
            kernel=KernelBuild(tmp_path, tmp_path),
        )
