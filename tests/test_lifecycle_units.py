"""A campaign's lifecycle without a guest: the results-dir lock, stopping on
a signal, writes that stay in their own run dir, and the guest launcher's
parent-death signal and read-only host (real namespaces, a shell in place
of UML; the guest itself: test_lifecycle_kernel.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mptlab import rundir
from mptlab.campaign import boot, runner
from mptlab.campaign.execute import Outcome
from mptlab.campaign.kernel import KernelBuild
from mptlab.campaign.runner import Campaign, CampaignLock, CampaignLocked
from mptlab.rundir import RunDir
from mptlab.spec.catalog import Catalog


def _runs(tmp_path: Path, reps: int):
    camp = tmp_path / "c.yaml"
    camp.write_text(
        "experiments:\n  e:\n    topology: two-path\n    paths: [wlan, 3g]\n"
        f"    workload: {{type: bulk, duration: 3s}}\n    repetitions: {reps}\n"
    )
    return Catalog.load(camp).expand("e")


HOLD = """\
import sys, time
from pathlib import Path
from mptlab.campaign.runner import CampaignLock
with CampaignLock(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(600)
"""


def test_a_second_invocation_is_refused_naming_the_holder_and_kill_9_frees_the_lock(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(CampaignLocked, match=f"PID {holder.pid} on "), CampaignLock(tmp_path):
            pass
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs
        holder.wait()
    with CampaignLock(tmp_path) as lock:  # the kernel dropped it with the process
        assert (tmp_path / rundir.LOCK).read_text().split()[0] == str(os.getpid())
        assert lock.fd is not None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_campaign_kills_the_running_and_starts_no_more(
    tmp_path, monkeypatch, sig
):
    """The runner's side of Ctrl-C with a stand-in for the guest that, like
    ``boot``, returns ``Interrupted`` once the campaign's cancel is set."""
    runs = _runs(tmp_path, 6)
    out = tmp_path / "out"
    started: list[str] = []

    def execute(campaign, run, kernel, provenance, cancel):
        d = campaign.run_dir(run.variant, run.repetition)
        d.create()
        started.append(run.run_id)
        if len(started) == 1:
            return Outcome(run.run_id, "ok", seconds=0.1)  # one finishes before the signal
        if len(started) == 3:  # the two after it are running: signal the process
            threading.Timer(0.2, os.kill, (os.getpid(), sig)).start()
        assert cancel.wait(30)
        raise boot.Interrupted("killed")

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "check_confinement", lambda: None)
    before = signal.getsignal(sig)
    campaign = Campaign(out, runs, KernelBuild(tmp_path, tmp_path), jobs=2)
    t0 = time.monotonic()
    report = campaign.run()
    assert time.monotonic() - t0 < 20
    assert signal.getsignal(sig) is before  # the handler is the caller's again
    assert report.stopped == sig.name and len(report.outcomes) == 1
    assert sorted(report.interrupted) == sorted(started[1:]) and len(started) == 3
    base = out / "runs" / "base"
    assert sorted(p.name for p in base.iterdir() if ".interrupted-" in p.name) == sorted(
        f"{r.split('/')[1]}.interrupted-1" for r in report.interrupted
    )


def test_writes_of_a_pinned_run_dir_follow_it_when_set_aside(tmp_path):
    d = RunDir(tmp_path / "rep-000")
    d.create()
    with d.pinned():
        aside = RunDir(d.path).set_aside("interrupted")  # what a later invocation does
        d.path.mkdir()  # ... and its new attempt
        assert d.moved()
        d.write_run_info({"status": "ok"})
        (aside.path / rundir.RESULT).write_text('{"attempt": "mine"}')
        assert d.result() == {"attempt": "mine"}
    assert json.loads((aside.path / rundir.RUN).read_text())["status"] == "ok"
    assert list(d.path.iterdir()) == []  # the new attempt's dir got nothing


def test_the_host_never_writes_through_a_link_the_guest_planted(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("host file\n")
    d = RunDir(tmp_path / "rep-000")
    d.create()
    (d.path / (rundir.RUN + ".tmp")).symlink_to(victim)
    (d.path / rundir.RESULT).symlink_to(victim)
    with d.pinned():
        d.write_run_info({"status": "ok"})
        with pytest.raises(rundir.RunDirError):
            d.result()
    assert victim.read_text() == "host file\n"
    assert json.loads((d.path / rundir.RUN).read_text())["status"] == "ok"


def _launch(run_dir: Path, scratch: Path, *cmd: str, confine: bool = True) -> list[str]:
    return [*boot._launcher(run_dir, scratch, confine=confine), *cmd]


needs_namespaces = pytest.mark.skipif(
    not boot.confined(), reason="MPTLAB_CONFINE=off: guests are not confined here"
)


@needs_namespaces
def test_the_launcher_leaves_only_the_run_dir_and_its_scratch_writable(tmp_path):
    run_dir, scratch, outside = tmp_path / "run", tmp_path / "scratch", tmp_path / "outside"
    for d in (run_dir, scratch, outside):
        d.mkdir()
    (outside / "f").write_text("host\n")
    script = (
        f"echo guest > {run_dir}/mine || exit 11; echo guest > {scratch}/tmp || exit 12; "
        f"for f in {outside}/f {outside}/new {tmp_path}/new /proc/self/comm; do "
        'if echo pwn > "$f"; then echo "wrote $f"; exit 13; fi; done; '
        f"mount -o remount,rw / 2>/dev/null && exit 14; ls {scratch}"
    )
    p = subprocess.run(
        _launch(run_dir, scratch, "/bin/sh", "-c", script), capture_output=True, text=True
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stderr.count("Read-only file system") == 4
    assert (run_dir / "mine").read_text() == "guest\n"
    assert (outside / "f").read_text() == "host\n" and not (outside / "new").exists()
    assert list(scratch.iterdir()) == []  # the scratch was a tmpfs of its own


HOST = """\
import os, subprocess, sys, time
argv = [a.replace("PARENT", str(os.getpid())) for a in sys.argv[1:]]
proc = subprocess.Popen(argv, start_new_session=True)
print(proc.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("confine", [True, False])
def test_the_launched_process_dies_with_the_campaign_on_kill_9(tmp_path, confine):
    if confine and not boot.confined():
        pytest.skip("MPTLAB_CONFINE=off")
    cmd = _launch(tmp_path, tmp_path, "/bin/sleep", "600", confine=confine)
    cmd[cmd.index("--parent") + 1] = "PARENT"  # the "campaign" below starts it
    host = subprocess.Popen([sys.executable, "-c", HOST, *cmd], stdout=subprocess.PIPE, text=True)
    assert host.stdout is not None
    child = int(host.stdout.readline())
    proc = Path(f"/proc/{child}")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and b"sleep" not in (proc / "cmdline").read_bytes():
        time.sleep(0.05)  # the launcher has become the program
    host.kill()  # kill -9 of the campaign
    host.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and proc.exists() and _state(proc) != "Z":
        time.sleep(0.05)
    assert not proc.exists() or _state(proc) == "Z", f"{child} outlived the campaign"


def _state(proc: Path) -> str:
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_stopping_a_cluster_campaign_cancels_its_tasks(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    from mptlab.campaign import cluster

    told = tmp_path / "told"  # a file: Dask hands the task a pickled copy of its closure

    def slow(out_dir, want, run_json, stop):  # a run a worker is busy with, as execute_on_worker
        cancel, done = threading.Event(), threading.Event()
        cluster.stop_watcher(stop, cancel, done)
        if cancel.wait(10):
            told.write_text(run_json["variant"])
        done.set()
        raise boot.Interrupted("killed")

    monkeypatch.setattr(cluster, "execute_on_worker", slow)
    runs = _runs(tmp_path, 4)
    cancel = threading.Event()
    recorded: list[Outcome] = []
    interrupted: list[str] = []
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as c:
        threading.Timer(1.0, cancel.set).start()
        t0 = time.monotonic()
        cluster.run_on_cluster(
            c.scheduler_address,
            tmp_path,
            KernelBuild(tmp_path, tmp_path),
            runs,
            recorded.append,
            lambda run, why: Outcome(run.run_id, "crashed", why),
            cancel=cancel,
            interrupted=lambda run: interrupted.append(run.run_id),
        )
        took = time.monotonic() - t0
        deadline = time.monotonic() + 5
        while not told.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    assert took < 4.5, f"{took:.1f} s: waited for the running task"
    assert not recorded and sorted(interrupted) == sorted(r.run_id for r in runs)
    assert told.exists()  # the running task heard of the stop (its guest would be killed)
