"""Kernel modules and MPTCP scheduler selection, inside the guest."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
from pathlib import Path

SYSCTL_DIR = Path("/proc/sys/net/mptcp")


# finit_module(2): loading through the system call rather than insmod saves
# a process per module (~80 ms of a UML guest's boot each).
_FINIT_MODULE = {"x86_64": 313, "aarch64": 273}.get(platform.machine())


def insmod(path: Path, params: dict[str, object] | None = None) -> None:
    """Load a module file; parameters as ``name=value`` words."""
    words = [f"{k}={v}" for k, v in (params or {}).items()]
    if _FINIT_MODULE is None:
        proc = subprocess.run(["insmod", str(path), *words], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"insmod {path.name} failed: {proc.stderr.strip()}")
        return
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        rc = libc.syscall(_FINIT_MODULE, fd, " ".join(words).encode(), 0)
    finally:
        os.close(fd)
    if rc != 0:
        err = ctypes.get_errno()
        hint = " (a parameter name or value the module rejects? see the console log)" if (
            err == 22 and words) else ""  # fmt: skip
        raise RuntimeError(f"loading {path.name} failed: {os.strerror(err)}{hint}")


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
