"""Where mptlab's own files are: the data it ships, the build cache, the results.

The data (``experiments.yaml``, ``topologies/``, ``kernel/``,
``compare-rules.yaml``, ``scripts/``) lives at the top of a checkout.  It is
found, in this order, in

1. ``$MPTLAB_HOME`` (a checkout, or any dir holding that data);
2. the checkout this package was imported from (``make venv``'s editable
   install, or running from the source tree);
3. the package's own copy, ``mptlab/_data/``, which building a wheel puts
   there (``setup.py``), so that ``pip install .`` works without a checkout.

Results go to ``./results`` of the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# what the data dir holds; setup.py ships the same list in wheels
DATA = ("experiments.yaml", "compare-rules.yaml", "topologies", "kernel", "scripts")
_MARKER = Path("kernel") / "build.sh"


class DataNotFound(FileNotFoundError):
    """mptlab's data files are nowhere to be found."""


def _holds_data(path: Path) -> bool:
    return (path / _MARKER).is_file() and (path / "experiments.yaml").is_file()


def checkout() -> Path | None:
    """The source checkout this package runs from, if it runs from one."""
    root = PACKAGE.parent
    return root if _holds_data(root) and (root / "pyproject.toml").is_file() else None


def home() -> Path:
    """The dir holding mptlab's data files (see the module docstring)."""
    env = os.environ.get("MPTLAB_HOME")
    if env:
        if not _holds_data(Path(env)):
            raise DataNotFound(
                f"MPTLAB_HOME={env} holds no mptlab data (experiments.yaml, kernel/build.sh)"
            )
        return Path(env)
    for candidate in (checkout(), PACKAGE / "_data"):
        if candidate is not None and _holds_data(candidate):
            return candidate
    raise DataNotFound(
        f"mptlab's data files (experiments.yaml, topologies/, kernel/) are neither in a checkout "
        f"around {PACKAGE} nor in {PACKAGE / '_data'}: set MPTLAB_HOME to a checkout of mptlab"
    )


def data(name: str) -> Path:
    """A data file or dir by its path in a checkout, e.g. ``topologies/profiles.yaml``."""
    return home() / name


def cache_dir() -> Path:
    """The build and content cache shared by all checkouts (``$MPTLAB_CACHE``,
    default ``~/.cache/mptlab``)."""
    return Path(os.environ.get("MPTLAB_CACHE", Path.home() / ".cache" / "mptlab"))


def results_dir() -> Path:
    """Where campaigns go unless told otherwise: ``./results``."""
    return Path("results")
