"""Find the commit that changed an experiment's numbers (issue 24).

    mptlab bisect NAME --good REV --bad REV [--reps 2] [--jobs J] [--file F]
                  [--metric M ...] [--mode exact|statistical] [--repo DIR] [--work DIR]

Under the virtual clock a run is deterministic: the same code and seed give
the same numbers.  So a revision's result can be reduced to a fingerprint (a
hash of every run's metric values) and two revisions compared exactly.  Each
probed revision is checked out in a temporary git worktree, its kernel and
modules built by its own ``kernel/build.sh`` (cached by a hash of their
inputs, so only what changed is rebuilt) and the experiment run with its own
code (``PYTHONPATH`` and ``MPTLAB_HOME`` point at the worktree).

Candidates are the first-parent chain from bad back to good (only commits
that descend from good).  Along that chain every commit contains all earlier
ones, so "differs from good" can only switch on once if the change is kept,
which is what a binary search needs.  A change that came in through a merge
is therefore named by its merge commit; bisecting the merged branch itself
is a second run (``render`` says how).

Modes:

* ``exact``: a revision differs when its fingerprint differs from good's;
* ``statistical``: a revision differs when ``moved(good_probe, probe)`` says
  so; by default when the median of any metric of any variant of good moved
  by more than 5 % (relative; from or to zero: any change), or went missing.

As with ``git bisect``, the answer is the first commit whose result differs
if the change persists up to bad; a change that is undone and redone in
between may be found at either place.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..analysis import compare, stats
from ..campaign.provenance import guest_inputs_changes, guest_inputs_note, host_inputs
from ..rundir import CampaignDir
from ..spec import cliargs
from ..spec.yamlsrc import SpecError

Mode = Literal["exact", "statistical"]
MODES: tuple[Mode, ...] = ("exact", "statistical")
MOVED_BY = 0.05  # the default statistical threshold: 5 % of a median
TAIL = 25  # lines of a failed command's output quoted in its error
SHORT = 12  # characters of a sha in names and text

# Runs `mptlab run` with the worktree's code, after checking that the import
# really came from the worktree: a stray installation earlier on sys.path
# would otherwise make every revision run the same code, and the bisection
# would silently find nothing.  sys.argv is rewritten rather than passed to
# main() because older revisions' main() takes no arguments.
_RUN_CODE = """\
import sys
from pathlib import Path
import mptlab
tree = Path(sys.argv[1]).resolve()
where = Path(mptlab.__file__).resolve()
if tree not in where.parents:
    sys.exit(f"mptlab was imported from {where}, not from the worktree {tree}")
from mptlab.cli import main
sys.argv = ["mptlab", *sys.argv[2:]]
sys.exit(main())
"""


class BisectError(RuntimeError):
    """A bisection that cannot go on: bad input, or a revision that fails to build or run."""


@dataclass
class Probe:
    """The result of one revision's campaign."""

    rev: str  # full sha
    fingerprint: str  # equal <=> the same numbers, run for run
    campaign: Path
    summary: dict[str, dict[str, float]]  # {variant: {metric: median of ok runs}}
    # the machine's inputs of its guests (provenance.host_inputs: packages,
    # interpreter, files; ``host`` their digest); {}: not known
    inputs: dict = field(default_factory=dict)


ProbeFn = Callable[[str], Probe]
MovedFn = Callable[[Probe, Probe], bool]
Log = Callable[[str], None]


# ------------------------------------------------------------------ git
def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise BisectError(_failure(["git", "-C", str(repo), *args], proc.returncode, proc.stderr))
    return proc.stdout


def _failure(cmd: Sequence[str], status: int, output: str) -> str:
    tail = output.strip().splitlines()[-TAIL:]
    quoted = "\n".join(f"  | {line}" for line in tail) or "  (no output)"
    return f"`{' '.join(cmd)}` failed with exit status {status}; last lines:\n{quoted}"


def resolve(repo: Path, rev: str) -> str:
    """The full sha of the commit ``rev`` names in ``repo``."""
    if not _is_git_dir(repo):
        raise BisectError(f"{repo}: not a git repository (give the checkout with --repo)")
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise BisectError(f"unknown revision {rev!r} in {repo} (not a commit git knows)")
    return proc.stdout.strip()


def _is_git_dir(repo: Path) -> bool:
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True, check=False
    )
    return proc.returncode == 0


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    proc = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", older, newer], check=False
    )
    return proc.returncode == 0


def candidates(repo: Path, good: str, bad: str) -> list[str]:
    """The commits after good up to bad, oldest first: the first-parent chain
    from bad, cut where it stops descending from good (module docstring)."""
    chain = _git(repo, "rev-list", "--reverse", "--first-parent", f"{good}..{bad}").split()
    # --first-parent together with --ancestry-path would judge descent along
    # first parents only and drop a merge that brought good in; the full
    # ancestry path is the set of true descendants.
    descend = set(_git(repo, "rev-list", "--ancestry-path", f"{good}..{bad}").split())
    return [c for c in chain if c in descend]


@dataclass
class CommitInfo:
    sha: str
    subject: str
    date: str  # author date, ISO 8601
    stat: str  # `git show --stat` of the commit (against its first parent)
    merge: bool


def commit_info(repo: Path, sha: str) -> CommitInfo:
    subject, date, parents = _git(repo, "show", "-s", "--format=%s%x00%aI%x00%P", sha).split("\0")
    stat = _git(
        repo,
        "show",
        "--stat",
        "--diff-merges=first-parent",  # a merge: what it brought to the mainline
        "--format=commit %H%nAuthor: %an <%ae>%nDate:   %aI%n%n    %s",
        sha,
    )
    return CommitInfo(sha, subject, date, stat.rstrip(), len(parents.split()) > 1)


# ------------------------------------------------------------------ results
def _metric_names(runs, metrics: list[str] | None, where: str) -> list[str]:
    available = [
        m for m in stats.metric_columns(runs) if m != "ok_rate" and m not in stats.HOST_MEASURED
    ]
    if metrics is None:
        return sorted(available)
    unknown = [m for m in metrics if m not in runs.columns]
    if unknown:
        raise BisectError(
            f"{where}: no metric {', '.join(map(repr, unknown))} in the runs; "
            f"metrics: {', '.join(available)}"
        )
    return list(metrics)


def _number(value) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def fingerprint(runs, metrics: list[str]) -> str:
    """A hash of every run's status and metric values, in (variant,
    repetition, seed) order: equal fingerprints <=> the same numbers."""
    table = runs.sort_values(["variant", "repetition", "seed"], kind="stable")
    digest = hashlib.sha256()
    for row in table.itertuples(index=False):
        rec = row._asdict()
        line = [
            str(rec["variant"]),
            int(rec["repetition"]),
            int(rec["seed"]),
            str(rec["status"]),
            # repr of a float is exact and stable; NaN/absent become null
            {m: _number(rec.get(m)) for m in metrics},
        ]
        digest.update(json.dumps(line, sort_keys=True).encode() + b"\n")
    return digest.hexdigest()[:16]


def summarize(runs, metrics: list[str]) -> dict[str, dict[str, float]]:
    """{variant: {metric: median over the ok runs}} (NaN: no value)."""
    ok = stats.ok_runs(runs)
    out: dict[str, dict[str, float]] = {}
    for variant in sorted(set(runs["variant"])):
        sub = ok[ok["variant"] == variant]
        out[variant] = {}
        for m in metrics:
            values = [x for x in map(_number, sub[m]) if x is not None] if m in sub else []
            out[variant][m] = statistics.median(values) if values else math.nan
    return out


def read_probe(rev: str, campaign: Path, metrics: list[str] | None) -> Probe:
    """The Probe of a finished campaign dir (``rev``: the sha it ran)."""
    try:
        runs = compare._runs(campaign, pcap=False)
    except SpecError as exc:
        raise BisectError(f"revision {rev[:SHORT]}: {exc}") from None
    names = _metric_names(runs, metrics, f"revision {rev[:SHORT]} ({campaign})")
    return Probe(
        rev, fingerprint(runs, names), campaign, summarize(runs, names), probe_inputs(campaign)
    )


def probe_inputs(campaign: Path) -> dict:
    """The machine's guest inputs a probe ran with: its campaign.json's
    (``guest_inputs``), or for a revision older than that record the
    machine's now, read as the probe ends (the same machine ran it)."""
    info = CampaignDir(campaign).info() or {}
    recorded = info.get("guest_inputs") or {}
    if recorded.get("host"):
        return {k: recorded.get(k) for k in ("host", "packages", "python", "paths")}
    return host_inputs()


def machine_changed(base: Probe, probes: Iterable[Probe]) -> list[str]:
    """Lines saying that probes ran with other guest inputs of the machine
    than good's (a package installed during a bisection), empty if none did:
    a difference between them may come from the machine, not the code."""
    before = base.inputs.get("host")
    lines = []
    for probe in probes:
        after = probe.inputs.get("host")
        if before and after and after != before:
            what = guest_inputs_changes(base.inputs, probe.inputs)
            lines.append(
                f"{probe.rev[:SHORT]}: {guest_inputs_note(before, after)}"
                + (f" ({'; '.join(what)})" if what else "")
            )
    return lines


def moved_by(threshold: float = MOVED_BY) -> MovedFn:
    """A ``moved`` test: any median of good's (variant, metric) changed by more
    than ``threshold`` (relative), went from or to zero, or went missing."""

    def moved(good: Probe, cur: Probe) -> bool:
        for variant, medians in good.summary.items():
            for metric, base in medians.items():
                now = cur.summary.get(variant, {}).get(metric)
                if _differs(base, now, threshold):
                    return True
        return False

    return moved


def _differs(base: float, now: float | None, threshold: float) -> bool:
    if now is None:
        return True
    if math.isnan(base) or math.isnan(now):
        return math.isnan(base) != math.isnan(now)
    if base == 0:
        return now != 0
    return abs(now / base - 1) > threshold


# ------------------------------------------------------------------ one revision
def build_command(tree: Path) -> list[str]:
    """The revision's own kernel build: builds what its inputs lack, prints the kernel dir."""
    script = tree / "kernel" / "build.sh"
    if not script.is_file():
        raise BisectError(f"{tree}: this revision has no kernel/build.sh")
    return ["bash", str(script)]


def run_command(
    tree: Path,
    out: Path,
    experiment: str,
    *,
    reps: int,
    jobs: int | None = None,
    file: str | None = None,
    seed: int = 1,
    quick: bool = False,
    python: str = sys.executable,
) -> list[str]:
    """``mptlab run`` of the worktree's code on virtual time into ``out``.

    ``file``: a campaign file; a relative path is the revision's own file,
    inside the worktree."""
    cmd = [python, "-c", _RUN_CODE, str(tree), "run", experiment]
    cmd += ["--reps", str(reps), "--out", str(out), "--clock", "virtual", "--seed", str(seed)]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    if file:
        path = Path(file) if Path(file).is_absolute() else tree / file
        if not path.is_file():
            raise BisectError(f"campaign file {file} is not in the revision at {tree}")
        cmd += ["--file", str(path)]
    if quick:
        cmd.append("--quick")
    return cmd


def revision_env(tree: Path) -> dict[str, str]:
    """The environment a revision runs in: its own code and data.

    PYTHONPATH is replaced, not extended, so no other checkout leaks in;
    MPTLAB_KERNEL_DIR is dropped because it would boot one kernel for every
    revision and hide the kernel and module changes being looked for."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["MPTLAB_HOME"] = str(tree)
    env.pop("MPTLAB_KERNEL_DIR", None)
    return env


def _stream(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log: Log,
    show: Callable[[str], bool],
    ok: Iterable[int] = (0,),
) -> tuple[int, list[str]]:
    """Run ``cmd`` with stdout and stderr merged, pass the lines ``show``
    accepts to ``log`` (progress, not the whole log), keep the tail for an error."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL)
    try:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    except OSError as exc:
        raise BisectError(f"`{' '.join(cmd)}` could not start: {exc}") from None
    assert proc.stdout is not None  # stdout=PIPE
    with proc:
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            if show(line):
                log(f"  {line}")
    if proc.returncode not in ok:
        raise BisectError(_failure(cmd, proc.returncode, "\n".join(tail)))
    return proc.returncode, list(tail)


def _add_worktree(repo: Path, tree: Path, sha: str) -> None:
    """A detached worktree of ``sha`` at ``tree``; one left there by an
    interrupted bisection of the same commit is reused."""
    if tree.exists():
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if head == sha and (tree / ".git").is_file():
            return
        raise BisectError(
            f"{tree} exists but is not a worktree of {sha[:SHORT]}: remove it "
            f"(git -C {repo} worktree remove --force {tree}) or choose another --work"
        )
    tree.parent.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "add", "--detach", str(tree), sha)


def probe_revision(
    repo: Path,
    rev: str,
    experiment: str,
    *,
    work: Path,
    reps: int,
    jobs: int | None,
    file: str | None,
    metrics: list[str] | None,
    log: Log,
    seed: int = 1,
    quick: bool = False,
    build_cmd: Callable[[Path], list[str]] = build_command,
    run_cmd: Callable[[Path, Path], list[str]] | None = None,
) -> Probe:
    """Build and run ``experiment`` at ``rev`` with that revision's own code.

    The worktree is ``work/<short sha>`` and always removed afterwards; the
    campaign lands in ``work/results/<short sha>/<experiment>`` and is kept
    (``mptlab run`` resumes it if the probe is repeated).  ``build_cmd`` and
    ``run_cmd`` (worktree, results dir -> argv) exist so that tests can run
    without a kernel; by default they are ``build_command`` and ``run_command``."""
    repo = Path(repo).resolve()
    work = Path(work).resolve()
    sha = resolve(repo, rev)
    tree = work / sha[:SHORT]
    out = work / "results" / sha[:SHORT]

    def mptlab_run(tree: Path, out: Path) -> list[str]:
        return run_command(
            tree, out, experiment, reps=reps, jobs=jobs, file=file, seed=seed, quick=quick
        )

    log(f"probe {sha[:SHORT]}: worktree {tree}")
    _add_worktree(repo, tree, sha)
    failed = True
    try:
        env = revision_env(tree)
        _, built = _stream(
            build_cmd(tree),
            cwd=tree,
            env=env,
            log=log,
            show=lambda line: line.startswith("kernel:"),
        )
        log(f"probe {sha[:SHORT]}: kernel {built[-1] if built else '(no dir printed)'}")
        out.mkdir(parents=True, exist_ok=True)
        # exit 1: some runs failed; that is a result too (the fingerprint holds every status)
        status, _ = _stream(
            (run_cmd or mptlab_run)(tree, out),
            cwd=tree,
            env=env,
            log=log,
            show=lambda _: True,
            ok=(0, 1),
        )
        failed = False
    finally:
        _remove_worktree(repo, tree, log, raise_errors=not failed)
    campaign = _campaign_dir(out, experiment, quick)
    if status:
        log(f"probe {sha[:SHORT]}: some runs failed (exit {status}); their status counts")
    probe = read_probe(sha, campaign, metrics)
    log(f"probe {sha[:SHORT]}: fingerprint {probe.fingerprint}")
    return probe


def _remove_worktree(repo: Path, tree: Path, log: Log, raise_errors: bool) -> None:
    """Remove the worktree (--force: the build leaves untracked files).  While
    another error is on its way, a failure here is logged, not raised, so
    that it does not hide the first one."""
    try:
        _git(repo, "worktree", "remove", "--force", str(tree))
    except BisectError as exc:
        if raise_errors:
            raise
        log(f"could not remove the worktree {tree}: {exc}")


def _campaign_dir(out: Path, experiment: str, quick: bool) -> Path:
    camp = out / (experiment + ("-quick" if quick else ""))
    if not (camp / "campaign.json").is_file():
        found = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        raise BisectError(
            f"the run left no campaign in {camp} (no campaign.json); {out} holds: "
            f"{', '.join(found) or 'nothing'}"
        )
    return camp


def default_probe(
    repo: Path,
    experiment: str,
    *,
    work: Path,
    reps: int = 2,
    jobs: int | None = None,
    file: str | None = None,
    metrics: list[str] | None = None,
    seed: int = 1,
    quick: bool = False,
    log: Log = print,
) -> ProbeFn:
    """``probe_revision`` with its options bound: the probe ``bisect`` calls."""

    def probe(rev: str) -> Probe:
        return probe_revision(
            repo,
            rev,
            experiment,
            work=work,
            reps=reps,
            jobs=jobs,
            file=file,
            metrics=metrics,
            log=log,
            seed=seed,
            quick=quick,
        )

    return probe


# ------------------------------------------------------------------ bisection
@dataclass
class BisectResult:
    good: str
    bad: str
    mode: Mode
    first: str | None = None  # the first commit whose result differs; None: no difference
    subject: str = ""
    date: str = ""
    stat: str = ""
    merge: bool = False
    before: str | None = None  # the probed commit just before `first` (good or a candidate)
    probes: dict[str, Probe] = field(default_factory=dict)  # sha -> its probe, in probe order
    candidates: int = 0
    message: str = ""

    @property
    def steps(self) -> int:
        """Revisions probed (each probe builds and runs once)."""
        return len(self.probes)

    def render(self) -> str:
        head = (
            f"bisect ({self.mode}): good {self.good[:SHORT]} .. bad {self.bad[:SHORT]}, "
            f"{self.candidates} commits on the first-parent path, {self.steps} probed"
        )
        lines = [head, ""]
        base = self.probes.get(self.good)
        machine = machine_changed(base, self.probes.values()) if base else []
        if machine:
            lines += ["warning: the machine changed during the bisection", *machine, ""]
        if self.first is None:
            lines.append(self.message)
        else:
            lines += self._found()
        lines += ["", "probes:"]
        for sha, probe in self.probes.items():
            role = "good" if sha == self.good else "bad" if sha == self.bad else ""
            same = base is not None and probe.fingerprint == base.fingerprint
            lines.append(
                f"  {sha[:SHORT]}  {probe.fingerprint}  "
                f"{'same numbers as good' if same else 'differs from good'}"
                + (f"  ({role})" if role else "")
            )
        return "\n".join(lines)

    def _found(self) -> list[str]:
        assert self.first is not None
        lines = [
            f"first commit that changed the result: {self.first}",
            f"  {self.subject}",
            f"  {self.date}",
            "",
        ]
        before = self.probes.get(self.before or "")
        after = self.probes.get(self.first)
        if before is not None and after is not None:
            lines += _values_table(before, after)
            lines.append("")
        lines.append(self.stat)
        if self.merge:
            lines += [
                "",
                "This is a merge: the change came from the branch it merged.  To find the "
                f"commit there: --good $(git merge-base {self.first[:SHORT]}^1 "
                f"{self.first[:SHORT]}^2) --bad {self.first[:SHORT]}^2",
            ]
        return lines


# a table of every metric of 30 variants would bury the answer
MAX_ROWS = 30


def _values_table(before: Probe, after: Probe) -> list[str]:
    """The medians before and after, per variant and metric: all of them when
    metrics were chosen (a few), only those that changed otherwise."""
    rows = []
    changed_only = sum(len(m) for m in before.summary.values()) > MAX_ROWS
    for variant in sorted(set(before.summary) | set(after.summary)):
        b_meds, a_meds = before.summary.get(variant, {}), after.summary.get(variant, {})
        for metric in sorted(set(b_meds) | set(a_meds)):
            b, a = b_meds.get(metric, math.nan), a_meds.get(metric, math.nan)
            if changed_only and _same(b, a):
                continue
            rows.append([variant, metric, _fmt(b), _fmt(a), _change(b, a)])
    title = f"medians per variant, {before.rev[:SHORT]} -> {after.rev[:SHORT]}"
    if not rows:
        return [f"{title}: no median changed (the runs changed, their medians did not)"]
    more = len(rows) - MAX_ROWS
    rows = rows[:MAX_ROWS]
    header = ["variant", "metric", "before", "after", "change"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = [f"{title}{' (those that changed)' if changed_only else ''}:"]
    for r in [header, *rows]:
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if more > 0:
        out.append(f"  ... and {more} more")
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _fmt(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.6g}"


def _change(b: float, a: float) -> str:
    if math.isnan(a) or math.isnan(b) or _same(a, b):
        return "" if _same(a, b) else "?"
    if b == 0:
        return "from 0"
    return f"{(a / b - 1) * 100:+.1f}%"


def bisect(
    repo: Path,
    good: str,
    bad: str,
    *,
    probe: ProbeFn,
    mode: Mode = "exact",
    moved: MovedFn | None = None,
    log: Log = print,
) -> BisectResult:
    """The first commit between good and bad whose result differs from good's
    (``mode``: see the module docstring).  ``probe`` runs one revision (a
    full sha); each revision is probed at most once."""
    if mode not in MODES:
        raise BisectError(f"mode {mode!r} is not allowed; allowed: {', '.join(MODES)}")
    repo = Path(repo)
    g, b = resolve(repo, good), resolve(repo, bad)
    if g == b:
        raise BisectError(f"good {good!r} and bad {bad!r} are the same commit {g[:SHORT]}")
    if not _is_ancestor(repo, g, b):
        raise BisectError(
            f"good {good!r} ({g[:SHORT]}) is not an ancestor of bad {bad!r} ({b[:SHORT]}): "
            "give a good revision that bad descends from"
        )
    chain = candidates(repo, g, b)
    result = BisectResult(good=g, bad=b, mode=mode, candidates=len(chain))
    log(f"bisect: {len(chain)} commits after {g[:SHORT]} up to {b[:SHORT]}")

    def run(sha: str) -> Probe:
        if sha not in result.probes:
            log(f"bisect: probing {sha[:SHORT]} ({len(result.probes) + 1} so far)")
            result.probes[sha] = probe(sha)
            if g in result.probes:
                for line in machine_changed(result.probes[g], [result.probes[sha]]):
                    log(f"bisect: {line}")
        return result.probes[sha]

    test = moved or moved_by(MOVED_BY)
    base = run(g)

    def differs(sha: str) -> bool:
        cur = run(sha)
        return cur.fingerprint != base.fingerprint if mode == "exact" else test(base, cur)

    if not differs(b):
        result.message = _no_change(result, moved is None)
        return result
    # chain[lo] (or good, lo = -1) is the same as good, chain[hi] differs
    lo, hi = -1, len(chain) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if differs(chain[mid]):
            hi = mid
        else:
            lo = mid
        log(f"bisect: commits left to decide: {hi - lo - 1}")
    info = commit_info(repo, chain[hi])
    result.first, result.subject, result.date = info.sha, info.subject, info.date
    result.stat, result.merge = info.stat, info.merge
    result.before = g if lo < 0 else chain[lo]
    return result


def _no_change(result: BisectResult, default_moved: bool) -> str:
    good, bad = result.good[:SHORT], result.bad[:SHORT]
    if result.mode == "exact":
        fp = result.probes[result.good].fingerprint
        return f"no change: good {good} and bad {bad} give the same numbers (fingerprint {fp})"
    why = (
        f"no median moved by more than {MOVED_BY:.0%}"
        if default_moved
        else "the moved() test says the result did not move"
    )
    return f"no change: between good {good} and bad {bad} {why}"


# ------------------------------------------------------------------ command line
def add_parser(sub) -> argparse.ArgumentParser:
    """The ``bisect`` subcommand on ``sub`` (an argparse subparsers object)."""
    p = sub.add_parser(
        "bisect",
        help="find the commit that changed an experiment's numbers (virtual time)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("name", help="experiment name (of experiments.yaml or --file)")
    p.add_argument("--good", required=True, help="a revision with the old numbers")
    p.add_argument("--bad", required=True, help="a later revision with the new numbers")
    p.add_argument("--reps", type=cliargs.REPS, default=2, help="repetitions per variant (2)")
    p.add_argument("--jobs", type=cliargs.JOBS, help="guests at once (default: 1 per CPU)")
    p.add_argument("--seed", type=cliargs.SEED, default=1, help="campaign seed (1)")
    p.add_argument("--quick", action="store_true", help="the short version of every run")
    p.add_argument("--file", help="campaign file holding NAME; relative: the file of each revision")
    p.add_argument(
        "--metric",
        action="append",
        metavar="M",
        help="only this metric counts (repeat for more; default: every metric)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        default="exact",
        help="exact: any change of the numbers; statistical: a median moved by more than 5%%",
    )
    p.add_argument("--repo", default=".", help="the git checkout (default: .)")
    p.add_argument(
        "--work", help="worktrees and campaigns (default: results/bisect/NAME of the repo)"
    )
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    """0: a first commit is named; 1: good and bad do not differ; 2: an error."""
    repo = Path(args.repo).resolve()
    work = Path(args.work) if args.work else repo / "results" / "bisect" / args.name
    probe = default_probe(
        repo,
        args.name,
        work=work,
        reps=args.reps,
        jobs=args.jobs,
        file=args.file,
        metrics=args.metric,
        seed=args.seed,
        quick=args.quick,
    )
    try:
        result = bisect(repo, args.good, args.bad, probe=probe, mode=args.mode)
    except BisectError as exc:
        print(f"mptlab bisect: {exc}", file=sys.stderr)
        return 2
    text = result.render()
    print(text)
    work.mkdir(parents=True, exist_ok=True)
    (work / "bisect.txt").write_text(text + "\n")
    return 0 if result.first else 1
