"""Each module's signature holds for that module and fails for its nearest
neighbour: the diagonal of each family's swap matrix and one cell beside
it per row (tests/swap.py; the families: tests/sched_matrix.py,
tests/cc_matrix.py, tests/addon_matrix.py).  The whole matrix over several seeds is
``python -m bench.run swap_matrix``, shown in docs/schedulers.md and
docs/congestion-control.md (with MPT-BM and TCP-dFEC's).

Virtual time, seed 1.  Per family, one guest per workload measures every
module the pairs need (two guests at a time), once for the whole file.  A
row whose feature spreads over realisations up to its bound is judged on
the median over more seeds of that workload (``MORE_SEEDS``), not on one
draw (issue 44).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from statistics import median

import addon_matrix
import cc_matrix
import pytest
import sched_matrix
import swap

pytestmark = pytest.mark.kernel

FAMILIES = {"sched": sched_matrix, "cc": cc_matrix, "addon": addon_matrix}
ROWS = [(name, s.module) for name, f in FAMILIES.items() for s in f.SIGNATURES]
# (family, module): (workload, the seeds besides 1).  OLIA's lossy.share_slow
# (bound < 0.15): 0.068-0.114 in 13 draws (seeds 1-8 and 1-5, 2026-11-28),
# 0.080-0.089 in the bench's 4, and once 0.197 (issue 44's suite: seed 1 as
# another realisation); LIA's 0.186-0.263 and Reno's 0.215-0.263 in the
# same 8 seeds.  The median of 3 seeds drops one such draw and keeps the
# bound between the controls.  Cost: a guest per further seed running OLIA's
# 60 s lossy transfer alone, both at once: +22 s of wall time after the
# family's 64 s (2026-11-28, beside a campaign's two guests).
MORE_SEEDS = {("cc", "olia"): ("lossy", (2, 3))}


def pairs(family) -> list[tuple[str, str]]:
    return [(s.module, m) for s in family.SIGNATURES for m in (s.module, s.neighbour)]


@pytest.fixture(scope="module")
def features(kernel, tmp_path_factory):
    cache: dict[str, dict] = {}

    def get(name: str) -> dict[str, swap.Features]:
        if name not in cache:
            family = FAMILIES[name]
            out = tmp_path_factory.mktemp(name)
            cache[name] = swap.measure(family, kernel, out, swap.needed(family, pairs(family)))
            print(name, cache[name])  # shown with a failure, as "Captured stdout setup"
        return cache[name]

    return get


def median_over_seeds(kernel, out, family: str, module: str, first: swap.Features) -> swap.Features:
    """``module``'s features with its ``MORE_SEEDS`` workload's replaced by
    their median over seed 1 (``first``) and the further seeds."""
    workload, seeds = MORE_SEEDS[(family, module)]

    def one(seed: int) -> dict[str, float]:
        data = swap.measure(FAMILIES[family], kernel, out, {workload: [module]}, seed=seed)
        return data[module][workload]

    with ThreadPoolExecutor(2) as pool:  # two guests at a time, as swap.measure
        draws = [first[workload], *pool.map(one, seeds)]
    print(family, module, workload, draws)  # shown with a failure
    return {**first, workload: {f: median(d[f] for d in draws) for f in draws[0]}}


@pytest.mark.parametrize(("family", "row"), ROWS)
def test_a_signature_holds_for_its_module_and_not_for_its_nearest_neighbour(
    kernel, tmp_path, features, family, row
):
    fam = FAMILIES[family]
    data = features(family)
    s = next(s for s in fam.SIGNATURES if s.module == row)
    ref = data[fam.REFERENCE]
    own = data[row]
    if (family, row) in MORE_SEEDS:
        own = median_over_seeds(kernel, tmp_path, family, row, own)
    failed = s.failed(own, ref)
    assert not failed, (row, [str(c) for c in failed], own)
    assert s.failed(data[s.neighbour], ref), (s.neighbour, data[s.neighbour])


@pytest.mark.parametrize("family", FAMILIES)
def test_every_signature_names_a_neighbour_and_workloads_of_its_family(family):
    fam = FAMILIES[family]
    modules = {s.module for s in fam.SIGNATURES}
    assert modules == set(fam.CANDIDATES) and fam.REFERENCE in modules
    for s in fam.SIGNATURES:
        assert s.neighbour in modules and s.neighbour != s.module
        assert s.workloads <= set(fam.WORKLOADS)
