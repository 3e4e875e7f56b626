"""The swap matrix of a family of modules (issue 22): each module's
*signature*, a predicate over the features it shows on the family's
workloads, checked against every module's measurements.  The matrix is
diagonal when each signature holds for its own module and for no other.

A family is a module with ``CANDIDATES``, ``WORKLOADS``, ``GUEST`` (the
guest's timeout and memory), ``PROGRAM`` (guest code that defines
``features(workload, candidate)``: see ``program()``), ``SIGNATURES`` and
``REFERENCE``: tests/sched_matrix.py (schedulers), tests/cc_matrix.py
(congestion controls), tests/addon_matrix.py (MPT-BM and TCP-dFEC).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from guestprog import run_guest

Features = dict[str, dict[str, float]]  # workload -> feature -> value, for one module


@dataclass(frozen=True)
class Cond:
    """``low <= value < high`` for a feature of one workload; with ``rel``
    the bounds are fractions of the family's reference module's value in
    the same seed (minrtt for the schedulers)."""

    workload: str
    feature: str
    low: float | None = None
    high: float | None = None
    rel: bool = False

    def bounds(self, reference: Features) -> tuple[float | None, float | None]:
        ref = reference[self.workload][self.feature] if self.rel else 1.0
        return (
            None if self.low is None else self.low * ref,
            None if self.high is None else self.high * ref,
        )

    def holds(self, candidate: Features, reference: Features) -> bool:
        value = candidate[self.workload][self.feature]
        low, high = self.bounds(reference)
        return (low is None or value >= low) and (high is None or value < high)

    def __str__(self) -> str:
        unit = " x ref" if self.rel else ""
        lo = "" if self.low is None else f"{self.low:g}{unit} <= "
        hi = "" if self.high is None else f" < {self.high:g}{unit}"
        return f"{lo}{self.workload}.{self.feature}{hi}"


@dataclass(frozen=True)
class Signature:
    module: str
    rule: str  # the defining rule, in words
    conds: tuple[Cond, ...]
    # the other module nearest to passing (swap.nearest() over the bench's
    # seeds; the bench says if that changes): make test runs this pair
    neighbour: str

    def failed(self, candidate: Features, reference: Features) -> list[Cond]:
        return [c for c in self.conds if not c.holds(candidate, reference)]

    @property
    def workloads(self) -> set[str]:
        return {c.workload for c in self.conds}

    @property
    def relative(self) -> bool:
        return any(c.rel for c in self.conds)


def matrix(family, data: dict[str, Features]) -> dict[str, dict[str, list[Cond]]]:
    """{row module: {column module: the row's conditions the column failed}}
    for the measurements of one seed; a cell holds when its list is empty."""
    ref = data[family.REFERENCE]
    return {s.module: {c: s.failed(data[c], ref) for c in data} for s in family.SIGNATURES}


def shortfall(cond: Cond, candidate: Features, reference: Features) -> float:
    """How far a value lies outside a condition's bounds, as a fraction of
    the bound it misses (0 when it holds)."""
    value = candidate[cond.workload][cond.feature]
    low, high = cond.bounds(reference)
    if low is not None and value < low:
        return (low - value) / max(abs(low), 1e-9)
    if high is not None and value >= high:
        return (value - high) / max(abs(high), 1e-9)
    return 0.0


def nearest(family, data: dict) -> dict[str, tuple[str, int, float]]:
    """{row: (column, conditions failed, summed shortfall)}: the other
    module that comes closest to passing the row's signature in any seed
    (fewest conditions failed, then the smallest shortfall); ``data``:
    {seed: {module: features}}.  The test runs this pair."""
    out = {}
    for s in family.SIGNATURES:
        best = None
        for col in family.CANDIDATES:
            if col == s.module:
                continue
            for d in data.values():
                ref = d[family.REFERENCE]
                failed = s.failed(d[col], ref)
                score = (len(failed), sum(shortfall(c, d[col], ref) for c in failed))
                if best is None or score < best[1:]:
                    best = (col, *score)
        out[s.module] = best
    return out


def needed(family, pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """{workload: modules} to evaluate the signature of each (row, column) pair."""
    by_row = {s.module: s for s in family.SIGNATURES}
    out: dict[str, set[str]] = {}
    for row, col in pairs:
        s = by_row[row]
        for w in s.workloads:
            out.setdefault(w, set()).add(col)
            if s.relative:
                out[w].add(family.REFERENCE)
    return {w: [c for c in family.CANDIDATES if c in mods] for w, mods in out.items()}


def program(family, workload: str, candidates: list[str]) -> str:
    """The guest program that fills ``RESULT[candidate]`` with ``workload``'s
    features for each candidate, one after another in one guest."""
    calls = "".join(f"RESULT[{c!r}] = features({workload!r}, {c!r})\n" for c in candidates)
    return family.PROGRAM + calls


def measure(family, kernel, out: Path, jobs: dict[str, list[str]], seed: int = 1, log=None):
    """{module: features} of one seed: one guest per workload of ``jobs``
    ({workload: modules}), two guests at a time, under virtual time."""

    def one(item):
        workload, modules = item
        res, run = run_guest(
            kernel,
            out / f"seed{seed}-{workload}",
            program(family, workload, modules),
            clock="virtual",
            rng_seed=seed,
            **family.GUEST,
        )
        if log:
            log(f"  seed {seed} {workload}: {run.status}, {run.duration_s:.0f} s")
        return workload, res

    data: dict[str, Features] = {}
    with ThreadPoolExecutor(2) as pool:
        for workload, res in pool.map(one, jobs.items()):
            for module, f in res.items():
                data.setdefault(module, {})[workload] = f
    return data
