"""mptlab command line: the subcommands of every part, composed.

mptlab list [--file F]              named experiments
mptlab show NAME [--file F]         every run an experiment expands to
mptlab validate FILE                check a campaign, topology or profiles file
mptlab run NAME|FILE [--reps N] [--jobs N] [--out DIR] [--quick] [--seed S] [--retry-failed]
                     [--retry-starved] [--cluster ADDRESS] [--clock real|virtual]
mptlab nightly NAME... [--publish] | --accept [S]  the nightly set: run, compare, record, publish
mptlab bisect NAME --good REV --bad REV            the first commit that changed a result
mptlab shell NAME|FILE [--variant V] [--clock C]   the topology up, a Mininet-like prompt
mptlab sweep NAME --vary KEY=V1,V2 [--grid] --reps N   claims over settings: forest plots
mptlab ingest|query|stats|report|reproduce|compare|pcap ...  analysis (mptlab.analysis.cli)
mptlab reproduce --all [--results ROOT] [--run --reps N]   one page over every paper's claims
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from . import api, home, nightly
from . import shell as shell_cmd
from . import sweeps as sweep_cmd
from .analysis import cli as analysis_cli
from .campaign.boot import ConfinementError
from .campaign.cluster import ClusterError
from .campaign.kernel import KernelNotBuilt
from .campaign.runner import CampaignLocked
from .nightly import bisect as bisect_cmd
from .rundir import CLOCKS
from .spec import cliargs
from .spec.catalog import Catalog, file_kind
from .spec.expect import resolve
from .spec.yamlsrc import SpecError, load


def _catalog(file: str | None) -> Catalog:
    return Catalog.load(Path(file) if file else None)


def _words(value) -> str:
    """A YAML value as it reads in a line: ``64MiB``, ``[wlan, 3g]``, ``{delta: 5}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_words(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_words(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def cmd_list(args) -> int:
    cat = _catalog(args.file)
    for name in cat.names(Path(args.file) if args.file else None):
        exp = cat.spec(name)
        runs = len(cat.variants(name)) * exp.repetitions
        print(f"{name:24} {runs:5} runs  {exp.description}")
    return 0


def cmd_show(args) -> int:
    """``show NAME`` (of experiments.yaml or --file), or ``show FILE``: each of
    its experiments, as ``run`` takes either."""
    path = _campaign_file(args.name)
    if args.file is None and path is not None:
        cat = Catalog.load(path)
        for i, name in enumerate(cat.names(path)):
            if i:
                print()
            _show(cat, name, args)
        return 0
    _show(_catalog(args.file), args.name, args)
    return 0


def _show(cat: Catalog, name: str, args) -> None:
    exp = cat.spec(name)
    runs = cat.expand(name, repetitions=args.reps, quick=args.quick)
    raw = cat.raw(name)
    print(f"{name}: {exp.description}")
    if exp.source:
        print(f"  source: {exp.source}")
    topology = exp.topology if isinstance(exp.topology, str) else f"mininet {exp.topology.mininet}"
    print(f"  topology {topology}, paths {', '.join(exp.paths) or '(none)'}")
    work = {k: v for k, v in raw["workload"].items() if k != "type"}
    print(
        f"  workload {exp.workload.type}: {', '.join(f'{k} {_words(v)}' for k, v in work.items())}"
    )
    for entry in raw.get("background") or []:
        print(f"  background: {_words(entry)}")
    variants = cat.variants(name)
    reps = len(runs) // max(1, len(variants))
    print(f"  {len(variants)} variants x {reps} repetitions = {len(runs)} runs")
    for label, keys in variants:
        print(f"  - {label}: {', '.join(f'{k}={_words(v)}' for k, v in keys.items()) or '-'}")
    claims = cat.claims(name)
    if claims:
        print(f"  expect: {len(claims)} claims of the paper (mptlab reproduce {name})")
        for c in claims:
            absent = [e for e in c.entries() if resolve(e, variants)[0] is None]
            missing = f"  [not a variant here: {', '.join(absent)}]" if absent else ""
            what = f"{c.compare[0]} vs {c.baseline}" if c.baseline else f"{c.compare[0]} (a level)"
            print(f"  - {c.metric}: {what}: {c.claim} ({c.source}){missing}")
    if args.runs:
        for run in runs:
            print(f"    {run.run_id}  seed={run.seed}")


def cmd_validate(args) -> int:
    path = Path(args.file)
    src = load(path)
    kind = file_kind(src)
    cat = Catalog.load()
    if kind == "profiles":
        cat.load_profiles(path)
        profiles = src.data.get("profiles") if isinstance(src.data, dict) else None
        print(f"{path}: {len(profiles or {})} profiles ok")
        return 0
    if kind == "topology":
        topo = cat.load_topology(path)
        print(
            f"{path}: topology ok ({len(topo.hosts)} hosts, {len(topo.routers)} routers, "
            f"{len(topo.switches)} switches, {len(topo.links)} links, {topo.paths} path slots)"
        )
        return 0
    cat = Catalog.load(path)
    names = cat.names(path)
    total = 0
    for name in names:
        n = len(cat.expand(name))
        total += n
        print(f"{path}: {name}: ok ({n} runs)")
    print(f"{path}: {len(names)} experiments, {total} runs")
    return 0


def _campaign_file(target: str) -> Path | None:
    """``target`` of ``run``/``show`` as a campaign file, or None: an experiment name."""
    path = Path(target)
    return path if path.suffix in (".yaml", ".yml") or path.exists() else None


def _experiments(target: str, file: str | None) -> list[api.Experiment]:
    path = _campaign_file(target)
    if path is not None:
        return api.experiments_of(path)
    return [api.Experiment.from_yaml(file, target) if file else api.Experiment.from_yaml(target)]


STOPPED = 130  # a campaign stopped by SIGINT or SIGTERM (128 + SIGINT, as a shell says)


def cmd_run(args) -> int:
    status = 0
    for exp in _experiments(args.target, args.file):
        try:
            results = api.run(
                exp,
                jobs=args.jobs,
                out=args.out,
                quick=args.quick,
                repetitions=args.reps,
                seed=args.seed,
                retry_failed=args.retry_failed,
                retry_starved=args.retry_starved,
                cluster=args.cluster,
                quiet=args.quiet,
                clock=args.clock,
                variants=args.variant,
            )
        except (KernelNotBuilt, ClusterError, CampaignLocked, ConfinementError) as exc:
            print(f"mptlab: {exc}", file=sys.stderr)
            return 2
        if results.report and results.report.stopped:
            return STOPPED  # Ctrl-C / SIGTERM: the next experiments of a file do not start
        status |= 1 if results.report and results.report.failed else 0
    return status


def _reproduce_all(**options):
    """``reproduce --all`` (``mptlab.api.reproduce_all``); a campaign that cannot
    start (no kernel, locked, ...) is an error of the command, as for ``run``."""
    try:
        return api.reproduce_all(**options)
    except (KernelNotBuilt, ClusterError, CampaignLocked, ConfinementError) as exc:
        raise SpecError(str(exc)) from None


def cmd_nightly(args) -> int:
    root = Path(args.root) if args.root else nightly.default_root()
    if args.accept is not None:
        for camp in nightly.accept(root, args.accept or None):
            print(f"nightly: baseline of {camp.name} is now {camp}")
        return 0
    if not args.name:
        if args.publish:
            print(f"nightly: trend pages {nightly.publish_site(root)}")
            return 0
        raise SpecError(
            "mptlab nightly: give experiment NAMEs (or --accept [STAMP], or --publish alone)"
        )
    exps = [e for name in args.name for e in _experiments(name, args.file)]
    return nightly.run(
        exps,
        root,
        rules=Path(args.rules) if args.rules else None,
        strict=args.strict,
        pcap=not args.no_pcap,
        on_regression=args.on_regression,
        publish=args.publish,
        jobs=args.jobs,
        quick=args.quick,
        repetitions=args.reps,
        seed=args.seed,
        clock=args.clock,
    )


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reps", type=cliargs.REPS, help="override the repetitions")
    p.add_argument(
        "--jobs",
        type=cliargs.JOBS,
        help="guests at most at once (default: 1 per CPU; lowered when guests starve)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="1/8 of the bytes or duration, no warm-up: a first look, results kept apart",
    )
    p.add_argument(
        "--seed", type=cliargs.SEED, default=1, help="campaign seed: run order and per-run seeds"
    )
    p.add_argument("--file", help="campaign file holding NAME (default: experiments.yaml)")
    p.add_argument(
        "--clock",
        choices=CLOCKS,
        help="the guests' clock for every run, whatever the experiment says: real, or virtual "
        "(UML time-travel: deterministic, load-immune; docs/experiments.md)",
    )


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mptlab", description="MPTCP emulation testbed")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="named experiments")
    p.add_argument("--file", help="campaign file (default: experiments.yaml)")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="the runs an experiment expands to")
    p.add_argument("name", help="experiment name, or a campaign FILE (each of its experiments)")
    p.add_argument("--file", help="campaign file (default: experiments.yaml)")
    p.add_argument("--reps", type=cliargs.REPS, help="override the repetitions")
    p.add_argument("--quick", action="store_true", help="the short version (see `run --quick`)")
    p.add_argument("--runs", action="store_true", help="list every run")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("validate", help="check a campaign, topology or profiles file")
    p.add_argument("file")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "run", help="run an experiment (NAME) or every experiment of a campaign FILE"
    )
    p.add_argument("target", help="experiment name, or a campaign YAML file")
    _run_options(p)
    p.add_argument(
        "--cluster",
        metavar="ADDRESS|slurm|pbs",
        help="run on the workers of this Dask scheduler (e.g. tcp://host:8786), or on "
        "batch jobs of SLURM or PBS (dask-jobqueue), instead of here; see docs/deployment.md",
    )
    p.add_argument("--out", help="results root (default: ./results)")
    p.add_argument(
        "--retry-failed", action="store_true", help="run failed runs again (old dirs kept)"
    )
    p.add_argument(
        "--retry-starved",
        action="store_true",
        help="run again the runs whose guest was short of host CPU (old dirs kept)",
    )
    p.add_argument("--quiet", action="store_true", help="report failed runs only")
    p.add_argument(
        "--variant",
        action="append",
        metavar="V",
        help="run only this variant (as `mptlab show` names it; repeat for more)",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "nightly", help="run the nightly set, compare with baselines and history, publish"
    )
    p.add_argument("name", nargs="*", help="experiment names (or campaign files): the nightly set")
    p.add_argument(
        "--accept",
        nargs="?",
        const="",
        help="make a nightly run (default: the latest) the baseline",
    )
    p.add_argument("--root", help="history dir (default: ./results/nightly)")
    p.add_argument("--rules", help="rules YAML (default: compare-rules.yaml)")
    _run_options(p)
    p.add_argument("--strict", action="store_true")
    p.add_argument("--no-pcap", action="store_true")
    p.add_argument(
        "--publish",
        action="store_true",
        help="write the trend pages (ROOT/site) after the night; alone: only them",
    )
    p.add_argument(
        "--on-regression",
        metavar="CMD",
        help="shell command run when the night regressed: findings on stdin, "
        "$MPTLAB_NIGHT and $MPTLAB_FINDINGS set",
    )
    p.set_defaults(func=analysis_cli.bad_input_is_spec_error(cmd_nightly))

    bisect_cmd.add_parser(sub)
    shell_cmd.add_parser(sub)
    sweep_cmd.add_parser(sub)

    analysis_cli.add_subcommands(
        sub,
        results=home.results_dir(),
        rules=lambda: home.data("compare-rules.yaml"),
        reproduce_all=_reproduce_all,
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    # `mptlab show X | head` ends quietly; restored on the way out, since a
    # caller in the same process (the tests) would otherwise be killed by
    # the next write to a closed socket: pytest died so in test_cluster, a
    # Dask client writing to a worker that had gone, after test_cli_numbers
    # had called main()
    previous = signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGPIPE, previous)


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except SpecError as exc:
        print(f"mptlab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before or after a campaign ran (it handles SIGINT itself)
        print("mptlab: interrupted; rerun the same command to resume", file=sys.stderr)
        return STOPPED


if __name__ == "__main__":
    sys.exit(main())
