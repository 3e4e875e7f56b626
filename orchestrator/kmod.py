"""Kernel modules and MPTCP scheduler selection, inside the guest."""

from __future__ import annotations

import subprocess
from pathlib import Path

SYSCTL_DIR = Path("/proc/sys/net/mptcp")


def insmod(path: Path, params: dict[str, object] | None = None) -> None:
    """Load a module file; parameters as ``name=value`` words."""
    args = ["insmod", str(path)] + [f"{k}={v}" for k, v in (params or {}).items()]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"insmod {path.name} failed: {proc.stderr.strip()}")


def rmmod(name: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rmmod", name], capture_output=True, text=True, check=False)


def load_schedulers(modules_dir: Path) -> list[str]:
    """Load every ``mptcp_*.ko`` in ``modules_dir``; return the module names loaded."""
    loaded = []
    for ko in sorted(Path(modules_dir).glob("mptcp_*.ko")):
        insmod(ko)
        loaded.append(ko.stem)
    return loaded


def available_schedulers() -> list[str]:
    return (SYSCTL_DIR / "available_schedulers").read_text().split()


def current_scheduler() -> str:
    return (SYSCTL_DIR / "scheduler").read_text().strip()


def set_scheduler(name: str) -> None:
    """Select the scheduler for new sockets in the current network namespace.

    Raises FileNotFoundError (ENOENT) for a name no module registered.
    """
    (SYSCTL_DIR / "scheduler").write_text(name)
