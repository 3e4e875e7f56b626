"""A Mininet topology with switches runs in the guest: the switches are
bridges, the links shaped as addLink said, MPTCP uses both L2 paths."""

from __future__ import annotations

import pytest

import mptlab
from mptlab.spec import mininet

pytestmark = pytest.mark.kernel

mininet.import_mininet()
from mininet.topo import Topo  # noqa: E402


class TwoSwitches(Topo):
    def build(self):
        client, server = self.addHost("client"), self.addHost("server")
        for i, delay in ((1, "10ms"), (2, "20ms")):
            switch = self.addSwitch(f"s{i}")
            self.addLink(client, switch)
            self.addLink(switch, server, bw=10, delay=delay, max_queue_size=100)


def test_a_bulk_transfer_uses_both_switched_paths(tmp_path):
    exp = mptlab.Experiment(
        "l2",
        topology=TwoSwitches(),
        kernel={"path_manager": {"subflows": 2, "add_addr_accepted": 2}},
        workload=mptlab.Bulk(duration="5s"),
        timeout="60s",
    )
    results = mptlab.run(exp, out=tmp_path, progress=False)
    assert [o.status for o in results.report.outcomes] == ["ok"], results.report.outcomes
    runs = results.runs
    (run,) = runs.itertuples()
    # two 10 Mbit/s paths (a 1500-byte packet carries 1448 bytes in 1514 on the wire)
    assert 13 < run.goodput_mbps < 2 * 10 * 1448 / 1514, run.goodput_mbps
    assert run.path1_share > 0.2 and run.path2_share > 0.2, (run.path1_share, run.path2_share)
    wd = results.query("SELECT stall_timeout_s FROM runs")["stall_timeout_s"][0]
    assert 6.2 < wd < 10  # auto: the switched paths' RTTs and queues were found
