"""Copy real campaign dirs into a small test fixture (how tests/data/analysis/results was made).

    python tests/data/analysis/make_fixture.py SRC_RESULTS_DIR DST_DIR [--pcap CAMPAIGN ...]

Keeps campaign.json and each run's spec/run/result/guest-provenance JSON; thins
the sampler CSVs to at most 40 (subflows) and 100 (mptcp) sample times;
keeps packet captures only for the campaigns named with --pcap.  Logs,
ktrace.txt and iperf3 JSON are left out.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pandas as pd

from mptlab import rundir
from mptlab.rundir import CampaignDir

KEEP = (rundir.SPEC, rundir.RUN, rundir.RESULT, rundir.PROVENANCE)


def thin(src: Path, dst: Path, times: int) -> None:
    df = pd.read_csv(src, dtype=str)
    ts = sorted(df["t"].unique(), key=float)
    step = max(1, -(-len(ts) // times))
    keep = set(ts[::step]) | ({ts[-1]} if ts else set())
    df[df["t"].isin(keep)].to_csv(dst, index=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--pcap", action="append", default=[])
    a = ap.parse_args()
    src, dst = Path(a.src), Path(a.dst)
    for camp in sorted(p for p in src.iterdir() if (p / rundir.CAMPAIGN).exists()):
        out = dst / camp.name
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy2(camp / rundir.CAMPAIGN, out / rundir.CAMPAIGN)
        for run in CampaignDir(camp).run_dirs():
            o = out / run.path.relative_to(camp)
            (o / rundir.TRACES).mkdir(parents=True, exist_ok=True)
            for name in KEEP:
                if run.file(name).exists():
                    shutil.copy2(run.file(name), o / name)
            for csv in sorted(run.traces.glob("*.csv")):
                thin(
                    csv,
                    o / rundir.TRACES / csv.name,
                    40 if csv.name.endswith("subflows.csv") else 100,
                )
            if camp.name in a.pcap:
                for pcap in sorted(run.traces.glob("*.pcap")):
                    shutil.copy2(pcap, o / rundir.TRACES / pcap.name)


if __name__ == "__main__":
    main()
