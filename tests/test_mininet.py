"""Mininet topologies: a ``Topo`` subclass is a topology, from Python and
from YAML; the shipped two-path topology written as a Topo plans to the
same network; switches are L2 segments; link options are our shapes."""

from __future__ import annotations

import sys
import textwrap

import pytest

import mptlab
from mptlab import home
from mptlab.spec import mininet
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import NetPlan, plan
from mptlab.spec.shapes import shape_to_json
from mptlab.spec.yamlsrc import SpecError

mininet.import_mininet()
from mininet.topo import Topo  # noqa: E402

sys.path.insert(0, str(home.data("topologies")))
from two_path import TwoPath  # noqa: E402


class TwoSwitches(Topo):
    """Client and server on two L2 paths, each through a switch."""

    def build(self, bw=20, delay="10ms"):
        client, server = self.addHost("client"), self.addHost("server")
        for i in (1, 2):
            switch = self.addSwitch(f"s{i}")
            self.addLink(client, switch)
            self.addLink(switch, server, bw=bw, delay=delay, loss=1, max_queue_size=100)


def canonical(p: NetPlan) -> dict:
    """The plan without its numbering: interfaces named by their node and the
    node at the other end of their link, links by their ends."""

    def iface(addr: str) -> tuple[str, str]:
        for ln in p.links:
            for node, own, other in ((ln.a, ln.a_addr, ln.b), (ln.b, ln.b_addr, ln.a)):
                if own.split("/")[0] == addr.split("/")[0]:
                    return node, other
        raise KeyError(addr)

    links = []
    for ln in p.links:
        ends = [(ln.a, shape_to_json(ln.a_to_b)), (ln.b, shape_to_json(ln.b_to_a))]
        links.append((sorted(ends, key=lambda e: e[0]), ln.label))
    return {
        "hosts": sorted(p.hosts),
        "routers": sorted(p.routers),
        "switches": sorted(p.switches),
        "links": sorted(links, key=repr),
        "routes": {n: sorted((iface(d), iface(v)) for d, v in r) for n, r in p.routes.items()},
        "policy": {
            n: sorted((iface(a), iface(gw)) for a, _i, gw in r) for n, r in p.policy.items()
        },
    }


def test_the_two_path_topology_as_a_mininet_topo_plans_the_same_network():
    cat = Catalog.load()
    yaml_topo = cat.topologies["two-path"]
    topo = mininet.from_topo(TwoPath())
    assert topo.paths == yaml_topo.paths == 2
    assert topo.roles == yaml_topo.roles and sorted(topo.routers) == sorted(yaml_topo.routers)
    for background in (True, False):
        a = plan(yaml_topo, cat.profiles, ["wlan", "3g"], background=background)
        b = plan(topo, cat.profiles, ["wlan", "3g"], background=background)
        assert canonical(a) == canonical(b)


def test_a_mininet_topology_from_yaml_and_from_python(tmp_path):
    (tmp_path / "mytopo.py").write_text(
        "from mininet.topo import Topo\n\n"
        + textwrap.dedent(
            """
            class Switches(Topo):
                def build(self, bw=20):
                    client, server = self.addHost("client"), self.addHost("server")
                    for i in (1, 2):
                        switch = self.addSwitch(f"s{i}")
                        self.addLink(client, switch)
                        self.addLink(switch, server, bw=bw, delay="10ms")
            """
        )
    )
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "experiments:\n"
        "  l2:\n"
        '    topology: {mininet: "mytopo:Switches", args: {bw: 30}}\n'
        "    workload: {type: bulk, bytes: 4MiB}\n"
        "  two-path:\n"
        '    topology: {mininet: "two_path:TwoPath"}\n'
        "    paths: [wlan, 3g]\n"
        "    workload: {type: bulk, bytes: 4MiB}\n"
    )
    cat = Catalog.load(campaign)
    (run,) = cat.expand("l2")
    shaped = [ln for ln in run.plan["links"] if ln["a_to_b"]]
    assert [ln["a_to_b"]["rate"] for ln in shaped] == [30, 30]  # the args reached the Topo
    assert run.config["topology"]["mininet"] == "mytopo:Switches"
    assert run.topology["switches"] == ["s1", "s2"]
    assert len(cat.expand("two-path")) == 1
    # from Python: the same topology as an instance
    exp = mptlab.Experiment("l2", topology=TwoSwitches(bw=30), workload=mptlab.Bulk(bytes="4MiB"))
    (py,) = exp.runs()
    assert py.config["topology"] == "mininet:test_mininet:TwoSwitches"
    assert [ln["a_to_b"]["rate"] for ln in py.plan["links"] if ln["a_to_b"]] == [30, 30]


def test_switches_make_l2_segments_with_one_subnet_each():
    p = plan(mininet.from_topo(TwoSwitches()), {}, [])
    # links in Mininet's order: client-s1, client-s2, s1-server, s2-server
    assert [(ln.a, ln.b) for ln in p.links] == [
        ("client", "s1"),
        ("client", "s2"),
        ("s1", "server"),
        ("s2", "server"),
    ]
    assert p.addresses("client") == ["10.0.0.1", "10.0.1.1"]
    assert p.addresses("server") == ["10.0.0.2", "10.0.1.2"]
    assert p.addresses("s1") == []
    assert p.routes == {"client": [], "server": []} and p.policy == {"client": [], "server": []}
    # a packet from the client's second address to the server's crosses switch 2
    assert p.route("client", "10.0.1.1", "10.0.1.2") == [(1, "a_to_b"), (3, "a_to_b")]


def test_mininet_link_options_become_our_shapes():
    fwd, rev = mininet.link_shape(
        {"bw": 10, "delay": "5ms", "jitter": "1ms", "loss": 2, "max_queue_size": 50}, "l"
    ).directions()
    assert fwd == rev and (fwd.rate, fwd.delay, fwd.jitter, fwd.loss) == (10, 5, 1, 2)
    assert fwd.queue.packets == 50
    fwd, rev = mininet.link_shape(
        {"bw": 10, "params1": {"delay": "5ms"}, "params2": {"delay": "20ms"}, "enable_red": True},
        "l",
    ).directions()
    assert (fwd.delay, rev.delay, fwd.qdisc) == (5, 20, "red")
    assert mininet.link_shape({"shape": "path2", "port1": 1}, "l") == "path2"
    assert mininet.link_shape({"cls": object, "intfName1": "x"}, "l") is None
    with pytest.raises(ValueError, match="link option 'bandwidth' is not supported"):
        mininet.link_shape({"bandwidth": 10}, "l")
    with pytest.raises(ValueError, match="enable_ecn is not supported"):
        mininet.link_shape({"bw": 1, "enable_ecn": True}, "l")


def test_switch_loops_and_bad_references_are_refused(tmp_path):
    class Loop(Topo):
        def build(self):
            a, b = self.addHost("a"), self.addHost("b")
            s1, s2 = self.addSwitch("s1"), self.addSwitch("s2")
            for x, y in ((a, s1), (s1, s2), (s2, b), (s1, b)):
                self.addLink(x, y)

    with pytest.raises(ValueError, match="form a loop"):
        mininet.from_topo(Loop())
    campaign = tmp_path / "c.yaml"
    campaign.write_text(
        "experiments:\n  x:\n    topology: {mininet: nomodule:Nope}\n"
        "    workload: {type: bulk, bytes: 1MiB}\n"
    )
    with pytest.raises(
        SpecError, match=r"c.yaml:3: experiments.x.topology: mininet: cannot import"
    ):
        Catalog.load(campaign).expand("x")
