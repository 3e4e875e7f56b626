"""Run dirs -> tidy tables (Parquet), incrementally.

    report = ingest(Path("results/blest-3g-wlan"))      # writes results/blest-3g-wlan/analysis/
    runs = load_table(Path("results/blest-3g-wlan"), "runs")
    con = connect(Path("results/blest-3g-wlan"))          # DuckDB with one view per table

``DIR`` is a campaign dir (holding ``campaign.json`` or ``runs/``) or any dir
above campaign dirs (e.g. ``results/``).  The store is ``DIR/analysis/``:
one sub-directory of Parquet part files per table and ``index.json``, which
records every ingested run dir with the mtime of its ``run.json``.  A re-run
reads only run dirs that are new or whose ``run.json`` changed, and drops the
rows of run dirs that disappeared.  A run dir's rows come from one reader
per instrument (``mptlab.analysis.readers``: ``read_run`` loops over them);
the functions tests and notebooks call by name here (``ofo_bins``,
``rmem_occupancy``, ...) are the readers', re-exported.  Tables and
columns: docs/analysis.md.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import rundir
from ..rundir import CampaignDir, RunDir
from .readers import READERS, IngestError, Run
from .readers.nstat import COUNTER_COLUMNS, NSTAT_COLUMNS, counter_columns, nstat_rows
from .readers.ofo import OFO_BIN_S, ofo_bins, ofo_occupancy, ofo_sampled_mean
from .readers.samplers import RCVBUF_PREFIX, RMEM_PREFIX, rmem_occupancy
from .readers.sbd import read_scores as _read_sbd_scores

# re-exported: the readers' functions that tests and notebooks call by these names
__all__ = [
    "COUNTER_COLUMNS",
    "NSTAT_COLUMNS",
    "OFO_BIN_S",
    "RCVBUF_PREFIX",
    "RMEM_PREFIX",
    "IngestError",
    "IngestReport",
    "RunTables",
    "_read_sbd_scores",
    "campaign_dirs",
    "connect",
    "connect_history",
    "counter_columns",
    "history_files",
    "ingest",
    "load_runs",
    "load_table",
    "nstat_rows",
    "ofo_bins",
    "ofo_occupancy",
    "ofo_sampled_mean",
    "read_run",
    "rmem_occupancy",
    "store_dir",
]

STORE = "analysis"
SCHEMA = 6  # bump when tables change: the next ingest rebuilds the store
TABLES = [
    "runs",
    "kernel_connections",
    "kernel_subflows",
    "kernel_fec",
    "fec_ratio",
    "sbd_scores",
    "ss",
    "mptcp",
    "kernel_ofo",
    "series",
    "nstat",
    "pcap_subflows",
    "pcap_connections",
    "pcap_ofo",
]
MAX_PARTS = 16  # parts per table before they are merged into one


# ------------------------------------------------------------------ discovery
def campaign_dirs(root: Path) -> list[Path]:
    """Campaign dirs at or below ``root`` (a dir with campaign.json or runs/)."""
    root = Path(root)
    if not root.is_dir():
        raise IngestError(f"{root}: no such directory (expected a campaign dir or a results dir)")
    if CampaignDir.is_campaign(root):
        return [root]
    found = []
    for dirpath, dirnames, _files in os.walk(root):
        d = Path(dirpath)
        dirnames[:] = sorted(n for n in dirnames if n not in (STORE, rundir.RUNS, rundir.TRACES))
        if d != root and CampaignDir.is_campaign(d):
            found.append(d)
            dirnames[:] = []
        elif len(d.relative_to(root).parts) >= 4:
            dirnames[:] = []
    return found


# ------------------------------------------------------------------ one run
@dataclass
class RunTables:
    row: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def read_run(run_dir: RunDir | Path, run_id: str, campaign: str, pcap: bool = True) -> RunTables:
    """Every table's rows for one run dir (any format, ``mptlab.rundir``): the
    readers' scalars (the run's row) and tables, one reader per instrument
    (``mptlab.analysis.readers``), in their order."""
    run = Run.open(run_dir, run_id, campaign, pcap)
    for reader in READERS:
        scalars, tables = reader.read(run)
        run.row.update(scalars)
        run.tables.update(tables)
    for df in run.tables.values():
        df.insert(0, "run_id", run_id)
    return RunTables(run.row, run.tables)


# ------------------------------------------------------------------ the store
@dataclass
class IngestReport:
    store: Path
    read: int = 0
    unchanged: int = 0
    removed: int = 0
    runs: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def store_dir(root: Path) -> Path:
    return Path(root) / STORE


def _load_index(store: Path) -> dict:
    path = store / "index.json"
    if not path.exists():
        return {"schema": SCHEMA, "runs": {}, "next_part": 0}
    try:
        idx = json.loads(path.read_text())
    except json.JSONDecodeError:
        return {"schema": SCHEMA, "runs": {}, "next_part": 0}
    if idx.get("schema") != SCHEMA:
        return {"schema": SCHEMA, "runs": {}, "next_part": 0, "rebuild": True}
    return idx


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def ingest(root: Path, pcap: bool = True, force: bool = False, progress=None) -> IngestReport:
    """Bring ``root``/analysis up to date with the run dirs below ``root``."""
    started = time.monotonic()
    root = Path(root)
    campaigns = campaign_dirs(root)
    store = store_dir(root)
    store.mkdir(exist_ok=True)
    index = _load_index(store)
    if force or index.pop("rebuild", False):
        for table in TABLES:
            for f in (store / table).glob("*.parquet"):
                f.unlink()
        index = {"schema": SCHEMA, "runs": {}, "next_part": 0}
    report = IngestReport(store)
    seen: dict[str, tuple[RunDir, str, float | None]] = {}
    for camp in campaigns:
        cname = camp.name if camp == root else str(camp.relative_to(root))
        for rd in CampaignDir(camp).run_dirs():
            rel = str(rd.path.relative_to(root))
            seen[rel] = (rd, cname, _mtime(rd.file(rundir.RUN)))
    old = index["runs"]
    todo = [
        rel
        for rel, (_rd, _c, m) in seen.items()
        if rel not in old or m is None or old[rel].get("mtime") != m
    ]
    gone = [rel for rel in old if rel not in seen]
    stale = set(todo) | set(gone)
    stale_ids = {old[rel]["run_id"] for rel in stale if rel in old}
    if stale_ids:
        _drop_rows(store, stale_ids)
    report.removed = len(gone)
    report.unchanged = len(seen) - len(todo)
    rows: list[dict] = []
    parts: dict[str, list[pd.DataFrame]] = {}
    for i, rel in enumerate(sorted(todo)):
        rd, cname, mtime = seen[rel]
        run_id = (
            f"{cname}/{rd.variant}/{rd.path.name}"
            if cname != "."
            else f"{rd.variant}/{rd.path.name}"
        )
        try:
            rt = read_run(rd, run_id, cname, pcap=pcap)
        except Exception as exc:  # noqa: BLE001 - one bad run dir must not stop the ingest
            report.errors.append(f"{rd}: {type(exc).__name__}: {exc}")
            rt = RunTables(
                {
                    "run_id": run_id,
                    "campaign": cname,
                    "run_dir": str(rd.path),
                    "attempt": rd.attempt(),
                    "variant": rd.variant,
                    "status": "unreadable",
                    "reason": f"ingest failed: {exc}",
                }
            )
        rows.append(rt.row)
        for name, df in rt.tables.items():
            parts.setdefault(name, []).append(df)
        index["runs"][rel] = {"run_id": run_id, "mtime": mtime}
        if progress:
            progress(i + 1, len(todo))
    for rel in gone:
        index["runs"].pop(rel, None)
    if rows:
        parts["runs"] = [pd.DataFrame(rows)]
    part_id = index.get("next_part", 0)
    for name, dfs in parts.items():
        df = pd.concat(dfs, ignore_index=True)
        _write_part(store / name, f"part-{part_id:06d}.parquet", df)
    index["next_part"] = part_id + 1
    for name in TABLES:
        _compact(store / name)
    (store / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True))
    report.read = len(todo)
    report.runs = len(seen)
    report.seconds = time.monotonic() - started
    return report


def _clean_for_parquet(df: pd.DataFrame) -> pd.DataFrame:
    for c in df.columns:
        if df[c].dtype == object and df[c].isna().all():
            # e.g. the MPTCP tokens of plain TCP sockets: text, not Parquet's null type
            df[c] = df[c].astype("string")
        elif df[c].dtype == object:
            kinds = {
                type(v)
                for v in df[c]
                if v is not None and not (isinstance(v, float) and math.isnan(v))
            }
            if len(kinds) > 1 or (kinds and not kinds <= {str, bool}):
                if kinds <= {int, float, bool}:
                    df[c] = pd.to_numeric(df[c], errors="coerce")
                else:
                    df[c] = [
                        None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
                        for v in df[c]
                    ]
    return df


def _write_part(table_dir: Path, name: str, df: pd.DataFrame) -> None:
    table_dir.mkdir(parents=True, exist_ok=True)
    tmp = table_dir / (name + ".tmp")
    _clean_for_parquet(df).to_parquet(tmp, index=False)
    tmp.rename(table_dir / name)


def _drop_rows(store: Path, run_ids: set[str]) -> None:
    for table in TABLES:
        for f in sorted((store / table).glob("*.parquet")):
            ids = pd.read_parquet(f, columns=["run_id"])["run_id"]
            if ids.isin(run_ids).any():
                df = pd.read_parquet(f)
                df = df[~df["run_id"].isin(run_ids)]
                if len(df):
                    _write_part(store / table, f.name, df)
                else:
                    f.unlink()


def _compact(table_dir: Path) -> None:
    files = sorted(table_dir.glob("*.parquet"))
    if len(files) <= MAX_PARTS:
        return
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    name = files[-1].name
    _write_part(table_dir, name + ".merged", df)
    for f in files:
        f.unlink()
    (table_dir / (name + ".merged")).rename(table_dir / name)


# ------------------------------------------------------------------ reading
def load_table(root: Path, table: str) -> pd.DataFrame:
    """One table of the store as a DataFrame (empty if it has no rows)."""
    if table not in TABLES:
        raise IngestError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
    files = sorted((store_dir(root) / table).glob("*.parquet"))
    if not files:
        return pd.DataFrame()
    dfs = [pd.read_parquet(f) for f in files]
    return pd.concat(dfs, ignore_index=True) if len(dfs) > 1 else dfs[0]


def load_runs(root: Path, current_only: bool = True) -> pd.DataFrame:
    """The runs table; by default only each run's current attempt."""
    runs = load_table(root, "runs")
    if len(runs) and current_only:
        runs = runs[runs["attempt"].isin(["current", "incomplete"])].reset_index(drop=True)
    return runs


# The nightly history's files under a nightly root (one per night, written by
# mptlab.nightly.history): the view is made here, where the other views are,
# for that module and for `mptlab query --history` alike.
HISTORY_DIR = "history"


def history_files(root: Path) -> list[Path]:
    return sorted((Path(root) / HISTORY_DIR).glob("*.parquet"))


def connect_history(root: Path):
    """An in-memory DuckDB with the view ``history`` over every night's file."""
    import duckdb

    con = duckdb.connect()
    pattern = str(Path(root) / HISTORY_DIR / "*.parquet").replace("'", "''")
    con.execute(
        f"CREATE VIEW history AS SELECT * FROM read_parquet('{pattern}', union_by_name=true)"
    )
    return con


def connect(root: Path, read_only_views: bool = True):
    """A DuckDB connection with a view per non-empty table of ``root``/analysis."""
    import duckdb

    con = duckdb.connect()
    store = store_dir(root)
    for table in TABLES:
        if any((store / table).glob("*.parquet")):
            pattern = str(store / table / "*.parquet").replace("'", "''")
            con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{pattern}', union_by_name=true)"
            )
        else:
            con.execute(f"CREATE VIEW {table} AS SELECT NULL::VARCHAR AS run_id WHERE false")
    return con
