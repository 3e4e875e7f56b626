"""A campaign's lifecycle with real guests: Ctrl-C stops it, kill -9 leaves
no guest behind and no foreign file in a resumed run dir, a second campaign
on a dir in use is refused, and a guest that tries as root cannot write the
host outside its run dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel

CAMPAIGN = """\
experiments:
  life:
    topology: two-path
    paths: [wlan, 3g]
    kernel: {scheduler: blest, path_manager: {subflows: 2, add_addr_accepted: 2}}
    # caught running for sure: on the real clock a run lasts its workload's
    # 12 s, whatever mptlab's speed.  Under virtual time each speed-up made
    # the test's Ctrl-C miss the runs (CI stop 19: 10 s of guest time; 2026-11-27:
    # 40 s; 2026-11-28: 150 s, ~3 s of wall time once the sampler was a
    # program, and the interrupted run had ended as the signal came)
    clock: real
    workload: {type: bulk, duration: 12s}
    repetitions: 3
    timeout: 120s
"""


def uml_processes(marker: Path) -> list[str]:
    """Every process whose command line names ``marker`` (its guests name
    their run dirs): pid, state and command line, from /proc (``ps``
    truncates long command lines to $COLUMNS)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(marker) in cmdline and state != "Z":
            found.append(f"{proc.name} {state} {cmdline[:200]}")
    return found


def start(mptlab, camp: Path, out: Path, jobs: int = 2) -> subprocess.Popen:
    """``mptlab run`` as a terminal runs it: the leader of its own process group."""
    return subprocess.Popen(
        [*mptlab.argv, "run", str(camp), "--jobs", str(jobs), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for_running_guest(runs: Path, proc: subprocess.Popen, timeout: float = 180) -> Path:
    """A run dir whose guest agent has started (and that has not finished)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for d in runs.glob("rep-[0-9][0-9][0-9]"):
            if (d / "agent.log").exists() and not (d / "run.json").exists():
                return d
        time.sleep(0.2)
    raise AssertionError(f"no guest started in {timeout} s (exit {proc.poll()})")


def gone_within(out: Path, seconds: float) -> float:
    """Seconds until no process names ``out``; fails after ``seconds``."""
    t0 = time.monotonic()
    while uml_processes(out):
        assert time.monotonic() - t0 < seconds, "\n".join(uml_processes(out))
        time.sleep(0.1)
    return time.monotonic() - t0


def check_attempts(runs: Path) -> None:
    """Every finished run dir holds its own attempt's files only."""
    for d in runs.glob("rep-[0-9][0-9][0-9]"):
        info = json.loads((d / "run.json").read_text())
        result = json.loads((d / "result.json").read_text())
        prov = json.loads((d / "guest-provenance.json").read_text())
        assert info["status"] == "ok", info
        assert info["confined"] is True
        assert len(info["attempt"]) == 12
        assert result["attempt"] == prov["attempt"] == info["attempt"], d


def test_ctrl_c_stops_the_campaign_and_a_second_one_is_refused_meanwhile(tmp_path, mptlab):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN)
    out = tmp_path / "out"
    runs = out / "life" / "runs" / "base"
    proc = start(mptlab, camp, out)
    try:
        wait_for_running_guest(runs, proc)
        # a second campaign on the same dir, meanwhile: refused at once, naming the holder
        second = mptlab("run", str(camp), "--out", str(out), timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"is in use by another `mptlab run` (PID {proc.pid} on " in second.stderr
        assert uml_processes(out)
        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        output, _ = proc.communicate(timeout=30)
        stopped_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, output
    assert stopped_s < 10, f"took {stopped_s:.1f} s to stop\n{output}"
    assert "stopped (SIGINT)" in output and "run the same command again to resume" in output
    gone_within(out, 2)
    aside = list(runs.glob("rep-*.interrupted-1"))
    assert aside and all(not (d / "run.json").exists() for d in aside)
    assert not [d for d in runs.glob("rep-[0-9][0-9][0-9]") if not (d / "run.json").exists()]

    p = mptlab("run", str(camp), "--jobs", "2", "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(list(runs.glob("rep-[0-9][0-9][0-9]/run.json"))) == 3
    check_attempts(runs)


def test_kill_9_of_the_campaign_leaves_no_guest_and_no_foreign_file(tmp_path, mptlab):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN)
    out = tmp_path / "out"
    runs = out / "life" / "runs" / "base"
    proc = start(mptlab, camp, out)
    try:
        running = wait_for_running_guest(runs, proc)
        time.sleep(1)  # the workload is on its way
        assert uml_processes(out)
        proc.kill()  # kill -9 of mptlab run only, not of its group
        proc.wait()
        gone_within(out, 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = {p: p.stat().st_mtime_ns for p in running.rglob("*")}

    p = mptlab("run", str(camp), "--jobs", "2", "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    check_attempts(runs)
    aside = runs / f"{running.name}.interrupted-1"
    assert aside.is_dir()  # the killed attempt, set aside untouched since
    assert {p: p.stat().st_mtime_ns for p in aside.rglob("*")} == {
        aside / q.relative_to(running): t for q, t in before.items()
    }


ESCAPE = r"""
set -u
out="$1"; parent="$2"; sibling="$3"; vartmp="$4"
fail=0
try() {  # try WHAT FILE: writing FILE must fail
    if echo pwned > "$2"; then echo "WROTE $1: $2"; fail=1;
    else echo "refused $1"; fi
}
mount -o remount,rw / && echo "remount rw: ok (guest kernel)"
try root-remounted "$vartmp"  # the root hostfs: the guest's /tmp is its own tmpfs
mkdir -p /tmp/host
mount -t hostfs none /tmp/host -o / || { echo "hostfs mount failed"; exit 3; }
try fresh-hostfs "/tmp/host$out/victim"
try fresh-hostfs-new "/tmp/host$out/new"
try parent-of-run-dir "/tmp/host$parent/new"
try sibling-run-dir "/tmp/host$sibling/result.json"
try host-proc "/tmp/host/proc/self/comm"  # UML's own name: harmless should it work
mkdir -p /tmp/dir
mount -t hostfs none /tmp/dir -o "$out" || { echo "hostfs of a dir failed"; exit 4; }
try hostfs-of-dir /tmp/dir/victim
mount -o remount,rw /tmp/host && try hostfs-remounted "/tmp/host$out/victim"
echo mine > "$MPTLAB_RUN_DIR/mine" || fail=1
exit $fail
"""


def test_a_guest_as_root_cannot_write_the_host_outside_its_run_dir(kernel, tmp_path):
    from mptlab.campaign.boot import confined, run_script

    if not confined():  # unconfined, every write below lands on the host
        pytest.skip("MPTLAB_CONFINE=off")

    outside = tmp_path / "outside"  # a host dir the guest must not change
    outside.mkdir()
    (outside / "victim").write_text("host\n")
    sibling = tmp_path / "runs" / "rep-001"  # another run's dir
    sibling.mkdir(parents=True)
    (sibling / "result.json").write_text("{}\n")
    vartmp = Path("/var/tmp") / f"mptlab-escape-{tmp_path.name}-{os.getpid()}"
    run_dir = tmp_path / "runs" / "rep-000"
    run_dir.mkdir()
    (run_dir / "escape.sh").write_text(ESCAPE)
    r = run_script(
        kernel,
        run_dir,
        f"exec /bin/sh $MPTLAB_RUN_DIR/escape.sh {outside} {run_dir.parent} {sibling} {vartmp}\n",
        timeout=120,
    )
    log = (run_dir / "guest.log").read_text()
    assert r.ok and r.confined, f"{r.status}: {r.reason}\n{log}"
    assert "remount rw: ok" in log  # the guest's kernel allows it: the host must not care
    assert log.count("refused ") == 8 and "WROTE" not in log, log
    assert log.count("Read-only file system") == 8  # each refused by the host's mounts
    assert (run_dir / "mine").read_text() == "mine\n"
    assert (outside / "victim").read_text() == "host\n" and not vartmp.exists()
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    assert (sibling / "result.json").read_text() == "{}\n"
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["rep-000", "rep-001"]


def test_ctrl_c_of_a_cluster_client_kills_the_guests_on_the_workers(tmp_path, mptlab):
    distributed = pytest.importorskip("distributed")
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN.replace("repetitions: 3", "repetitions: 2"))
    out = tmp_path / "out"
    runs = out / "life" / "runs" / "base"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        proc = subprocess.Popen(
            [*mptlab.argv, "run", str(camp), "--cluster", address, "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            wait_for_running_guest(runs, proc)
            os.killpg(proc.pid, signal.SIGINT)
            output, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 130, output
        assert "stopped (SIGINT)" in output
        gone_within(out, 10)  # the worker's guests, told through a Dask event
        p = mptlab("run", str(camp), "--cluster", address, "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    aside = list(runs.glob("rep-*.interrupted-1"))
    # killed mid-run (a guest left to its end would have written its result)
    assert aside and not [d for d in aside if (d / "result.json").exists()]
    check_attempts(runs)
