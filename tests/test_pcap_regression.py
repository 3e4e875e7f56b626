"""The pcap decoder and reassembly pinned on a recorded capture, byte for byte.

tests/data/analysis/pcap-small-tables.json was written from the decoder as it
was before `_decode`, `_reassemble` and `_connections` were split into smaller
functions (issue 25): the packet table of every capture and the subflow,
connection and OFO tables, with and without the run's addresses (``c2s``/``s2c``
and the initiator-relative ``fwd``/``rev`` take different branches), each as
its shape and the SHA-256 of its CSV.  A refactoring that changes any value,
dtype-visible formatting or row order fails here.

To re-record after an intended change: ``MPTLAB_RECORD=1 python -m pytest
tests/test_pcap_regression.py`` and say why in the commit.
"""

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from mptlab.analysis import pcap
from mptlab.rundir import RunDir

DATA = Path(__file__).parent / "data" / "analysis"
RUN = DATA / "results" / "pcap-small" / "runs" / "scheduler=blest" / "rep-000"
PINNED = DATA / "pcap-small-tables.json"


def _digest(df: pd.DataFrame) -> dict:
    text = df.to_csv(index=False)
    return {
        "shape": list(df.shape),
        "columns": [f"{c}:{df[c].dtype}" for c in df.columns],
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def tables() -> dict:
    out: dict = {}
    for f in sorted(RunDir(RUN).traces.glob("*.pcap*")):
        p = pcap.read(f)
        out[f"packets/{f.name}"] = _digest(p.frame())
        out[f"counts/{f.name}"] = {"total": int(p.total), "skipped": int(p.skipped)}
    addrs = (RunDir(RUN).result() or {})["addresses"]
    for name, args in (
        ("addressed", (addrs["client"], addrs["server"])),
        ("unaddressed", ((), ())),
    ):
        res = pcap.analyze(pcap.run_captures(RUN), *args)
        for t in ("subflows", "connections", "ofo"):
            out[f"{name}/{t}"] = _digest(getattr(res, t))
        out[f"{name}/packets"] = {"packets": int(res.packets), "skipped": int(res.skipped)}
    out["kernel_agreement"] = json.loads(
        json.dumps({k: v for k, v in pcap.kernel_agreement(RUN).items() if k != "run"}, default=str)
    )
    return out


def test_the_recorded_capture_decodes_to_the_pinned_tables():
    got = tables()
    if os.environ.get("MPTLAB_RECORD"):
        PINNED.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(PINNED.read_text())
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key
