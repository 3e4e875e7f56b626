"""Shared fixtures.  Tests marked ``kernel`` boot the real mptlab UML kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mptlab.campaign.boot import run_script
from mptlab.campaign.kernel import KernelNotBuilt, find_kernel

REPO = Path(__file__).resolve().parent.parent


class CLI:
    """The ``mptlab`` command, run as a process: ``mptlab("run", camp, "--jobs", 2)``."""

    argv = [sys.executable, "-m", "mptlab.cli"]

    def __call__(self, *args, timeout: float | None = None) -> subprocess.CompletedProcess:
        cmd = [*self.argv, *map(str, args)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def mptlab() -> CLI:
    return CLI()


@pytest.fixture(scope="session")
def kernel():
    try:
        return find_kernel()
    except KernelNotBuilt as exc:
        pytest.fail(str(exc))


class GuestFailed(AssertionError):
    pass


@pytest.fixture
def guest(kernel, tmp_path):
    """Run Python code inside a fresh guest; returns the ``RESULT`` dict it filled.

    The code runs as root in the guest with the venv's interpreter; it sees
    ``RUN_DIR`` (writable), ``MODULES_DIR`` (the built scheduler modules) and
    a ``RESULT`` dict that is returned to the test as JSON.  ``clock``:
    ``real`` or ``virtual`` (UML time-travel, ``mptlab.campaign.boot``);
    by default ``$MPTLAB_TEST_CLOCK`` or ``real``, so that a kernel test file
    can be run under virtual time as it is:
    ``MPTLAB_TEST_CLOCK=virtual pytest -m kernel tests/test_kernel_cc.py``.
    """
    counter = iter(range(1000))

    def run(code: str, timeout: float = 120, mem_mb: int = 256, clock: str | None = None) -> dict:
        clock = clock or os.environ.get("MPTLAB_TEST_CLOCK", "real")
        run_dir = tmp_path / f"guest{next(counter)}"
        run_dir.mkdir()
        body = textwrap.dedent(code)
        program = (
            "import json, os, sys\n"
            "from pathlib import Path\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "RUN_DIR = Path(os.environ['MPTLAB_RUN_DIR'])\n"
            "MODULES_DIR = Path(os.environ['MPTLAB_MODULES_DIR'])\n"
            "RESULT = {}\n"
            "try:\n" + textwrap.indent(body, "    ") + "\n"
            "finally:\n"
            "    (RUN_DIR / 'result.json').write_text(json.dumps(RESULT, default=str))\n"
        )
        (run_dir / "guest_main.py").write_text(program)
        result = run_script(
            kernel,
            run_dir,
            f"exec {sys.executable} {run_dir}/guest_main.py\n",
            timeout=timeout,
            mem_mb=mem_mb,
            env={"MPTLAB_MODULES_DIR": str(kernel.modules_dir)},
            clock=clock,  # type: ignore[arg-type]
            rng_seed=1,  # virtual time: every guest of a test draws the same numbers
        )
        if not result.ok:
            log = result.guest_log.read_text() if result.guest_log.exists() else ""
            console = result.console_log.read_text()[-3000:]
            raise GuestFailed(
                f"guest {result.status}: {result.reason}\n--- guest.log\n{log[-6000:]}"
                f"\n--- console (tail)\n{console}"
            )
        return json.loads((run_dir / "result.json").read_text())

    return run
