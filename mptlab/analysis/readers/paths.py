"""How the data bytes split over the paths: the data sender's kernel subflow
counters by path (readers.kernel writes them, ``path_share_source``
``kernel``), or for single-path TCP, which has no MPTCP counters, the
sampled sockets' final bytes (``ss``, from readers.samplers)."""

from __future__ import annotations

import pandas as pd

from ...spec.metrics import Metric
from .base import Run

ATTRIBUTES = ("path_share_source",)
METRICS = (
    Metric("path{n}_bytes", "B", None, "data bytes sent on path n"),
    Metric("path{n}_share", "", None, "path n's share of the data bytes"),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    if "path_share_source" not in run.row and "ss" in run.tables:
        return ss_path_share(run.tables["ss"]), {}
    return {}, {}


def ss_path_share(ss: pd.DataFrame) -> dict:
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
