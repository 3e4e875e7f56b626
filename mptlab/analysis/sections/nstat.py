"""The kernel's notable counters per group (nstat): drops, pruning, out-of-order
queueing, retransmissions, timeouts, MPTCP reinjections, FEC."""

from __future__ import annotations

from ..html import Markup, render, table
from ..units import human
from .context import Context

# kernel counters worth a look per variant: drops, pruning, out-of-order
# queueing, retransmissions, timeouts, MPTCP reinjections (name patterns)
NSTAT_PATTERNS = (
    "prune",
    "drop",
    "ofo",
    "retrans",
    "timeout",
    "reinject",
    "collapse",
    "overflow",
    "fec",  # TCP-dFEC: TCPFECSent, TCPFECRecovered, TCPFECFailed (docs/fec.md)
)

_SECTION = """\
<h2 id='nstat'>Kernel counters (nstat)</h2>\
{% if t is none %}<p class='muted'>{{ why }}</p>{% else %}<p class='muted'>Mean change per run \
(client + server), every run of the current attempt whatever its status; all counters: the \
nstat table.</p>{{ t }}{% endif %}"""


def section(ctx: Context) -> Markup:
    """Mean per-run change of the notable kernel counters (client and server
    summed), per group: the counters of ``NSTAT_PATTERNS`` that moved in
    some run."""
    runs, by = ctx.runs, ctx.by
    ns = ctx.table("nstat")
    if not len(ns) or "kind" not in ns:
        return render(_SECTION, t=None, why="no nstat counters in these runs.")
    ns = ns[(ns["kind"] == "counter") & ns["run_id"].isin(runs["run_id"])]
    moved = ns["counter"].str.lower().str.contains("|".join(NSTAT_PATTERNS))
    ns = ns[moved & ns["delta"].fillna(0).ne(0)]
    if not len(ns):
        why = "none of the drop, prune, OFO, retransmission or timeout counters moved."
        return render(_SECTION, t=None, why=why)
    per_run = ns.groupby(["run_id", "name"])["delta"].sum().unstack(fill_value=0)
    per_run = per_run.reindex(runs["run_id"], fill_value=0)
    groups = runs.set_index("run_id")[by].reindex(per_run.index)
    names = sorted(per_run.columns, key=lambda n: (not n.startswith("MPTcp"), n))
    rows = []
    for g in ctx.order:
        sub = per_run[groups == g]
        if len(sub):
            rows.append([g, str(len(sub))] + [human(float(sub[n].mean()), "count") for n in names])
    return render(_SECTION, t=table([by, "runs", *names], rows, left=1), why="")
