"""What a report section reads: the campaign's runs and what ``report.build``
derived from them once (``Context``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import figures, ingest
from ..html import Markup, figure


@dataclass
class Context:
    """What every section may read: the runs (current attempt, in the experiment's
    variant order) and what ``report.build`` derived from them once."""

    root: Path  # the results dir the report is about
    out: Path  # the HTML file; figures go to out.parent / "figures"
    runs: pd.DataFrame  # current attempt, sorted by group then repetition
    all_runs: pd.DataFrame  # every attempt, variants qualified (stats.qualify_variants)
    raw_runs: pd.DataFrame  # every attempt, variants as each campaign names them (claims)
    ok: pd.DataFrame  # the ok runs of ``runs``
    by: str  # the grouping column (variant, scheduler, ...)
    order: list  # the groups in the experiment's order
    campaigns: list[tuple[str, dict]]  # (campaign dir name, campaign.json)
    kmetrics: list[str]  # key metrics: headline first, then MPTCP's, FEC's, path shares
    fmetrics: list[str]  # those worth a figure (at most 6)
    health: list[str]  # host-cost metrics present (run health, not results)
    notok: dict  # group -> its runs not ok, in words
    ref: str | None  # the reference group (None: no ok run)
    pairing: tuple[str, object, dict] | None  # see report._pairing
    claims_file: Path | None = None
    max_timeseries: int = 8
    _tables: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def fig_dir(self) -> Path:
        return self.out.parent / "figures"

    def table(self, name: str) -> pd.DataFrame:
        """An ingested table of the campaign (loaded once per report)."""
        if name not in self._tables:
            self._tables[name] = ingest.load_table(self.root, name)
        return self._tables[name]

    def figure(self, fig, name: str, caption: str) -> Markup:
        """Save ``fig`` as ``name``.png/.pdf next to the report and embed the PNG."""
        paths = figures.save(fig, self.fig_dir, name)
        return figure(paths["png"], caption, paths["pdf"], self.out.parent)
