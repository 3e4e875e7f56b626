"""The nightly history store: every night's per-variant statistics, in Parquet.

Layout under the nightly root (``results/nightly``)::

    history/<stamp>.parquet     one file per night (each experiment added once, atomically)

One row per night x experiment x variant x metric, with these columns
(``COLUMNS``, in this order):

    stamp         str    the night, UTC ``YYYYmmdd-HHMMSS`` (sorts in time)
    time          str    ISO 8601 UTC time of the night's start
    experiment    str
    campaign      str    the campaign dir, relative to the root
    report        str    the night's report.html, relative to the root ("" if none)
    commit        str    git commit of the checkout ("-dirty" suffix if modified)
    kernel_key    str    the kernel build's cache key
    modules_key   str    the modules build's key (basename of its dir)
    clock         str    virtual | real | mixed
    seed          str    the campaign seed (``mptlab run --seed``: run order and per-run seeds)
    seeds         str    hash of the runs' (variant, repetition, seed): equal -> same runs
    variant       str
    metric        str    a runs-table column (or ok_rate)
    better        str    higher | lower | "" (no direction known)
    n             int    runs with a value of the metric
    n_runs        int    runs of the variant, failed and stalled included
    n_failed      int    runs that did not end ok
    n_stalled     int    runs that stalled
    median        float
    ci_lo, ci_hi  float  95 % bootstrap CI of the median
    mean          float
    values        str    hash of the per-run values in run order: equal -> same numbers

``load`` also puts each night's machine inputs of the guest into the frame's
``attrs["guest_inputs"]``: ``{"<stamp> <experiment>": host digest}``, read
from the night's campaign.json (``guest_inputs.host``, ``mptlab.campaign.
provenance``); nights from before it was recorded, or whose campaign dir is
gone, are missing.  Not a column: the schema above stays as published sites
and their readers know it.  ``mptlab.nightly.detect`` reads it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis import compare as cmp
from ..analysis import ingest, stats
from ..analysis.compare import Rule
from ..rundir import OK, STALLED, CampaignDir

COLUMNS: tuple[str, ...] = (
    "stamp",
    "time",
    "experiment",
    "campaign",
    "report",
    "commit",
    "kernel_key",
    "modules_key",
    "clock",
    "seed",
    "seeds",
    "variant",
    "metric",
    "better",
    "n",
    "n_runs",
    "n_failed",
    "n_stalled",
    "median",
    "ci_lo",
    "ci_hi",
    "mean",
    "values",
)
INT_COLUMNS = ("n", "n_runs", "n_failed", "n_stalled")
FLOAT_COLUMNS = ("median", "ci_lo", "ci_hi", "mean")
STR_COLUMNS = tuple(c for c in COLUMNS if c not in INT_COLUMNS + FLOAT_COLUMNS)
# variant_stats' columns: the per-variant part of COLUMNS
STATS_COLUMNS = ("variant", "metric", *INT_COLUMNS, *FLOAT_COLUMNS, "values")

HISTORY = ingest.HISTORY_DIR
STAMP_FORMAT = "%Y%m%d-%H%M%S"
_STAMP = re.compile(r"^\d{8}-\d{6}$")
HASH_CHARS = 16  # 64 bits: no accidental collision among a few thousand nights
OK_RATE = "ok_rate"
# run attempts that are the run (ingest.load_runs keeps these): a superseded
# or interrupted attempt was run again and must not count twice
CURRENT_ATTEMPTS = ("current", "incomplete")


# ------------------------------------------------------------------ hashes
def short_hash(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:HASH_CHARS]


def _number_text(v) -> str:
    """A value as hashed: every number as a float's repr, so an int64 column
    and the float64 the same column becomes once a run lacks it hash alike."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "nan"
    return "nan" if math.isnan(f) else repr(f)


def _key_text(v) -> str:
    """A repetition or seed as hashed: an integer (a float column of integers
    after a missing value must not change the hash)."""
    if isinstance(v, int | np.integer):
        return str(int(v))  # exact, however large the seed
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "nan"
    if math.isnan(f):
        return "nan"
    return str(int(f)) if f.is_integer() else repr(f)


def seeds_hash(runs: pd.DataFrame) -> str:
    """The runs' identity: sorted (variant, repetition, seed)."""
    keys = [
        f"{v}\t{_key_text(r)}\t{_key_text(s)}"
        for v, r, s in zip(runs["variant"], runs["repetition"], runs["seed"], strict=True)
    ]
    return short_hash(sorted(keys))


# ------------------------------------------------------------------ statistics
def current_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run once: its current attempt (or its incomplete one)."""
    if "attempt" not in runs:
        return runs
    return runs[runs["attempt"].isin(CURRENT_ATTEMPTS)]


def _in_run_order(runs: pd.DataFrame) -> pd.DataFrame:
    # stable, so that runs without repetition or seed keep the table's order
    return runs.sort_values(["repetition", "seed"], kind="stable", na_position="last")


def _metric_stats(values: np.ndarray, stat) -> dict:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return {"n": 0, "median": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "mean": math.nan}
    lo, hi = stats.bootstrap_ci(finite, stat)  # seeded: the same numbers give the same CI
    centre = float(stat(finite))
    return {
        "n": len(finite),
        "median": centre,
        "ci_lo": lo,
        "ci_hi": hi,
        "mean": float(np.mean(finite)),
    }


def _metric_values(runs: pd.DataFrame, metric: str, ok: pd.Series) -> np.ndarray:
    """Per run, in run order, the metric of an ok run and NaN for any other:
    a stalled or failed run's result.json still carries the metrics measured
    until it ended, which must not mix with complete runs (as in
    ``stats.ok_runs``, the report and ``compare``)."""
    v = pd.to_numeric(runs[metric], errors="coerce").astype("float64")
    return v.where(ok).to_numpy(dtype=float)


def _variant_rows(runs: pd.DataFrame, metrics: list[str]) -> list[dict]:
    runs = _in_run_order(runs)
    status = runs["status"].fillna("")
    ok = status.eq(OK)
    counts = {
        "n_runs": len(runs),
        "n_failed": int((~ok).sum()),
        "n_stalled": int(status.eq(STALLED).sum()),
    }
    rows = []
    for metric in metrics:
        if metric == OK_RATE:
            # every run has an outcome; its "median" is the share of ok runs,
            # since the median of 0/1 outcomes only says whether most were ok
            values = ok.to_numpy(dtype=float)
            summary = _metric_stats(values, np.mean)
        else:
            values = _metric_values(runs, metric, ok)
            summary = _metric_stats(values, np.median)
        text = [_number_text(v) for v in values]
        rows.append({"metric": metric, **counts, **summary, "values": short_hash(text)})
    return rows


def metrics_of(runs: pd.DataFrame) -> list[str]:
    """Every numeric metric column of a runs table, then ``ok_rate``."""
    return [m for m in stats.metric_columns(runs) if m != OK_RATE] + [OK_RATE]


def variant_stats(runs: pd.DataFrame, metrics: list[str] | None = None) -> pd.DataFrame:
    """One row per variant x metric of a runs table (one experiment's runs):
    ``STATS_COLUMNS``.  ``n_runs`` counts every run, failed and stalled ones
    included; the statistics are over the ok runs that have a value."""
    missing = {"variant", "status", "repetition", "seed"} - set(runs.columns)
    if missing:
        raise ValueError(f"runs table lacks the column(s) {', '.join(sorted(missing))}")
    runs = current_runs(runs)
    metrics = metrics if metrics is not None else metrics_of(runs)
    unknown = [m for m in metrics if m != OK_RATE and m not in runs]
    if unknown:
        raise ValueError(f"runs table has no metric column(s) {', '.join(unknown)}")
    rows = []
    for variant, sub in runs.groupby("variant", sort=False):
        rows += [{"variant": str(variant), **r} for r in _variant_rows(sub, metrics)]
    return pd.DataFrame(rows, columns=list(STATS_COLUMNS))


# ------------------------------------------------------------------ provenance
def stamp_time(stamp: str) -> str:
    """The ISO 8601 UTC time of a night's stamp."""
    if not _STAMP.match(stamp):
        raise ValueError(f"night stamp {stamp!r}: expected UTC YYYYmmdd-HHMMSS")
    try:
        t = dt.datetime.strptime(stamp, STAMP_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError as exc:
        raise ValueError(f"night stamp {stamp!r}: not a time ({exc})") from None
    return t.isoformat()


def provenance(info: dict, runs: pd.DataFrame | None = None) -> dict[str, str]:
    """commit, kernel_key, modules_key, clock and the campaign seed from campaign.json."""
    kernel = info.get("kernel") or {}
    clocks = set(info.get("clocks") or [])
    if not clocks and runs is not None and "clock" in runs:
        clocks = set(runs["clock"].dropna())
    if not clocks:
        clocks = {"real"}  # campaigns from before clocks existed ran on real time
    return {
        "commit": str(info.get("git_commit") or ""),
        "kernel_key": str(kernel.get("kernel_key") or ""),
        "modules_key": Path(str(kernel.get("modules_dir") or "")).name,
        "clock": clocks.pop() if len(clocks) == 1 else "mixed",
        "seed": str(info.get("order_seed", "")),
    }


def better_of(rules: list[Rule] | None, metric: str) -> str:
    """The metric's better direction: the first rule naming it, else ""."""
    return next((r.better for r in rules or [] if r.metric == metric), "")


def _relative(path: Path | None, root: Path, what: str) -> str:
    if path is None:
        return ""
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        raise ValueError(f"{path}: the {what} is not below the nightly root {root}") from None


def _experiments(runs: pd.DataFrame, info: dict) -> pd.Series:
    """Each run's experiment (campaign.json's when a run does not say)."""
    names = info.get("experiment") or []
    fallback = names[0] if len(names) == 1 else ""
    if "experiment" not in runs:
        return pd.Series(fallback, index=runs.index, dtype="str")
    return runs["experiment"].fillna(fallback).astype(str)


# ------------------------------------------------------------------ the table
def typed(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with exactly COLUMNS and stable dtypes (text never None)."""
    out = pd.DataFrame(index=table.index)
    for c in COLUMNS:
        if c in STR_COLUMNS:
            out[c] = table[c].fillna("").astype(str)
        elif c in INT_COLUMNS:
            out[c] = table[c].astype("int64")
        else:
            out[c] = table[c].astype("float64")
    return out.reset_index(drop=True)


def empty() -> pd.DataFrame:
    return typed(pd.DataFrame({c: [] for c in COLUMNS}))


def table_from_runs(
    runs: pd.DataFrame,
    info: dict,
    *,
    stamp: str,
    campaign: str = "",
    report: str = "",
    rules: list[Rule] | None = None,
) -> pd.DataFrame:
    """A night's history rows from its runs table and campaign.json (``info``)."""
    night = {"stamp": stamp, "time": stamp_time(stamp), "campaign": campaign, "report": report}
    night.update(provenance(info, runs))
    runs = current_runs(runs)
    experiments = _experiments(runs, info)
    parts = []
    for experiment in dict.fromkeys(experiments):
        sub = runs[experiments == experiment]
        part = variant_stats(sub, metrics_of(sub))
        part["experiment"] = experiment
        part["seeds"] = seeds_hash(sub)
        part["better"] = [better_of(rules, m) for m in part["metric"]]
        parts.append(part.assign(**night))
    if not parts:
        return empty()
    return typed(pd.concat(parts, ignore_index=True))


def night_table(
    campaign: Path,
    *,
    root: Path,
    stamp: str,
    report: Path | None = None,
    rules: list[Rule] | None = None,
    pcap: bool = False,
) -> pd.DataFrame:
    """The history rows of one night's campaign (ingested first, as ``compare`` does)."""
    campaign = Path(campaign)
    info = CampaignDir(campaign).info()
    if info is None:
        raise FileNotFoundError(f"{campaign}: no campaign.json (not a campaign dir)")
    runs = cmp._runs(campaign, pcap)
    return table_from_runs(
        runs,
        info,
        stamp=stamp,
        campaign=_relative(campaign, root, "campaign"),
        report=_relative(report, root, "report"),
        rules=rules,
    )


# ------------------------------------------------------------------ the store
def history_dir(root: Path) -> Path:
    return Path(root) / HISTORY


def _files(root: Path) -> list[Path]:
    return ingest.history_files(root)


def _check_table(table: pd.DataFrame, where: Path) -> str:
    """The night of a table fit to append; raises ValueError otherwise."""
    if tuple(table.columns) != COLUMNS:
        missing = [c for c in COLUMNS if c not in table.columns]
        extra = [c for c in table.columns if c not in COLUMNS]
        raise ValueError(
            f"{where}: table to append: columns differ from history.COLUMNS"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unknown: {', '.join(map(str, extra))}" if extra else "")
            + ("; same names, other order" if not missing and not extra else "")
        )
    stamps = sorted(set(table["stamp"]))
    if len(stamps) != 1:
        found = ", ".join(stamps) if stamps else "none (no rows)"
        raise ValueError(
            f"{where}: table to append: expected the rows of one night; stamps: {found}"
        )
    stamp_time(stamps[0])  # a stamp names a file: it must be a stamp
    return stamps[0]


def _night_so_far(target: Path, table: pd.DataFrame) -> pd.DataFrame | None:
    """The rows ``target`` holds already (None if it does not exist); refuses
    to record an experiment of that night twice."""
    if not target.exists():
        return None
    try:
        held = typed(pd.read_parquet(target))
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{target}: unreadable history file: {exc}") from None
    twice = sorted(set(held["experiment"]) & set(table["experiment"]))
    if twice:
        raise FileExistsError(
            f"{target}: night {target.stem} already holds experiment(s) {', '.join(twice)}; "
            "a night's experiment is recorded once (delete its rows or the file to "
            "record it again)"
        )
    return held


def append(root: Path, table: pd.DataFrame) -> Path:
    """Add one night's table to ``<root>/history/<stamp>.parquet``.  The
    nightly run appends each experiment of a night in turn, so a night's file
    grows by whole experiments; an experiment already there is refused."""
    stamp = _check_table(table, history_dir(root))
    target = history_dir(root) / f"{stamp}.parquet"
    held = _night_so_far(target, table)
    rows = typed(table) if held is None else pd.concat([held, typed(table)], ignore_index=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a reader sees the old file or the new one, never a part: the temporary's
    # name does not match *.parquet, and the rename is atomic within the dir
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        rows.to_parquet(tmp, index=False)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# quoted: "values" is an SQL keyword
_SELECT = ", ".join(f'"{c}"' for c in COLUMNS)


def load(root: Path, experiment: str | None = None) -> pd.DataFrame:
    """Every night of the history (of ``experiment``), sorted by stamp."""
    import duckdb

    if not _files(root):
        return empty()
    where = "WHERE experiment = ?" if experiment is not None else ""
    sql = f"SELECT {_SELECT} FROM history {where} ORDER BY stamp, experiment, variant, metric"
    con = ingest.connect_history(root)
    try:
        df = con.execute(sql, [experiment] if experiment is not None else []).df()
    except duckdb.Error as exc:
        raise ValueError(f"{history_dir(root)}: cannot read the history: {exc}") from None
    finally:
        con.close()
    out = typed(df)
    out.attrs[GUEST_INPUTS] = guest_inputs_of(root, out)
    return out


GUEST_INPUTS = "guest_inputs"  # the key in a loaded history's attrs


def guest_inputs_of(root: Path, table: pd.DataFrame) -> dict[str, str]:
    """``{"<stamp> <experiment>": guest_inputs.host}`` of every night's
    campaign (the ``campaign`` column, relative to ``root``) that recorded it."""
    out = {}
    pairs = table[["stamp", "experiment", "campaign"]].drop_duplicates()
    for stamp, experiment, campaign in pairs.itertuples(index=False):
        if not campaign:
            continue
        info = CampaignDir(Path(root) / campaign).info() or {}
        host = (info.get("guest_inputs") or {}).get("host")
        if host:
            out[f"{stamp} {experiment}"] = str(host)
    return out


def query(root: Path, sql: str) -> pd.DataFrame:
    """Run ``sql`` over the view ``history`` (every night's rows)."""
    import duckdb

    if not _files(root):
        raise ValueError(
            f"{root}: no nightly history yet (no {HISTORY}/*.parquet); "
            "`mptlab nightly` writes one file per night"
        )
    con = ingest.connect_history(root)
    try:
        return con.execute(sql).df()
    except duckdb.Error as exc:
        raise ValueError(f"{history_dir(root)}: query failed: {exc}") from None
    finally:
        con.close()
