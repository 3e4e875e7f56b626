"""The scheduler module's mechanism counters (issue 39; runs whose scheduler is
one of mptlab's modules): ``result.json["schedstats"]``.

The run's metrics are derived in the guest (mptlab/guest/schedstats.py,
from ``/sys/module/mptcp_<scheduler>/parameters/stats``, kernel/modules/sched_util.h)
and arrive among the workload's metrics (readers.result); they are declared
here, with the instrument, as ``fec_*`` and ``sbd_*`` are.  Absent, not 0,
in runs of Linux's built-in ``default``; the time shares are absent for
cp and daps, which keep only the re-send counts (docs/schedulers.md,
"Mechanism counters").  The per-pair split stays in result.json (each pair
with its path); the runs table has it per path."""

from __future__ import annotations

import pandas as pd

from ...spec.metrics import Metric
from .base import Run

METRICS = (
    Metric(
        "sched_busy_s",
        "s",
        None,
        "time the scheduled MPTCP connections had more than a segment of data waiting to "
        "be sent (summed over connections): the shares' denominator",
    ),
    Metric(
        "sndwnd_blocked_s",
        "s",
        "lower",
        "time the MPTCP send window blocked: data waiting, a subflow with cwnd room, no "
        "window for one more segment",
    ),
    Metric("sndwnd_blocked_share", "", "lower", "sndwnd_blocked_s / sched_busy_s"),
    Metric(
        "sndwnd_blocked_share_path{n}",
        "",
        "lower",
        "the part of sndwnd_blocked_share during which path n's subflow held the oldest "
        "unacknowledged data (of several carriers, the slowest)",
    ),
    Metric(
        "sndwnd_blocked_unheld_share",
        "",
        None,
        "the part no subflow held (a zero window): with the per-path parts, sums to "
        "sndwnd_blocked_share",
    ),
    Metric(
        "or_resends_lost",
        "",
        None,
        "opportunistic re-sends decided while a subflow that carried the blocking data was "
        "in loss recovery (TCP Recovery or Loss state)",
    ),
    Metric(
        "or_resends_queued",
        "",
        None,
        "opportunistic re-sends decided while the blocking data was still queued or in flight "
        "on its carrier (no loss recovery there)",
    ),
    Metric("rto_resends", "", "lower", "MPTCP-level re-sends after a timeout"),
    Metric(
        "blest_lambda_mean",
        "",
        None,
        "BLEST's lambda, mean over busy time (1.0: the estimate uncorrected)",
    ),
    Metric("blest_lambda_at_min_share", "", None, "share of that time lambda sat at lambda_min"),
    Metric("blest_lambda_at_max_share", "", None, "share of that time lambda sat at lambda_max"),
    Metric(
        "blest_slow_skips",
        "",
        None,
        "BLEST's decisions to wait for the fast subflow rather than send on the slow one "
        "(scheduler calls, not segments)",
    ),
    Metric("blest_slow_sends", "", None, "BLEST's decisions to send on the slow subflow"),
)


def read(run: Run) -> tuple[dict, dict[str, pd.DataFrame]]:
    """Nothing beyond the metrics readers.result takes from result.json."""
    return {}, {}
