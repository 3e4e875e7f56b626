"""Shared-bottleneck detection (runs with ``kernel.sbd``): the main
connection's decisions judged against the truth (``traces/sbd-scores.csv``).

The run's ``sbd_*`` metrics are scored in the guest (mptlab/guest/sbdu.py
``score``) and arrive among the workload's metrics (readers.result); they
are declared here, with the instrument (docs/congestion-control.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ... import rundir
from ...spec.metrics import Metric
from .base import Run, read_csv

METRICS = (
    Metric("sbd_decisions", "", None, "decisions after the warm-up"),
    Metric(
        "sbd_accuracy",
        "",
        "higher",
        "share of those that group every pair of subflows as the truth says (together "
        "exactly when their paths share a bottleneck)",
    ),
    Metric("sbd_accuracy_shared", "", "higher", "the same while some paths share a bottleneck"),
    Metric("sbd_accuracy_nonshared", "", "higher", "the same while none do"),
    Metric(
        "sbd_bottlenecked",
        "",
        None,
        "share of the subflows in those decisions found bottlenecked at all",
    ),
    Metric(
        "sbd_first_correct_s",
        "s",
        "lower",
        "from the workload's start to the first detection (a right decision with every "
        "subflow bottlenecked)",
    ),
    Metric(
        "sbd_transition_delay_s",
        "s",
        "lower",
        "mean time from a truth phase's start to the next detection",
    ),
    Metric("sbd_transitions_missed", "", "lower", "truth phases never followed by a detection"),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    scores = read_scores(run.rd.trace(rundir.SBD_SCORES))
    if scores is not None and len(scores):
        return {}, {"sbd_scores": scores}
    return {}, {}


def read_scores(path: Path) -> pd.DataFrame | None:
    """``traces/sbd-scores.csv``: the main connection's SBD decisions judged
    against the truth (``rundir.SBD_SCORE_COLUMNS``: ``t`` in s since
    the workload's start, ``decision``, ``shared``, ``right`` (0/1),
    ``bottlenecked``, ``subflows``)."""
    columns = rundir.SBD_SCORE_COLUMNS.split(",")

    def check(df: pd.DataFrame) -> pd.DataFrame:
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
        return df

    return read_csv(path, "an SBD scores CSV", check=check)
