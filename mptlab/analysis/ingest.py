"""Run dirs -> tidy tables (Parquet), incrementally.

    report = ingest(Path("results/blest-3g-wlan"))      # writes results/blest-3g-wlan/analysis/
    runs = load_table(Path("results/blest-3g-wlan"), "runs")
    con = connect(Path("results/blest-3g-wlan"))          # DuckDB with one view per table

``DIR`` is a campaign dir (holding ``campaign.json`` or ``runs/``) or any dir
above campaign dirs (e.g. ``results/``).  The store is ``DIR/analysis/``:
one sub-directory of Parquet part files per table and ``index.json``, which
records every ingested run dir with the mtime of its ``run.json``.  A re-run
reads only run dirs that are new or whose ``run.json`` changed, and drops the
rows of run dirs that disappeared.  Tables and columns: docs/analysis.md.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import rundir
from ..rundir import CampaignDir, RunDir, RunDirError

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
OFO_BIN_S = 0.010  # the BLEST paper samples the OFO queue every 10 ms
MAX_PARTS = 16  # parts per table before they are merged into one


class IngestError(ValueError):
    """A results dir that cannot be ingested."""


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


# ------------------------------------------------------------------ helpers
def _read(read, name: str) -> tuple[dict | None, str]:
    """A run dir file through its reader: (data, "") or (None, why not)."""
    try:
        data = read()
    except RunDirError as exc:
        return None, str(exc)
    return (data, "") if data is not None else (None, f"{name} missing")


def _colname(key: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def _scalar(v):
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return json.dumps(v, sort_keys=True)


def _flatten(d: dict, prefix: str = "") -> tuple[dict, dict]:
    """Scalars of a nested dict (keys joined with _) and its lists (name -> list)."""
    scalars, lists = {}, {}
    for k, v in (d or {}).items():
        name = f"{prefix}{_colname(str(k))}"
        if isinstance(v, dict):
            s, l2 = _flatten(v, name + "_")
            scalars.update(s)
            lists.update(l2)
        elif isinstance(v, list):
            lists[name] = v
        else:
            scalars[name] = v
    return scalars, lists


def _path_of(addr: str, addresses: dict) -> int | None:
    for host in ("client", "server"):
        addrs = addresses.get(host) or []
        if addr in addrs:
            return addrs.index(addr) + 1
    return None


def _tok(v) -> str | None:
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        return v.lower() if not v.isdigit() else f"{int(v):08x}"
    return f"{int(v):08x}"


# ------------------------------------------------------------------ one run
@dataclass
class RunTables:
    row: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def read_run(run_dir: RunDir | Path, run_id: str, campaign: str, pcap: bool = True) -> RunTables:
    """Every table's rows for one run dir (any format, ``mptlab.rundir``)."""
    rd = RunDir(run_dir)
    info, info_err = _read(rd.run_info, rundir.RUN)
    spec, _ = _read(rd.spec, rundir.SPEC)
    result, result_err = _read(rd.result, rundir.RESULT)
    attempt = rd.attempt() if info is not None or rd.set_aside_as else "incomplete"
    row: dict = {
        "run_id": run_id,
        "campaign": campaign,
        "run_dir": str(rd.path),
        "attempt": attempt,
    }
    spec = spec or {}
    cfg = spec.get("config") or {}
    row["experiment"] = spec.get("experiment") or (info or {}).get("experiment")
    row["variant"] = spec.get("variant") or (info or {}).get("variant") or rd.variant
    row["repetition"] = spec.get("repetition", (info or {}).get("repetition"))
    if row["repetition"] is None:
        row["repetition"] = rd.repetition
    row["seed"] = spec.get("seed", (info or {}).get("seed"))
    if info is not None:
        row["status"] = info.get("status", "unknown")
        row["reason"] = info.get("reason", "")
        for k in (
            "started",
            "seconds",
            "boot_status",
            "git_commit",
            "timeout_s",
            "host",
            "host_cpu_s",
            "host_cpu_wait_s",
        ):
            row[k] = info.get(k)
        if info.get("host_cpu_wait_s") is not None and info.get("seconds"):
            row["host_cpu_wait_share"] = info["host_cpu_wait_s"] / info["seconds"]
    elif attempt == "interrupted":
        row["status"], row["reason"] = (
            "interrupted",
            "no run.json: left by an interrupted invocation",
        )
    else:
        row["status"] = "incomplete"
        row["reason"] = f"no run.json ({info_err}): still running, or its invocation was killed"
    # variant keys and the resolved configuration that matters most
    vkeys = spec.get("variant_keys") or {}
    row["variant_keys"] = json.dumps(vkeys, sort_keys=True)
    for k, v in vkeys.items():
        row[_colname(k)] = _scalar(v)
    kern = cfg.get("kernel") or {}
    work = cfg.get("workload") or {}
    row["topology"] = cfg.get("topology")
    row["paths"] = "+".join(map(str, cfg.get("paths") or []))
    row["mptcp"] = kern.get("mptcp")
    row["scheduler"] = kern.get("scheduler") if kern.get("mptcp", True) else "tcp"
    row["congestion_control"] = kern.get("congestion_control")
    row["tcp_path"] = kern.get("tcp_path") if kern.get("mptcp") is False else None
    row["workload"] = work.get("type")
    row["warmup_ms"] = cfg.get("warmup")
    row["clock"] = rundir.clock_of(cfg)
    tables: dict[str, pd.DataFrame] = {}
    result = result or {}
    row["result_status"] = result.get("status") if result else None
    if result.get("status") not in (None, "ok"):
        row["result_error"] = str(result.get("error") or result.get("reason") or "")[:2000]
    row.update(_watchdog_columns(result))
    if not result and info is not None and row["status"] == "ok":
        row["result_error"] = result_err
    # workload metrics: scalars as columns, lists as the series table
    scalars, lists = _flatten(result.get("metrics") or {})
    bg_scalars, bg_lists = (
        _flatten(result.get("background") or {}, "bg_")
        if isinstance(result.get("background"), dict)
        else ({}, {})
    )
    for k, v in {**scalars, **bg_scalars}.items():
        row[k if k not in row else f"m_{k}"] = _scalar(v)
    pairs = bg_lists.get("bg_pairs") or []
    if pairs and all(isinstance(p, dict) for p in pairs):
        # what the background flows got, all pairs together: the competing
        # TCP flows' goodput in the congestion-control pre-study
        row["bg_received_mbps"] = float(sum(p.get("received_mbps") or 0.0 for p in pairs))
        if any("tcp_out_segs" in p for p in pairs):
            # what the background TCP flows lost (retransmitted), all pairs together: the
            # FEC chapter's fairness test (docs/fec.md)
            out_segs = sum(p.get("tcp_out_segs") or 0 for p in pairs)
            retrans = sum(p.get("tcp_retrans_segs") or 0 for p in pairs)
            row["bg_tcp_retrans_segs"] = float(retrans)
            row["bg_tcp_retrans_share"] = retrans / out_segs if out_segs else np.nan
    series = []
    for name, values in {**lists, **bg_lists}.items():
        for i, v in enumerate(values):
            if isinstance(v, dict):
                for kk, vv in _flatten(v)[0].items():
                    series.append(
                        (name, i, kk, _num(vv), None if _num(vv) is not None else _scalar(vv))
                    )
            else:
                series.append((name, i, "", _num(v), None if _num(v) is not None else _scalar(v)))
    if series:
        tables["series"] = pd.DataFrame(series, columns=["metric", "idx", "field", "value", "text"])
    marks = result.get("marks") or {}
    t0 = marks.get("workload_start") or result.get("started") or row.get("started")
    row["workload_start"] = marks.get("workload_start")
    row["workload_end"] = marks.get("workload_end")
    addresses = result.get("addresses") or {}
    # kernel counters
    kc = result.get("kernel") or {}
    conns = pd.DataFrame(kc.get("connections") or [])
    subs = pd.DataFrame(kc.get("subflows") or [])
    if len(conns):
        conns["token"] = [rundir.kernel_token(t) for t in conns["token"]]
        tables["kernel_connections"] = conns.drop(columns=["event"], errors="ignore")
    if len(subs):
        subs["token"] = [rundir.kernel_token(t) for t in subs["token"]]
        subs = subs[subs["token"].notna() & (subs["token"] != "00000000")]
        tables["kernel_subflows"] = subs.drop(columns=["event"], errors="ignore")
    row.update(_kernel_summary(conns, subs))
    fec = pd.DataFrame(kc.get("fec") or [])  # kernel.fec runs: every FEC socket (docs/fec.md)
    if len(fec):
        tables["kernel_fec"] = fec.drop(columns=["event"], errors="ignore")
    fec_ratio = _read_fec_ratio(rd.trace(rundir.FEC_RATIO_EVENTS))
    if fec_ratio is not None and len(fec_ratio):
        fec_ratio["t_rel"] = fec_ratio["t"] - t0 if t0 else np.nan
        fec_ratio["socket"] = (
            fec_ratio["saddr"]
            + ":"
            + fec_ratio["sport"].astype(str)
            + ">"
            + fec_ratio["daddr"]
            + ":"
            + fec_ratio["dport"].astype(str)
        )
        fec_ratio["path"] = [_path_of(a, addresses) for a in fec_ratio["saddr"]]
        tables["fec_ratio"] = fec_ratio
    sbd_scores = _read_sbd_scores(rd.trace(rundir.SBD_SCORES))
    if sbd_scores is not None and len(sbd_scores):
        tables["sbd_scores"] = sbd_scores
    # time series from the samplers
    for host in ("client", "server"):
        for kind, table in (("subflows", "ss"), ("mptcp", "mptcp")):
            df = _read_csv(rd.trace(rundir.sampler_trace(host, kind)))
            if df is None or not len(df):
                continue
            df.insert(0, "host", host)
            df["t_rel"] = df["t"] - t0 if t0 else np.nan
            df = _ss_columns(df, addresses) if table == "ss" else _mptcp_columns(df, addresses)
            tables.setdefault(table, [])
            tables[table].append(df)
    for table in ("ss", "mptcp"):
        if table in tables:
            tables[table] = pd.concat(tables[table], ignore_index=True)
    if row.get("workload_start") and row.get("workload_end"):
        start = row["workload_start"] + (row.get("warmup_ms") or 0) / 1000
        row.update(rmem_occupancy(tables.get("mptcp"), start, row["workload_end"]))
    ns = nstat_rows(result)
    if len(ns):
        tables["nstat"] = ns
    row.update(counter_columns(result))
    ofo_events = _read_ofo_events(rd.trace(rundir.OFO_EVENTS))
    row.update(ofo_occupancy(ofo_events))
    ofo = ofo_bins(ofo_events)
    if row.get("workload_start") and row.get("workload_end"):
        start = row["workload_start"] + (row.get("warmup_ms") or 0) / 1000
        row.update(ofo_sampled_mean(ofo, start, row["workload_end"]))
    if len(ofo):
        ofo["t_rel"] = ofo["t"] - t0 if t0 else np.nan
        tables["kernel_ofo"] = ofo
    if "path_share_source" not in row and "ss" in tables:
        row.update(_ss_path_share(tables["ss"]))
    # packet captures
    pcaps = sorted(rd.traces.glob("*.pcap*")) if pcap else []
    if pcaps and info is not None:
        tables.update(_pcap_tables(pcaps, addresses, row))
    for df in tables.values():
        df.insert(0, "run_id", run_id)
    return RunTables(row, tables)


def _watchdog_columns(result: dict) -> dict:
    """The stall watchdog's setting and, for a stalled run, what it saw."""
    out: dict = {}
    wd = result.get("watchdog") or {}
    if wd:
        out["stall_timeout_s"] = wd.get("stall_timeout_s")
        out["stall_timeout_setting"] = wd.get("setting")
    stall = result.get("stall") or {}
    if stall:
        out["stall_frozen_s"] = stall.get("frozen_s")
        out["stall_after_s"] = stall.get("after_s")
        out["stall_host"] = stall.get("host")
        out["stall_bytes_acked"] = stall.get("bytes_acked")
    return out


NSTAT_COLUMNS = ["host", "mib", "counter", "name", "start", "end", "delta", "kind"]

# Kernel counters that become run columns: column -> (group, counter, hosts).
# The counters are per network namespace; a column sums the hosts named (None:
# every host).
# - or_*: the opportunistic re-send's own counters (kernel patch 0011): what
#   the BLEST paper's Table II counts ("retransmitted by OR&P").
#   k_bytes_reinjected also holds MPTCP-level re-sends after a timeout, which
#   no scheduler chooses (3G + WLAN bulk, n = 10: OR is 68 % of minRTT's
#   re-sent bytes, 90 % of BLEST's).
# - cwnd_restarts_*: RFC 2861 restarts of a socket's cwnd after an idle period
#   longer than its RTO (patch 0012), per host: the ECF paper's "initial
#   window resets" are the data sender's (the server in a download); the
#   client's are its requests after idle periods.
# - sbd_feedback_*: MPTCP-SBD's decisions on the wire (patch 0015): options
#   the receiver's subflows sent, and the sender's parsed (each decision rides
#   on three segments of each subflow).
COUNTER_COLUMNS: dict[str, tuple[str, str, tuple[str, ...] | None]] = {
    "or_resent_segs": ("MPTcpExt", "OppRetrans", None),
    "or_resent_bytes": ("MPTcpExt", "OppRetransBytes", None),
    "cwnd_restarts_server": ("TcpExt", "TCPCwndRestart", ("server",)),
    "cwnd_restarts_client": ("TcpExt", "TCPCwndRestart", ("client",)),
    "sbd_feedback_sent": ("MPTcpExt", "SbdTx", None),
    "sbd_feedback_received": ("MPTcpExt", "SbdRx", None),
}


def counter_columns(result: dict) -> dict:
    """The COUNTER_COLUMNS of a run: each counter's change during the run,
    summed over its hosts.  NaN where the kernel has no such counter (built
    before the patch that adds it), a host is missing, or a host's start or
    end snapshot lacks it: unknown, not zero."""
    nstat = result.get("nstat") or {}
    out = {col: np.nan for col in COUNTER_COLUMNS}
    if not nstat:
        return out
    for col, (group, counter, hosts) in COUNTER_COLUMNS.items():
        total = 0.0
        for host in hosts or tuple(nstat):
            entry = nstat.get(host) or {}
            a = ((entry.get("start") or {}).get(group) or {}).get(counter)
            b = ((entry.get("end") or {}).get(group) or {}).get(counter)
            if a is None or b is None:
                total = np.nan
                break
            total += b - a
        out[col] = float(total)
    return out


def nstat_rows(result: dict) -> pd.DataFrame:
    """result.json ``nstat`` and ``memory`` in long form: one row per host and
    counter that is non-zero at the start or the end of the run.  ``mib`` is
    the group (``TcpExt``, ``MPTcpExt``, ``Tcp``, ...), ``name`` the counter
    as ``nstat`` prints it (``TcpExtTCPOFOQueue``); ``kind`` is ``counter``
    (``delta`` = end - start) or ``gauge`` (``sockstat``, ``meminfo``,
    ``tcp_mem``: values at the two moments, host ``guest`` for guest-wide
    ones)."""
    rows = []
    for host, entry in (result.get("nstat") or {}).items():
        start, end = entry.get("start") or {}, entry.get("end") or {}
        for mib in dict.fromkeys([*start, *end]):
            a, b = start.get(mib) or {}, end.get(mib) or {}
            for counter in dict.fromkeys([*a, *b]):
                v0, v1 = a.get(counter), b.get(counter)
                if not v0 and not v1:
                    continue
                d = v1 - v0 if v0 is not None and v1 is not None else None
                rows.append((host, mib, counter, f"{mib}{counter}", v0, v1, d, "counter"))
    mem = result.get("memory") or {}
    m0, m1 = mem.get("start") or {}, mem.get("end") or {}
    gauges: dict[tuple, list] = {}
    for i, snap in enumerate((m0, m1)):
        for k, v in (snap.get("meminfo_kb") or {}).items():
            gauges.setdefault(("guest", "meminfo", f"{k}_kB"), [None, None])[i] = v
        for k, v in enumerate(snap.get("tcp_mem_pages") or []):
            name = ("min", "pressure", "max")[k] if k < 3 else str(k)
            gauges.setdefault(("guest", "tcp_mem", f"{name}_pages"), [None, None])[i] = v
        for host, groups in (snap.get("sockstat") or {}).items():
            for g, values in (groups or {}).items():
                for k, v in values.items():
                    gauges.setdefault((host, f"sockstat_{g}", k), [None, None])[i] = v
    for (host, mib, counter), (v0, v1) in gauges.items():
        d = v1 - v0 if v0 is not None and v1 is not None else None
        rows.append((host, mib, counter, f"{mib}{counter}", v0, v1, d, "gauge"))
    df = pd.DataFrame(rows, columns=NSTAT_COLUMNS)
    for c in ("start", "end", "delta"):
        df[c] = df[c].astype("Int64")
    return df


def _num(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None


def _read_csv(path: Path) -> pd.DataFrame | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    big = {
        c: "UInt64"
        for c in (
            "write_seq",
            "snd_una",
            "rcv_nxt",
            "pacing_rate",
            "bytes_acked",
            "bytes_received",
            "bytes_sent",
            "bytes_retrans",
            "delivery_rate",
            "mptcp_bytes_sent",
            "mptcp_bytes_reinjected",
            "bytes_reinjected",
        )
    }
    try:
        head = pd.read_csv(path, nrows=0)
        dtypes = {c: t for c, t in big.items() if c in head.columns}
        dtypes.update({c: "string" for c in ("saddr", "daddr", "scheduler") if c in head.columns})
        return pd.read_csv(path, dtype=dtypes)
    except (ValueError, pd.errors.ParserError) as exc:
        raise IngestError(f"{path}: not a sampler CSV: {exc}") from None


def _read_ofo_events(path: Path) -> pd.DataFrame | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        return pd.read_csv(path, dtype={"token": "string"})
    except (ValueError, pd.errors.ParserError) as exc:
        raise IngestError(f"{path}: not an OFO event CSV: {exc}") from None


def _read_fec_ratio(path: Path) -> pd.DataFrame | None:
    """``traces/fec-ratio.csv``: every re-evaluation of a socket's dynamic FEC
    ratio (``t, saddr, sport, daddr, dport, ratio, residual, srtt_us``)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        return pd.read_csv(path, dtype={"saddr": "string", "daddr": "string"})
    except (ValueError, pd.errors.ParserError) as exc:
        raise IngestError(f"{path}: not an FEC ratio CSV: {exc}") from None


def _read_sbd_scores(path: Path) -> pd.DataFrame | None:
    """``traces/sbd-scores.csv``: the main connection's SBD decisions judged
    against the truth (``rundir.SBD_SCORE_COLUMNS``: ``t`` in s since
    the workload's start, ``decision``, ``shared``, ``right`` (0/1),
    ``bottlenecked``, ``subflows``)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    columns = rundir.SBD_SCORE_COLUMNS.split(",")
    try:
        df = pd.read_csv(path)
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(
                f"no column {', '.join(missing)} (expected {rundir.SBD_SCORE_COLUMNS})"
            )
        df = df[columns]
        if df.isna().any().any():
            raise ValueError("empty cells")
        for c in columns:
            df[c] = pd.to_numeric(df[c]).astype(float if c == "t" else "int64")
    except (ValueError, TypeError, pd.errors.ParserError) as exc:
        raise IngestError(f"{path}: not an SBD scores CSV: {exc}") from None
    return df


def ofo_bins(events: pd.DataFrame | None, bin_s: float = OFO_BIN_S) -> pd.DataFrame:
    """Every change of a connection's MPTCP OFO queue (``t, token, ofo_bytes,
    ofo_segs``) -> fixed bins per connection: the queue at the end of the bin
    (``ofo_bytes``, ``ofo_segs``) and its maximum within it (``ofo_bytes_max``,
    ``ofo_segs_max``), from the connection's first change to its last.  ``t``
    is the bin's start (wall clock, bins aligned to multiples of ``bin_s``)."""
    cols = ["token", "t", "ofo_bytes", "ofo_bytes_max", "ofo_segs", "ofo_segs_max"]
    if events is None or not len(events):
        return pd.DataFrame(columns=cols)
    out = []
    for token, g in events.groupby("token", sort=True):
        g = g.sort_values("t", kind="stable")
        t = g["t"].to_numpy(dtype="float64")
        first = math.floor(t[0] / bin_s)
        idx = (np.floor(t / bin_s) - first).astype(np.int64)
        n = int(idx[-1]) + 1
        last_in_bin = np.r_[idx[1:] != idx[:-1], True]
        row = {"token": token, "t": (first + np.arange(n)) * bin_s}
        for col in ("ofo_bytes", "ofo_segs"):
            v = g[col].to_numpy(dtype="float64")
            end = np.full(n, np.nan)
            end[idx[last_in_bin]] = v[last_in_bin]
            end = pd.Series(end).ffill().to_numpy()
            carried = np.r_[0.0, end[:-1]]  # the queue as the bin starts (empty before the first)
            peak = np.full(n, -np.inf)
            np.maximum.at(peak, idx, v)
            row[col] = end.astype(np.int64)
            row[f"{col}_max"] = np.maximum(peak, carried).astype(np.int64)
        out.append(pd.DataFrame(row))
    return pd.concat(out, ignore_index=True)[cols]


def ofo_occupancy(events: pd.DataFrame | None, qs: tuple[int, ...] = (50, 75, 95)) -> dict:
    """The MPTCP OFO queue's size over time (payload bytes):
    time-weighted percentiles ``k_ofo_bytes_p50/p75/p95`` of the queue of the
    connection whose queue grew largest (the data receiver's), from its
    first change to its last.  Not the MPT-BM paper's "MPTCP buffer size"
    (its Table III), which is allocated memory: ``rmem_occupancy()``.  Time-weighted, so that a queue that sits at
    4 MB for 9 s and is empty for 1 s has a median of 4 MB whatever the
    number of events either way.  {} without events."""
    if events is None or not len(events):
        return {}
    token = events.groupby("token")["ofo_bytes"].max().idxmax()
    g = events[events["token"] == token].sort_values("t", kind="stable")
    t = g["t"].to_numpy(dtype="float64")
    v = g["ofo_bytes"].to_numpy(dtype="float64")
    held = np.diff(t)  # each level is held until the next change
    if len(held) == 0 or held.sum() <= 0:
        return {f"k_ofo_bytes_p{q}": float(v[-1]) for q in qs}
    pct = _weighted_percentiles(v[:-1], held, qs)
    return {f"k_ofo_bytes_p{q}": pct[q] for q in qs}


def _weighted_percentiles(levels: np.ndarray, weights: np.ndarray, qs) -> dict[int, float]:
    """{q: the smallest level at or below which q % of the total weight lies}
    (levels held for ``weights`` seconds: a time-weighted percentile)."""
    o = np.argsort(levels, kind="stable")
    cum = np.cumsum(weights[o])
    out = {}
    for q in qs:
        k = min(int(np.searchsorted(cum, q / 100 * cum[-1])), len(o) - 1)
        out[q] = float(levels[o][k])
    return out


RMEM_PREFIX = "k_rmem_bytes"
RCVBUF_PREFIX = "k_rcvbuf_bytes"


def rmem_occupancy(
    mptcp: pd.DataFrame | None, start: float, end: float, qs: tuple[int, ...] = (50, 75, 95)
) -> dict:
    """The MPT-BM paper's "MPTCP buffer size" (its Fig. 7, Table III: "the
    memory allocated for segments" at the MPTCP level; KiB there, bytes
    here): the data receiver's MPTCP socket's ``rmem_alloc`` (the sampler's
    SK_MEMINFO_RMEM_ALLOC: the truesize of the OFO queue plus the data in
    order but not yet read; mptlab/guest/sampler.py says why) over the
    analysis window [start, end] (epoch s), as ``k_ofo_bytes_mean`` takes it.

    ``k_rmem_bytes_p50/p75/p95``: time-weighted percentiles, as
    ``k_ofo_bytes_p*`` are; ``k_rmem_bytes_mean``: the time-weighted mean;
    ``k_rmem_bytes_max``: the largest sample; ``k_rcvbuf_bytes_max``: the
    socket's receive buffer (autotuned) at its largest, the ceiling
    rmem_alloc can reach, and ``k_rcvbuf_bytes_p50/p75/p95`` its
    time-weighted percentiles: the other reading of "memory allocated for
    segments" (the budget autotuning grants, not what the segments use),
    kept so that the two readings can be told apart on the paper's
    baseline rows (docs/reproduction.md).  Each sample holds until the connection's next
    one (also when that lies after the window; the level at ``start`` is the
    last sample before it), its last one for the median sampling interval,
    all cut to the window: the sampler skips a tick when it falls behind,
    and a skipped tick must not count less.  The data receiver is the
    connection (host and address pair) that received the most.

    {} where nothing was recorded (no sampler table, or one written before
    the sampler read SKMEMINFO: unknown, not 0); NaN where the receiver has
    no sample in the window or no value in its samples."""
    names = (
        [f"{RMEM_PREFIX}_p{q}" for q in qs]
        + [
            f"{RMEM_PREFIX}_mean",
            f"{RMEM_PREFIX}_max",
            f"{RCVBUF_PREFIX}_max",
        ]
        + [f"{RCVBUF_PREFIX}_p{q}" for q in qs]
    )
    if mptcp is None or not len(mptcp) or "rmem_alloc" not in mptcp:
        return {}
    out: dict = {name: np.nan for name in names}
    if not end > start or "bytes_received" not in mptcp:
        return out
    key = [c for c in ("host", "saddr", "sport", "daddr", "dport") if c in mptcp]
    received = pd.to_numeric(mptcp["bytes_received"], errors="coerce").astype("float64")
    if received.isna().all():
        return out
    # bytes_received only grows: the largest sample is the receiver's
    conn = mptcp.iloc[int(np.nanargmax(received.to_numpy()))]
    mine = np.ones(len(mptcp), dtype=bool)
    for c in key:
        mine &= mptcp[c].eq(conn[c]).fillna(False).to_numpy(dtype=bool)
    g = mptcp[mine].sort_values("t", kind="stable")
    t = g["t"].to_numpy(dtype="float64")
    v = pd.to_numeric(g["rmem_alloc"], errors="coerce").to_numpy(dtype="float64")
    step = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    until = np.minimum(np.r_[t[1:], t[-1] + step], end)
    held = until - np.maximum(t, start)  # <= 0: a sample that ends before the window
    keep = (held > 0) & (t < end) & ~np.isnan(v)
    if not keep.any():
        return out
    levels, weights = v[keep], held[keep]
    pct = _weighted_percentiles(levels, weights, qs)
    for q in qs:
        out[f"{RMEM_PREFIX}_p{q}"] = pct[q]
    out[f"{RMEM_PREFIX}_mean"] = float(np.sum(levels * weights) / np.sum(weights))
    out[f"{RMEM_PREFIX}_max"] = float(levels.max())
    if "rcvbuf" in g:
        rcvbuf = pd.to_numeric(g["rcvbuf"], errors="coerce").to_numpy(dtype="float64")[keep]
        known = ~np.isnan(rcvbuf)
        if known.any():
            out[f"{RCVBUF_PREFIX}_max"] = float(rcvbuf[known].max())
            pct = _weighted_percentiles(rcvbuf[known], weights[known], qs)
            for q in qs:
                out[f"{RCVBUF_PREFIX}_p{q}"] = pct[q]
    return out


def ofo_sampled_mean(bins: pd.DataFrame, start: float, end: float) -> dict:
    """The BLEST paper's OFO statistic: it samples "the maximum value of
    the out-of-order (OFO) queue every 10 ms" and compares schedulers by
    those samples; ``k_ofo_bytes_mean`` is their mean over the analysis
    window [start, end] (epoch s) of the data receiver's connection (the
    one whose queue grew largest), every 10 ms bin counted, empty ones as 0.
    Unlike the time-weighted median (``k_ofo_bytes_p50``), which is 0 when
    the queue is empty most of the time (every CBR run), it sees short
    bursts.  {} without a window; 0 without any OFO event."""
    if not end > start:
        return {}
    if not len(bins):
        return {"k_ofo_bytes_mean": 0.0}
    token = bins.groupby("token")["ofo_bytes_max"].max().idxmax()
    g = bins[bins["token"] == token]
    inside = g[(g["t"] >= start) & (g["t"] < end)]
    n = max(1, round((end - start) / OFO_BIN_S))
    return {"k_ofo_bytes_mean": float(inside["ofo_bytes_max"].sum()) / n}


def _ss_columns(df: pd.DataFrame, addresses: dict) -> pd.DataFrame:
    df["path"] = [_path_of(a, addresses) for a in df["saddr"]]
    for col in ("srtt_us", "rttvar_us", "min_rtt_us"):
        if col in df:
            v = df[col].astype("float64")
            df[col.replace("_us", "_ms")] = np.where(v >= 4294967295, np.nan, v / 1000)
    if {"unacked", "sacked", "lost", "retrans"} <= set(df.columns):
        # Linux tcp_packets_in_flight(): packets_out - (sacked_out + lost_out) + retrans_out
        df["in_flight"] = df["unacked"] - df["sacked"] - df["lost"] + df["retrans"]
    df["socket"] = (
        df["saddr"].astype(str)
        + ":"
        + df["sport"].astype(str)
        + ">"
        + df["daddr"].astype(str)
        + ":"
        + df["dport"].astype(str)
    )
    for c in ("token_loc", "token_rem"):
        if c in df:
            df[c] = [_tok(v) for v in df[c]]
    # each socket's final volume (bytes acked or received), to find the data sockets
    vol = pd.concat(
        [df[c].astype("float64") for c in ("bytes_acked", "bytes_received") if c in df], axis=1
    ).max(axis=1)
    df["socket_bytes"] = vol.groupby(df["socket"]).transform("max")
    return df


def _mptcp_columns(df: pd.DataFrame, addresses: dict) -> pd.DataFrame:
    df["token"] = [_tok(v) for v in df["token"]]
    df["path"] = [_path_of(a, addresses) for a in df["saddr"]]
    return df


def _ss_path_share(ss: pd.DataFrame) -> dict:
    """Per-path bytes from the sockets' last samples (plain TCP has no MPTCP counters)."""
    out: dict[str, float | str] = {}
    if "socket_bytes" not in ss or ss["path"].isna().all():
        return out
    best = None
    for _host, g in ss.groupby("host"):
        last = g.groupby("socket").agg(path=("path", "first"), vol=("socket_bytes", "max"))
        per_path = last.groupby("path")["vol"].sum()
        if best is None or per_path.sum() > best.sum():
            best = per_path
    if best is None or best.sum() <= 0:
        return out
    for p, v in best.items():
        out[f"path{int(p)}_bytes"] = float(v)
        out[f"path{int(p)}_share"] = float(v / best.sum())
    out["path_share_source"] = "ss"
    return out


def _kernel_summary(conns: pd.DataFrame, subs: pd.DataFrame) -> dict:
    """Run-level counters of the data connection (the one that sent the most)."""
    out: dict = {}
    if not len(conns) or "bytes_sent" not in conns:
        return out
    snd = conns.loc[conns["bytes_sent"].idxmax()]
    rcv = conns.loc[conns["bytes_received"].idxmax()] if "bytes_received" in conns else None
    out["k_token"] = snd["token"]
    out["k_bytes_sent"] = float(snd["bytes_sent"])
    out["k_bytes_reinjected"] = float(snd.get("bytes_reinjected", np.nan))
    out["k_reinjected_share"] = (
        float(snd["bytes_reinjected"]) / float(snd["bytes_sent"]) if snd["bytes_sent"] else np.nan
    )
    if rcv is not None:
        out["k_bytes_received"] = float(rcv["bytes_received"])
        out["k_ofo_bytes_max"] = float(rcv.get("ofo_bytes_max", np.nan))
        out["k_ofo_segs_max"] = float(rcv.get("ofo_segs_max", np.nan))
    if len(subs) and "token" in subs:
        mine = subs[subs["token"] == snd["token"]]
        out["k_tcp_retrans"] = float(mine["tcp_retrans"].sum()) if "tcp_retrans" in mine else np.nan
        out["k_subflows"] = int((mine["bytes_sent"] > 0).sum())
        total = float(mine["bytes_sent"].sum())
        if "path" in mine and total > 0:
            for p, g in mine.dropna(subset=["path"]).groupby("path"):
                out[f"path{int(p)}_bytes"] = float(g["bytes_sent"].sum())
                out[f"path{int(p)}_share"] = float(g["bytes_sent"].sum()) / total
            out["path_share_source"] = "kernel"
    return out


def _pcap_tables(pcaps: list[Path], addresses: dict, row: dict) -> dict[str, pd.DataFrame]:
    from . import pcap as pc

    captures: dict[str, list] = {}
    errors = []
    for f in pcaps:
        host = f.name.split(".")[0].rsplit("-", 1)[0] if "-" in f.name else "capture"
        try:
            captures.setdefault(host, []).append(pc.read(f))
        except pc.PcapError as exc:
            errors.append(str(exc))
    if errors:
        row["pcap_error"] = "; ".join(errors)[:2000]
    if not captures:
        return {}
    res = pc.analyze(captures, addresses.get("client") or [], addresses.get("server") or [])
    out = {}
    if len(res.subflows):
        out["pcap_subflows"] = res.subflows
    if len(res.connections):
        out["pcap_connections"] = res.connections
        main = res.connections.sort_values("data_bytes", ascending=False).iloc[0]
        row["pcap_data_bytes"] = float(main["data_bytes"])
        row["pcap_ofo_bytes_max"] = float(main["ofo_bytes_max"])
        row["pcap_ofo_segs_max"] = float(main["ofo_segs_max"])
        for k in (
            "hol_delay_mean_ms",
            "hol_delay_p50_ms",
            "hol_delay_p75_ms",
            "hol_delay_p95_ms",
            "hol_delay_max_ms",
        ):
            row[f"pcap_{k}"] = float(main[k]) if main[k] is not None else np.nan
        row["pcap_reinjected_bytes"] = float(main["reinjected_bytes"])
        sf = res.subflows
        snd = sf[(sf.conn == main["conn"]) & (sf.direction == main["direction"])]
        if len(snd):
            # retransmissions are seen at the sender (a lost original never reaches the receiver)
            want = {"s2c": "server", "c2s": "client"}.get(main["direction"])
            sender = (
                want
                if want in set(snd["host"])
                else snd.groupby("host")["bytes_wire"].sum().idxmax()
            )
            row["pcap_retrans_segs"] = float(snd[snd.host == sender]["retrans_segs"].sum())
    row["pcap_packets"] = res.packets
    if len(res.ofo):
        out["pcap_ofo"] = res.ofo
    return out


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
