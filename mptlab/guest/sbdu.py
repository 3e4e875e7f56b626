"""The guest's SBD unit ("SBDU", as the thesis called its user-space part):
shared-bottleneck detection at the receiver, fed by the kernel.

Kernel patch 0014 traces the one-way delay of every data segment an MPTCP
subflow receives (``mptcp:mptcp_subflow_owd``, with net.mptcp.owd_trace on
in the client's and the server's namespaces, which also makes the subflows
send microsecond timestamps).  ``tracepoints.TraceReader`` hands those lines
to ``SbdUnit.feed``; for every MPTCP connection (token) a
``mptlab.guest.sbd.Detector`` turns the delays and the losses into RFC 8382
observations every T and a decision every 10 observations.  Each decision
goes to the receiver's kernel at once: written to olia_sbd's parameter
``sbd_group`` (kernel/modules/mptcp_olia.c), one line per subflow as the
receiver sees it, with the subflow's number and the decision's; the subflow
carries it to the sender in kernel patch 0015's MPTCP option on its next
three segments (acks), as the thesis's SBD option did, and the sender's
olia_sbd follows the last one that arrived.

What differs from the thesis (docs/congestion-control.md, "SBD"):
- losses are the holes in each subflow's sequence numbers as the receiver
  sees them (a segment beyond the highest one seen counts the segments it
  skipped), not counts the sender signals in its timestamp option;
- the trace is read every ``TraceReader`` interval (0.1 s with SBD), so a
  decision is made up to that late.

Every observation and decision is written to the run dir (``sbd-observations.csv``,
``sbd-decisions.csv``), with each subflow's path, for the analysis to score
against the topology's truth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TextIO, cast

from .. import rundir
from ..spec.plan import NetPlan
from .config import Sbd
from .sbd import Decision, Detector, Observation, SbdParams

OWD_EVENT = "mptcp_subflow_owd"
SBD_GROUP_PARAM = Path("/sys/module/mptcp_olia/parameters/sbd_group")
OBSERVATION_COLUMNS = (
    "t,token,observation,saddr,sport,daddr,dport,path,skew_est,var_est,freq_est,pkt_loss,"
    "bottlenecked,group"
)
DECISION_COLUMNS = "t,token,decision,saddr,sport,daddr,dport,path,group"

_OWD = re.compile(
    r"\s([\d.]+): mptcp_subflow_owd: token=([0-9a-f]+) saddr=(\S+) sport=(\d+) "
    r"daddr=(\S+) dport=(\d+) seq=(\d+) len=(\d+) tsval=\d+ owd_us=(\d+)"
)

Flow = tuple[str, str, int, str, int]  # token, receiver's address and port, sender's


def sbd_params(config: Sbd) -> SbdParams:
    """The detector's parameters from the spec's ``kernel.sbd`` block (interval in ms)."""
    values: dict[str, float | int] = {
        f.name: getattr(config, f.name)
        for f in fields(config)
        if f.name not in ("truth", "interval")
    }
    values["interval_s"] = config.interval / 1000
    return SbdParams.from_mapping(values)


class _Subflow:
    """The delay and loss bookkeeping of one subflow at its receiver."""

    __slots__ = ("base", "max_end", "mss")

    def __init__(self, owd: int, seq: int, length: int):
        self.base = owd  # the first delay: later ones relative to it (u32 wrap-safe)
        self.max_end = (seq + length) & 0xFFFFFFFF
        self.mss = length

    def relative(self, owd: int) -> int:
        d = (owd - self.base) & 0xFFFFFFFF
        return d - (1 << 32) if d >= 1 << 31 else d

    def lost(self, seq: int, length: int) -> int:
        """Segments skipped before this one (0 for in-order or re-sent data)."""
        self.mss = max(self.mss, length)
        gap = (seq - self.max_end) & 0xFFFFFFFF
        end = (seq + length) & 0xFFFFFFFF
        if gap >= 1 << 31:  # at or below the highest byte seen: in order, or a re-send
            if ((end - self.max_end) & 0xFFFFFFFF) < 1 << 31:
                self.max_end = end
            return 0
        self.max_end = end
        return -(-gap // self.mss) if gap else 0


class SbdUnit:
    """Consumes ``mptcp_subflow_owd`` trace lines; writes observations and
    decisions; hands decisions to ``apply`` (default: olia_sbd's parameter)."""

    def __init__(
        self,
        params: SbdParams,
        observations: TextIO,
        decisions: TextIO,
        path_of: Callable[[str], int | None],
        apply: Callable[[str], None] | None = None,
    ):
        self.params = params
        self.obs_out = observations
        self.dec_out = decisions
        self.obs_out.write(OBSERVATION_COLUMNS + "\n")
        self.dec_out.write(DECISION_COLUMNS + "\n")
        self.path_of = path_of
        self.apply = apply if apply is not None else write_sbd_group
        self.detectors: dict[str, Detector] = {}
        self.subflows: dict[Flow, _Subflow] = {}
        self.last_t = 0.0
        self.samples = 0
        self.token_samples: dict[str, int] = {}  # the connection that received most is the main one
        self.decisions = 0
        self.apply_errors: list[str] = []
        self.apply_gone = 0  # decisions for subflows that had closed

    def feed(self, lines: list[str]) -> list[str]:
        """Take the OWD events out of ftrace text ``lines``; returns the other lines."""
        other = []
        for line in lines:
            m = _OWD.search(line) if OWD_EVENT in line else None
            if m is None:
                other.append(line)
                continue
            t = max(float(m[1]), self.last_t)
            self.last_t = t
            token = m[2]
            flow: Flow = (token, m[3], int(m[4]), m[5], int(m[6]))
            owd, seq, length = int(m[9]), int(m[7]), int(m[8])
            det = self.detectors.get(token)
            if det is None:
                det = self.detectors[token] = Detector(self.params)
            sf = self.subflows.get(flow)
            if sf is None:
                sf = self.subflows[flow] = _Subflow(owd, seq, length)
            else:
                lost = sf.lost(seq, length)
                if lost:
                    det.lost(flow, t, lost)
            det.packet(flow, t, float(sf.relative(owd)))
            self.samples += 1
            self.token_samples[token] = self.token_samples.get(token, 0) + 1
        return other

    def advance(self, t: float, offset: float) -> None:  # offset: trace time -> wall clock
        """Close every interval that ended by trace time ``t`` (a later event
        stamped before ``t`` counts at ``t``)."""
        self.last_t = max(self.last_t, t)
        for token, det in self.detectors.items():
            for item in det.advance(t):
                if isinstance(item, Observation):
                    self._observation(token, item, offset)
                elif isinstance(item, Decision):
                    self._decision(token, item, offset)

    def _where(self, flow: Flow) -> str:
        _token, saddr, sport, daddr, dport = flow
        path = self.path_of(saddr)
        return f"{saddr},{sport},{daddr},{dport},{'' if path is None else path}"

    def _observation(self, token: str, obs: Observation, offset: float) -> None:
        group_of = {flow: g for g, flows in enumerate(obs.groups, 1) for flow in flows}
        for e in obs.estimates:
            self.obs_out.write(
                f"{obs.t + offset:.6f},{token},{obs.index},{self._where(cast(Flow, e.flow))},"
                f"{e.skew_est:.5f},{e.var_est:.3f},{e.freq_est:.4f},{e.pkt_loss:.5f},"
                f"{int(e.bottlenecked)},{group_of.get(e.flow, 0)}\n"
            )

    def _decision(self, token: str, dec: Decision, offset: float) -> None:
        self.decisions += 1
        flows = cast(dict[Flow, int], dict(dec.groups))  # the keys fed in are Flows
        # the option's decision id is 16 bits and never 0 (0 = no decision)
        wire_id = dec.decision_id % 0xFFFF + 1
        for number, (flow, group) in enumerate(sorted(flows.items()), 1):
            self.dec_out.write(
                f"{dec.t + offset:.6f},{token},{dec.decision_id},{self._where(flow)},{group}\n"
            )
            _token, saddr, sport, daddr, dport = flow
            # the receiver's own view of its subflow: the kernel finds it by that
            line = f"{saddr} {sport} {daddr} {dport} {group} {number} {wire_id}"
            try:
                self.apply(line)
            except FileNotFoundError:
                # the kernel has no such established subflow: it closed after
                # its last samples (seen: the second subflow of iperf3's control
                # connection); counted, not an error of the decision path
                self.apply_gone += 1
            except OSError as exc:
                self.apply_errors.append(f"{line}: {exc}")
        self.dec_out.flush()

    def close(self) -> None:
        self.obs_out.close()
        self.dec_out.close()


def write_sbd_group(line: str) -> None:
    """Hand one subflow's decision to olia_sbd (nothing if the module has no such parameter)."""
    if SBD_GROUP_PARAM.exists():
        SBD_GROUP_PARAM.write_text(line)


# ------------------------------------------------------------ ground truth
Truth = list[tuple[float, list[set[int]]]]  # (from s after the workload's start, groups of paths)


def topology_truth(plan: NetPlan, client: str, server: str) -> list[set[int]]:
    """Which of the client's paths share a bottleneck, from the topology: a
    path's bottleneck is the set of rate-limited hops of its slowest rate on
    the way from the server to the client's address of that path (the data
    direction of a download; the way back has the same hops here), and paths
    share when those sets meet.  Link events and background load are not
    looked at: an experiment whose bottleneck moves gives ``kernel.sbd.truth``."""
    server_addr = plan.addresses(server)[0]
    slowest: dict[int, set[tuple[int, str]]] = {}
    for p, addr in enumerate(plan.addresses(client), 1):
        hops = plan.route(server, server_addr, addr) or []
        rated = [
            (hop, shape.rate)
            for hop in hops
            if (shape := getattr(plan.links[hop[0]], hop[1])) is not None and shape.rate
        ]
        if rated:
            low = min(rate for _hop, rate in rated)
            slowest[p] = {hop for hop, rate in rated if rate == low}
    groups: list[set[int]] = []
    for p, bottleneck in slowest.items():
        joined = [g for g in groups if any(slowest[q] & bottleneck for q in g)]
        merged = {p}.union(*joined)
        groups = [g for g in groups if g not in joined] + [merged]
    return sorted((g for g in groups if len(g) > 1), key=min)


def truth_phases(config: Sbd, plan: NetPlan, client: str, server: str) -> Truth:
    """``kernel.sbd.truth`` as (start s, groups), or the topology's one phase."""
    if not config.truth:
        return [(0.0, topology_truth(plan, client, server))]
    return [(ph.at / 1000, [set(g) for g in ph.shared]) for ph in config.truth]


def _truth_at(truth: Truth, t: float) -> list[set[int]]:
    current = truth[0][1] if truth and truth[0][0] <= t else []
    for at, groups in truth:
        if at <= t:
            current = groups
    return current


@dataclass(frozen=True)
class Judged:
    """One decision of the main connection against the truth."""

    t: float  # s since the workload's start
    decision: int
    shared: bool  # some of its subflows' paths share a bottleneck now
    right: bool  # every pair grouped as the truth says
    bottlenecked: int  # subflows it found bottlenecked (group > 0)
    subflows: int


SCORE_COLUMNS = rundir.SBD_SCORE_COLUMNS


def judge(
    decisions_csv: Path, truth: Truth, start: float, token: str | None = None
) -> list[Judged]:
    """The main connection's decisions judged against the truth.

    A decision is right when every pair of its subflows is grouped as the
    truth says: together (the same group, not 0) exactly when their paths
    share a bottleneck.  The main connection is ``token`` (the agent's: the
    one that received the most data), else the one with the most
    decisions; a decision about fewer than two subflows is not judged;
    times count from ``start`` (the workload's), earlier ones are left out."""
    by_decision: dict[tuple[str, int], list[dict[str, str]]] = {}
    with open(decisions_csv) as f:
        header = f.readline().strip().split(",")
        for line in f:
            row = dict(zip(header, line.strip().split(","), strict=False))
            by_decision.setdefault((row["token"], int(row["decision"])), []).append(row)
    if not by_decision:
        return []
    if token is None:
        counts: dict[str, int] = {}
        for tok, _d in by_decision:
            counts[tok] = counts.get(tok, 0) + 1
        token = max(counts, key=lambda tok: counts[tok])
    out = []
    for (tok, d), rows in sorted(by_decision.items(), key=lambda kv: float(kv[1][0]["t"])):
        t = float(rows[0]["t"]) - start
        paths = {int(r["path"]): int(r["group"]) for r in rows if r["path"]}
        if tok != token or t < 0 or len(paths) < 2:  # one subflow: nothing to group
            continue
        groups = _truth_at(truth, t)
        together = {frozenset((a, b)) for g in groups for a in g for b in g if a != b}
        pairs = [frozenset((a, b)) for a in paths for b in paths if a < b]
        right = all(((paths[min(pr)] == paths[max(pr)] != 0) == (pr in together)) for pr in pairs)
        shared = any(pr in together for pr in pairs)
        out.append(Judged(t, d, shared, right, sum(g != 0 for g in paths.values()), len(paths)))
    return out


def write_scores(path: Path, judged: list[Judged]) -> None:
    """``sbd-scores.csv``: one row per judged decision (``SCORE_COLUMNS``)."""
    with open(path, "w") as f:
        f.write(SCORE_COLUMNS + "\n")
        for j in judged:
            f.write(
                f"{j.t:.3f},{j.decision},{int(j.shared)},{int(j.right)},"
                f"{j.bottlenecked},{j.subflows}\n"
            )


def score(judged: list[Judged], truth: Truth, warmup: float = 0.0) -> dict[str, float | int]:
    """The run's SBD metrics from its judged decisions.

    ``sbd_accuracy`` is the share of right decisions after the first
    ``warmup`` seconds (the experiment's warm-up: the thesis discards an
    initial phase too), ``sbd_accuracy_shared`` / ``_nonshared`` the same
    within the periods where some of the subflows' paths share a bottleneck
    / none do, ``sbd_bottlenecked`` the share of the subflows in those
    decisions found bottlenecked (group > 0: a detector that finds nothing
    is "right" on disjoint paths, this says so).  A detection is a right
    decision in which every subflow is bottlenecked; ``sbd_first_correct_s``
    is the time from the workload's start to the first (absent if none
    was); with several truth phases, ``sbd_transition_delay_s`` is the mean
    time from a phase's start to the first detection in it or later (the
    thesis's transition delay) and ``sbd_transitions_missed`` counts phases
    never followed by one."""
    scored = [j for j in judged if j.t >= warmup]
    out: dict[str, float | int] = {"sbd_decisions": len(scored)}
    if scored:
        out["sbd_accuracy"] = sum(j.right for j in scored) / len(scored)
        out["sbd_bottlenecked"] = sum(j.bottlenecked for j in scored) / sum(
            j.subflows for j in scored
        )
    for kind, shared in (("shared", True), ("nonshared", False)):
        marks = [j.right for j in scored if j.shared == shared]
        if marks:
            out[f"sbd_accuracy_{kind}"] = sum(marks) / len(marks)
    right_at = [j.t for j in judged if j.right and j.bottlenecked == j.subflows]
    if right_at:
        out["sbd_first_correct_s"] = right_at[0]
    delays = [
        min(r for r in right_at if r >= at) - at
        for at, _groups in truth[1:]
        if any(r >= at for r in right_at)
    ]
    if delays:
        out["sbd_transition_delay_s"] = sum(delays) / len(delays)
    if len(truth) > 1:
        out["sbd_transitions_missed"] = len(truth) - 1 - len(delays)
    return out
