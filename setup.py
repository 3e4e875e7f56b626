"""Wheels carry mptlab's data files (mptlab/_data/): ``pip install .`` then
works without a checkout (mptlab/home.py finds them).  Everything else is in
pyproject.toml."""

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from mptlab.home import DATA  # noqa: E402 - the list home.py looks for


class BuildWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "mptlab" / "_data"
        for name in DATA:
            src, dst = ROOT / name, target / name
            if src.is_dir():
                ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
                shutil.copytree(src, dst, dirs_exist_ok=True, ignore=ignore)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildWithData})
