"""The run dir: the one contract between the host, the guest and the analysis.

A campaign dir (``results/<experiment>/`` by default) holds::

    campaign.json                 what was asked: runs, order, seed, provenance
    campaign.lock                 flock()ed by the invocation running (its PID inside)
    runs/<variant>/rep-NNN/       one run dir per run (self-describing):
        spec.json                 the fully expanded run (``RunSpec``), by the host
        guest-entry.sh            what the guest runs, by the host
        console.log               the kernel console, by the boot harness
        guest.log guest-exit-code the entry's output and exit status, by the guest's init
        guest-timeout             (virtual clock) the entry hit its guest-time limit, by init
        agent.log                 the guest agent's log
        guest-provenance.json     kernel, module hashes, settings applied, by the agent
        result.json               what the guest measured, by the agent
        run.json                  the outcome, by the host, last: a run is finished iff it exists
        traces/                   samplers, kernel tracepoints, workload traces
    runs/<variant>/rep-NNN.interrupted-K/   left by an interrupted invocation
    runs/<variant>/rep-NNN.failed-K/        kept when a failed run was run again
    runs/<variant>/rep-NNN.starved-K/       kept when a starved run was run again

Everything that names one of these files, says what a run's status is,
sets a run dir aside or reads one back lives here; the writers (campaign
runner, boot harness, guest agent) and the readers (analysis) use these
names, never their own.  Like Flent's ``ResultSet``, a run dir is an object
(``RunDir``) that knows its files and the format they were written in.

Only the standard library is imported: the guest imports this module.

Format
------
``FORMAT`` is written into ``run.json``, ``result.json`` and
``campaign.json`` as ``"format"``.  Readers accept every format so far:

- **1** (mptlab as one package): ``format`` present; the plan's link shapes
  in ``spec.json`` use the YAML's field names (``rate``, ``delay``,
  ``jitter``, ``loss``); ``config.background`` holds the entries with their
  preset's values filled in.
- **0** (earlier run dirs, no ``format`` key): plan shapes named
  ``rate_mbit``, ``delay_ms``, ``jitter_ms``, ``loss_pct``; background
  entries as written in the YAML.  Nothing the analysis reads differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import typing
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal

FORMAT: Final = 1

# ---------------------------------------------------------------- names
CAMPAIGN: Final = "campaign.json"
LOCK: Final = "campaign.lock"  # flock()ed by the invocation using the campaign dir; holds its PID
RUNS: Final = "runs"
SPEC: Final = "spec.json"
ENTRY: Final = "guest-entry.sh"
CONSOLE_LOG: Final = "console.log"
GUEST_LOG: Final = "guest.log"  # written by guest/init.sh
EXIT_CODE: Final = "guest-exit-code"  # written by guest/init.sh
GUEST_TIMEOUT: Final = "guest-timeout"  # init.sh: the entry hit its guest-time limit
AGENT_LOG: Final = "agent.log"
PROVENANCE: Final = "guest-provenance.json"
RESULT: Final = "result.json"
RUN: Final = "run.json"
TRACES: Final = "traces"
# the agent's own traces (workloads name theirs: docs/workloads.md)
OFO_EVENTS: Final = "ofo-events.csv"
KTRACE: Final = "ktrace.txt"
FEC_RATIO_EVENTS: Final = "fec-ratio.csv"  # kernel.fec: the tcp_fec_ratio tracepoint (docs/fec.md)
# kernel.sbd: shared-bottleneck detection's observations and decisions (mptlab.guest.sbdu)
SBD_OBSERVATIONS: Final = "sbd-observations.csv"
SBD_DECISIONS: Final = "sbd-decisions.csv"
SBD_SCORES: Final = "sbd-scores.csv"  # the main connection's decisions judged against the truth
SBD_SCORE_COLUMNS: Final = "t,decision,shared,right,bottlenecked,subflows"
STALL_SNAPSHOT: Final = "stall-snapshot.json"
# The guest's environment variable holding its boot's attempt id; the agent
# writes it into result.json and guest-provenance.json, the host into run.json.
ATTEMPT_ENV: Final = "MPTLAB_ATTEMPT"
# The guest's environment variable naming the host's content cache
# (``<cache>/content``), where a run's ``content_key`` is resolved.
CONTENT_ENV: Final = "MPTLAB_CONTENT"


def content_key(workload: dict) -> str:
    """The key of the content a run's workload needs made on the host
    (``spec.json`` ``content_key``): ``<type>-<16 hex digits>``, a hash of
    the workload's resolved fields (``config.workload``), so that runs with
    the same workload share it and any machine that prepares it files it
    under the same name.  Computed when the catalog expands the run: the
    spec is final from then on, wherever the content ends up."""
    text = json.dumps(workload, sort_keys=True, separators=(",", ":"))
    return f"{workload['type']}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def content_manifest(content_dir: Path, key: str) -> Path:
    """Where the host files what a workload's ``prepare()`` returned for
    ``key`` (JSON: the content's paths and sizes on that machine):
    ``<cache>/content/prepared/<key>.json``."""
    return content_dir / "prepared" / f"{key}.json"


def sampler_trace(host: str, kind: str) -> str:
    """``client-subflows.csv``, ``server-mptcp.csv``: the sampler's files."""
    return f"{host}-{kind}.csv"


# --------------------------------------------------------------- clocks
Clock = Literal["real", "virtual"]
"""The guest's clock (``spec.json`` ``config.clock``, ``run.json`` ``clock``):
``real``, the host's; ``virtual``, UML time-travel (inf-cpu), where guest
time advances only while the guest is idle (``mptlab.campaign.boot``)."""
CLOCKS: Final[tuple[Clock, ...]] = typing.get_args(Clock)


def kernel_token(value) -> str | None:
    """An MPTCP token of result.json's kernel counters as 8 hex digits.

    The tracepoints print tokens as ``%08x``; run dirs written before the
    parser kept them as text hold an all-decimal-digit token (2.3 % of them)
    as the int of those digits, which this restores.
    """
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, str):
        return value.lower()
    return f"{int(value):08d}"


def clock_of(config: dict) -> Clock:
    """A run's clock from its ``spec.json`` config (``real`` before clocks existed)."""
    return config.get("clock", "real")


# A guest whose processes spent more than this share of the run ready to run
# but waiting for a host CPU (scheduler statistics, mptlab.campaign.boot.TreeCPU)
# was starved by its neighbours: its timing, hence its results, may be off.
# Alone a guest waits ~3 %; bulk goodput held within 1 % up to ~23 % and lost
# 3-4 % at ~34 % (docs/benchmarks.md, campaign throughput); delay metrics
# feel waiting sooner, hence a margin.  Only for real time: a virtual-time
# guest's results do not depend on when it gets a CPU (clock: virtual).  One
# rule for the runner (back-off, warnings) and the analysis (report, reproduce).
STARVED_WAIT_SHARE = 0.10


def is_starved(cpu_wait_share: float | None, clock: str | None) -> bool:
    """``run.json``'s wait share says the run's results may be off (real time only)."""
    return (
        clock != "virtual"
        and cpu_wait_share is not None
        and cpu_wait_share == cpu_wait_share  # not NaN (a table's missing value)
        and cpu_wait_share > STARVED_WAIT_SHARE
    )


# ------------------------------------------------------------- statuses
RunStatus = Literal["ok", "failed", "stalled", "timeout", "panic", "crashed"]
"""``run.json`` ``status``: how a run ended (written by the host).

``ok``; ``failed``: the guest program failed or reported an error;
``stalled``: the stall watchdog saw the workload's data level frozen with
data outstanding for ``stall_timeout`` and ended the run; ``timeout``:
killed after ``timeout_s``; ``panic``: kernel panic; ``crashed``: the guest
died without a status, or a host-side error.  Everything but ``ok`` is a
run without a result, counted and listed as such (``mptlab run``,
``mptlab stats``, the report).  A guest alone ends ``ok``, ``failed``,
``timeout``, ``panic`` or ``crashed`` (``BootResult.status``)."""
ResultStatus = Literal["ok", "error", "stalled"]
"""``result.json`` ``status``: what the guest saw (``error`` with ``error``
and ``traceback``; ``stalled`` with ``reason`` and ``stall``)."""
SetAside = Literal["interrupted", "failed", "starved"]
Attempt = Literal["current", "incomplete", "superseded", "interrupted"]
"""What a run dir is to its run: ``current`` (``rep-NNN`` with a run.json),
``incomplete`` (``rep-NNN`` without: still running, or its invocation was
killed), ``superseded`` (``.failed-K``/``.starved-K``: an attempt that was
run again), ``interrupted`` (``.interrupted-K``)."""

OK: Final = "ok"
FAILED: Final = "failed"
STALLED: Final = "stalled"
TIMEOUT: Final = "timeout"
PANIC: Final = "panic"
CRASHED: Final = "crashed"
RUN_STATUSES: Final[tuple[RunStatus, ...]] = typing.get_args(RunStatus)
NOT_OK: Final[tuple[RunStatus, ...]] = tuple(s for s in RUN_STATUSES if s != OK)
RESULT_OK: Final = "ok"
RESULT_ERROR: Final = "error"
RESULT_STALLED: Final = "stalled"


def outcome(boot_status: RunStatus, boot_reason: str, result: dict | None) -> tuple[RunStatus, str]:
    """The run's (status, reason) from how the guest ended (``BootResult``)
    and what it wrote to ``result.json`` (None: nothing).  A guest that ran
    to its end (``ok`` or ``failed``) is judged by its result; a timeout,
    panic or crash stays what it was."""
    if boot_status not in (OK, FAILED):
        return boot_status, boot_reason
    if result is None:
        return FAILED, boot_reason or f"the guest wrote no {RESULT}"
    status = result.get("status")
    if status == RESULT_STALLED:
        return STALLED, result.get("reason") or "stalled (no reason recorded)"
    if status != RESULT_OK:
        return FAILED, result.get("error") or boot_reason or f"{RESULT} status {status!r}"
    if boot_status != OK:
        return FAILED, boot_reason
    return OK, ""


def breakdown(statuses: Iterable[str]) -> str:
    """``"2 failed, 1 stalled"``: the not-ok statuses with their counts, in
    ``RUN_STATUSES`` order (then any other name), or ``""``."""
    counts: dict[str, int] = {}
    for s in statuses:
        if s != OK:
            counts[s] = counts.get(s, 0) + 1
    order = [s for s in RUN_STATUSES if s in counts] + sorted(set(counts) - set(RUN_STATUSES))
    return ", ".join(f"{counts[s]} {s}" for s in order)


# -------------------------------------------------------------- writing
def atomic_write(path: Path, text: str, dir_fd: int | None = None) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the
    new one, never a part (a temporary sibling renamed into place).  The
    temporary is created afresh and never through a symbolic link (a guest
    may have left one in its run dir).  ``dir_fd``: an open directory to
    write in instead of ``path``'s parent (``RunDir.pinned``)."""
    tmp = path.name + ".tmp"
    parent = dir_fd if dir_fd is not None else os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(tmp, flags, 0o666, dir_fd=parent), "w") as f:
            f.write(text)
        os.replace(tmp, path.name, src_dir_fd=parent, dst_dir_fd=parent)
    finally:
        if dir_fd is None:
            os.close(parent)


def write_json(path: Path, data: dict, indent: int = 1, dir_fd: int | None = None) -> None:
    atomic_write(path, json.dumps(data, indent=indent, default=str), dir_fd)


class RunDirError(ValueError):
    """A run dir's file that exists but cannot be read."""


def read_json(path: Path, dir_fd: int | None = None) -> dict | None:
    """A JSON file of a run or campaign dir; None if it does not exist.
    ``dir_fd``: read ``path.name`` in that open directory, not through a link."""
    try:
        if dir_fd is None:
            text = path.read_text()
        else:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            with open(os.open(path.name, flags, dir_fd=dir_fd)) as f:
                text = f.read()
        data = json.loads(text)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path.name} unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path.name} unreadable: not a JSON object")
    return data


def file_format(data: dict | None) -> int:
    """The format a run.json/result.json/campaign.json was written in (0: before formats)."""
    return int((data or {}).get("format", 0))


# -------------------------------------------------------------- the run
@dataclass(frozen=True)
class RunSpec:
    """An experiment's variant at one repetition: ``spec.json``, what the host
    hands to the guest (plain data: the host validates and plans, the guest
    executes).  Final once the catalog has expanded it: content made on the
    host later is referred to by ``content_key``, never written into it, so
    the spec of a run dir is the spec the catalog expands again on resume
    (the guest reads it through ``mptlab.guest.config.GuestRun``)."""

    experiment: str
    variant: str
    variant_keys: dict
    repetition: int
    seed: int
    config: dict  # the resolved experiment (ExperimentSpec as JSON data)
    topology: dict  # the topology spec as JSON data
    profiles: dict  # profile name -> spec data, the ones this run uses
    plan: dict  # the network plan (mptlab.spec.plan.NetPlan as JSON data)
    # the key of the content made on the host for the workload (``content_key``);
    # None in spec.json files from before content keys
    content_key: str | None = None

    @property
    def run_id(self) -> str:
        return f"{self.variant}/{rep_name(self.repetition)}"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> RunSpec:
        return cls(**data)


class RunInfo(typing.TypedDict, total=False):
    """``run.json``: the outcome, written by the host (docs/run-dirs.md)."""

    format: int
    status: RunStatus
    reason: str
    started: float
    seconds: float
    boot_status: RunStatus
    attempt: str
    confined: bool
    host_cpu_s: float | None
    host_cpu_wait_s: float | None
    timeout_s: float
    wall_timeout_s: float
    clock: Clock
    host_cpu: int | None
    experiment: str
    variant: str
    repetition: int
    seed: int
    host: str
    kernel_dir: str
    git_commit: str
    tools: dict[str, str]


def rep_name(repetition: int) -> str:
    return f"rep-{repetition:03d}"


_NAME = re.compile(r"^rep-(\d+)(?:\.(interrupted|failed|starved)-(\d+))?$")


class RunDir:
    """One run dir: its files, its place among its run's attempts, its readers
    and writers."""

    def __init__(self, path: os.PathLike[str] | str):
        self.path = Path(path)
        self._fd: int | None = None  # while pinned(): the dir's inode, wherever it is renamed

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @contextlib.contextmanager
    def pinned(self) -> Iterator[RunDir]:
        """While in this block the host's writers write into this directory
        (its inode, held open), even if another invocation renames it away
        meanwhile (``set_aside``) and a new attempt takes its name: an
        attempt never writes into a later attempt's run dir."""
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield self
        finally:
            os.close(self._fd)
            self._fd = None

    def moved(self) -> bool:
        """Pinned, and the path no longer names this directory (set aside)."""
        if self._fd is None:
            return False
        try:
            here = os.stat(self.path)
        except FileNotFoundError:
            return True
        mine = os.fstat(self._fd)
        return (here.st_dev, here.st_ino) != (mine.st_dev, mine.st_ino)

    def __fspath__(self) -> str:
        return str(self.path)

    # ---------------------------------------------------------- layout
    def file(self, name: str) -> Path:
        return self.path / name

    @property
    def traces(self) -> Path:
        return self.path / TRACES

    def trace(self, name: str) -> Path:
        return self.path / TRACES / name

    @property
    def variant(self) -> str:
        return self.path.parent.name

    @property
    def repetition(self) -> int | None:
        m = _NAME.match(self.path.name)
        return int(m.group(1)) if m else None

    @property
    def set_aside_as(self) -> SetAside | None:
        """Why this dir was set aside (``rep-NNN.failed-2``: ``failed``), or None."""
        m = _NAME.match(self.path.name)
        return typing.cast(SetAside, m.group(2)) if m and m.group(2) else None

    @property
    def finished(self) -> bool:
        """A run is finished iff its ``run.json`` exists (the host writes it last)."""
        return (self.path / RUN).exists()

    def attempt(self) -> Attempt:
        why = self.set_aside_as
        if why == "interrupted":
            return "interrupted"
        if why is not None:
            return "superseded"  # kept when --retry-failed / --retry-starved ran it again
        return "current" if self.finished else "incomplete"

    def set_aside(self, why: SetAside) -> RunDir:
        """Rename to ``rep-NNN.<why>-K`` (the first free K); nothing is deleted."""
        k = 1
        while (target := self.path.with_name(f"{self.path.name}.{why}-{k}")).exists():
            k += 1
        self.path.rename(target)
        return RunDir(target)

    # --------------------------------------------------------- readers
    def spec(self) -> dict | None:
        return read_json(self.path / SPEC)

    def run_spec(self) -> RunSpec:
        data = self.spec()
        if data is None:
            raise RunDirError(f"{self.path}: no {SPEC}")
        return RunSpec.from_json(data)

    def run_info(self) -> RunInfo | None:
        return typing.cast(RunInfo | None, read_json(self.path / RUN, self._fd))

    def result(self) -> dict | None:
        return read_json(self.path / RESULT, self._fd)

    def provenance(self) -> dict | None:
        return read_json(self.path / PROVENANCE)

    def format(self) -> int:
        """The format this run dir was written in (``FORMAT`` or older)."""
        for name in (RUN, RESULT):
            try:
                data = read_json(self.path / name)
            except RunDirError:
                continue
            if data is not None:
                return file_format(data)
        return FORMAT

    # --------------------------------------------------------- writers
    def create(self) -> None:
        self.path.mkdir(parents=True)

    def write_spec(self, spec: RunSpec) -> None:
        write_json(self.path / SPEC, spec.to_json(), dir_fd=self._fd)

    def write_entry(self, script: str) -> Path:
        """The program the guest runs (a /bin/sh script)."""
        entry = self.path / ENTRY
        entry.write_text("#!/bin/sh\n" + script)
        entry.chmod(0o755)
        return entry

    def write_run_info(self, info: dict[str, Any]) -> None:
        write_json(self.path / RUN, {"format": FORMAT, **info}, dir_fd=self._fd)

    def write_result(self, result: dict[str, Any]) -> None:
        write_json(self.path / RESULT, {"format": FORMAT, **result})

    def write_provenance(self, provenance: dict[str, Any]) -> None:
        write_json(self.path / PROVENANCE, provenance, indent=2)


# --------------------------------------------------------- the campaign
class CampaignDir:
    """A campaign dir: ``campaign.json`` and the run dirs below ``runs/``."""

    def __init__(self, path: os.PathLike[str] | str):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"CampaignDir({str(self.path)!r})"

    @staticmethod
    def is_campaign(path: Path) -> bool:
        return (path / CAMPAIGN).exists() or (path / RUNS).is_dir()

    def info(self) -> dict | None:
        return read_json(self.path / CAMPAIGN)

    def write_info(self, info: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.path / CAMPAIGN, {"format": FORMAT, **info})

    def run_dir(self, variant: str, repetition: int) -> RunDir:
        return RunDir(self.path / RUNS / variant / rep_name(repetition))

    def run_dirs(self) -> list[RunDir]:
        """Every run dir, every attempt: ``runs/<variant>/rep-NNN[.<why>-K]``."""
        runs = self.path / RUNS
        if not runs.is_dir():
            return []
        return [
            RunDir(r)
            for v in sorted(runs.iterdir())
            if v.is_dir()
            for r in sorted(v.iterdir())
            if r.is_dir() and _NAME.match(r.name)
        ]
