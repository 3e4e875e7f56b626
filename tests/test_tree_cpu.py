"""The host CPU a guest's process tree used (``boot.TreeCPU``), on real
processes: a parent whose short-lived children burn CPU and exit between
samples, the way UML's guest processes do."""

import subprocess
import sys
import time

from mptlab.campaign import boot

# a parent that starts 4 children one after the other, each burning ~50 ms of
# CPU and exiting; the parent waits for each, as UML does for its guest's
BURN = """
import subprocess, sys
child = "import time\\nend = time.process_time() + 0.05\\nwhile time.process_time() < end: pass"
for _ in range(4):
    subprocess.run([sys.executable, "-c", child], check=True)
"""


def burn_cpu_s() -> float:
    """The CPU the tree used, measured by the test's own process accounting."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", BURN], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def test_a_tree_that_ends_between_samples_has_its_cpu_counted():
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    tree = boot.TreeCPU(proc.pid)
    while not boot.wait_exit(proc, 1.0):  # the whole tree ends within one sample period
        tree.sample()
    tree.reap(proc)
    assert proc.returncode == 0
    # 4 x 50 ms in the children, plus 5 interpreters' start-up
    expected = burn_cpu_s()
    assert tree.cpu_ns / 1e9 >= 0.2
    assert abs(tree.cpu_ns / 1e9 - expected) < 0.5 * expected
    # samples alone (none, or one at the zombie) would have missed the children
    assert tree.sampled_ns < 0.5 * tree.cpu_ns


def test_wait_exit_times_out_on_a_running_process_and_does_not_reap():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    start = time.monotonic()
    assert not boot.wait_exit(proc, 0.1)
    assert time.monotonic() - start >= 0.09
    assert boot.wait_exit(proc, 5.0)
    assert proc.returncode is None  # exited, not reaped: reap() takes its usage
    tree = boot.TreeCPU(proc.pid)
    tree.reap(proc)
    assert proc.returncode == 0 and tree.reaped_ns is not None


def test_a_killed_tree_keeps_what_its_samples_saw():
    # killed before it is reaped by its own parent: wait4 still holds the
    # parent's own CPU, and the samples are a floor
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass"]
    )
    tree = boot.TreeCPU(proc.pid)
    time.sleep(0.3)
    tree.sample()
    proc.kill()
    assert boot.wait_exit(proc, 5.0)
    tree.reap(proc)
    assert proc.returncode == -9
    assert tree.cpu_ns >= tree.sampled_ns > 0.1e9
