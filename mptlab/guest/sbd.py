"""Shared-bottleneck detection (SBD): the receiver-side core of MPTCP-SBD.

What this is
------------
The statistics and the grouping of RFC 8382 ("Shared Bottleneck Detection for
Coupled Congestion Control for RTP Media", Hayes, Ferlin, Welzl, Hiorth, 2018)
as S. Ferlin's thesis (ch. 5) and the MPTCP-SBD paper (IFIP Networking 2016)
use them, plus the thesis's observation filter.  A *flow* is an MPTCP subflow
(any hashable key).  The detector is fed, per flow, the relative one-way delay
(OWD) of every received packet and the number of packets lost.  Every base
interval T it produces an :class:`Observation` (which flows are bottlenecked
and how they group), and every ``observations`` (10) observations a filtered
:class:`Decision` (flow -> group id; 0 = not bottlenecked, never coupled).

Only the standard library: it runs in the emulated guest.  ``packet()`` is
O(1); the per-interval work is O(flows x N) every T.

Parameters (:class:`SbdParams`)
-------------------------------
Values are the thesis's Table 5.1 (= the MPTCP-SBD paper's Table I); where
they differ from RFC 8382's defaults the thesis wins.

``interval_s`` T = 0.35 s
    Base interval: every statistic is kept per interval of T (RFC 8382 §2).
``n`` N = 50
    Intervals of history kept; freq_est and pkt_loss use the last N.
``m`` M = 50
    Intervals that the long-term mean, skew_est and var_est use.  RFC 8382
    separates M (skew/variability) from N (oscillation) and says that usually
    M = N (§2.1).  The thesis gives only N and defines the long-term mean and
    the skewness sums over the N stored intervals, so M = N here; set ``m``
    to use a shorter window.
``c_s`` = -0.01, ``c_h`` = 0.3
    Skewness threshold and its hysteresis: a flow is bottlenecked when
    skew_est < c_s, or skew_est < c_h if it was bottlenecked in the previous
    observation.
``p_l`` = 0.1
    Loss threshold: pkt_loss > p_l marks a flow bottlenecked whatever its
    skew, and makes loss (not skew) the last grouping step.
``p_f`` = 0.1, ``p_mad`` = 0.1, ``p_s`` = 0.1, ``p_d`` = 0.1
    Grouping thresholds for freq_est (absolute), var_est (relative),
    skew_est (absolute) and pkt_loss (relative).
``p_v`` = 0.7
    Hysteresis of the oscillation count, as a fraction of var_est.
``observations`` = 10, ``min_seen`` = 5
    The thesis's observation filter (3.5 s): flows are grouped in a decision
    when grouped together in at least ``min_seen`` of the ``observations``
    observations (a 5-of-10 tie counts as grouped).
``min_intervals`` = 10
    History a flow needs before it can be bottlenecked (see step 4).
RFC 8382's F (§3.4.1: a shorter equally-weighted window to cut lag) belongs
to an optional enhancement that the thesis does not use; it is not
implemented.

Step by step
------------
Interval k covers [t0 + kT, t0 + (k+1)T), t0 being the time of the first
report (packet or loss, of any flow) the detector saw.  ``advance(t)`` closes
every interval that ended at or before t; a packet or loss report with a
later time closes them too (their observations wait for the next
``advance``).  A report earlier than the open interval (time must not go
backwards) is counted in the open interval.

1. Per packet (RFC 8382 §3.2.1-§3.2.3), in the open interval n of its flow:
   C_n += 1 and the sum of OWD (for mean_OWD_n = sum / C_n);
   skew_base_n += 1 if OWD < mean_OWD, -= 1 if OWD > mean_OWD, where mean_OWD
   is the long-term mean as it stood when the interval opened (the mean of
   the interval means of the last M *closed* intervals): it is not known for
   the open one, so samples are compared as they arrive (as the RFC does);
   var_base_n += |OWD - mean_OWD_{n-1}|, mean_OWD_{n-1} being the mean of the
   previous interval (the last closed one that had samples): the mean
   absolute deviation about the previous interval's mean, as the thesis
   writes it.
   A flow's first interval with samples has neither reference: its samples
   enter mean_OWD_n but are not compared (they count neither in skew_base /
   var_base nor in their denominators).  OWD is taken relative to the flow's
   first sample, so a constant per-flow offset (unsynchronised clocks)
   changes nothing, and huge raw values lose no precision.
2. At the end of each interval, per flow (RFC 8382 §3.2.2-§3.2.5):
   skew_est = sum skew_base_n / sum C'_n and var_est = sum var_base_n /
   sum C'_n over the last M intervals (C'_n: the compared samples), so
   -1 <= skew_est <= 1 and var_est is in the OWD's unit (microseconds).
   var_est is *not* normalised: grouping compares it relatively (p_mad), and
   dividing by a mean OWD would make it depend on the clock offset.
   freq_est: take the interval means of the last N intervals and their mean
   E; walking them in time order, an interval mean is "above" if > E + p_v *
   var_est, "below" if < E - p_v * var_est, and in the dead band otherwise
   (it keeps the last side); every change of side is one crossing.
   freq_est = crossings / N (over N even while fewer intervals are stored).
   pkt_loss = lost / (lost + received) over the last N intervals (0 when
   nothing was received or lost).
   Intervals without samples: they are kept (so every flow's window covers the
   same time), add nothing to the sums above, have no mean (so they neither
   enter E nor the long-term mean, and cannot cross), and losses in them still
   count.  A flow with no compared sample in its window reports skew_est =
   var_est = 0.
3. Bottlenecked (RFC 8382 §3.3.1, step 1): skew_est < c_s, or skew_est < c_h
   and bottlenecked in the previous observation (the RFC's "PB"), or pkt_loss
   > p_l.
4. Enough history (not fixed by the sources): a flow can be bottlenecked only
   when at least ``min_intervals`` of its last M intervals had compared
   samples (10 = 3.5 s, one observation block).  Before that, and whenever it
   falls below (a flow that stopped sending), it is "not bottlenecked" and its
   hysteresis state is cleared.  Flows that appear later start with empty
   history, from the interval they appeared in.
5. Grouping of the bottlenecked flows (RFC 8382 §3.3.1, steps 2-4), each step
   sorting the flows of every group so far by one statistic and cutting
   between *neighbours* whose values differ by more than the threshold:
   freq_est, absolute difference > p_f;
   var_est, (larger - smaller) / larger > p_mad (two zeros never differ);
   then, if the group's largest pkt_loss is > p_l, pkt_loss with (larger -
   smaller) / larger > p_d, otherwise skew_est with absolute difference > p_s.
   Cutting between neighbours chains: a group may span more than one
   threshold.  Which pkt_loss decides "loss-driven" (the group's largest
   here) is left open by the sources.  Flows not in any group are not
   bottlenecked.  Within a group flows are in the order the detector first
   saw them, and groups are in the order of their first member.
6. Observation filter (thesis ch. 5; not in the RFC): over each block of
   ``observations`` consecutive observations (non-overlapping, 10 x 0.35 s =
   3.5 s), two flows are paired when they were in the same observation group
   in at least ``min_seen`` observations (>=, so a 5-of-10 tie is grouped,
   the thesis's conservative choice).  The thesis asks for "the same
   observation" 5 times; pairs are used here so that a group is not lost when
   a third flow flickers in and out.  Decision groups are the connected
   components of that pairing (its transitive closure), so they partition the
   flows: A~B and B~C put A, B, C in one group even if A and C were together
   fewer times.  A flow bottlenecked in fewer than ``min_seen`` observations
   of the block gets group 0; one that was bottlenecked often enough but
   paired with nobody gets a group of its own (bottlenecked, shares with
   nobody: the sender runs plain Reno for it).  Ids 1, 2, ... are given in
   the order of each group's first member and are only meaningful within one
   decision; decision ids count 1, 2, ...

Sources: RFC 8382 and the thesis (ch. 5, as the project's reference notes
summarise it).  Every point called "left open" or "not fixed" above, and
every "here", is a choice of this module.  RFC 8382's own text was not at
hand when this was written (the searchable copies held only its first page):
its section numbers, its "usually M = N" and F above come from recollection
of the RFC and should be checked against it; the formulas follow the thesis.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import islice

__all__ = [
    "Decision",
    "Detector",
    "FlowEstimates",
    "Observation",
    "SbdParams",
    "decide",
    "group",
    "is_bottlenecked",
]

_INT_FIELDS = frozenset({"n", "m", "observations", "min_seen", "min_intervals"})


@dataclass(frozen=True)
class SbdParams:
    """SBD parameters: the thesis's Table 5.1 values (see the module doc)."""

    interval_s: float = 0.35  # T
    n: int = 50  # N: history kept; freq_est and pkt_loss window
    m: int = 50  # M: long-term mean, skew_est and var_est window (RFC 8382; M = N)
    c_s: float = -0.01  # skewness threshold
    c_h: float = 0.3  # skewness hysteresis threshold
    p_f: float = 0.1  # freq_est grouping threshold (absolute)
    p_mad: float = 0.1  # var_est grouping threshold (relative)
    p_s: float = 0.1  # skew_est grouping threshold (absolute)
    p_d: float = 0.1  # pkt_loss grouping threshold (relative)
    p_l: float = 0.1  # loss threshold
    p_v: float = 0.7  # freq_est crossing hysteresis, x var_est
    observations: int = 10  # observation filter: 10 observations = 3.5 s
    min_seen: int = 5  # grouped together in >= 5 of 10 (a tie is grouped)
    min_intervals: int = 10  # intervals with samples before a flow can be bottlenecked

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _INT_FIELDS:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"SBD parameter {f.name!r} must be an integer, not {value!r}")
            elif (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                raise ValueError(f"SBD parameter {f.name!r} must be a finite number, not {value!r}")
        problems = []
        if self.interval_s <= 0:
            problems.append(f"interval_s must be > 0 (got {self.interval_s})")
        if self.n < 2:
            problems.append(f"n must be >= 2 (got {self.n})")
        if not 1 <= self.m <= self.n:
            problems.append(f"m must be between 1 and n={self.n} (got {self.m})")
        if not 1 <= self.min_intervals <= self.m:
            problems.append(
                f"min_intervals must be between 1 and m={self.m} (got {self.min_intervals})"
            )
        if self.observations < 1:
            problems.append(f"observations must be >= 1 (got {self.observations})")
        if not 1 <= self.min_seen <= self.observations:
            problems.append(
                f"min_seen must be between 1 and observations={self.observations} (got {self.min_seen})"
            )
        if not -1 <= self.c_s <= self.c_h <= 1:
            problems.append(f"need -1 <= c_s <= c_h <= 1 (got c_s={self.c_s}, c_h={self.c_h})")
        for name in ("p_f", "p_mad", "p_s", "p_d", "p_v"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0 (got {getattr(self, name)})")
        if not 0 <= self.p_l < 1:
            problems.append(f"p_l must be in [0, 1) (got {self.p_l})")
        if problems:
            raise ValueError("bad SBD parameters: " + "; ".join(problems))

    @classmethod
    def from_mapping(cls, values: Mapping[str, float | int]) -> SbdParams:
        """Parameters from a mapping of overrides; the rest keep their defaults.

        Raises ValueError naming an unknown key (and listing the allowed ones)
        or a bad value.  Integer parameters accept integral floats (50.0)."""
        allowed = [f.name for f in fields(cls)]
        kwargs: dict[str, float | int] = {}
        for key, value in values.items():
            if key not in allowed:
                raise ValueError(f"unknown SBD parameter {key!r}; allowed: {', '.join(allowed)}")
            if (
                key in _INT_FIELDS
                and isinstance(value, float)
                and math.isfinite(value)
                and value.is_integer()
            ):
                value = int(value)
            elif key not in _INT_FIELDS and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            kwargs[key] = value
        return cls(**kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class FlowEstimates:
    """One flow's statistics at the end of an interval (RFC 8382 §3.2)."""

    flow: Hashable
    skew_est: float
    var_est: float  # microseconds (the OWD's unit)
    freq_est: float
    pkt_loss: float
    bottlenecked: bool


@dataclass(frozen=True)
class Observation:
    """The grouping at the end of interval ``index`` (ending at ``t``).

    ``groups`` holds the bottlenecked flows, grouped; a flow in no group is
    not bottlenecked."""

    t: float
    index: int
    estimates: tuple[FlowEstimates, ...]
    groups: tuple[tuple[Hashable, ...], ...]


@dataclass(frozen=True)
class Decision:
    """The filtered grouping over one block of observations.

    ``groups`` maps every flow known so far to a group id: 0 = not
    bottlenecked (never coupled), 1, 2, ... = shared-bottleneck groups (a
    flow alone in its id is bottlenecked but shares with nobody)."""

    t: float
    decision_id: int
    groups: Mapping[Hashable, int]


def is_bottlenecked(skew_est: float, pkt_loss: float, previously: bool, params: SbdParams) -> bool:
    """RFC 8382 §3.3.1 step 1 (with the RFC's "PB" hysteresis)."""
    return skew_est < params.c_s or (previously and skew_est < params.c_h) or pkt_loss > params.p_l


def _split(
    members: list[FlowEstimates],
    value: Callable[[FlowEstimates], float],
    apart: Callable[[float, float], bool],
) -> list[list[FlowEstimates]]:
    """Sort by ``value`` and cut between neighbours ``apart(lower, higher)``."""
    ordered = sorted(members, key=value)
    out = [[ordered[0]]]
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        if apart(value(prev), value(cur)):
            out.append([cur])
        else:
            out[-1].append(cur)
    return out


def _relative_apart(limit: float) -> Callable[[float, float], bool]:
    def apart(low: float, high: float) -> bool:
        return high > 0 and (high - low) / high > limit

    return apart


def _absolute_apart(limit: float) -> Callable[[float, float], bool]:
    def apart(low: float, high: float) -> bool:
        return high - low > limit

    return apart


def group(
    estimates: Sequence[FlowEstimates], params: SbdParams
) -> tuple[tuple[Hashable, ...], ...]:
    """RFC 8382 §3.3.1 steps 2-4: the bottlenecked flows of ``estimates``,
    grouped (flows in input order within a group, groups in the order of their
    first member)."""
    position = {e.flow: i for i, e in enumerate(estimates)}
    groups = [[e for e in estimates if e.bottlenecked]]
    if not groups[0]:
        return ()
    by_freq = _absolute_apart(params.p_f)
    by_var = _relative_apart(params.p_mad)
    by_loss = _relative_apart(params.p_d)
    by_skew = _absolute_apart(params.p_s)
    groups = [g for grp in groups for g in _split(grp, lambda e: e.freq_est, by_freq)]
    groups = [g for grp in groups for g in _split(grp, lambda e: e.var_est, by_var)]
    final: list[list[FlowEstimates]] = []
    for grp in groups:
        if max(e.pkt_loss for e in grp) > params.p_l:
            final.extend(_split(grp, lambda e: e.pkt_loss, by_loss))
        else:
            final.extend(_split(grp, lambda e: e.skew_est, by_skew))
    ordered = [sorted((e.flow for e in g), key=position.__getitem__) for g in final]
    ordered.sort(key=lambda g: position[g[0]])
    return tuple(tuple(g) for g in ordered)


def decide(
    observations: Sequence[Observation],
    params: SbdParams,
    flows: Iterable[Hashable] | None = None,
) -> dict[Hashable, int]:
    """The thesis's observation filter over one block of observations (module
    doc, step 6): flow -> group id (0 = not bottlenecked).

    ``flows`` (default: every flow in the observations' estimates, in order of
    first appearance) are the flows to report and give the id order."""
    order: dict[Hashable, None] = {}
    if flows is not None:
        order.update((f, None) for f in flows)
    for obs in observations:
        order.update((e.flow, None) for e in obs.estimates)
        for g in obs.groups:
            order.update((f, None) for f in g)
    seen: dict[Hashable, int] = {}
    together: dict[tuple[Hashable, Hashable], int] = {}
    rank = {f: i for i, f in enumerate(order)}
    for obs in observations:
        for g in obs.groups:
            members = sorted(g, key=rank.__getitem__)
            for i, a in enumerate(members):
                seen[a] = seen.get(a, 0) + 1
                for b in members[i + 1 :]:
                    together[(a, b)] = together.get((a, b), 0) + 1
    parent = {f: f for f in order if seen.get(f, 0) >= params.min_seen}

    def root(f: Hashable) -> Hashable:
        while parent[f] != f:
            parent[f] = parent[parent[f]]
            f = parent[f]
        return f

    for (a, b), count in together.items():
        if count >= params.min_seen:  # then both were seen >= min_seen times
            ra, rb = root(a), root(b)
            if ra != rb:
                if rank[ra] < rank[rb]:
                    parent[rb] = ra
                else:
                    parent[ra] = rb
    ids: dict[Hashable, int] = {}
    out: dict[Hashable, int] = {}
    for f in order:
        if f not in parent:
            out[f] = 0
            continue
        r = root(f)
        if r not in ids:
            ids[r] = len(ids) + 1
        out[f] = ids[r]
    return out


class _Flow:
    """One flow's open interval (running sums) and closed-interval history."""

    __slots__ = (
        "key",
        "base",
        "ring",
        "count",
        "total",
        "compared",
        "below",
        "above",
        "dev",
        "lost",
        "ref",
        "prev",
        "bottlenecked",
    )

    def __init__(self, key: Hashable, n: int) -> None:
        self.key = key
        self.base: float | None = None  # first OWD: everything is relative to it
        # closed intervals: (count, compared, skew_base, var_base, lost, mean | None)
        self.ring: deque[tuple[int, int, int, float, int, float | None]] = deque(maxlen=n)
        self.ref: float | None = None  # long-term mean of the closed intervals
        self.prev = 0.0  # mean of the last closed interval with samples (once ref is set)
        self.bottlenecked = False
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self.total = 0.0
        self.compared = 0
        self.below = 0
        self.above = 0
        self.dev = 0.0
        self.lost = 0


class Detector:
    """Receiver-side SBD over any number of flows (see the module doc)."""

    def __init__(self, params: SbdParams | None = None) -> None:
        self.params = params if params is not None else SbdParams()
        self._flows: dict[Hashable, _Flow] = {}
        self._t0: float | None = None
        self._k = 0  # index of the open interval
        self._end = math.inf  # end of the open interval
        self._pending: list[Observation | Decision] = []
        self._block: list[Observation] = []
        self._decisions = 0

    # -- input ---------------------------------------------------------------

    def _flow(self, key: Hashable, t: float) -> _Flow:
        if self._t0 is None:
            self._t0 = t
            self._end = t + self.params.interval_s
        elif t >= self._end:
            self._close_until(t)
        st = self._flows.get(key)
        if st is None:
            st = self._flows[key] = _Flow(key, self.params.n)
        return st

    def packet(self, flow: Hashable, t: float, owd_us: float) -> None:
        """One received packet of ``flow`` at receiver time ``t`` (seconds,
        non-decreasing) with relative one-way delay ``owd_us``."""
        if t >= self._end or self._t0 is None:
            st = self._flow(flow, t)
        else:
            st = self._flows.get(flow) or self._flow(flow, t)
        if st.base is None:
            st.base = owd_us
        x = owd_us - st.base
        st.count += 1
        st.total += x
        ref = st.ref
        if ref is not None:
            st.compared += 1
            if x < ref:
                st.below += 1
            elif x > ref:
                st.above += 1
            d = x - st.prev
            st.dev += d if d >= 0 else -d

    def lost(self, flow: Hashable, t: float, count: int = 1) -> None:
        """``count`` packets of ``flow`` reported lost at time ``t``."""
        if count < 0:
            raise ValueError(f"lost count must be >= 0, not {count}")
        self._flow(flow, t).lost += count

    def advance(self, t: float) -> list[Observation | Decision]:
        """Close every interval that ended at or before ``t``; return the
        Observations (and, after every ``observations`` of them, a Decision)
        produced since the last call, in time order."""
        if self._t0 is not None and t >= self._end:
            self._close_until(t)
        out, self._pending = self._pending, []
        return out

    # -- per interval -----------------------------------------------------------

    def _close_until(self, t: float) -> None:
        assert self._t0 is not None
        while t >= self._end:
            self._close()
            self._k += 1
            self._end = self._t0 + (self._k + 1) * self.params.interval_s

    def _close(self) -> None:
        p = self.params
        estimates = []
        for st in self._flows.values():
            mean = st.total / st.count if st.count else None
            st.ring.append((st.count, st.compared, st.below - st.above, st.dev, st.lost, mean))
            st._reset()
            if mean is not None:
                st.prev = mean
                means = [r[5] for r in islice(reversed(st.ring), p.m) if r[5] is not None]
                st.ref = sum(means) / len(means)
            estimates.append(self._estimate(st))
        obs = Observation(
            t=self._end, index=self._k, estimates=tuple(estimates), groups=group(estimates, p)
        )
        self._pending.append(obs)
        self._block.append(obs)
        if len(self._block) >= p.observations:
            self._decisions += 1
            self._pending.append(
                Decision(
                    t=self._end,
                    decision_id=self._decisions,
                    groups=decide(self._block, p, self._flows),
                )
            )
            self._block = []

    def _estimate(self, st: _Flow) -> FlowEstimates:
        p = self.params
        compared = skew_base = intervals = 0
        dev = 0.0
        for _count, cmp, skew, var, _lost, _mean in islice(reversed(st.ring), p.m):
            if cmp:
                compared += cmp
                skew_base += skew
                dev += var
                intervals += 1
        skew_est = skew_base / compared if compared else 0.0
        var_est = dev / compared if compared else 0.0
        received = lost = 0
        means = []
        for count, _cmp, _skew, _var, lost_n, mean in st.ring:
            received += count
            lost += lost_n
            if mean is not None:
                means.append(mean)
        pkt_loss = lost / (lost + received) if lost else 0.0
        freq_est = _crossings(means, p.p_v * var_est) / p.n
        if intervals >= p.min_intervals:
            st.bottlenecked = is_bottlenecked(skew_est, pkt_loss, st.bottlenecked, p)
        else:
            st.bottlenecked = False
        return FlowEstimates(st.key, skew_est, var_est, freq_est, pkt_loss, st.bottlenecked)


def _crossings(means: Sequence[float], band: float) -> int:
    """How often the interval means change side of their own mean, with a dead
    band of +-``band`` around it (RFC 8382 §3.2.4)."""
    if len(means) < 2:
        return 0
    centre = sum(means) / len(means)
    high, low = centre + band, centre - band
    side = crossings = 0
    for x in means:
        if x > high:
            now = 1
        elif x < low:
            now = -1
        else:
            continue
        if side and now != side:
            crossings += 1
        side = now
    return crossings
