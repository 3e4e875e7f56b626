"""The scheduler module's mechanism counters (issue 39), read at the end of a run.

Every mptlab scheduler module keeps module-global counters since it was
loaded (kernel/modules/sched_util.h; docs/schedulers.md, "Mechanism
counters") and shows them in one read-only parameter,
``/sys/module/mptcp_<scheduler>/parameters/stats``::

    calls 81234
    observed_us 61234567
    busy_us 30617283
    blocked_us 4123456
    unheld_us 1234
    or_lost 12
    or_queued 345
    rto 0
    blocked_pair 10.0.8.2 10.0.5.1 4000000
    blocked_pair 10.0.2.2 10.0.1.1 122222
    lambda_sum 31234567890        (blest only, and the lines below)
    lambda_us 30617283
    ...

``collect(ctx)`` reads it once the workload's connections have closed and
returns what goes to ``result.json["schedstats"]`` (the counters, each
address pair with its path); ``metrics(record)`` derives the run's metrics
(``METRIC_NAMES``; declared with the analysis' reader,
``mptlab.analysis.readers.schedstats``).  A run whose scheduler has no
such file (Linux's built-in ``default``, a module of the user's own) gets
no record and none of these metrics: absent, not 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

SYS_MODULE = Path("/sys/module")
PARAM = "stats"
# the counters every module prints; blest adds BLEST_COUNTERS
COUNTERS = (
    "calls",
    "observed_us",
    "busy_us",
    "blocked_us",
    "unheld_us",
    "or_lost",
    "or_queued",
    "rto",
)
BLEST_COUNTERS = (
    "lambda_sum",
    "lambda_us",
    "lambda_at_min_us",
    "lambda_at_max_us",
    "slow_skips",
    "slow_sends",
)
PAIR = "blocked_pair"


class SchedStatsError(ValueError):
    """A stats file that is not what the modules print."""


def parse(text: str) -> dict:
    """The parameter's text -> ``{"counters": {name: int}, "pairs": [{"saddr",
    "daddr", "blocked_us"}]}``.  Unknown names are kept (a newer module);
    a malformed line, a repeated counter or a missing common counter is a
    ``SchedStatsError`` naming the line."""
    counters: dict[str, int] = {}
    pairs: list[dict] = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == PAIR and len(words) == 4:
                pairs.append({"saddr": words[1], "daddr": words[2], "blocked_us": int(words[3])})
                continue
            if len(words) != 2 or words[0] == PAIR:
                raise ValueError("expected 'name value' or 'blocked_pair SADDR DADDR us'")
            if words[0] in counters:
                raise ValueError(f"{words[0]} given twice")
            counters[words[0]] = int(words[1])
        except ValueError as exc:
            raise SchedStatsError(f"stats line {n} {line.strip()!r}: {exc}") from None
    missing = [c for c in COUNTERS if c not in counters]
    if missing:
        raise SchedStatsError(
            f"stats: no {', '.join(missing)} (a module older than these counters?)"
        )
    return {"counters": counters, "pairs": pairs}


def pair_path(
    pair: dict, path_of: Callable[[str], int | None], client_addrs: Iterable[str]
) -> int | None:
    """The path of an address pair: that of its client address (the sender
    may be the server, whose single address would stand for every path),
    else that of whichever address has one."""
    client = set(client_addrs)
    ordered = sorted((pair["saddr"], pair["daddr"]), key=lambda a: a not in client)
    for addr in ordered:
        path = path_of(addr)
        if path is not None:
            return path
    return None


def annotate(
    parsed: dict, path_of: Callable[[str], int | None], client_addrs: Iterable[str], n_paths: int
) -> dict:
    """``parsed`` with each pair's ``path`` and the number of paths of the
    topology (``n_paths``): what ``result.json["schedstats"]`` holds."""
    client = list(client_addrs)
    pairs = [{**p, "path": pair_path(p, path_of, client)} for p in parsed["pairs"]]
    return {"counters": dict(parsed["counters"]), "pairs": pairs, "paths": n_paths}


def metrics(record: dict | None) -> dict:
    """The run's metrics from ``result.json["schedstats"]`` ({} without one).

    Shares are of ``busy_us`` (the time the scheduled connections had more
    than a segment waiting to be sent), so that iperf3's idle control
    connection does not count; ``sndwnd_blocked_share_path{n}`` for every path of the
    topology, and ``sndwnd_blocked_unheld_share`` for blocked time no path
    held, sum to ``sndwnd_blocked_share``.  Modules that cannot keep the
    time counters (cp, daps: docs/schedulers.md) report 0 busy time: their
    shares are left out, their re-send counts stay."""
    if not record or "counters" not in record:
        return {}
    c = record["counters"]
    out: dict[str, float | int] = {
        "or_resends_lost": c["or_lost"],
        "or_resends_queued": c["or_queued"],
        "rto_resends": c["rto"],
    }
    busy = c["busy_us"]
    if busy > 0:
        out["sched_busy_s"] = busy / 1e6
        out["sndwnd_blocked_s"] = c["blocked_us"] / 1e6
        out["sndwnd_blocked_share"] = c["blocked_us"] / busy
        per_path = dict.fromkeys(range(1, int(record.get("paths") or 0) + 1), 0)
        unheld = c["unheld_us"]
        for p in record.get("pairs", []):
            if p.get("path") is None:
                unheld += p["blocked_us"]
            else:
                per_path[p["path"]] = per_path.get(p["path"], 0) + p["blocked_us"]
        for path, us in sorted(per_path.items()):
            out[f"sndwnd_blocked_share_path{path}"] = us / busy
        out["sndwnd_blocked_unheld_share"] = unheld / busy
    if c.get("lambda_us", 0) > 0:
        out["blest_lambda_mean"] = c["lambda_sum"] / c["lambda_us"] / 1000
        out["blest_lambda_at_min_share"] = c["lambda_at_min_us"] / c["lambda_us"]
        out["blest_lambda_at_max_share"] = c["lambda_at_max_us"] / c["lambda_us"]
    if "slow_skips" in c:
        out["blest_slow_skips"] = c["slow_skips"]
        out["blest_slow_sends"] = c["slow_sends"]
    return out


def stats_file(scheduler: str | None, root: Path = SYS_MODULE) -> Path | None:
    """The scheduler module's stats parameter, if it has one."""
    if not scheduler:
        return None
    path = root / f"mptcp_{scheduler}" / "parameters" / PARAM
    return path if path.exists() else None


def collect(ctx, root: Path = SYS_MODULE) -> dict | None:
    """The record for ``result.json["schedstats"]``: the module's counters,
    each pair's path; None when the scheduler has no stats file.  A file
    that cannot be read or parsed gives ``{"error": ...}`` (and a line in
    agent.log): the run's own result stands."""
    path = stats_file(ctx.config.kernel.scheduler, root)
    if path is None:
        return None
    try:
        parsed = parse(path.read_text())
    except (OSError, SchedStatsError) as exc:
        ctx.log(f"schedstats: {path}: {exc}")
        return {"module": path.parts[-3], "error": str(exc)}
    client = ctx.plan.addresses(ctx.client)
    n_paths = max(len(client), len(ctx.plan.addresses(ctx.server)))
    return {"module": path.parts[-3], **annotate(parsed, ctx.path_of, client, n_paths)}
