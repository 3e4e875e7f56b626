"""Each module's signature holds for that module and fails for its nearest
neighbour: the diagonal of each family's swap matrix and one cell beside
it per row (tests/swap.py; the families: tests/sched_matrix.py,
tests/cc_matrix.py, tests/addon_matrix.py).  The whole matrix over several seeds is
``python -m bench.run swap_matrix``, shown in docs/schedulers.md and
docs/congestion-control.md (with MPT-BM and TCP-dFEC's).

Virtual time, seed 1.  Per family, one guest per workload measures every
module the pairs need (two guests at a time), once for the whole file.
"""

from __future__ import annotations

import addon_matrix
import cc_matrix
import pytest
import sched_matrix
import swap

pytestmark = pytest.mark.kernel

FAMILIES = {"sched": sched_matrix, "cc": cc_matrix, "addon": addon_matrix}
ROWS = [(name, s.module) for name, f in FAMILIES.items() for s in f.SIGNATURES]


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


@pytest.mark.parametrize(("family", "row"), ROWS)
def test_a_signature_holds_for_its_module_and_not_for_its_nearest_neighbour(features, family, row):
    fam = FAMILIES[family]
    data = features(family)
    s = next(s for s in fam.SIGNATURES if s.module == row)
    ref = data[fam.REFERENCE]
    failed = s.failed(data[row], ref)
    assert not failed, (row, [str(c) for c in failed], data[row])
    assert s.failed(data[s.neighbour], ref), (s.neighbour, data[s.neighbour])


@pytest.mark.parametrize("family", FAMILIES)
def test_every_signature_names_a_neighbour_and_workloads_of_its_family(family):
    fam = FAMILIES[family]
    modules = {s.module for s in fam.SIGNATURES}
    assert modules == set(fam.CANDIDATES) and fam.REFERENCE in modules
    for s in fam.SIGNATURES:
        assert s.neighbour in modules and s.neighbour != s.module
        assert s.workloads <= set(fam.WORKLOADS)
