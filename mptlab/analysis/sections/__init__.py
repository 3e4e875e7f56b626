"""The report's sections, in the order a reader meets them (``SECTIONS``).

A section is a function ``(Context) -> Markup | None``: it renders its part
of the page from the campaign's tables (``Context``), or returns None when
the runs have nothing for it (no SBD scores, no packet traces), and the
page leaves it out.  ``report.build`` prepares one ``Context`` and renders
``SECTIONS`` in turn; adding an instrument's section is one module here and
one entry in ``SECTIONS``, nothing else.

The order reads like a paper (issue 25): what was reproduced and the
headline figure first, then the summary and the comparisons, then the
figures of every key metric, the instruments' sections, and the long
tables (run health, kernel counters, the runs not ok, provenance) last.
"""

from __future__ import annotations

from collections.abc import Callable

from ..html import Markup
from . import (
    compare,
    fec,
    figs,
    headline,
    health,
    mechanism,
    nstat,
    overview,
    pcap,
    provenance,
    reproduction,
    reps,
    runs_not_ok,
    sbd,
    summary,
)
from .context import Context

__all__ = ["SECTIONS", "Context", "Section", "render_sections"]

Section = Callable[[Context], Markup | None]

SECTIONS: tuple[Section, ...] = (
    reproduction.section,  # the paper's claims: the verdicts lead
    headline.section,  # the headline metric per variant, one figure
    overview.section,  # runs per variant and their status
    summary.section,  # key metrics per variant (n, mean, median, sd, CI)
    compare.section,  # each variant against its partner or the reference
    reps.section,  # repetitions needed for an effect of the headline metric
    figs.section,  # bar, box and CDF per key metric; path shares; time series
    fec.section,  # TCP-dFEC's ratio over time
    sbd.section,  # shared-bottleneck detection's accuracy
    mechanism.section,  # the scheduler's mechanism counters (bulk runs)
    health.section,  # what the runs cost the host; starved runs
    pcap.section,  # packet traces against the kernel counters
    nstat.section,  # the kernel's drop/prune/OFO/retransmission counters
    runs_not_ok.section,  # every run not ok with its reason
    provenance.section,  # campaign.json, specs, tool versions
)


def render_sections(ctx: Context, listed: tuple[Section, ...] = SECTIONS) -> list[Markup]:
    """Each section of ``listed`` rendered, in order; a section that returns None
    (nothing to show for these runs) is left out."""
    out = []
    for section in listed:
        html = section(ctx)
        if html is not None:
            out.append(html)
    return out
