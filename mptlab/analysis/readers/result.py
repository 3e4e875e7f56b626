"""result.json's own part: how the workload ended, the stall watchdog, and
the workload's and the background flows' metrics (scalars as runs columns
under their own names, lists as the ``series`` table).

A workload metric whose name is already a column of the run (a run
attribute such as ``status`` or a variant key's column) is not dropped and
not put in its place: it becomes ``m_<name>``, with a ``RuntimeWarning``
and the renames listed in the run's ``metric_renames`` column
(``status->m_status``), so the rename is visible where the value is.  The
registry (``mptlab.spec.metrics``) keeps declared metrics off the run's
attributes (tests/test_metrics.py), so only an undeclared metric, e.g. of
an older run dir, can collide."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ...spec.metrics import Metric
from .base import Run, flatten, num, scalar

ATTRIBUTES = (
    "result_status",
    "result_error",
    "workload_start",
    "workload_end",
    "stall_timeout_setting",
    "stall_host",
    "metric_renames",
)
METRICS = (
    Metric("stall_timeout_s", "s", None, "the stall watchdog's timeout (`watchdog`)"),
    Metric(
        "stall_frozen_s",
        "s",
        None,
        "stalled runs: how long the connection's data level was frozen (`stall`)",
    ),
    Metric("stall_after_s", "s", None, "stalled runs: when, after the workload's start"),
    Metric("stall_bytes_acked", "B", None, "stalled runs: the frozen connection's data level"),
    Metric(
        "bg_received_mbps",
        "Mbit/s",
        None,
        "what all background pairs received (e.g. the competing TCP flows' goodput)",
    ),
    Metric(
        "bg_tcp_retrans_segs",
        "segments",
        "lower",
        "what the background TCP flows retransmitted, all pairs together",
    ),
    Metric("bg_tcp_retrans_share", "", "lower", "bg_tcp_retrans_segs / their segments sent"),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    result = run.result
    row: dict = {"result_status": result.get("status") if result else None}
    if result.get("status") not in (None, "ok"):
        row["result_error"] = str(result.get("error") or result.get("reason") or "")[:2000]
    row.update(_watchdog_columns(result))
    if not result and run.info is not None and run.row.get("status") == "ok":
        row["result_error"] = run.result_err
    scalars, lists = flatten(result.get("metrics") or {})
    bg_scalars, bg_lists = (
        flatten(result.get("background") or {}, "bg_")
        if isinstance(result.get("background"), dict)
        else ({}, {})
    )
    taken = {**run.row, **row, **dict.fromkeys(ATTRIBUTES)}
    row.update(_metric_columns({**scalars, **bg_scalars}, taken, run))
    row.update(_background(bg_lists.get("bg_pairs") or []))
    tables = {}
    series = _series({**lists, **bg_lists})
    if series is not None:
        tables["series"] = series
    marks = result.get("marks") or {}
    row["workload_start"] = marks.get("workload_start")
    row["workload_end"] = marks.get("workload_end")
    return row, tables


def _metric_columns(metrics: dict, row: dict, run: Run) -> dict:
    out: dict = {}
    renamed = []
    for k, v in metrics.items():
        if k in row:
            renamed.append(f"{k}->m_{k}")
            k = f"m_{k}"
        out[k] = scalar(v)
    if renamed:
        warnings.warn(
            f"{run.rd.path}: metrics named like a column of the run, renamed: "
            + ", ".join(renamed),
            RuntimeWarning,
            stacklevel=2,
        )
        out["metric_renames"] = ", ".join(renamed)
    return out


def _background(pairs: list) -> dict:
    out: dict = {}
    if pairs and all(isinstance(p, dict) for p in pairs):
        # what the background flows got, all pairs together: the competing
        # TCP flows' goodput in the congestion-control pre-study
        out["bg_received_mbps"] = float(sum(p.get("received_mbps") or 0.0 for p in pairs))
        if any("tcp_out_segs" in p for p in pairs):
            # what the background TCP flows lost (retransmitted), all pairs together: the
            # FEC chapter's fairness test (docs/fec.md)
            out_segs = sum(p.get("tcp_out_segs") or 0 for p in pairs)
            retrans = sum(p.get("tcp_retrans_segs") or 0 for p in pairs)
            out["bg_tcp_retrans_segs"] = float(retrans)
            out["bg_tcp_retrans_share"] = retrans / out_segs if out_segs else np.nan
    return out


def _series(lists: dict) -> pd.DataFrame | None:
    """List-valued metrics in long form (a list of records: a row per field)."""
    series = []
    for name, values in lists.items():
        for i, v in enumerate(values):
            if isinstance(v, dict):
                for kk, vv in flatten(v)[0].items():
                    series.append(
                        (name, i, kk, num(vv), None if num(vv) is not None else scalar(vv))
                    )
            else:
                series.append((name, i, "", num(v), None if num(v) is not None else scalar(v)))
    if not series:
        return None
    return pd.DataFrame(series, columns=["metric", "idx", "field", "value", "text"])


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
