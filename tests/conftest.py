"""Shared fixtures.  Tests marked ``kernel`` boot the real mptlab UML kernel."""

from __future__ import annotations

import json
import os
import shutil
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
        run.last = result  # its host CPU wait (cpu_wait_s), for real-clock tests
        if not result.ok:
            log = result.guest_log.read_text() if result.guest_log.exists() else ""
            console = result.console_log.read_text()[-3000:]
            raise GuestFailed(
                f"guest {result.status}: {result.reason}\n--- guest.log\n{log[-6000:]}"
                f"\n--- console (tail)\n{console}"
            )
        return json.loads((run_dir / "result.json").read_text())

    return run
