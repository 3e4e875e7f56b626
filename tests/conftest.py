"""Shared fixtures.  Tests marked ``kernel`` boot the real mptlab UML kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from guestprog import run_guest

from mptlab.campaign.kernel import KernelNotBuilt, find_kernel


class CLI:
    """The ``mptlab`` command, run as a process: ``mptlab("run", camp, "--jobs", 2)``."""

    argv = [sys.executable, "-m", "mptlab.cli"]

    def __call__(self, *args, timeout: float | None = None) -> subprocess.CompletedProcess:
        cmd = [*self.argv, *map(str, args)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def mptlab() -> CLI:
    return CLI()


class Chromium:
    """Headless Chromium, for pages that must render as a browser shows them
    (the HTML report, the reproduction page): ``run(args)``, the DOM of a URL,
    a screenshot as an RGB(A) array."""

    binary = shutil.which("chromium") or shutil.which("chromium-browser")

    def __init__(self, tmp: Path):
        self.tmp = tmp

    def run(self, args: list[str]) -> subprocess.CompletedProcess:
        if self.binary is None:
            pytest.fail(
                "chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
            )
        cmd = [
            self.binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={self.tmp / 'profile'}",
            *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)

    def dom(self, page: Path) -> str:
        p = self.run(["--dump-dom", page.as_uri()])
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout

    def screenshot(self, page: Path, width: int, height: int):
        """The page as a (height, width, channels) uint8 array."""
        import numpy as np
        from matplotlib import image

        shot = self.tmp / f"{page.stem}.png"
        p = self.run(
            [f"--screenshot={shot}", f"--window-size={width},{height}", "--hide-scrollbars"]
            + [page.as_uri()]
        )
        assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
        return (image.imread(shot) * 255).round().astype(np.uint8)

    @staticmethod
    def count(img, rgb: tuple, tol: int = 6) -> int:
        """Pixels of colour ``rgb`` (within ``tol`` per channel)."""
        import numpy as np

        return int((np.abs(img[:, :, :3].astype(int) - np.array(rgb)) <= tol).all(axis=2).sum())


@pytest.fixture
def chromium(tmp_path) -> Chromium:
    return Chromium(tmp_path)


@pytest.fixture(scope="session")
def kernel():
    try:
        return find_kernel()
    except KernelNotBuilt as exc:
        pytest.fail(str(exc))


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
        out, result = run_guest(
            kernel,
            tmp_path / f"guest{next(counter)}",
            code,
            timeout=timeout,
            mem_mb=mem_mb,
            clock=clock or os.environ.get("MPTLAB_TEST_CLOCK", "real"),
            rng_seed=1,  # virtual time: every guest of a test draws the same numbers
        )
        run.last = result  # its host CPU wait (cpu_wait_s), for real-clock tests
        return out

    return run
