"""Where things live: the checkout, the cache, the kernel build."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """The build cache shared by all checkouts (``$MPTLAB_CACHE``, default ~/.cache/mptlab)."""
    return Path(os.environ.get("MPTLAB_CACHE", Path.home() / ".cache" / "mptlab"))


class KernelNotBuilt(RuntimeError):
    """The kernel (or its modules) for the current inputs has not been built yet."""


@dataclass(frozen=True)
class KernelBuild:
    """A built UML kernel and the modules under test built against it."""

    dir: Path
    modules_dir: Path

    @property
    def linux(self) -> Path:
        return self.dir / "linux"

    @property
    def build_info(self) -> Path:
        return self.dir / "build-info.json"

    def module(self, name: str) -> Path:
        """Path of the loadable module ``name`` (e.g. ``mptcp_blest``)."""
        path = self.modules_dir / f"{name}.ko"
        if not path.exists():
            available = sorted(p.stem for p in self.modules_dir.glob("*.ko"))
            raise FileNotFoundError(f"no module {name!r} in {self.modules_dir}; built: {available}")
        return path


def _build_sh(*args: str) -> str:
    proc = subprocess.run(
        [str(REPO_ROOT / "kernel" / "build.sh"), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode == 3:
        raise KernelNotBuilt(
            "the mptlab kernel for this checkout is not built: run `make kernel` "
            "(about 5 minutes the first time; later checkouts reuse the cache)"
        )
    if proc.returncode != 0:
        raise RuntimeError(f"kernel/build.sh {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def find_kernel() -> KernelBuild:
    """The kernel matching this checkout's patches, config and module sources.

    ``MPTLAB_KERNEL_DIR`` overrides the lookup (a dir holding ``linux`` and ``modules/``).
    """
    override = os.environ.get("MPTLAB_KERNEL_DIR")
    if override:
        kdir = Path(override)
        mods = sorted((kdir / "modules").glob("*/"))
        return KernelBuild(kdir, mods[-1] if mods else kdir / "modules")
    return KernelBuild(Path(_build_sh("--dir")), Path(_build_sh("--modules-dir")))
