"""Open vSwitch against Linux bridges (docs/benchmarks.md, "Open vSwitch").

    .venv/bin/python -m bench.ovs [--reps 3] [--idle 30] [--out DIR]   (~7 min)
    .venv/bin/python -m bench.run ovs                                  (the defaults)

1. Agreement: a 5 s bulk transfer on two-path-switched (tests/test_ovs_kernel.py's
   paths), ``switch: bridge`` and ``switch: ovs``, ``--reps`` repetitions
   (each its own seed) under each clock: goodput and the server's median
   sRTT per path, so that the OVS-bridge difference can be set against the
   run-to-run spread.
2. Cost: an idle workload of ``--idle`` s on the same network, with bridges,
   with two OVS switches (two daemon pairs) and with one (the other a
   bridge): the host CPU of the run (run.json ``host_cpu_s``) says what a
   daemon pair costs while nothing happens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import mptlab
from mptlab.spec.catalog import Catalog, shipped_topologies

PATHS = [
    {"rate": "10mbit", "delay": "10ms", "queue": 100},
    {"rate": "10mbit", "delay": "20ms", "queue": 100},
]


def topology(tmp: Path, switch: str, only_s1: bool = False):
    text = (shipped_topologies() / "two-path-switched.yaml").read_text()
    if only_s1:
        text = text.replace("switches: [s1, s2]", "switches: [{name: s1, switch: ovs}, s2]")
    else:
        text = text.replace("switch: bridge", f"switch: {switch}")
    path = tmp / f"topo-{switch}-{int(only_s1)}.yaml"
    path.write_text(text)
    return Catalog.load().load_topology(path)


def bulk(tmp: Path, switch: str, clock: str, reps: int) -> list[dict]:
    exp = mptlab.Experiment(
        f"ovs-{switch}-{clock}",
        topology=topology(tmp, switch),
        paths=PATHS,
        kernel={"path_manager": {"subflows": 2, "add_addr_accepted": 2}},
        workload=mptlab.Bulk(duration="5s"),
        repetitions=reps,
        timeout="60s",
        clock=clock,
    )
    results = mptlab.run(exp, out=tmp / f"bulk-{switch}-{clock}", progress=False, seed=1)
    ss = results.table("ss")
    out = []
    for run in results.runs.itertuples():
        mine = ss[(ss["run_id"] == run.run_id) & (ss["host"] == "server") & ss["path"].notna()]
        srtt = mine.groupby("path")["srtt_ms"].median()
        out.append(
            {
                "goodput": run.goodput_mbps,
                "srtt1": float(srtt.get(1.0, float("nan"))),
                "srtt2": float(srtt.get(2.0, float("nan"))),
                "host_cpu_s": run.host_cpu_s,
            }
        )
    return out


def idle(tmp: Path, label: str, topo, seconds: float) -> float:
    exp = mptlab.Experiment(
        f"idle-{label}",
        topology=topo,
        paths=PATHS,
        workload={"type": "idle", "duration": f"{seconds:g}s"},
        timeout=f"{seconds + 60:g}s",
    )
    results = mptlab.run(exp, out=tmp / f"idle-{label}", progress=False, seed=1)
    (run,) = results.runs.itertuples()
    return float(run.host_cpu_s)


def main(argv: list[str] | tuple = ()) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ovs")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--idle", type=float, default=30.0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(list(argv))
    tmp = args.out or Path(tempfile.mkdtemp(prefix="bench-ovs-"))
    tmp.mkdir(parents=True, exist_ok=True)
    report: dict = {"bulk": {}, "idle": {}}
    for clock in ("virtual", "real"):
        for switch in ("bridge", "ovs"):
            rows = bulk(tmp, switch, clock, args.reps)
            report["bulk"][f"{switch}/{clock}"] = rows
            for key in ("goodput", "srtt1", "srtt2", "host_cpu_s"):
                values = [r[key] for r in rows]
                sd = statistics.stdev(values) if len(values) > 1 else 0.0
                print(
                    f"{switch:6} {clock:7} {key:10} mean {statistics.mean(values):8.3f} "
                    f"sd {sd:6.3f}  {[round(v, 3) for v in values]}",
                    flush=True,
                )
    for label, topo in (
        ("bridge", topology(tmp, "bridge")),
        ("ovs-1", topology(tmp, "bridge", only_s1=True)),
        ("ovs-2", topology(tmp, "ovs")),
    ):
        report["idle"][label] = cpu = idle(tmp, label, topo, args.idle)
        print(f"idle {args.idle:g} s {label:7} host_cpu_s {cpu:.3f}", flush=True)
    (tmp / "report.json").write_text(json.dumps(report, indent=1))
    print(f"report: {tmp / 'report.json'}")


if __name__ == "__main__":
    main(sys.argv[1:])
