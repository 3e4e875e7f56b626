"""The kernel a campaign boots: the UML build for this checkout's inputs.

``kernel/build.sh`` (a data file, ``mptlab.home``) computes the cache key
from the kernel's inputs and prints where the build is; ``make kernel``
builds it.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import home


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

    def identity(self) -> dict[str, str]:
        """What identifies the build across machines: its cache keys."""
        return {"kernel": self.dir.name, "modules": self.modules_dir.name}


def _build_sh(*args: str) -> str:
    script = home.data("kernel/build.sh")
    proc = subprocess.run(["bash", str(script), *args], capture_output=True, text=True, check=False)
    if proc.returncode == 3:
        raise KernelNotBuilt(
            "the mptlab kernel for this checkout is not built: run `make kernel` "
            "(about 10 minutes the first time; later checkouts reuse the cache)"
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
