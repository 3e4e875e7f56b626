"""The swap matrices (issue 22): each signature of a family of modules
(tests/swap.py; tests/sched_matrix.py, tests/cc_matrix.py,
tests/addon_matrix.py) checked
against every module of the family, over several seeds of the guest's
randomness (virtual time).

    python -m bench.run swap_matrix     # MPTLAB_BENCH_SEEDS=N seeds (default 3)
    MPTLAB_BENCH_FAMILY="congestion controls" python -m bench.run swap_matrix

One guest per workload and seed measures all modules in turn (two guests at
a time).  A cell counts the seeds in which the row's signature held for the
column's module: the diagonal must hold in every seed, no other cell in
any.  Each module's features are printed with their spread over the seeds:
the signatures' bounds sit between the modules' spreads.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from mptlab.campaign.kernel import find_kernel

from .report import write_section

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import addon_matrix  # noqa: E402
import cc_matrix  # noqa: E402
import sched_matrix  # noqa: E402
import swap  # noqa: E402

# family -> (its module, the doc that shows its matrix, title)
FAMILIES = {
    "schedulers": (sched_matrix, ROOT / "docs" / "schedulers.md"),
    "congestion controls": (cc_matrix, ROOT / "docs" / "congestion-control.md"),
    "MPT-BM and TCP-dFEC": (addon_matrix, ROOT / "docs" / "congestion-control.md"),
}


def fmt(x: float) -> str:
    if abs(x) >= 1e5:
        return f"{x / 1e6:.2f}M"
    return f"{x:.3g}"


def render(family, data: dict) -> str:
    """The matrix, the signatures and the features' spreads, as markdown;
    ``data``: {seed: {module: features}}."""
    seeds = sorted(data)
    mods = family.CANDIDATES
    held = {s.module: dict.fromkeys(mods, 0) for s in family.SIGNATURES}
    for seed in seeds:
        for row, cols in swap.matrix(family, data[seed]).items():
            for col, failed in cols.items():
                held[row][col] += not failed
    n = len(seeds)
    diagonal = all(
        k == (n if col == row else 0) for row, cols in held.items() for col, k in cols.items()
    )
    lines = [
        f"Cells: in how many of {n} seeds the row's signature held for the column's "
        f"module (virtual time).  Diagonal: **{'yes' if diagonal else 'NO'}**.",
        "",
        "| signature \\ module | " + " | ".join(mods) + " |",
        "|---|" + "---|" * len(mods),
    ]
    for row, cols in held.items():
        cells = [
            (f"**{k}/{n}**" if col == row else (f"{k}/{n}" if k else "."))
            for col, k in cols.items()
        ]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines += ["", f"Signatures (ref: {family.REFERENCE}'s value in the same seed):", ""]
    for s in family.SIGNATURES:
        conds = "; ".join(str(c) for c in s.conds)
        lines.append(f"- **{s.module}**: {s.rule}. `{conds}` (nearest: {s.neighbour})")
    lines += [
        "",
        "Nearest neighbour of each row (fewest conditions failed in any seed, then the"
        " smallest shortfall beyond the bounds): the pair `make test` runs.",
        "",
    ]
    for row, (col, n_failed, short) in swap.nearest(family, data).items():
        declared = next(s.neighbour for s in family.SIGNATURES if s.module == row)
        flag = "" if declared == col else f" (**the test runs {declared}**)"
        lines.append(f"- {row}: {col}, {n_failed} failed, shortfall {short:.2f}{flag}")
    feats = sorted({(w, f) for d in data.values() for m in d.values() for w in m for f in m[w]})
    lines += ["", f"Features, min-max over the {n} seeds:", ""]
    lines += ["| feature | " + " | ".join(mods) + " |", "|---|" + "---|" * len(mods)]
    for w, f in feats:
        cells = []
        for m in mods:
            vals = [data[seed][m][w][f] for seed in seeds if w in data[seed].get(m, {})]
            lo, hi = fmt(min(vals)), fmt(max(vals))
            cells.append(lo if lo == hi else f"{lo}-{hi}")
        lines.append(f"| {w}.{f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run(family, seeds: list[int], out: Path) -> dict:
    """{seed: {module: features}}: every module on every workload."""
    kernel = find_kernel()
    jobs = {w: list(family.CANDIDATES) for w in family.WORKLOADS}
    return {
        seed: swap.measure(family, kernel, out / str(seed), jobs, seed, log=print) for seed in seeds
    }


def main() -> None:
    seeds = list(range(1, int(os.environ.get("MPTLAB_BENCH_SEEDS", "3")) + 1))
    only = os.environ.get("MPTLAB_BENCH_FAMILY")  # e.g. "schedulers": that one alone
    family_env = f'MPTLAB_BENCH_FAMILY="{only}" ' if only else ""
    command = f"MPTLAB_BENCH_SEEDS={len(seeds)} {family_env}python -m bench.run swap_matrix"
    for title, (family, doc) in FAMILIES.items():
        if only and only != title:
            continue
        print(f"-- {title}", flush=True)
        with tempfile.TemporaryDirectory(prefix="swap-") as tmp:
            data = run(family, seeds, Path(tmp))
        body = render(family, data)
        print(json.dumps(data))
        print(body)
        key = f"swap_matrix_{family.__name__}"
        write_section(key, f"Swap matrix: {title}", command, body)
        write_section(key, f"Swap matrix: {title}", command, body, doc=doc)


if __name__ == "__main__":
    main()
