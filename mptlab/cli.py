"""mptlab command line.

mptlab list                         named experiments
mptlab show NAME [--file F]         every run an experiment expands to
mptlab validate FILE                check a campaign or topology file
mptlab run NAME|FILE [--reps N] [--jobs N] [--out DIR] [--quick] [--seed S] [--retry-failed]
                     [--retry-starved] [--cluster ADDRESS]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from .campaign.kernel import REPO_ROOT, KernelNotBuilt, find_kernel
from .rundir import RunSpec
from .spec.catalog import Catalog
from .spec.yamlsrc import SpecError


def _catalog(file: str | None) -> Catalog:
    return Catalog.load(Path(file) if file else None)


def cmd_list(args) -> int:
    cat = _catalog(args.file)
    for name in cat.names():
        exp = cat.spec(name)
        runs = len(cat.variants(name)) * exp.repetitions
        print(f"{name:24} {runs:5} runs  {exp.description}")
    return 0


def cmd_show(args) -> int:
    cat = _catalog(args.file)
    exp = cat.spec(args.name)
    runs = cat.expand(args.name, repetitions=args.reps, quick=args.quick)
    print(f"{args.name}: {exp.description}")
    if exp.source:
        print(f"  source: {exp.source}")
    print(
        f"  topology {exp.topology}, paths {', '.join(exp.paths)}, workload {exp.workload.model_dump(exclude_none=True)}"
    )
    variants = cat.variants(args.name)
    print(
        f"  {len(variants)} variants x {len(runs) // max(1, len(variants))} repetitions = {len(runs)} runs"
    )
    for label, keys in variants:
        print(f"  - {label}: {keys}")
    if args.runs:
        for run in runs:
            print(f"    {run.run_id}  seed={run.seed}")
    return 0


def cmd_validate(args) -> int:
    path = Path(args.file)
    if path.resolve().parent == (REPO_ROOT / "topologies").resolve() or "topology" in path.name:
        cat = Catalog.load(topology_dir=path.parent if path.name != "profiles.yaml" else None)
        print(f"{path}: ok")
        return 0
    cat = Catalog.load(path)
    total = 0
    for name in cat.names():
        n = len(cat.expand(name))
        total += n
        print(f"{path}: {name}: ok ({n} runs)")
    print(f"{path}: {len(cat.names())} experiments, {total} runs")
    return 0


class Progress:
    """A progress line per finished run (CI) or a live bar (terminal)."""

    def __init__(self, total: int, quiet: bool):
        self.total = total
        self.started = time.monotonic()
        self.quiet = quiet
        self.base = None
        self.bar = None
        if sys.stdout.isatty() and not quiet:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TimeRemainingColumn())  # fmt: skip
            self.task = self.bar.add_task("runs", total=total)
            self.bar.start()

    def __call__(self, outcome, done: int, failed: int, total: int) -> None:
        elapsed = time.monotonic() - self.started
        if self.bar:
            self.bar.update(self.task, completed=done, description=f"runs (not ok {failed})")
            if outcome.status != "ok":
                self.bar.console.print(
                    f"[red]{outcome.status}[/red] {outcome.run_id}: {outcome.reason}"
                )
            elif outcome.starved:
                self.bar.console.print(
                    f"[yellow]starved[/yellow] {outcome.run_id}: waited for host CPU "
                    f"{outcome.cpu_wait_share:.0%} of the run"
                )
            return
        if self.quiet and outcome.status == "ok":
            return
        if self.base is None:  # runs finished in earlier invocations do not count for the ETA
            self.base = done - 1
        eta = elapsed / max(1, done - self.base) * (total - done)
        print(f"[{done:4}/{total}] {outcome.status:8} {outcome.run_id:40} {outcome.seconds:6.1f} s"
              f"  not ok {failed}  eta {eta / 60:5.1f} min"
              + (f"  ({outcome.reason})" if outcome.status != "ok" else "")
              + (f"  (starved: waited {outcome.cpu_wait_share:.0%})" if outcome.starved else ""),
              flush=True)  # fmt: skip

    def close(self) -> None:
        if self.bar:
            self.bar.stop()


def cmd_run(args) -> int:
    from .campaign.cluster import ClusterError
    from .campaign.runner import STARVED_WAIT_SHARE, Campaign

    target = Path(args.target)
    if target.suffix in (".yaml", ".yml") or target.exists():
        cat = Catalog.load(target)
        own = Catalog()
        own._load_experiments(target)
        names = own.names()
    else:
        cat = _catalog(args.file)
        names = [args.target]
    try:
        kernel = find_kernel()
    except KernelNotBuilt as exc:
        print(f"mptlab: {exc}", file=sys.stderr)
        return 2
    status = 0
    for name in names:
        runs: list[RunSpec] = cat.expand(
            name, repetitions=args.reps, campaign_seed=args.seed, quick=args.quick
        )
        out = Path(args.out or REPO_ROOT / "results") / (name + ("-quick" if args.quick else ""))
        print(f"{name}: {len(runs)} runs -> {out}", flush=True)
        progress = Progress(len(runs), args.quiet)
        campaign = Campaign(out, runs, kernel, jobs=args.jobs, seed=args.seed,
                            retry_failed=args.retry_failed, retry_starved=args.retry_starved,
                            on_progress=progress,
                            cluster=args.cluster)  # fmt: skip
        try:
            report = campaign.run()
        except ClusterError as exc:
            print(f"mptlab: {exc}", file=sys.stderr)
            return 2
        finally:
            progress.close()
        ok = len(report.outcomes) - len(report.failed)
        reused = sum(o.previous for o in report.outcomes)
        not_ok = f"{len(report.failed)} not ok" + (
            f" ({report.breakdown()})" if report.failed else ""
        )
        print(f"{name}: {ok} ok, {not_ok} ({reused} from earlier invocations) in {out}")
        for o in report.failed:  # failed, stalled, timeout, ...: each by name
            print(f"  {o.status}: {o.run_id}: {o.reason}")
        for notice in report.notices:
            print(f"  note: {notice}")
        if report.starved:
            worst = max(o.cpu_wait_share for o in report.starved)
            earlier = sum(o.previous for o in report.starved)
            print(
                f"warning: {len(report.starved)} run(s) ({earlier} from earlier invocations) were "
                f"short of host CPU (their guest waited for a CPU up to {worst:.0%} of the run; "
                f"over {STARVED_WAIT_SHARE:.0%} counts): their timing, hence goodput and delays, "
                "may be off.  Rerun them with --retry-starved, with fewer --jobs if the campaign "
                "did not already back off (docs/deployment.md).",
                file=sys.stderr,
            )
            for o in report.starved:
                print(f"  starved: {o.run_id}: waited {o.cpu_wait_share:.0%}", file=sys.stderr)
        status |= 1 if report.failed else 0
    return status


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `mptlab show X | head` ends quietly
    parser = argparse.ArgumentParser(prog="mptlab", description="MPTCP emulation testbed")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="named experiments")
    p.add_argument("--file", help="campaign file (default: experiments.yaml)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="the runs an experiment expands to")
    p.add_argument("name")
    p.add_argument("--file", help="campaign file (default: experiments.yaml)")
    p.add_argument("--reps", type=int, help="override the repetitions")
    p.add_argument("--quick", action="store_true", help="the short version (see `run --quick`)")
    p.add_argument("--runs", action="store_true", help="list every run")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("validate", help="check a campaign (or topology) file")
    p.add_argument("file")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "run", help="run an experiment (NAME) or every experiment of a campaign FILE"
    )
    p.add_argument("target", help="experiment name, or a campaign YAML file")
    p.add_argument("--file", help="campaign file holding NAME (default: experiments.yaml)")
    p.add_argument("--reps", type=int, help="override the repetitions")
    p.add_argument(
        "--jobs",
        type=int,
        help="guests at most at once (default: 1 per CPU; lowered when guests starve)",
    )
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run on the workers of this Dask scheduler (e.g. tcp://host:8786) "
                        "instead of here; see docs/deployment.md")  # fmt: skip
    p.add_argument("--out", help="results root (default: results/)")
    p.add_argument("--quick", action="store_true",
                   help="1/8 of the bytes or duration, no warm-up: a first look, results kept apart")  # fmt: skip
    p.add_argument("--seed", type=int, default=1, help="campaign seed: run order and per-run seeds")
    p.add_argument(
        "--retry-failed", action="store_true", help="run failed runs again (old dirs kept)"
    )
    p.add_argument("--retry-starved", action="store_true",
                   help="run again the runs whose guest was short of host CPU (old dirs kept)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="report failed runs only")
    p.set_defaults(func=cmd_run)

    from mptlab.analysis.cli import add_subcommands

    add_subcommands(sub)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except SpecError as exc:
        print(f"mptlab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mptlab: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
