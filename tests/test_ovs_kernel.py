"""Open vSwitch switches in the guest: with `switch: ovs` a bulk transfer
over two switched paths gets the goodput and RTTs it gets with Linux
bridges (the shapes are on the veths either way); a fail-mode secure
switch forwards what its static flows say and, without flows, nothing;
and no OVS daemon outlives its network."""

from __future__ import annotations

import json
import textwrap

import pytest

import mptlab
from mptlab.spec import mininet
from mptlab.spec.catalog import Catalog, shipped_topologies
from mptlab.spec.plan import plan

pytestmark = pytest.mark.kernel

mininet.import_mininet()
from mininet.node import OVSKernelSwitch  # noqa: E402
from mininet.topo import Topo  # noqa: E402

PATHS = [
    {"rate": "10mbit", "delay": "10ms", "queue": 100},
    {"rate": "10mbit", "delay": "20ms", "queue": 100},
]
# Relative tolerances of the OVS-bridge agreement, from one measurement
# (python -m bench.ovs: 5 s bulk on two-path-switched with PATHS, 3 seeds
# each; docs/benchmarks.md "Open vSwitch").  Virtual clock (this test's):
# goodput bridge 18.44 Mbit/s (sd 0.06), OVS 18.22 (sd 0.08), -1.2 %; the
# server's median sRTT 35.79/40.0 ms and 35.82/40.0 ms (sd 0), +0.07 %.
# 3 % is 2.5 x the measured goodput difference; a lost path or a shape in
# the wrong place would move goodput by tens of % and RTTs by 10+ ms.  (Under
# the real clock the runs spread more than the switches differ: goodput sd
# 1.3 %/5.9 %, sRTT per path sd up to 21 %: not a clock to test this on.)
#
# The median sRTT is not a shape's signature: it holds the queueing, which
# depends on the run's realisation.  Seeds 1-3 on main at 716af9b (the
# sampler's change gave new realisations): bridges 35.79/40.0 ms every
# time, OVS 35.82/43.55, 38.39/40.0, 35.82/40.0 (+8.9 % and +7.3 % on one
# path once each; goodput 18.33/18.36/18.28 against 18.33/18.49/18.49), and
# the per-path minimum RTT 20.0/40.0 ms in all six.  So the shapes are
# checked by the minimum RTT (3 %), the queueing by the median (12 %).
GOODPUT_TOL = 0.03
RTT_TOL = 0.03
SRTT_TOL = 0.12


def two_path_switched(tmp_path, switch: str):
    """topologies/two-path-switched.yaml with `switch:` set, read as YAML."""
    src = shipped_topologies() / "two-path-switched.yaml"
    text = src.read_text().replace("switch: bridge", f"switch: {switch}")
    assert f"switch: {switch}" in text
    path = tmp_path / f"two-path-{switch}.yaml"
    path.write_text(text)
    return Catalog.load().load_topology(path)


def bulk_run(tmp_path, switch: str) -> dict:
    exp = mptlab.Experiment(
        f"ovs-{switch}",
        topology=two_path_switched(tmp_path, switch),
        paths=PATHS,
        kernel={"path_manager": {"subflows": 2, "add_addr_accepted": 2}},
        workload=mptlab.Bulk(duration="5s"),
        timeout="60s",
    )
    results = mptlab.run(exp, out=tmp_path / switch, progress=False, seed=1)
    assert [o.status for o in results.report.outcomes] == ["ok"], results.report.outcomes
    (run,) = results.runs.itertuples()
    ss = results.table("ss")
    # Bulk's default direction is download: the server sends
    by_path = ss[(ss["host"] == "server") & ss["path"].notna()].groupby("path")
    srtt = by_path["srtt_ms"].median()
    min_rtt = by_path["min_rtt_us"].min() / 1000
    spec = json.loads(next((tmp_path / switch).rglob("spec.json")).read_text())
    agent_log = next((tmp_path / switch).rglob("agent.log")).read_text()
    return {
        "goodput": run.goodput_mbps,
        "srtt": {int(p): v for p, v in srtt.items()},
        "min_rtt": {int(p): v for p, v in min_rtt.items()},
        "ovs": spec["plan"].get("ovs", {}),
        # what the guest built: OVS bridges (the agent logs every command)
        "ovs_bridges": sorted(b for b in ("s1", "s2") if f"add-br {b} " in agent_log),
    }


def test_ovs_and_bridges_give_the_same_goodput_and_rtts(tmp_path):
    bridge = bulk_run(tmp_path, "bridge")
    ovs = bulk_run(tmp_path, "ovs")
    assert bridge["ovs"] == {} and set(ovs["ovs"]) == {"s1", "s2"}
    assert bridge["ovs_bridges"] == [] and ovs["ovs_bridges"] == ["s1", "s2"]
    # the transfer used both paths: two 10 Mbit/s bottlenecks
    assert 13 < bridge["goodput"] < 20, bridge
    assert abs(ovs["goodput"] - bridge["goodput"]) <= GOODPUT_TOL * bridge["goodput"], (
        bridge,
        ovs,
    )
    assert set(ovs["srtt"]) == set(bridge["srtt"]) == {1, 2}
    for path, rtt in bridge["min_rtt"].items():
        # the paths' RTTs are 20 and 40 ms: the shapes are where they were
        assert 20 * path <= rtt < 20 * path * (1 + RTT_TOL), bridge
        assert abs(ovs["min_rtt"][path] - rtt) <= RTT_TOL * rtt, (path, bridge, ovs)
        srtt = bridge["srtt"][path]
        assert abs(ovs["srtt"][path] - srtt) <= SRTT_TOL * srtt, (path, bridge, ovs)


class Secure(Topo):
    """Client and server through one Mininet `ovsk` switch (fail mode secure)."""

    def build(self, flows=()):
        client, server = self.addHost("client"), self.addHost("server")
        s1 = self.addSwitch("s1", cls=OVSKernelSwitch, flows=list(flows))
        self.addLink(client, s1)
        self.addLink(s1, server, bw=10, delay="5ms")


GUEST = """\
import subprocess
from mptlab.guest.build import build
from mptlab.spec.plan import NetPlan

def ovs_processes():
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("ovs"):
                out.append(comm)
    return out

for name, data in PLANS.items():
    p = NetPlan.from_json(data)
    net = build(p, "client", "server")
    server = p.addresses("server")[0]
    ping = subprocess.run(
        ["ip", "netns", "exec", net.ns("client"), "ping", "-c", "3", "-i", "0.2", "-W", "1", server],
        capture_output=True, text=True,
    )
    RESULT[name] = {
        "ping": ping.returncode,
        "out": ping.stdout[-300:],
        "flows": net.ovs["s1"].dump_flows(),
        "running": sorted(ovs_processes()),
    }
    net.destroy()
    RESULT[name]["after"] = sorted(ovs_processes())
"""


def test_a_secure_switch_forwards_its_flows_only_and_no_daemon_is_left(guest):
    cat = Catalog.load()
    flows = ["in_port=1,actions=output:2", "in_port=2,actions=output:1"]
    plans = {
        name: plan(mininet.from_topo(Secure(flows=f)), cat.profiles, []).to_json()
        for name, f in (("flows", flows), ("none", ()))
    }
    assert plans["none"]["ovs"] == {"s1": {"fail_mode": "secure", "flows": []}}
    code = f"PLANS = {plans!r}\n" + textwrap.dedent(GUEST)
    # virtual clock: the wait for 10 s of uptime (mptlab/guest/ovs.py) is skipped idle time
    out = guest(code, timeout=120, clock="virtual")
    print(json.dumps(out, indent=1))
    with_flows, without = out["flows"], out["none"]
    assert with_flows["ping"] == 0, with_flows
    assert "in_port=1 actions=output:2" in with_flows["flows"].replace(",", " "), with_flows
    # secure, no controller, no flows: an empty table, no NORMAL flow, nothing forwarded
    assert without["ping"] != 0 and "100% packet loss" in without["out"], without
    assert "actions=" not in without["flows"], without
    for case in (with_flows, without):
        assert sorted(set(case["running"])) == ["ovs-vswitchd", "ovsdb-server"], case
        assert case["after"] == [], case
