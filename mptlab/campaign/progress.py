"""What a campaign tells the person who started it: a line per finished run
(or a live bar on a terminal) and a summary with every run that was not ok
and every starved one, by name.  ``mptlab run`` and ``mptlab.run()`` print
the same."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .. import rundir
from .execute import Outcome
from .runner import CampaignReport


class Progress:
    """A progress line per finished run (CI) or a live bar (terminal)."""

    def __init__(self, total: int, quiet: bool, out: TextIO | None = None):
        self.total = total
        self.started = time.monotonic()
        self.quiet = quiet
        self.out = out or sys.stdout
        self.base: int | None = None
        self.bar = None
        if self.out.isatty() and not quiet:
            from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeRemainingColumn(),
            )
            self.task = self.bar.add_task("runs", total=total)
            self.bar.start()

    def __call__(self, outcome: Outcome, done: int, failed: int, total: int) -> None:
        elapsed = time.monotonic() - self.started
        if self.bar:
            self.bar.update(self.task, completed=done, description=f"runs (not ok {failed})")
            if outcome.status != rundir.OK:
                self.bar.console.print(
                    f"[red]{outcome.status}[/red] {outcome.run_id}: {outcome.reason}"
                )
            elif outcome.starved:
                self.bar.console.print(
                    f"[yellow]starved[/yellow] {outcome.run_id}: waited for host CPU "
                    f"{outcome.cpu_wait_share:.0%} of the run"
                )
            return
        if self.quiet and outcome.status == rundir.OK:
            return
        if self.base is None:  # runs finished in earlier invocations do not count for the ETA
            self.base = done - 1
        eta = elapsed / max(1, done - self.base) * (total - done)
        line = (
            f"[{done:4}/{total}] {outcome.status:8} {outcome.run_id:40} {outcome.seconds:6.1f} s"
            f"  not ok {failed}  eta {eta / 60:5.1f} min"
        )
        if outcome.status != rundir.OK:
            line += f"  ({outcome.reason})"
        if outcome.starved:
            line += f"  (starved: waited {outcome.cpu_wait_share:.0%})"
        print(line, file=self.out, flush=True)

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def summary(name: str, out_dir, report: CampaignReport, out: TextIO | None = None) -> None:
    """The campaign's end: counts, every run not ok with its reason, notices,
    and the starved runs (on stderr)."""
    out = out or sys.stdout
    ok = len(report.outcomes) - len(report.failed)
    reused = sum(o.previous for o in report.outcomes)
    not_ok = f"{len(report.failed)} not ok" + (f" ({report.breakdown()})" if report.failed else "")
    print(f"{name}: {ok} ok, {not_ok} ({reused} from earlier invocations) in {out_dir}", file=out)
    cost = report.cost()
    if cost["runs"] and cost["guest_s"]:
        per_cpu = f" ({cost['guest_per_cpu_s']:.1f} per CPU-s)" if cost["guest_per_cpu_s"] else ""
        print(
            f"{name}: cost: {cost['guest_s']:.0f} s of experiment (guest time) in "
            f"{cost['wall_s']:.0f} s wall ({cost['guest_per_wall_s']:.1f} per wall-s) and "
            f"{cost['host_cpu_s']:.0f} s of host CPU{per_cpu}, {cost['runs']} runs",
            file=out,
        )
    for o in report.failed:  # failed, stalled, timeout, ...: each by name
        print(f"  {o.status}: {o.run_id}: {o.reason}", file=out)
    for notice in report.notices:
        print(f"  note: {notice}", file=out)
    if report.stopped:
        left = report.total - len(report.outcomes) - len(report.interrupted)
        print(
            f"{name}: stopped ({report.stopped}): {len(report.interrupted)} run(s) killed and "
            f"set aside as rep-NNN.interrupted-K, {left} not started; run the same command "
            "again to resume",
            file=out,
        )
        for run_id in report.interrupted:
            print(f"  interrupted: {run_id}", file=out)
    if report.starved:
        worst = max(o.cpu_wait_share or 0 for o in report.starved)
        earlier = sum(o.previous for o in report.starved)
        print(
            f"warning: {len(report.starved)} run(s) ({earlier} from earlier invocations) were "
            f"short of host CPU (their guest waited for a CPU up to {worst:.0%} of the run; "
            f"over {rundir.STARVED_WAIT_SHARE:.0%} counts): their timing, hence goodput and delays, "
            "may be off.  Rerun them with --retry-starved, with fewer --jobs if the campaign "
            "did not already back off (docs/deployment.md).",
            file=sys.stderr,
        )
        for o in report.starved:
            print(f"  starved: {o.run_id}: waited {o.cpu_wait_share:.0%}", file=sys.stderr)
