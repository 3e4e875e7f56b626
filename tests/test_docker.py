"""The Docker image, for real: `make docker` builds it from a debootstrapped
Debian 12 (no registry), a campaign runs in a container without privileges
and writes to a mounted results dir, and a Compose cluster (a Dask scheduler,
two workers) runs a campaign sent with --cluster (docs/deployment.md).

Needs Debian's docker.io (`make test` installs it with scripts/install-deps.sh
docker) and starts dockerd when it is not running.  Measured on 2 shared CPUs:
this file takes 5 min 41 s with no engine running and nothing cached but the
kernel (the image builds in ~4 min: debootstrap ~30 s, Debian packages ~2 min,
PyPI ~1.5 min), ~3 min with the layers cached (8 s to rebuild after a
code change); the campaign in one container (7 runs) takes ~2 min, the one on
the cluster 30-45 s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# A tag of its own: a checkout's tests never retag the image a user built with
# `make docker`, and the tag keeps the layers this test's next build reuses.
IMAGE = "mptlab-test"
# UML maps guest memory executable from /dev/shm; Docker's own is noexec.
SHM = ["--tmpfs", "/dev/shm:rw,nosuid,nodev,exec,size=2g"]
# Docker's default profile plus what guest confinement needs, no capability
# (written by `make docker`, scripts/docker-seccomp.sh)
SECCOMP = REPO / "build/docker/seccomp.json"

pytestmark = pytest.mark.docker


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _docker(*args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def engine():
    """A running engine: started here if docker.io is installed (and stopped
    again afterwards); a skip only when docker cannot run at all on this
    machine, with the reason."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts/docker-engine.sh")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode == 2:
        pytest.skip(f"docker.io not installed: {proc.stderr.strip()}")
    if proc.returncode != 0:
        pytest.skip(f"no Docker engine can run here: {proc.stderr.strip()}")
    started = proc.stdout.strip()
    yield
    if started:  # the dockerd this fixture started, by its PID
        os.kill(int(started), signal.SIGTERM)
        for _ in range(300):
            try:
                os.kill(int(started), 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


@pytest.fixture(scope="module")
def image(engine) -> str:
    proc = subprocess.run(
        ["make", "-C", str(REPO), "docker", f"DOCKER_TAG={IMAGE}"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, f"make docker failed:\n{_tail(proc.stdout)}\n{_tail(proc.stderr)}"
    inspect = _docker("image", "inspect", IMAGE)
    assert inspect.returncode == 0, inspect.stderr
    assert SECCOMP.is_file(), f"make docker did not write {SECCOMP}"
    config = json.loads(inspect.stdout)[0]["Config"]
    assert config["Entrypoint"] == ["/mptlab/.venv/bin/mptlab"]
    return IMAGE


def _ok_runs(campaign: Path) -> list[dict]:
    infos = [json.loads(p.read_text()) for p in sorted(campaign.glob("runs/*/rep-*/run.json"))]
    for info in infos:
        assert info["status"] == "ok", info
        # confined in namespaces of its own inside the container: the seccomp
        # profile's three calls suffice, no capability (docs/deployment.md)
        assert info["confined"] is True, info
    for result in campaign.glob("runs/*/rep-*/result.json"):
        assert json.loads(result.read_text())["metrics"]["goodput_mbps"] > 0, result
    return infos


def test_a_campaign_runs_in_an_unprivileged_container(image, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    name = f"mptlab-test-{os.getpid()}"
    proc = _docker(
        "run", "--rm", "--name", name, *SHM, "--security-opt", f"seccomp={SECCOMP}",
        "-v", f"{results}:/mptlab/results",
        image, "run", "blest-3g-wlan", "--quick", "--reps", "1",
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, f"{_tail(proc.stdout)}\n{_tail(proc.stderr)}"
    planned = int(re.search(r"(\d+) runs -> ", proc.stdout).group(1))
    assert f"{planned} ok, 0 not ok" in proc.stdout, proc.stdout
    infos = _ok_runs(results / "blest-3g-wlan-quick")
    assert len(infos) == planned
    # the run dirs carry the image's kernel build, staged from the host cache
    build = json.loads(
        _docker("run", "--rm", "--entrypoint", "sh", image, "-c",
                'cat "$MPTLAB_KERNEL_DIR/build-info.json"').stdout
    )  # fmt: skip
    assert build["arch"] == "um" and build["kernel_key"]


def _campaign(name: str, repetitions: int) -> str:
    """A small campaign file: short downloads over WLAN + 3G."""
    return textwrap.dedent(
        f"""\
        experiments:
          {name}:
            topology: two-path
            paths: [wlan, 3g]
            kernel: {{path_manager: {{subflows: 2, add_addr_accepted: 2}}}}
            workload: {{type: bulk, duration: 3s}}
            repetitions: {repetitions}
            timeout: 90s
        """
    )


def _compose(image: str, results: Path, project: str, **env: str):
    """``docker-compose ARGS`` of this checkout's file, as a project of the
    test's own, with the image, the results dir and ``env``."""
    env = {
        **os.environ,
        "MPTLAB_IMAGE": image,
        "MPTLAB_RESULTS": str(results),
        "MPTLAB_SHM": "2g",
        "MPTLAB_SECCOMP": str(SECCOMP),
        **env,
    }
    base = [
        "docker-compose",
        "-f",
        str(REPO / "docker-compose.yml"),
        "-p",
        f"{project}{os.getpid()}",
    ]

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*base, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
        )

    return run


def test_a_campaign_runs_on_a_compose_dask_cluster_of_two_workers(image, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "campaign.yaml").write_text(_campaign("docker-cluster", 4))
    compose_run = _compose(image, results, "mptlabtest")

    up = compose_run("--profile", "cluster", "up", "-d", "--scale", "dask-worker=2")
    try:
        assert up.returncode == 0, up.stderr
        # both workers registered before the campaign, so that both get runs
        wait = compose_run(
            "run", "--rm", "--entrypoint", "/mptlab/.venv/bin/python", "mptlab", "-c",
            "from distributed import Client; "
            "Client('tcp://dask-scheduler:8786', timeout=60).wait_for_workers(2, timeout=120)",
        )  # fmt: skip
        assert wait.returncode == 0, f"the two Dask workers did not register: {_tail(wait.stderr)}"
        proc = compose_run(
            "run", "--rm", "mptlab", "run", "/mptlab/results/campaign.yaml",
            "--cluster", "tcp://dask-scheduler:8786",
            timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, f"{_tail(proc.stdout)}\n{_tail(proc.stderr)}"
        assert "4 ok, 0 not ok" in proc.stdout, proc.stdout
        infos = _ok_runs(results / "docker-cluster")
        assert len(infos) == 4
        # two worker containers (hostnames are container ids), not the client
        workers = compose_run("--profile", "cluster", "ps", "-q", "dask-worker").stdout.split()
        assert len(workers) == 2
        hosts = {info["host"] for info in infos}
        assert hosts <= {w[:12] for w in workers}, (hosts, workers)
        assert len(hosts) == 2, hosts
    finally:
        down = compose_run("--profile", "cluster", "down", "-v", "--remove-orphans")
        assert down.returncode == 0, down.stderr


def test_the_compose_nightly_profile_runs_a_night(image, tmp_path):
    """`docker-compose --profile nightly` (scripts/nightly-loop.sh): one night
    now (NIGHTLY_ONCE=1) of a set given by a campaign file in the results
    volume: the first night becomes the baseline, the history and the trend
    pages land in results/nightly."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "nightly.yaml").write_text(_campaign("docker-nightly", 2))
    compose = _compose(
        image,
        results,
        "mptlabnightly",
        NIGHTLY="/mptlab/results/nightly.yaml",
        NIGHTLY_ARGS="--jobs 2 --no-pcap",
        NIGHTLY_ONCE="1",
    )
    try:
        proc = compose("--profile", "nightly", "run", "--rm", "nightly", timeout=900)
        assert proc.returncode == 0, f"{_tail(proc.stdout)}\n{_tail(proc.stderr)}"
        assert "is now the baseline" in proc.stdout, proc.stdout
        root = results / "nightly"
        assert (root / "site" / "index.html").stat().st_size > 1000
        assert len(list((root / "history").glob("*.parquet"))) == 1
        (night,) = [p for p in root.iterdir() if p.name[:1].isdigit()]
        assert len(_ok_runs(night / "docker-nightly")) == 2
    finally:
        compose("--profile", "nightly", "down", "-v", "--remove-orphans")
