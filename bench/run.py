"""Run benchmarks and record them in docs/benchmarks.md.

python -m bench.run            # all
python -m bench.run kernel     # one
python -m bench.run calibrate  # not in the default set: docs/reproduction.md
python -m bench.run calibrate_mptbm  # idem (MPT-BM receive buffer, ~5 min)
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = [
    "kernel",
    "campaign",
    "pcap",
    "virtual_time",
    "blest_campaign",
    "run_cost",
    "swap_matrix",
    "scaling",
]
# not part of a plain `make bench` (about 20 min of campaigns each): name them
EXTRA = ["calibrate", "calibrate_mptbm", "run_cost_metrics", "ovs"]


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    for name in names:
        if name not in BENCHMARKS + EXTRA:
            print(
                f"unknown benchmark {name!r}; available: {', '.join(BENCHMARKS + EXTRA)}",
                file=sys.stderr,
            )
            return 2
    for name in names:
        print(f"== {name}")
        importlib.import_module(f"bench.{name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
