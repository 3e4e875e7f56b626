"""A run dir's readers, one per instrument: each module has ``read(run) ->
(scalars, tables)`` (``run``: a ``base.Run``; scalars: runs columns; tables:
name -> DataFrame) and declares ``METRICS``, the metrics it produces
(``mptlab.spec.metrics`` collects them), and ``ATTRIBUTES``, the runs
columns it writes that are not metrics (text, bookkeeping).

``mptlab.analysis.ingest.read_run`` calls them in ``READERS`` order: a
reader may read what the ones before it found (``run.row``,
``run.tables``), e.g. the samplers the analysis window the result gives.
A new instrument is a new module here and an entry in ``READERS``.
"""

from __future__ import annotations

from . import common, fec, kernel, nstat, ofo, paths, pcap, result, samplers, sbd, schedstats
from .base import IngestError, Run

READERS = (common, result, kernel, fec, sbd, schedstats, samplers, nstat, ofo, paths, pcap)


def attributes() -> tuple[str, ...]:
    """Every runs column the readers write that is not a metric (besides one
    column per variant key)."""
    return tuple(a for r in READERS for a in getattr(r, "ATTRIBUTES", ()))


__all__ = ["READERS", "IngestError", "Run", "attributes"]
