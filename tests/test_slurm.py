"""Campaigns on a batch system (issue 26): `mptlab run --cluster slurm` on a
real single-node SLURM (Debian's slurmctld, slurmd and munge, 22.05), through
dask-jobqueue: the runs execute inside SLURM jobs, and the campaign finishes
as a local one does.

The daemons run from a configuration of this test's own (a temp dir, ports
of their own, ``SLURM_CONF``), as root; munged is started if it is not
running, and everything started here is stopped again.  A machine where
that cannot be (not root, packages missing) skips, saying why; `make test`
installs the packages (scripts/install-deps.sh slurm) and CI runs as root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel

CAMPAIGN = textwrap.dedent(
    """\
    experiments:
      slurm-e2e:
        topology: two-path
        paths: [wlan, 3g]
        kernel: {path_manager: {subflows: 2, add_addr_accepted: 2}}
        workload: {type: bulk, duration: 3s}
        repetitions: 3
        timeout: 90s
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mem_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def _munge_ok() -> bool:
    p = subprocess.run("munge -n | unmunge", shell=True, capture_output=True)
    return p.returncode == 0


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running single-node SLURM; yields the environment that reaches it."""
    missing = [
        b for b in ("slurmctld", "slurmd", "sbatch", "sinfo", "munged") if not shutil.which(b)
    ]
    if missing:
        pytest.skip(f"SLURM is not installed ({', '.join(missing)}): scripts/install-deps.sh slurm")
    if os.geteuid() != 0:
        pytest.skip("the single-node SLURM of this test runs its daemons as root")
    started = []
    if not _munge_ok():
        Path("/run/munge").mkdir(exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True)
        started.append(("munged", None))
        for _ in range(50):
            if _munge_ok():
                break
            time.sleep(0.1)
    d = tmp_path_factory.mktemp("slurm")
    (d / "state").mkdir()
    (d / "spool").mkdir()
    host = socket.gethostname()
    conf = d / "slurm.conf"
    conf.write_text(
        textwrap.dedent(
            f"""\
            ClusterName=mptlabtest
            SlurmctldHost={host}
            SlurmctldPort={_free_port()}
            SlurmdPort={_free_port()}
            SlurmUser=root
            SlurmdUser=root
            AuthType=auth/munge
            StateSaveLocation={d}/state
            SlurmdSpoolDir={d}/spool
            SlurmctldPidFile={d}/slurmctld.pid
            SlurmdPidFile={d}/slurmd.pid
            SlurmctldLogFile={d}/slurmctld.log
            SlurmdLogFile={d}/slurmd.log
            ProctrackType=proctrack/linuxproc
            TaskPlugin=task/none
            JobAcctGatherType=jobacct_gather/none
            AccountingStorageType=accounting_storage/none
            SelectType=select/cons_tres
            SelectTypeParameters=CR_Core_Memory
            ReturnToService=2
            MpiDefault=none
            NodeName={host} CPUs={os.cpu_count()} RealMemory={_mem_mb() - 512} State=UNKNOWN
            PartitionName=mptlabtest Nodes={host} Default=YES MaxTime=INFINITE State=UP
            """
        )
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for daemon in (["slurmctld", "-i"], ["slurmd"]):
        subprocess.run(daemon, check=True, env=env)
    started += [("slurmctld", d / "slurmctld.pid"), ("slurmd", d / "slurmd.pid")]
    try:
        for _ in range(150):
            p = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env)
            if p.stdout.strip() == "idle":
                break
            time.sleep(0.2)
        else:
            logs = "".join(f.read_text()[-1500:] for f in d.glob("*.log"))
            pytest.fail(f"the test's SLURM did not come up: sinfo says {p.stdout!r}\n{logs}")
        yield env, d
    finally:
        subprocess.run(["scancel", "--partition", "mptlabtest"], env=env, capture_output=True)
        for name, pidfile in reversed(started):
            if pidfile is not None and pidfile.exists():
                _stop(int(pidfile.read_text()))
            elif pidfile is None:
                subprocess.run(["pkill", "-x", name], capture_output=True)


def _stop(pid: int) -> None:
    """SIGTERM, then wait for the daemon to be gone (slurmctld saves its state
    first: a few seconds), SIGKILL after 15 s: nothing outlives the test."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(150):
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_a_campaign_runs_in_slurm_jobs(slurm, tmp_path):
    env, d = slurm
    camp = tmp_path / "campaign.yaml"
    camp.write_text(CAMPAIGN)
    out = tmp_path / "out"
    env = {
        **env,
        # the site's settings, as a user writes them in ~/.config/dask/jobqueue.yaml
        "DASK_JOBQUEUE__SLURM__CORES": "2",
        "DASK_JOBQUEUE__SLURM__MEMORY": "3GB",
        "DASK_JOBQUEUE__SLURM__WALLTIME": "00:30:00",
        "DASK_JOBQUEUE__SLURM__LOG_DIRECTORY": str(tmp_path / "jobs"),
        "MPTLAB_JOBQUEUE_WAIT_S": "120",
    }
    cmd = [sys.executable, "-m", "mptlab.cli", "run", str(camp), "--cluster", "slurm"]
    p = subprocess.run(
        [*cmd, "--jobs", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    logs = "".join(f.read_text()[-1500:] for f in d.glob("*.log"))
    assert p.returncode == 0, f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}\n{logs}"
    assert "3 ok, 0 not ok" in p.stdout, p.stdout
    assert "batch job(s) of 2 core(s) submitted" in p.stdout
    infos = [json.loads(f.read_text()) for f in sorted(out.glob("slurm-e2e/runs/*/rep-*/run.json"))]
    assert len(infos) == 3
    # each run executed inside a SLURM job, on the node of this test's cluster
    jobs = {info["batch_job"] for info in infos}
    assert None not in jobs and len(jobs) == 1, jobs
    for info in infos:
        assert info["status"] == "ok" and info["confined"] is True
    for result in out.glob("slurm-e2e/runs/*/rep-*/result.json"):
        assert json.loads(result.read_text())["metrics"]["goodput_mbps"] > 0
    # the jobs ended with the campaign: nothing left in the queue
    q = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env=env)
    assert q.stdout.strip() == "", q.stdout
