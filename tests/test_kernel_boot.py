"""The boot harness against the real kernel: outcomes are classified and a
guest never outlives its timeout."""

import subprocess
from pathlib import Path

import pytest

from mptlab.campaign.boot import run_script

pytestmark = pytest.mark.kernel

DATA = Path(__file__).parent / "data"


def test_ok_run_writes_logs_and_sees_a_readonly_root(kernel, tmp_path):
    r = run_script(
        kernel,
        tmp_path,
        "echo hello > $MPTLAB_RUN_DIR/out; touch /root-is-ro 2>&1; uname -r\n",
        timeout=60,
    )
    assert r.status == "ok", r.reason
    assert (tmp_path / "out").read_text() == "hello\n"
    log = r.guest_log.read_text()
    assert "Read-only file system" in log
    assert r.console_log.exists()


def test_nonzero_exit_is_reported(kernel, tmp_path):
    r = run_script(kernel, tmp_path, "exit 7\n", timeout=60)
    assert (r.status, r.exit_code) == ("failed", 7)


def test_hung_guest_is_killed_at_its_timeout(kernel, tmp_path):
    r = run_script(kernel, tmp_path, "sleep 600\n", timeout=3)
    assert r.status == "timeout"
    leftover = subprocess.run(
        ["pgrep", "-f", f"MPTLAB_HOST_RUN_DIR={tmp_path}"], capture_output=True, text=True
    )
    assert leftover.stdout.strip() == ""


def test_kernel_panic_is_detected(kernel, tmp_path):
    r = run_script(kernel, tmp_path, "echo c > /proc/sysrq-trigger\n", timeout=60)
    assert r.status == "panic"
    assert "Kernel panic" in r.reason


@pytest.mark.parametrize("clock", ["real", "virtual"])
def test_fp_state_survives_syscalls_signals_and_threads(kernel, tmp_path, clock):
    """Kernel patch 0008 skips writing a process's FP registers back when
    its host process already holds them: every case where they must be
    written after all (another thread, a signal handler, sigreturn) keeps
    each thread's SSE/AVX values across system calls (tests/data/fpstate.c)."""
    binary = tmp_path / "fpstate"
    subprocess.run(
        ["cc", "-O2", "-Wall", "-pthread", "-o", str(binary), str(DATA / "fpstate.c")],
        check=True,
    )
    # a signal every 1 ms of real time; under virtual time every 50 us of guest
    # time, which passes only in close(-1) (1 us each): about 200 signals
    period_us = 1000 if clock == "real" else 50
    r = run_script(
        kernel,
        tmp_path,
        f"$MPTLAB_RUN_DIR/{binary.name} 20000 {period_us} > $MPTLAB_RUN_DIR/fp.out\n",
        timeout=120,
        clock=clock,
    )
    out = (tmp_path / "fp.out").read_text() if (tmp_path / "fp.out").exists() else ""
    assert r.status == "ok", (r.reason, out)
    assert out.startswith("ok "), out
    fields = dict(kv.split("=") for kv in out.split()[2:])
    assert int(fields["rounds"]) == 40000 and int(fields["bad"]) == 0
    assert int(fields["signals"]) > 100  # the handler ran between loads and stores
