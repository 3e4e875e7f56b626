"""A wheel of mptlab works without the checkout: its data files travel in
the package and the kernel's cache key is the same from there."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel, unpacked as an install would put it (dependencies: this venv's)."""
    tmp = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp.glob("mptlab-*.whl")
    site = tmp / "site"
    zipfile.ZipFile(wheel).extractall(site)
    return site


def python(site: Path, code: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "MPTLAB_HOME"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_an_installed_mptlab_finds_its_data_and_writes_results_here(installed, tmp_path):
    code = (
        "import mptlab, mptlab.home as h\n"
        "from mptlab.spec.catalog import Catalog\n"
        "print(mptlab.__file__); print(h.home()); print(h.checkout())\n"
        "print(len(Catalog.load().expand('blest-3g-wlan'))); print(h.results_dir().resolve())\n"
    )
    where, home, checkout, runs, results = python(installed, code, tmp_path).splitlines()
    assert where.startswith(str(installed)) and home == str(installed / "mptlab" / "_data")
    assert checkout == "None" and int(runs) > 10
    assert results == str(tmp_path / "results")


def test_the_kernel_key_is_the_same_from_the_package(installed, tmp_path):
    def key(build_sh: Path) -> tuple[int, str]:
        p = subprocess.run(["bash", str(build_sh), "--dir"], capture_output=True, text=True)
        return p.returncode, p.stdout

    assert key(installed / "mptlab" / "_data" / "kernel" / "build.sh") == key(
        ROOT / "kernel" / "build.sh"
    )
