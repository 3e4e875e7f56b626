"""Boot harness: run one program inside a User-Mode Linux guest.

The guest's root is the host's ``/`` mounted read-only over hostfs, so every
tool installed on the host runs inside it.  One host directory, the run dir,
is mounted read-write at the same path.  The guest runs ``entry`` (any
executable the guest can see, usually a script in the run dir), writes its
output to ``guest.log`` and its exit status to ``guest-exit-code`` in the run
dir, and powers off.  The harness captures the kernel console in
``console.log``, kills the guest when ``timeout`` expires (or at once when
``cancel`` is set: ``Interrupted``), and classifies what happened; it never
waits forever and never leaves a UML process behind.

Every guest is started through ``launch.py``: it dies with the thread that
started it (even on ``kill -9`` of the campaign) and, confined, can write
the host only in its run dir (docs/deployment.md, "What a guest can
write").  ``MPTLAB_CONFINE=off`` runs guests unconfined, where the machine
allows no namespaces (a container without privileges: the container is
then the boundary).  Each boot is an *attempt* with an id of its own
(``BootResult.attempt``), passed to the guest (``rundir.ATTEMPT_ENV``),
which writes it into ``result.json``.

    result = boot(find_kernel(), Path("/var/tmp/run1"), "/var/tmp/run1/go.sh", timeout=60)
    assert result.ok, result.reason
"""

from __future__ import annotations

import compileall
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .. import rundir
from ..rundir import ATTEMPT_ENV, CONSOLE_LOG, EXIT_CODE, GUEST_LOG, RunDir, RunStatus
from .kernel import KernelBuild

PACKAGE = Path(__file__).resolve().parent.parent  # mptlab/
GUEST_INIT = PACKAGE / "guest" / "init.sh"
LAUNCH = Path(__file__).resolve().parent / "launch.py"
LAUNCH_SETUP_FAILED = 121  # launch.py's exit status when it could not set the guest up
CONFINE_ENV = "MPTLAB_CONFINE"  # "off": guests unconfined (docs/deployment.md)


class Interrupted(Exception):
    """The guest was killed because the campaign is stopping (``cancel`` set)."""


class ConfinementError(RuntimeError):
    """This machine cannot confine guests (no mount/user namespaces)."""


def confined() -> bool:
    """Whether guests are confined: unless ``MPTLAB_CONFINE=off`` (or 0, no, false)."""
    return os.environ.get(CONFINE_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


_CONFINE_CHECKED: list[bool] = []


def check_confinement() -> None:
    """Raise ``ConfinementError`` (saying why and what to do) when guests are
    to be confined and this machine cannot: once per process, ~25 ms."""
    if not confined() or _CONFINE_CHECKED:
        return
    scratch = Path(tempfile.mkdtemp(prefix="mptlab-probe-"))
    try:
        p = subprocess.run(
            [*_launcher(scratch, scratch, confine=True), "/bin/true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if p.returncode != 0:
        raise ConfinementError(
            f"{p.stderr.strip() or f'launch.py exited {p.returncode}'}.  mptlab confines each "
            "guest in mount and user namespaces of its own so that it can write only its run "
            "dir; this machine refuses them (e.g. a container without privileges, or "
            "user.max_user_namespaces = 0).  Set MPTLAB_CONFINE=off to run guests unconfined "
            "where something else is the boundary (docs/deployment.md)."
        )
    _CONFINE_CHECKED.append(True)


def _launcher(run_dir: Path, scratch: Path, *, confine: bool) -> list[str]:
    """The argv prefix that starts ``launch.py`` (the UML argv follows)."""
    cmd = [sys.executable, "-I", "-S", str(LAUNCH), "--parent", str(os.getpid())]
    cmd += ["--run-dir", str(run_dir), "--scratch", str(scratch)]
    return [*cmd, *([] if confine else ["--no-confine"]), "--"]


# Paths and values travel on the kernel command line: keep them to a safe alphabet.
_SAFE = re.compile(r"^[A-Za-z0-9_./:,=+@%-]+$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclass(frozen=True)
class BootResult:
    """What happened to one guest.

    status: ``ok`` (entry exited 0), ``failed`` (entry exited non-zero),
    ``timeout`` (killed after ``timeout`` s), ``panic`` (kernel panic) or
    ``crashed`` (the guest died without reporting the entry's status).
    """

    status: RunStatus
    exit_code: int | None
    duration_s: float
    reason: str
    run_dir: Path
    cpu_s: float | None = None  # host CPU the guest's processes used (see TreeCPU)
    cpu_wait_s: float | None = None  # time they were ready to run but waited for a host CPU
    attempt: str = ""  # this boot's id, also in the guest's result.json
    confined: bool = True  # started confined (launch.py)

    @property
    def ok(self) -> bool:
        return self.status == rundir.OK

    @property
    def console_log(self) -> Path:
        return self.run_dir / CONSOLE_LOG

    @property
    def guest_log(self) -> Path:
        return self.run_dir / GUEST_LOG


def _check_safe(what: str, value: str) -> None:
    if not _SAFE.match(value):
        raise ValueError(
            f"{what} {value!r} cannot be passed to the guest: use only letters, digits "
            "and _ . / : , = + @ % - (no spaces)"
        )


def command_line(
    kernel: KernelBuild,
    run_dir: Path,
    entry: str,
    *,
    umid: str,
    uml_dir: Path,
    mem_mb: int = 256,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The UML command line for one guest (exposed for docs and debugging)."""
    args = [
        str(kernel.linux),
        f"mem={mem_mb}M",
        "rootfstype=hostfs",
        "rootflags=/",
        "ro",
        f"init={GUEST_INIT}",
        "quiet",
        "con=null",
        "con0=fd:0,fd:1",
        f"umid={umid}",
        f"uml_dir={uml_dir}",
        f"MPTLAB_RUN_DIR={run_dir}",
        f"MPTLAB_ENTRY={entry}",
    ]
    for key, value in (env or {}).items():
        if not _ENV_NAME.match(key):
            raise ValueError(f"guest environment name {key!r} must match [A-Z_][A-Z0-9_]*")
        _check_safe(f"guest environment value for {key}", value)
        args.append(f"{key}={value}")
    return args


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL is not ignorable
        proc.wait(timeout=10)


def _panic_line(console: Path) -> str | None:
    try:
        text = console.read_text(errors="replace")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        if "Kernel panic" in line:
            return line.split("]", 1)[-1].strip()
    return None


_COMPILED: set[Path] = set()


def compile_guest_code() -> None:
    """Write bytecode for mptlab's own package before a guest imports it: the
    guest sees it read-only and would compile it at every boot (and
    PYTHONDONTWRITEBYTECODE, set on some machines, stops the host doing it)."""
    if PACKAGE not in _COMPILED:
        compileall.compile_dir(PACKAGE, quiet=1)
        _COMPILED.add(PACKAGE)


class TreeCPU:
    """Host CPU use of a process tree from the kernel's scheduler statistics
    (``/proc/PID/task/TID/schedstat``: time on a CPU, time runnable but
    waiting for one).  ``sample()`` walks the tree and adds what every task
    gained since the last sample; tasks that exit between samples lose at most
    one period.  The wait time is the direct measure of a guest starved by
    its neighbours: a guest alone on an idle host hardly waits at all."""

    def __init__(self, pid: int):
        self.pid = pid
        self.last: dict[int, tuple[int, int]] = {}
        self.cpu_ns = 0
        self.wait_ns = 0

    def _tasks(self, pid: int, seen: set[int]) -> None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            seen.add(int(tid))
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    children = f.read().split()
            except OSError:
                continue
            for child in children:
                if int(child) not in seen:
                    self._tasks(int(child), seen)

    def sample(self) -> None:
        seen: set[int] = set()
        self._tasks(self.pid, seen)
        for tid in seen:
            try:
                with open(f"/proc/{tid}/schedstat") as f:
                    run_ns, wait_ns = (int(v) for v in f.read().split()[:2])
            except (OSError, ValueError):
                continue
            prev_run, prev_wait = self.last.get(tid, (0, 0))
            self.cpu_ns += max(0, run_ns - prev_run)
            self.wait_ns += max(0, wait_ns - prev_wait)
            self.last[tid] = (run_ns, wait_ns)


CPU_SAMPLE_S = 1.0


def boot(
    kernel: KernelBuild,
    run_dir: Path,
    entry: str | Path,
    *,
    timeout: float,
    mem_mb: int = 256,
    env: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> BootResult:
    """Boot a guest that runs ``entry`` with ``run_dir`` writable; wait at most
    ``timeout`` s.  ``cancel`` set: the guest is killed within ``CPU_SAMPLE_S``
    and ``Interrupted`` raised."""
    run_dir = Path(run_dir).resolve()
    entry = str(entry)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run dir {run_dir} does not exist")
    _check_safe("run dir", str(run_dir))
    _check_safe("entry", entry)
    if not kernel.linux.exists():
        raise FileNotFoundError(f"kernel {kernel.linux} is missing: run `make kernel`")
    compile_guest_code()
    for stale in (EXIT_CODE, EXIT_CODE + ".tmp"):
        (run_dir / stale).unlink(missing_ok=True)

    if cancel is not None and cancel.is_set():
        raise Interrupted("not started: stopping")
    attempt = uuid.uuid4().hex[:12]
    umid = "mptlab-" + attempt
    confine = confined()
    # UML's umid dir and (confined) memory file: a private tmpfs launch.py
    # mounts on this dir, which stays empty on the host.
    uml_dir = Path(tempfile.mkdtemp(prefix="mptlab-uml-"))
    args = command_line(
        kernel,
        run_dir,
        entry,
        umid=umid,
        uml_dir=uml_dir,
        mem_mb=mem_mb,
        env={**(env or {}), ATTEMPT_ENV: attempt},
    )
    console = run_dir / CONSOLE_LOG
    started = time.monotonic()
    timed_out = cancelled = False
    try:
        with open(console, "wb") as out:
            proc = subprocess.Popen(
                [*_launcher(run_dir, uml_dir, confine=confine), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: killed as one, not by the terminal's ^C
                cwd=run_dir,
            )
            tree = TreeCPU(proc.pid)
            try:
                deadline = started + timeout
                while True:
                    try:
                        proc.wait(timeout=max(0.0, min(CPU_SAMPLE_S, deadline - time.monotonic())))
                        break
                    except subprocess.TimeoutExpired:
                        # checked once per CPU_SAMPLE_S: Ctrl-C of a campaign with two
                        # guests running measured 1.3 s to exit, UML gone with it
                        if cancel is not None and cancel.is_set():
                            cancelled = True
                            break
                        if time.monotonic() >= deadline:
                            timed_out = True
                            break
                        tree.sample()
            finally:
                # UML leaves helper processes in its group; always reap them.
                _kill_group(proc)
    finally:
        shutil.rmtree(uml_dir, ignore_errors=True)
    if cancelled:
        raise Interrupted(f"guest killed after {time.monotonic() - started:.1f} s: stopping")
    duration = time.monotonic() - started

    def ended(status: RunStatus, exit_code: int | None, reason: str) -> BootResult:
        return BootResult(
            status,
            exit_code,
            duration,
            reason,
            run_dir,
            cpu_s=tree.cpu_ns / 1e9,
            cpu_wait_s=tree.wait_ns / 1e9,
            attempt=attempt,
            confined=confine,
        )

    code_file = run_dir / EXIT_CODE
    exit_code = None
    if code_file.exists():
        try:
            exit_code = int(code_file.read_text().strip())
        except ValueError:
            exit_code = None
    if timed_out:
        return ended(rundir.TIMEOUT, exit_code, f"killed after {timeout:g} s")
    if exit_code is not None:
        if exit_code == 0:
            return ended(rundir.OK, 0, "")
        return ended(rundir.FAILED, exit_code, f"guest program exited with {exit_code}")
    panic = _panic_line(console)
    if panic:
        return ended(rundir.PANIC, None, panic)
    if proc.returncode == LAUNCH_SETUP_FAILED:
        return ended(
            rundir.CRASHED, None, _launch_error(console) or "the guest could not be started"
        )
    return ended(
        rundir.CRASHED,
        None,
        f"guest stopped (UML exit {proc.returncode}) without reporting a status; see {console}",
    )


def _launch_error(console: Path) -> str | None:
    try:
        text = console.read_text(errors="replace")
    except FileNotFoundError:
        return None
    return next((line for line in text.splitlines() if line.startswith("mptlab-launch:")), None)


def run_script(
    kernel: KernelBuild,
    run_dir: Path,
    script: str,
    *,
    timeout: float,
    mem_mb: int = 256,
    env: dict[str, str] | None = None,
    cancel: threading.Event | None = None,
) -> BootResult:
    """Write ``script`` (a /bin/sh script) into the run dir and boot a guest running it."""
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = RunDir(run_dir).write_entry(script)
    return boot(kernel, run_dir, entry, timeout=timeout, mem_mb=mem_mb, env=env, cancel=cancel)
