"""The MPTCP out-of-order queue from the kernel's tracepoint
(``traces/ofo-events.csv``, ``traces.ofo_events``: every change of a
connection's queue): the ``kernel_ofo`` table in 10 ms bins and the queue's
size over time as run columns."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ... import rundir
from ...spec.metrics import Metric
from .base import Run, read_csv, weighted_percentiles

OFO_BIN_S = 0.010  # the BLEST paper samples the OFO queue every 10 ms
METRICS = (
    Metric(
        "k_ofo_bytes_p{q}",
        "B",
        "lower",
        "the MPTCP OFO queue's size over time (payload bytes): time-weighted percentile q "
        "(50, 75, 95) from the queue's first change to its last, of the connection whose "
        "queue grew largest",
    ),
    Metric(
        "k_ofo_bytes_mean",
        "B",
        "lower",
        "the BLEST paper's OFO statistic: the mean over the analysis window of the queue's "
        "maximum in each 10 ms (empty bins as 0); sees the short bursts a time-weighted "
        "median misses",
    ),
    Metric(
        "ofo_bytes",
        "B",
        None,
        "an MPTCP connection's OFO queue (bytes) at a sample or bin end",
        table="kernel_ofo",
    ),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    events = read_events(run.rd.trace(rundir.OFO_EVENTS))
    row = ofo_occupancy(events)
    bins = ofo_bins(events)
    window = run.window()
    if window:
        row.update(ofo_sampled_mean(bins, *window))
    tables = {}
    if len(bins):
        t0 = run.t0
        bins["t_rel"] = bins["t"] - t0 if t0 else np.nan
        tables["kernel_ofo"] = bins
    return row, tables


def read_events(path: Path) -> pd.DataFrame | None:
    return read_csv(path, "an OFO event CSV", dtype={"token": "string"})


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
    for tok, g in events.groupby("token", sort=True):
        g = g.sort_values("t", kind="stable")
        t = g["t"].to_numpy(dtype="float64")
        first = math.floor(t[0] / bin_s)
        idx = (np.floor(t / bin_s) - first).astype(np.int64)
        n = int(idx[-1]) + 1
        last_in_bin = np.r_[idx[1:] != idx[:-1], True]
        row = {"token": tok, "t": (first + np.arange(n)) * bin_s}
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
    tok = events.groupby("token")["ofo_bytes"].max().idxmax()
    g = events[events["token"] == tok].sort_values("t", kind="stable")
    t = g["t"].to_numpy(dtype="float64")
    v = g["ofo_bytes"].to_numpy(dtype="float64")
    held = np.diff(t)  # each level is held until the next change
    if len(held) == 0 or held.sum() <= 0:
        return {f"k_ofo_bytes_p{q}": float(v[-1]) for q in qs}
    pct = weighted_percentiles(v[:-1], held, qs)
    return {f"k_ofo_bytes_p{q}": pct[q] for q in qs}


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
    tok = bins.groupby("token")["ofo_bytes_max"].max().idxmax()
    g = bins[bins["token"] == tok]
    inside = g[(g["t"] >= start) & (g["t"] < end)]
    n = max(1, round((end - start) / OFO_BIN_S))
    return {"k_ofo_bytes_mean": float(inside["ofo_bytes_max"].sum()) / n}
