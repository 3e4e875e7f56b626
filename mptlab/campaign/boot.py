"""Boot harness: run one program inside a User-Mode Linux guest.

The guest's root is the host's ``/`` mounted read-only over hostfs, so every
tool installed on the host runs inside it.  One host directory, the run dir,
is mounted read-write at a fixed guest path, ``GUEST_RUN_DIR`` (the guest
sees it there whatever its host path; ``entry`` inside the run dir is passed
as the guest sees it, and scripts should name the run dir
``$MPTLAB_RUN_DIR``).  The guest runs ``entry`` (any
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

Two clocks (``clock=``):

- ``real``: the guest's clock is the host's; a guest that waits for a host
  CPU sees its timers fire late, so results depend on the host's load.
- ``virtual``: UML's ``time-travel=inf-cpu``.  Guest time stands still
  while the guest computes and jumps ahead to the next timer when it is
  idle, so processing costs no guest time, whatever the load: results are
  deterministic.  Each guest is pinned to a host CPU of its own (``CpuPool``):
  every guest system call is a ptrace hand-off between the UML kernel
  process and the traced guest process, ~15 us on one CPU and ~64 us when
  they bounce between CPUs, and inf-cpu makes twice the hand-offs of real
  time; unpinned a virtual-time guest ran 1.5-2.7x slower than real time,
  pinned several times faster (docs/benchmarks.md, "Virtual time").
  ``timeout`` is then guest time, enforced inside the guest (init.sh runs
  the entry under ``timeout``); the host kills the guest only after
  ``VIRTUAL_WALL_FACTOR`` times as much wall time, the backstop for a guest
  whose time stopped (a busy loop never lets virtual time advance).
"""

from __future__ import annotations

import compileall
import contextlib
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import home, rundir
from ..guest import sampler
from ..rundir import (
    ATTEMPT_ENV,
    CLOCKS,
    CONSOLE_LOG,
    EXIT_CODE,
    GUEST_LOG,
    GUEST_TIMEOUT,
    Clock,
    RunDir,
    RunStatus,
)
from ..workloads.helpers import bgtraffic, native, spin
from .kernel import KernelBuild

# The kernel words of each clock.  inf-cpu: time advances only when the guest
# is idle ("basic" time-travel, which also lets CPU time pass, hung for 60 s
# on the 6.1 prototype).  One kernel build serves both clocks
# (CONFIG_UML_TIME_TRAVEL_SUPPORT=y); without these words it keeps real time.
# time-travel-start: the guest's wall clock starts at VIRTUAL_EPOCH at every
# boot.  By default it starts at the host's time, and the fraction of a
# second it starts at shifts everything the guest schedules by the wall clock
# (Python's time.time() in the agent, the workloads, D-ITG): the same run
# then diverged after a few hundred ms (a few us at first, then other
# losses and retransmissions).
VIRTUAL_EPOCH = 1_767_225_600  # 2026-01-01 00:00:00 UTC
CLOCK_ARGS: dict[Clock, list[str]] = {
    "real": [],
    "virtual": [
        "time-travel=inf-cpu",
        f"time-travel-start={VIRTUAL_EPOCH * 10**9}",
        "norandmaps",
    ],
}
# TCP's established-socket hash table is sized from guest RAM: 8192 buckets
# for 1 GiB.  Every sock_diag dump (the sampler's, 8 per 100 ms tick; the
# stall watchdog's) walks all of them, and in a UML guest that walk was most
# of a dump's cost: 0.58 ms per dump with 8192 buckets, 0.20 ms with 512
# (2000 dumps in a virtual-time guest, host CPU; perf: 84 % of the dumping
# guest's samples in inet_diag_dump_icsk).  A run holds tens of sockets,
# hundreds at most (background flows, web page loads): 512 buckets keep the
# chains short.  The bucket count changes no result (lookups, not timing).
SIZING_ARGS = ["thash_entries=512"]
# The guest's Python under virtual time: no hash randomisation, so that set
# and dict orders (hence what a thread does first) repeat from boot to boot.
CLOCK_ENV: dict[Clock, dict[str, str]] = {"real": {}, "virtual": {"PYTHONHASHSEED": "0"}}
# Host-side limit for a virtual-time guest: wall time = this x its guest-time
# limit (plus VIRTUAL_WALL_MARGIN_S).  A pinned inf-cpu guest alone on its CPU
# ran 3-4x faster than real time on the 6.1 prototype, a 10 s bulk run 2.1x
# faster on a loaded host here (docs/benchmarks.md, "Virtual time"); one that
# shares its CPU (more guests than CPUs, or other jobs on the host) runs
# slower in proportion, and an unpinned one was measured at 2.7x slower than
# real time.  The guest enforces its own limit in guest time; this is only
# the backstop for a guest whose time stands still (a busy loop), so it is
# generous: it must never cut a run that would have ended by itself.
VIRTUAL_WALL_FACTOR = 4.0
VIRTUAL_WALL_MARGIN_S = 60.0

PACKAGE = Path(__file__).resolve().parent.parent  # mptlab/
GUEST_INIT = PACKAGE / "guest" / "init.sh"
LAUNCH = Path(__file__).resolve().parent / "launch.py"
LAUNCH_SETUP_FAILED = 121  # launch.py's exit status when it could not set the guest up
CONFINE_ENV = "MPTLAB_CONFINE"  # "off": guests unconfined (docs/deployment.md)
# Where the guest sees its run dir, whatever its host path.  Under virtual time
# (inf-cpu) guest work is not free: every failed system call costs 1 us of guest
# time (arch/um/kernel/skas/syscall.c) and every clock read 256 ns
# (arch/um/kernel/time.c, timer_read), so the work init.sh does for the path
# (mkdir -p, one step per component) moved everything after it by a few us,
# and a run's results with it (docs/reproduction.md, "results root").  At a
# fixed guest path the guest does the same work for every results root.
GUEST_RUN_DIR = "/run/mptlab/rundir"
# The guest's end of a control channel (``boot(channel=...)``): UML's second
# console line, bound to two host pipes (``con1=fd:R,fd:W``).  No network
# device and no file: a pipe needs nothing the confinement forbids
# (launch.py passes the descriptors through its exec) and works under both
# clocks (input arrives as an interrupt, SIGIO, also while time travels).
CHANNEL_TTY = "/dev/tty1"


# The run dir's host path reaches the guest on the kernel command line, and
# from there the environment of every guest process.  Its length alone
# moved virtual-time runs: the same run (blest-3g-wlan minrtt_pr rep-005,
# same kernel, modules and seed) gave 4.756 Mbit/s under a results root
# of 4 components and 4.697 under one of 6 (2026-11-27), 1 run in 6.  So
# the path is padded with "/." to a fixed width: every results root shorter
# than that gives the guest the same number of bytes.
HOST_PATH_WIDTH = 512


def padded_host_path(run_dir: Path) -> str:
    """``run_dir`` padded with ``/.`` to ``HOST_PATH_WIDTH`` characters (to
    the next multiple of it for a longer path): the same file for the host."""
    text = str(run_dir).rstrip("/") or "/"
    width = -(-max(len(text), 1) // HOST_PATH_WIDTH) * HOST_PATH_WIDTH
    text += "/." * ((width - len(text)) // 2)
    return text + "/" * (width - len(text))


def guest_path(run_dir: Path, path: str) -> str:
    """``path`` as the guest sees it: under ``GUEST_RUN_DIR`` if it is in ``run_dir``."""
    p = Path(path)
    if p == run_dir or run_dir in p.parents:
        return str(GUEST_RUN_DIR / p.relative_to(run_dir))
    return path


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
    clock: Clock = "real"
    host_cpu: int | None = None  # the host CPU a virtual-time guest was pinned to
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


def hidden_host_dirs(extra: list[Path] | None = None) -> list[str]:
    """Host dirs a guest needs that lie under /tmp: the guest's init covers
    /tmp with a tmpfs (programs need a writable one), so it mounts each of
    these back from the host, read-only.  Without it a checkout or venv in
    /tmp left the guest without its Python ("exited with 127")."""
    wanted = {Path(sys.prefix), Path(sys.base_prefix), PACKAGE.parent, *(extra or [])}
    tmp = Path("/tmp")
    under = sorted({p.resolve() for p in wanted if tmp in p.resolve().parents})
    out: list[str] = []
    for path in under:  # sorted: a parent comes before what it holds
        if not any(Path(o) in path.parents for o in out):
            _check_safe("host dir under /tmp", str(path))
            out.append(str(path))
    return out


def check_clock(clock: str) -> Clock:
    if clock not in CLOCKS:
        raise ValueError(f"clock {clock!r}: use one of {', '.join(CLOCKS)}")
    return clock  # type: ignore[return-value]


def pinned_guests() -> dict[int, int]:
    """Guests pinned to one host CPU, of every process on this host (another
    ``mptlab run``, a test, a nightly), per CPU (see ``pinned_umids``)."""
    return {cpu: len(umids) for cpu, umids in pinned_umids().items()}


def pinned_umids() -> dict[int, set[str]]:
    """Per host CPU, the ``umid=`` of the UML guests pinned to it alone (a
    guest is dozens of host processes with its command line: counted once).
    Read from /proc: 9 ms with 2 guests running here."""
    found: dict[int, set[str]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if b"rootfstype=hostfs" not in args:
                continue
            cpus = os.sched_getaffinity(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        umid = next((a for a in args if a.startswith(b"umid=")), None)
        if umid is not None and len(cpus) == 1:
            found.setdefault(next(iter(cpus)), set()).add(umid[5:].decode(errors="replace"))
    return found


class CpuPool:
    """Host CPUs for virtual-time guests, one guest per CPU as long as there
    are CPUs: ``acquire()`` gives the CPU (of those this process may use,
    ``os.sched_getaffinity``) with the fewest guests on it, the lowest number
    first; ``release(cpu)`` gives it back.  With N guests on C CPUs each gets
    its own CPU while N <= C, then they double up round-robin.  Guests of
    other processes count when ``others`` is given (the pool of ``mptlab
    run`` counts every pinned guest on the host: two campaigns with one job
    each had both pinned their guest to CPU 0 while CPU 1 idled); a CPU's
    load is the larger of this process's count and the host's, since a guest
    of ours is in both once it started.  To keep guests off some CPUs, start
    mptlab under ``taskset``."""

    def __init__(
        self, cpus: set[int] | None = None, others: Callable[[], dict[int, int]] | None = None
    ):
        self.cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        self.users = dict.fromkeys(self.cpus, 0)
        self.others = others
        self.lock = threading.Lock()

    def acquire(self) -> int:
        with self.lock:
            host = self.others() if self.others else {}
            cpu = min(self.cpus, key=lambda c: (max(self.users[c], host.get(c, 0)), c))
            self.users[cpu] += 1
            return cpu

    def release(self, cpu: int) -> None:
        with self.lock:
            self.users[cpu] = max(0, self.users.get(cpu, 0) - 1)


CPUS = CpuPool(others=pinned_guests)


def pin_prefix(cpu: int) -> list[str]:
    """``taskset -c CPU setarch -R``: UML starts pinned, so every process and
    thread it creates (the guest processes' ptrace stubs, its helper threads)
    inherits the CPU from the start (a pin set after the start would race the
    forks); and without address-space randomisation: UML sizes the guest's
    memory from where the host put its heap, so MemTotal (and the tcp_mem
    the agent derives from it) differed by up to 5.6 MB from boot to boot of
    the same run."""
    taskset, setarch = shutil.which("taskset"), shutil.which("setarch")
    if taskset is None or setarch is None:
        raise FileNotFoundError(
            "clock: virtual pins each guest to a host CPU with `taskset` and turns off its "
            "address-space randomisation with `setarch` (Debian package util-linux), which "
            "are not on PATH"
        )
    return [taskset, "-c", str(cpu), setarch, "-R"]


def command_line(
    kernel: KernelBuild,
    run_dir: Path,
    entry: str,
    *,
    umid: str,
    uml_dir: Path,
    mem_mb: int = 256,
    env: dict[str, str] | None = None,
    clock: Clock = "real",
    rng_seed: int | None = None,
    host_ro: list[Path] | None = None,
    channel: tuple[int, int] | None = None,
) -> list[str]:
    """The UML command line for one guest (exposed for docs and debugging).
    ``rng_seed`` (virtual clock only): the guest kernel's randomness comes
    from it alone (kernel patch 0006), so that a run repeats exactly.
    ``host_ro``: more host dirs the guest reads (a workload module of the
    user's own): under /tmp they are mounted back (``hidden_host_dirs``).
    ``channel``: host file descriptors (read, write) that become the guest's
    second console, ``/dev/tty1`` (``CHANNEL_TTY``): the control channel of
    ``mptlab.campaign.control``."""
    args = [
        str(kernel.linux),
        f"mem={mem_mb}M",
        "rootfstype=hostfs",
        "rootflags=/",
        "ro",
        f"init={GUEST_INIT}",
        "quiet",
        "con=null",
        "con0=null,fd:1",
        *([f"con1=fd:{channel[0]},fd:{channel[1]}"] if channel is not None else []),
        f"umid={umid}",
        f"uml_dir={uml_dir}",
        *SIZING_ARGS,
        *CLOCK_ARGS[check_clock(clock)],
        *([f"det_rng_seed={rng_seed}"] if clock == "virtual" and rng_seed is not None else []),
        f"MPTLAB_RUN_DIR={GUEST_RUN_DIR}",
        f"MPTLAB_HOST_RUN_DIR={padded_host_path(run_dir)}",
        f"MPTLAB_ENTRY={guest_path(run_dir, entry)}",
        f"MPTLAB_CLOCK={clock}",
    ]
    hidden = hidden_host_dirs([kernel.dir, kernel.modules_dir, *(host_ro or [])])
    if hidden:
        args.append(f"MPTLAB_HOST_RO={':'.join(hidden)}")
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
    """Host CPU use of a process tree.

    The CPU time is exact: when the guest's top process has exited, ``reap``
    takes its ``wait4`` resource usage, which holds its own CPU and that of
    every descendant it waited for (UML waits for each process of its guest).
    ``sample()`` walks the tree through the kernel's scheduler statistics
    (``/proc/PID/task/TID/schedstat``: time on a CPU, time runnable but
    waiting for one) and adds what every task gained since the last sample.
    It gives the wait time, and a floor for the CPU time of a tree whose
    processes are killed rather than waited for (a guest that timed out).

    Sampling alone lost what tasks gained after the last sample: once per
    second, a headline run measured 3.5-3.8 s against 4.0-4.2 s by wait4, and
    a run shorter than a second measured 0 (every 10 ms: 3.8-3.9 s).  The
    wait time stays sampled, so for a run of a few seconds it is a lower
    bound.  A guest alone on an idle host hardly waits at all; the wait is
    the direct measure of a guest starved by its neighbours."""

    def __init__(self, pid: int):
        self.pid = pid
        self.last: dict[int, tuple[int, int]] = {}
        self.sampled_ns = 0
        self.wait_ns = 0
        self.reaped_ns: int | None = None  # wait4's user + system time of the tree

    @property
    def cpu_ns(self) -> int:
        if self.reaped_ns is None:
            return self.sampled_ns
        return max(self.reaped_ns, self.sampled_ns)

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
            self.sampled_ns += max(0, run_ns - prev_run)
            self.wait_ns += max(0, wait_ns - prev_wait)
            self.last[tid] = (run_ns, wait_ns)

    def reap(self, proc: subprocess.Popen) -> None:
        """Reap ``proc`` (exited: a zombie) with its resource usage; a last
        sample first, while the zombie's statistics are still readable."""
        self.sample()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except ChildProcessError:  # reaped elsewhere: the samples are all there is
            return
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.reaped_ns = round((usage.ru_utime + usage.ru_stime) * 1e9)


def wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait at most ``timeout`` s for ``proc`` to exit, without reaping it
    (``TreeCPU.reap`` does, to keep its resource usage); True if it exited."""
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:  # no pidfd (Linux < 5.3): poll
        end = time.monotonic() + timeout
        while True:
            try:
                if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    return True
            except ChildProcessError:
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(fd)


CPU_SAMPLE_S = 1.0


def wall_limit(timeout: float, clock: Clock) -> float:
    """The host's limit (wall seconds) for a guest whose own limit is ``timeout``."""
    if clock == "virtual":
        return timeout * VIRTUAL_WALL_FACTOR + VIRTUAL_WALL_MARGIN_S
    return timeout


def boot(
    kernel: KernelBuild,
    run_dir: Path,
    entry: str | Path,
    *,
    timeout: float | None,
    mem_mb: int = 256,
    env: dict[str, str] | None = None,
    clock: Clock = "real",
    cancel: threading.Event | None = None,
    rng_seed: int | None = None,
    host_ro: list[Path] | None = None,
    channel: tuple[int, int] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> BootResult:
    """Boot a guest that runs ``entry`` with ``run_dir`` writable; wait at most
    ``timeout`` s (real clock), or let it run ``timeout`` s of guest time
    (virtual clock: within ``wall_limit(timeout)`` s of wall time); None: no
    limit (an interactive guest: ``cancel`` ends it).  ``cancel``
    set: the guest is killed within ``CPU_SAMPLE_S`` and ``Interrupted`` raised.
    ``host_ro``: host dirs the guest must see (``command_line``).
    ``channel``: see ``command_line``; the descriptors are passed to the guest.
    ``on_start``: called with the UML kernel's host PID once it is started."""
    run_dir = Path(run_dir).resolve()
    entry = str(entry)
    clock = check_clock(clock)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run dir {run_dir} does not exist")
    _check_safe("run dir", str(run_dir))
    _check_safe("entry", entry)
    if not kernel.linux.exists():
        raise FileNotFoundError(f"kernel {kernel.linux} is missing: run `make kernel`")
    compile_guest_code()
    for stale in (EXIT_CODE, EXIT_CODE + ".tmp", GUEST_TIMEOUT):
        (run_dir / stale).unlink(missing_ok=True)

    if cancel is not None and cancel.is_set():
        raise Interrupted("not started: stopping")
    guest_env = {**CLOCK_ENV[clock], **(env or {})}
    host_cpu = None
    prefix: list[str] = []
    # the background replayer (workloads.helpers.bgtraffic), under both clocks;
    # without it (no C compiler) only generator: d-itg background entries run
    with contextlib.suppress(RuntimeError):
        guest_env[bgtraffic.ENV] = str(bgtraffic.build(home.cache_dir()))
    # iperf3's preload (workloads.helpers.spin): under virtual time against
    # select() spins and repeated clock reads, under both for a receive
    # low-water mark; without it (no C compiler) runs cost more host CPU, and
    # a bulk workload with rcvlowat fails saying why
    with contextlib.suppress(RuntimeError):
        guest_env[spin.ENV] = str(spin.build(home.cache_dir()))
    # the sampler as a program (guest/sampler.c); without it (no C compiler,
    # or env gives an empty path) the guest samples in a thread of its agent
    if sampler.ENV not in guest_env:
        with contextlib.suppress(RuntimeError):
            guest_env[sampler.ENV] = str(native.build(sampler.SOURCE, home.cache_dir()))
    if clock == "virtual":
        if timeout is not None:
            guest_env["MPTLAB_GUEST_TIMEOUT"] = f"{timeout:.3f}"
        guest_env[spin.VIRTUAL_ENV] = "1"
        host_cpu = CPUS.acquire()
        try:
            prefix = pin_prefix(host_cpu)
        except FileNotFoundError:
            CPUS.release(host_cpu)
            raise
    limit = wall_limit(timeout, clock) if timeout is not None else math.inf
    attempt = uuid.uuid4().hex[:12]
    umid = "mptlab-" + attempt
    confine = confined()
    # UML's umid dir and (confined) memory file: a private tmpfs launch.py
    # mounts on this dir, which stays empty on the host.
    uml_dir = Path(tempfile.mkdtemp(prefix="mptlab-uml-"))
    args = prefix + command_line(
        kernel,
        run_dir,
        entry,
        umid=umid,
        uml_dir=uml_dir,
        mem_mb=mem_mb,
        env={**guest_env, ATTEMPT_ENV: attempt},
        clock=clock,
        rng_seed=rng_seed,
        host_ro=host_ro,
        channel=channel,
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
                pass_fds=channel or (),
            )
            tree = TreeCPU(proc.pid)
            if on_start is not None:
                on_start(proc.pid)
            try:
                deadline = started + limit
                while True:
                    if wait_exit(proc, max(0.0, min(CPU_SAMPLE_S, deadline - time.monotonic()))):
                        tree.reap(proc)
                        break
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
        if host_cpu is not None:
            CPUS.release(host_cpu)
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
            clock=clock,
            host_cpu=host_cpu,
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
        if clock == "virtual":
            return ended(
                rundir.TIMEOUT,
                exit_code,
                f"killed after {limit:g} s of wall time (its limit: {timeout:g} s of guest "
                "time): guest time stood still (a busy loop) or the guest had too little "
                "host CPU",
            )
        return ended(rundir.TIMEOUT, exit_code, f"killed after {timeout:g} s")
    if (run_dir / GUEST_TIMEOUT).exists():
        return ended(
            rundir.TIMEOUT, exit_code, f"stopped after {timeout:g} s of guest time (virtual clock)"
        )
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
    clock: Clock = "real",
    cancel: threading.Event | None = None,
    rng_seed: int | None = None,
) -> BootResult:
    """Write ``script`` (a /bin/sh script) into the run dir and boot a guest running it."""
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = RunDir(run_dir).write_entry(script)
    return boot(
        kernel,
        run_dir,
        entry,
        timeout=timeout,
        mem_mb=mem_mb,
        env=env,
        clock=clock,
        cancel=cancel,
        rng_seed=rng_seed,
    )
