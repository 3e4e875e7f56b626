"""``mptlab`` subcommands of the analysis package.

mptlab ingest DIR [--force] [--no-pcap]           run dirs -> DIR/analysis/*.parquet
mptlab query SQL [-d DIR] [--csv]                  DuckDB SQL over the tables
mptlab query --history [ROOT] SQL                  ... over the nightly history
mptlab stats DIR [--metric M] [--reference V]      n, mean, median, sd, CI; differences; reps
mptlab report DIR [--out FILE]                     self-contained HTML report
mptlab reproduce NAME|DIR [DIR] [--file F]         the paper's claims (expect:) against the runs
mptlab reproduce --all [--results ROOT] [--out F]   one page over every experiment with claims
mptlab compare BASELINE CURRENT [--rules F]        regression check (exit 1 on failure)
mptlab pcap FILE... [--client ADDR ...]            MPTCP metrics from packet captures

``mptlab.cli`` adds them to mptlab's parser (``add_subcommands``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

from ..rundir import breakdown
from ..spec import cliargs
from ..spec.yamlsrc import SpecError


def _dir(path: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise SpecError(f"{path}: no such directory (expected a campaign dir or a results dir)")
    return p


def _print_df(df, fmt: str = "table") -> None:
    import pandas as pd

    if fmt == "csv":
        df.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        print(df.to_json(orient="records", indent=1))
    else:
        with pd.option_context(
            "display.max_rows",
            500,
            "display.max_columns",
            60,
            "display.width",
            200,
            "display.max_colwidth",
            60,
        ):
            print(df.to_string(index=False) if len(df) else "(no rows)")


def cmd_ingest(args) -> int:
    from . import ingest

    root = _dir(args.dir)

    def progress(i, n):
        if sys.stderr.isatty():
            print(f"\ringest: {i}/{n}", end="", file=sys.stderr, flush=True)

    rep = ingest.ingest(root, pcap=not args.no_pcap, force=args.force, progress=progress)
    if sys.stderr.isatty() and rep.read:
        print(file=sys.stderr)
    print(
        f"{rep.store}: {rep.runs} run dirs; read {rep.read}, unchanged {rep.unchanged}, "
        f"removed {rep.removed} ({rep.seconds:.1f} s)"
    )
    for e in rep.errors:
        print(f"  error: {e}", file=sys.stderr)
    return 1 if rep.errors else 0


def cmd_query(args) -> int:
    import duckdb

    from . import ingest

    if args.history is not None:
        return _query_history(Path(args.history), args.sql, args.format)
    root = _dir(args.dir)
    if not args.no_ingest:
        rep = ingest.ingest(root, pcap=not args.no_pcap)
        for e in rep.errors:
            print(f"ingest error: {e}", file=sys.stderr)
    con = ingest.connect(root)
    if args.tables:
        for t in ingest.TABLES:
            cols = con.execute(f"DESCRIBE {t}").fetchall()
            n = con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            print(f"{t} ({n} rows): " + ", ".join(f"{c[0]} {c[1]}" for c in cols))
        return 0
    if not args.sql:
        raise SpecError(
            "mptlab query: give a SQL statement (or --tables); tables: " + ", ".join(ingest.TABLES)
        )
    try:
        df = con.execute(args.sql).df()
    except duckdb.Error as exc:
        print(f"mptlab query: {exc}", file=sys.stderr)
        return 2
    _print_df(df, args.format)
    return 0


def _query_history(root: Path, sql: str | None, fmt: str) -> int:
    """``mptlab query --history [ROOT] SQL``: the view ``history`` over every
    night's per-variant statistics (docs/deployment.md, "Nightly")."""
    import duckdb

    from . import ingest

    if not ingest.history_files(root):
        raise SpecError(
            f"{root}: no nightly history ({ingest.HISTORY_DIR}/*.parquet); "
            "run `mptlab nightly` first"
        )
    con = ingest.connect_history(root)
    sql = (
        sql
        or "SELECT stamp, experiment, variant, metric, median, ci_lo, ci_hi, n, n_runs FROM history ORDER BY stamp, experiment, variant, metric"
    )
    try:
        df = con.execute(sql).df()
    except duckdb.Error as exc:
        print(f"mptlab query: {exc}", file=sys.stderr)
        return 2
    _print_df(df, fmt)
    return 0


def cmd_stats(args) -> int:
    import pandas as pd

    from . import ingest, stats

    root = _dir(args.dir)
    if not args.no_ingest:
        ingest.ingest(root, pcap=not args.no_pcap)
    runs = stats.qualify_variants(ingest.load_runs(root))
    if not len(runs):
        raise SpecError(f"{root}: no runs")
    if args.by not in runs:
        raise SpecError(f"--by {args.by}: not a column of the runs table; e.g. variant, scheduler")
    ok = stats.ok_runs(runs)
    metrics = args.metric or stats.metric_columns(ok)
    bad = [m for m in metrics if m not in runs]
    if bad:
        raise SpecError(
            f"--metric {', '.join(bad)}: not in the runs table; metrics: "
            f"{', '.join(stats.metric_columns(ok))}"
        )
    not_ok_runs = runs[runs["status"] != "ok"]
    not_ok = f", not ok: {breakdown(not_ok_runs['status'])}" if len(not_ok_runs) else ""
    print(
        f"{root}: {len(runs)} runs, {len(ok)} ok{not_ok} (statistics over ok runs; n per group below)"
    )
    for _, r in not_ok_runs.iterrows():  # never silently left out: each by name, with its reason
        reason = str(r.get("reason") or r.get("result_error") or "")
        print(f"  {r['status']}: {r['run_id']}: {reason[:300]}")
    summ = stats.summarize(runs, metrics, by=args.by, seed=args.seed)
    _print_df(summ.drop(columns=["conf"]), args.format)
    if args.reference is not None:
        groups = list(dict.fromkeys(ok[args.by]))
        if args.reference not in groups:
            raise SpecError(
                f"--reference {args.reference}: not a {args.by} with ok runs; allowed: "
                f"{', '.join(map(str, groups))}"
            )
        print(
            f"\nagainst {args.reference} (relative difference of means, 95 % bootstrap CI, "
            "two-sided Mann-Whitney U):"
        )
        pw = pd.concat(
            [stats.pairwise(runs, m, args.reference, by=args.by, seed=args.seed) for m in metrics],
            ignore_index=True,
        )
        _print_df(pw.drop(columns=["conf"], errors="ignore"), args.format)
    if args.effect:
        print(
            f"\nrepetitions per {args.by} for a {args.effect:.1%} change (alpha {args.alpha}, power {args.power}):"
        )
        rows = []
        for m in metrics:
            for g, sub in ok.groupby(args.by, sort=False):
                v = pd.to_numeric(sub[m], errors="coerce").dropna()
                if len(v) < 2 or v.mean() == 0 or v.std(ddof=1) == 0:
                    rows.append(
                        {
                            "metric": m,
                            args.by: g,
                            "n": len(v),
                            "cv": math.nan,
                            "n_t_test": None,
                            "n_mann_whitney": None,
                        }
                    )
                    continue
                cv = float(v.std(ddof=1) / abs(v.mean()))
                r = stats.reps_needed(args.effect, cv, alpha=args.alpha, power=args.power)
                rows.append(
                    {
                        "metric": m,
                        args.by: g,
                        "n": len(v),
                        "cv": cv,
                        "n_t_test": r["n_t_test"],
                        "n_mann_whitney": r["n_mann_whitney"],
                    }
                )
        _print_df(pd.DataFrame(rows), args.format)
    return 0


def cmd_report(args) -> int:
    from . import report

    root = _dir(args.dir)
    if (root / "sweep.json").exists():  # a sweep root (mptlab sweep): its forest plots
        from . import sweep

        try:
            print(sweep.build(root)["html"])
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        return 0
    try:
        out = report.build(
            root,
            out=Path(args.out) if args.out else None,
            metrics=args.metric,
            reference=args.reference,
            by=args.by,
            pcap=not args.no_pcap,
            claims_file=Path(args.file) if args.file else None,
        )
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    print(out)
    return 0


def _reproduce_target(args) -> tuple[Path, str | None]:
    """(results dir, experiment name or None: every experiment in the dir)."""
    target = Path(args.target)
    if args.dir is None and target.is_dir():
        return target, None
    name = args.target
    if args.dir is not None:
        return _dir(args.dir), name
    for cand in (args.results / name, args.results / f"{name}-quick"):
        if cand.is_dir():
            return cand, name
    raise SpecError(
        f"mptlab reproduce: no campaign dir {args.results / name} (nor {name}-quick); "
        f"run `mptlab run {name}` or give the dir: mptlab reproduce {name} DIR"
    )


# options of `reproduce --all` only, by dest (and its flag, for the error)
ALL_ONLY = {
    "root": "--results",
    "out": "--out",
    "markdown": "--markdown",
    "run": "--run",
    "reps": "--reps",
    "jobs": "--jobs",
    "quick": "--quick",
}


def cmd_reproduce_all(args) -> int:
    """``reproduce --all``: every experiment with claims, one page
    (``args.reproduce_all``: ``mptlab.api.reproduce_all``, given by mptlab.cli
    because running what is missing is the campaign's part, above this one)."""
    from . import reproduce_page

    if args.target is not None:
        given = " ".join(x for x in (args.target, args.dir) if x)
        raise SpecError(
            f"mptlab reproduce --all takes no NAME or DIR (got {given}): it reads every "
            "experiment with claims; give the results root with --results ROOT"
        )
    if not args.run and (args.reps is not None or args.jobs is not None or args.quick):
        raise SpecError("--reps, --jobs and --quick are for --run (run what has no runs yet)")
    if args.run and args.reps is None:
        raise SpecError(
            "--run needs --reps N: the experiments' own repetitions can take hours each"
        )
    root = Path(args.root) if args.root else args.results
    out = Path(args.out) if args.out else root / reproduce_page.PAGE
    frame = args.reproduce_all(
        results=root,
        out=out,
        markdown=Path(args.markdown) if args.markdown else None,
        pcap=not args.no_pcap,
        file=Path(args.file) if args.file else None,
        seed=args.seed,
        do_ingest=not args.no_ingest,
        run_missing=args.run,
        repetitions=args.reps,
        jobs=args.jobs,
        quick=args.quick,
    )
    print(reproduce_page.text_summary(frame, root))
    print(f"page: {out}")
    if args.markdown:
        print(f"markdown: {args.markdown}")
    return 0


def cmd_reproduce(args) -> int:
    from . import ingest, reproduce

    if args.all:
        return cmd_reproduce_all(args)
    given = [flag for dest, flag in ALL_ONLY.items() if getattr(args, dest) not in (None, False)]
    if given:
        raise SpecError(f"{', '.join(given)}: only with --all (every experiment with claims)")
    if args.target is None:
        raise SpecError(
            "mptlab reproduce: give an experiment NAME, a results DIR, or --all "
            "(every experiment with claims)"
        )
    root, name = _reproduce_target(args)
    if not args.no_ingest:
        ingest.ingest(root, pcap=not args.no_pcap)
    runs = ingest.load_table(root, "runs")
    if not len(runs):
        raise SpecError(f"{root}: no run dirs found")
    present = sorted({str(e) for e in runs["experiment"].dropna()})
    if name is not None and name not in present:
        raise SpecError(
            f"{root}: no runs of {name}; experiments there: {', '.join(present) or 'none'}"
        )
    names = [name] if name else present
    blocks = []
    for exp in reproduce.expectations(names, Path(args.file) if args.file else None):
        if exp.error:
            if name is not None:
                raise SpecError(exp.error)
            blocks.append(f"{exp.experiment}: no claims ({exp.error})")
            continue
        if not exp.claims:
            blocks.append(f"{exp.experiment}: no claims (the experiment has no expect: list)")
            continue
        mine = reproduce.experiment_runs(runs, exp.experiment)
        results = reproduce.evaluate(exp.claims, mine, seed=args.seed)
        blocks.append(reproduce.render_text(exp, results, reproduce.quick_campaigns(mine)))
    print(f"{root}: the papers' claims (expect:) against {len(runs)} run dirs\n")
    print("\n\n".join(blocks))
    return 0


def cmd_compare(args) -> int:
    from . import compare

    rules_path = Path(args.rules) if args.rules else args.default_rules()
    rules = compare.load_rules(rules_path)
    res = compare.compare(
        _dir(args.baseline), _dir(args.current), rules, strict=args.strict, pcap=not args.no_pcap
    )
    print(f"baseline {args.baseline}\ncurrent  {args.current}\nrules    {rules_path}\n")
    print(compare.render(res))
    return 0 if res.ok else 1


def cmd_pcap(args) -> int:
    from . import pcap

    captures: dict[str, list] = {}
    for f in args.files:
        host = Path(f).name.split(".")[0].rsplit("-", 1)[0] if args.by_name else "capture"
        try:
            captures.setdefault(host, []).append(pcap.read(f))
        except pcap.PcapError as exc:
            raise SpecError(str(exc)) from None
    res = pcap.analyze(captures, args.client or [], args.server or [])
    print(f"{res.packets} packets ({res.skipped} not IPv4/TCP)")
    print("\nsubflows:")
    _print_df(res.subflows.drop(columns=["first_ts", "last_ts"]), args.format)
    print("\nconnections:")
    _print_df(res.connections, args.format)
    if args.ofo_csv:
        res.ofo.to_csv(args.ofo_csv, index=False)
        print(f"\nOFO time series -> {args.ofo_csv}")
    return 0


def bad_input_is_spec_error(func):
    """Bad input becomes SpecError (mptlab prints it and exits 2), not a traceback."""
    from .ingest import IngestError
    from .pcap import PcapError

    @wraps(func)
    def run(args):
        try:
            return func(args)
        except (IngestError, PcapError, FileNotFoundError) as exc:
            raise SpecError(str(exc)) from None

    return run


def add_subcommands(
    sub, results: Path, rules: Callable[[], Path], reproduce_all: Callable[..., Any]
) -> None:
    """Register the analysis subcommands on mptlab's subparsers; ``results``:
    ``query``'s default dir, ``rules``: ``compare``'s default rules file,
    ``reproduce_all``: what ``reproduce --all`` calls (``mptlab.api.reproduce_all``:
    it may run campaigns, which this package cannot import)."""
    fmt = {"choices": ["table", "csv", "json"], "default": "table", "help": "output format"}

    p = sub.add_parser("ingest", help="run dirs -> Parquet tables (incremental)")
    p.add_argument("dir", help="campaign dir or results dir")
    p.add_argument("--force", action="store_true", help="rebuild the store from scratch")
    p.add_argument("--no-pcap", action="store_true", help="skip packet captures")
    p.set_defaults(func=bad_input_is_spec_error(cmd_ingest))

    p = sub.add_parser("query", help="SQL (DuckDB) over the ingested tables")
    p.add_argument(
        "sql",
        nargs="?",
        help='e.g. "SELECT variant, avg(goodput_mbps), count(*) FROM runs GROUP BY 1"',
    )
    p.add_argument("-d", "--dir", default=str(results), help=f"results dir (default: {results})")
    p.add_argument("--tables", action="store_true", help="list the tables and their columns")
    p.add_argument(
        "--history",
        nargs="?",
        const=str(results / "nightly"),
        help=f"query the nightly history (view `history`) under this root "
        f"(default: {results / 'nightly'}) instead of campaigns",
    )
    p.add_argument("--no-ingest", action="store_true", help="query the store as it is")
    p.add_argument("--no-pcap", action="store_true", help="ingest without packet captures")
    p.add_argument("--format", **fmt)
    p.set_defaults(func=bad_input_is_spec_error(cmd_query))

    p = sub.add_parser("stats", help="statistics per variant (always with n)")
    p.add_argument("dir")
    p.add_argument("--metric", action="append", help="metric column (repeatable; default: all)")
    p.add_argument("--by", default="variant", help="group column (default: variant)")
    p.add_argument("--reference", help="compare every group against this one")
    p.add_argument(
        "--effect",
        type=cliargs.fraction(0, 10),
        help="relative effect (e.g. 0.05) for repetitions needed",
    )
    p.add_argument("--alpha", type=cliargs.fraction(0, 0.5), default=0.05)
    p.add_argument("--power", type=cliargs.fraction(0, 0.999), default=0.8)
    p.add_argument("--seed", type=cliargs.SEED, default=0, help="bootstrap seed")
    p.add_argument("--no-ingest", action="store_true")
    p.add_argument("--no-pcap", action="store_true")
    p.add_argument("--format", **fmt)
    p.set_defaults(func=bad_input_is_spec_error(cmd_stats))

    p = sub.add_parser("report", help="self-contained HTML report of a campaign")
    p.add_argument("dir", help="campaign dir (or a results dir: all campaigns below it)")
    p.add_argument("--out", help="HTML file (default: DIR/analysis/report/report.html)")
    p.add_argument("--metric", action="append", help="metric to plot (repeatable)")
    p.add_argument("--reference", help="variant the others are compared with (default: the first)")
    p.add_argument("--by", default="variant", help="group column (default: variant)")
    p.add_argument("--file", help="campaign file with the claims (default: experiments.yaml)")
    p.add_argument("--no-pcap", action="store_true")
    p.set_defaults(func=bad_input_is_spec_error(cmd_report))

    p = sub.add_parser(
        "reproduce", help="the paper's claims (an experiment's expect:) against its runs"
    )
    p.add_argument(
        "target",
        nargs="?",
        help="experiment NAME (its claims), or a results DIR (every experiment in it)",
    )
    p.add_argument(
        "dir", nargs="?", help=f"results dir of NAME (default: {results}/NAME, or NAME-quick)"
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="every experiment with claims (of experiments.yaml or --file) against its runs "
        "below --results: one HTML page",
    )
    p.add_argument(
        "--results",
        dest="root",
        metavar="ROOT",
        help=f"with --all: results root (default: {results})",
    )
    p.add_argument("--out", help="with --all: the page (default: ROOT/reproduction.html)")
    p.add_argument("--markdown", metavar="FILE", help="with --all: the summary tables as Markdown")
    p.add_argument(
        "--run",
        action="store_true",
        help="with --all: first run (as mptlab run) each experiment with claims that has no "
        "campaign dir yet (neither ROOT/NAME nor ROOT/NAME-quick)",
    )
    p.add_argument("--reps", type=cliargs.REPS, help="with --run: repetitions (required)")
    p.add_argument("--jobs", type=cliargs.JOBS, help="with --run: guests at most at once")
    p.add_argument(
        "--quick", action="store_true", help="with --run: mptlab run --quick (into NAME-quick)"
    )
    p.add_argument("--file", help="campaign file with the claims (default: experiments.yaml)")
    p.add_argument("--seed", type=cliargs.SEED, default=0, help="bootstrap seed")
    p.add_argument("--no-ingest", action="store_true")
    p.add_argument("--no-pcap", action="store_true")
    p.set_defaults(
        func=bad_input_is_spec_error(cmd_reproduce), results=results, reproduce_all=reproduce_all
    )

    p = sub.add_parser("compare", help="compare a campaign with a baseline (exit 1 on regression)")
    p.add_argument("baseline")
    p.add_argument("current")
    p.add_argument("--rules", help="rules YAML (default: compare-rules.yaml)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="changes beyond tolerance fail even if not significant",
    )
    p.add_argument("--no-pcap", action="store_true")
    p.set_defaults(func=bad_input_is_spec_error(cmd_compare), default_rules=rules)

    p = sub.add_parser("pcap", help="MPTCP metrics from pcap/pcapng files")
    p.add_argument("files", nargs="+")
    p.add_argument("--client", action="append", help="client address, in path order (repeatable)")
    p.add_argument("--server", action="append", help="server address, in path order (repeatable)")
    p.add_argument(
        "--by-name",
        action="store_true",
        help="files named HOST-DEV.pcap: one capture host per HOST (receiver-side OFO)",
    )
    p.add_argument("--ofo-csv", help="write the OFO/HOL time series here")
    p.add_argument("--format", **fmt)
    p.set_defaults(func=bad_input_is_spec_error(cmd_pcap))
