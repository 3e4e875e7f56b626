"""The samplers' time series (``traces/<host>-subflows.csv``: every TCP
socket every ``ss_interval``; ``traces/<host>-mptcp.csv``: every MPTCP
connection every ``ofo_interval``) as the ``ss`` and ``mptcp`` tables, and
the data receiver's socket memory over the analysis window as run columns
(``rmem_occupancy``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ... import rundir
from ...spec.metrics import Metric
from .base import Run, read_csv, socket_name, token, weighted_percentiles

RMEM_PREFIX = "k_rmem_bytes"
RCVBUF_PREFIX = "k_rcvbuf_bytes"
METRICS = (
    Metric(
        "k_rmem_bytes_{stat}",
        "B",
        "lower",
        "the memory the data receiver's MPTCP socket holds for received segments "
        "(`rmem_alloc`: its OFO queue's truesize plus the data in order not yet read) over "
        "the analysis window: time-weighted p50, p75, p95 and mean, and its largest sample "
        '(max); the MPT-BM paper\'s "MPTCP buffer size" (its Table III) reads either this '
        "or k_rcvbuf_bytes_*. Absent without SK_MEMINFO samples",
    ),
    Metric(
        "k_rcvbuf_bytes_{stat}",
        "B",
        None,
        "the receiver socket's receive buffer (autotuned) over the window: at its largest "
        "(max) and time-weighted p50, p75, p95 (the granted budget the MPT-BM claims read)",
    ),
    Metric("srtt_ms", "ms", None, "a socket's smoothed RTT", table="ss"),
    Metric("rttvar_ms", "ms", None, "its RTT variation", table="ss"),
    Metric("min_rtt_ms", "ms", None, "its minimum RTT", table="ss"),
    Metric("cwnd", "segments", None, "its congestion window", table="ss"),
    Metric(
        "in_flight",
        "segments",
        None,
        "unacked - sacked - lost + retrans (Linux's tcp_packets_in_flight)",
        table="ss",
    ),
)
# columns that exceed int64's exact range in float64 or hold 2^32 - 1 markers
BIG = (
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


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    found: dict[str, list[pd.DataFrame]] = {}
    t0 = run.t0
    for host in ("client", "server"):
        for kind, table in (("subflows", "ss"), ("mptcp", "mptcp")):
            df = read_trace(run.rd.trace(rundir.sampler_trace(host, kind)))
            if df is None or not len(df):
                continue
            df.insert(0, "host", host)
            df["t_rel"] = df["t"] - t0 if t0 else np.nan
            df = _ss_columns(df, run) if table == "ss" else _mptcp_columns(df, run)
            found.setdefault(table, []).append(df)
    tables = {table: pd.concat(dfs, ignore_index=True) for table, dfs in found.items()}
    window = run.window()
    row = rmem_occupancy(tables.get("mptcp"), *window) if window else {}
    return row, tables


def read_trace(path: Path) -> pd.DataFrame | None:
    def dtypes(columns: list[str]) -> dict:
        d = {c: "UInt64" for c in BIG if c in columns}
        d.update({c: "string" for c in ("saddr", "daddr", "scheduler") if c in columns})
        return d

    return read_csv(path, "a sampler CSV", dtype=dtypes)


def _ss_columns(df: pd.DataFrame, run: Run) -> pd.DataFrame:
    df["path"] = [run.path_of(a) for a in df["saddr"]]
    for col in ("srtt_us", "rttvar_us", "min_rtt_us"):
        if col in df:
            v = df[col].astype("float64")
            df[col.replace("_us", "_ms")] = np.where(v >= 4294967295, np.nan, v / 1000)
    if {"unacked", "sacked", "lost", "retrans"} <= set(df.columns):
        # Linux tcp_packets_in_flight(): packets_out - (sacked_out + lost_out) + retrans_out
        df["in_flight"] = df["unacked"] - df["sacked"] - df["lost"] + df["retrans"]
    df["socket"] = socket_name(df)
    for c in ("token_loc", "token_rem"):
        if c in df:
            df[c] = [token(v) for v in df[c]]
    # each socket's final volume (bytes acked or received), to find the data sockets
    vol = pd.concat(
        [df[c].astype("float64") for c in ("bytes_acked", "bytes_received") if c in df], axis=1
    ).max(axis=1)
    df["socket_bytes"] = vol.groupby(df["socket"]).transform("max")
    return df


def _mptcp_columns(df: pd.DataFrame, run: Run) -> pd.DataFrame:
    df["token"] = [token(v) for v in df["token"]]
    df["path"] = [run.path_of(a) for a in df["saddr"]]
    return df


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
        + [f"{RMEM_PREFIX}_mean", f"{RMEM_PREFIX}_max", f"{RCVBUF_PREFIX}_max"]
        + [f"{RCVBUF_PREFIX}_p{q}" for q in qs]
    )
    if mptcp is None or not len(mptcp) or "rmem_alloc" not in mptcp:
        return {}
    out: dict = {name: np.nan for name in names}
    if not end > start or "bytes_received" not in mptcp:
        return out
    g = _receiver(mptcp)
    if g is None:
        return out
    t = g["t"].to_numpy(dtype="float64")
    v = pd.to_numeric(g["rmem_alloc"], errors="coerce").to_numpy(dtype="float64")
    step = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    until = np.minimum(np.r_[t[1:], t[-1] + step], end)
    held = until - np.maximum(t, start)  # <= 0: a sample that ends before the window
    keep = (held > 0) & (t < end) & ~np.isnan(v)
    if not keep.any():
        return out
    levels, weights = v[keep], held[keep]
    pct = weighted_percentiles(levels, weights, qs)
    for q in qs:
        out[f"{RMEM_PREFIX}_p{q}"] = pct[q]
    out[f"{RMEM_PREFIX}_mean"] = float(np.sum(levels * weights) / np.sum(weights))
    out[f"{RMEM_PREFIX}_max"] = float(levels.max())
    if "rcvbuf" in g:
        rcvbuf = pd.to_numeric(g["rcvbuf"], errors="coerce").to_numpy(dtype="float64")[keep]
        known = ~np.isnan(rcvbuf)
        if known.any():
            out[f"{RCVBUF_PREFIX}_max"] = float(rcvbuf[known].max())
            pct = weighted_percentiles(rcvbuf[known], weights[known], qs)
            for q in qs:
                out[f"{RCVBUF_PREFIX}_p{q}"] = pct[q]
    return out


def _receiver(mptcp: pd.DataFrame) -> pd.DataFrame | None:
    """The data receiver's samples in time order: the connection (host and
    address pair) whose bytes_received (which only grows) is the largest."""
    key = [c for c in ("host", "saddr", "sport", "daddr", "dport") if c in mptcp]
    received = pd.to_numeric(mptcp["bytes_received"], errors="coerce").astype("float64")
    if received.isna().all():
        return None
    conn = mptcp.iloc[int(np.nanargmax(received.to_numpy()))]
    mine = np.ones(len(mptcp), dtype=bool)
    for c in key:
        mine &= mptcp[c].eq(conn[c]).fillna(False).to_numpy(dtype=bool)
    return mptcp[mine].sort_values("t", kind="stable")
