"""The boot harness against the real kernel: outcomes are classified and a
guest never outlives its timeout."""

import subprocess

import pytest

from mptlab.campaign.boot import run_script

pytestmark = pytest.mark.kernel


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
        ["pgrep", "-f", f"MPTLAB_RUN_DIR={tmp_path}"], capture_output=True, text=True
    )
    assert leftover.stdout.strip() == ""


def test_kernel_panic_is_detected(kernel, tmp_path):
    r = run_script(kernel, tmp_path, "echo c > /proc/sysrq-trigger\n", timeout=60)
    assert r.status == "panic"
    assert "Kernel panic" in r.reason
