"""The scheduler modules under test, loaded inside the guest."""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
from pathlib import Path

SYSCTL_DIR = Path("/proc/sys/net/mptcp")
ENV = "MPTLAB_MODULES_DIR"  # where the host tells the guest the built modules are


# finit_module(2): loading through the system call rather than insmod saves
# a process per module (~80 ms of a UML guest's boot each).
_FINIT_MODULE = {"x86_64": 313, "aarch64": 273}.get(platform.machine())


# controls that live in another control's module file
CC_MODULE = {"olia_sbd": "olia"}


def module_of(name: str | None) -> str:
    """The module a scheduler or congestion control is in: ``mptcp_<name>``,
    or its host module's (olia_sbd is in mptcp_olia)."""
    return f"mptcp_{CC_MODULE.get(name or '', name)}"


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
        hint = ""
        if err == 22 and words:
            hint = " (a parameter name or value the module rejects? see the console log)"
        raise RuntimeError(f"loading {path.name} failed: {os.strerror(err)}{hint}")


def load_schedulers(
    modules_dir: Path | str | None = None,
    scheduler: str | None = None,
    params: dict[str, object] | None = None,
    cc: str | None = None,
    cc_params: dict[str, object] | None = None,
) -> dict[str, str]:
    """Load every ``mptcp_*.ko`` of ``modules_dir`` (default: ``$MPTLAB_MODULES_DIR``),
    ``params`` for the module of ``scheduler``, ``cc_params`` for that of the
    congestion control ``cc``; {module file: sha256}.
    RuntimeError if ``scheduler`` is not registered afterwards."""
    modules_dir = Path(modules_dir or os.environ[ENV])
    hashes = {}
    given = {f"mptcp_{scheduler}": params, module_of(cc): cc_params}
    for ko in sorted(modules_dir.glob("mptcp_*.ko")):
        insmod(ko, given.get(ko.stem))
        hashes[ko.name] = hashlib.sha256(ko.read_bytes()).hexdigest()
    if scheduler is not None and scheduler not in available_schedulers():
        raise RuntimeError(f"scheduler {scheduler!r} not available after loading {sorted(hashes)}")
    return hashes


def read_params(module: str, names) -> dict[str, str]:
    """The values the kernel holds for a loaded module's parameters."""
    base = Path("/sys/module") / module / "parameters"
    return {n: (base / n).read_text().strip() for n in names}


ALLOWED_CC = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


def allow_congestion_control(name: str) -> None:
    """Let namespaces other than the initial one use ``name`` as their default.

    Linux lets a network namespace default only to a control marked
    non-restricted (tcp_set_default_congestion_control(): EPERM otherwise);
    reno, cubic, bbr and mptlab's modules are; the built-in vegas, westwood,
    htcp and others are not until the initial namespace lists them in
    tcp_allowed_congestion_control, which marks them so (measured: a run
    with congestion_control vegas failed with EPERM without this)."""
    allowed = ALLOWED_CC.read_text().split()
    if name not in allowed:
        ALLOWED_CC.write_text(" ".join([*allowed, name]))


def available_schedulers() -> list[str]:
    """``net.mptcp.available_schedulers``: the schedulers registered now."""
    return (SYSCTL_DIR / "available_schedulers").read_text().split()
