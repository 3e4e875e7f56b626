"""Switch types (``switch: bridge | ovs``, ``fail_mode``, ``flows``): the
topology language, its errors, the plan, and Mininet's switch classes.
The switches at work: tests/test_ovs_kernel.py."""

from __future__ import annotations

import functools
import shutil
import textwrap

import pytest

from mptlab.spec import mininet
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import NetPlan, plan
from mptlab.spec.yamlsrc import SpecError

mininet.import_mininet()
from mininet.node import OVSBridge, OVSKernelSwitch, OVSSwitch, UserSwitch  # noqa: E402
from mininet.nodelib import LinuxBridge  # noqa: E402
from mininet.topo import Topo  # noqa: E402

BASE = """\
paths: 2
hosts: [client, server]
links:
  - [client, s1]
  - [s1, server, path1]
  - [client, s2]
  - [s2, server, path2]
roles: {client: client, server: server}
"""


@functools.cache
def catalog() -> Catalog:
    return Catalog.load()


def load(tmp_path, text: str):
    path = tmp_path / "topo.yaml"
    path.write_text(textwrap.dedent(text) + BASE)
    return catalog().load_topology(path), path


def planned(topo) -> NetPlan:
    return plan(topo, catalog().profiles, ["wlan", "3g"])


def test_bridges_stay_the_default_and_plan_as_before(tmp_path):
    topo, _ = load(tmp_path, "switches: [s1, s2]\n")
    assert topo.switch == "bridge" and topo.ovs_switches() == {}
    p = planned(topo)
    # a plan without OVS switches is the JSON it was before switch types
    assert "ovs" not in p.to_json() and p.switches == ["s1", "s2"]
    assert topo.model_dump(mode="json")["switches"] == ["s1", "s2"]


def test_switch_ovs_on_the_topology_and_overrides_per_switch(tmp_path):
    topo, _ = load(
        tmp_path,
        """\
        switch: ovs
        switches:
          - s1
          - {name: s2, fail_mode: secure, flows: ["in_port=1,actions=output:2", "in_port=2,actions=output:1"]}
        """,
    )
    p = planned(topo)
    assert p.ovs == {
        "s1": {"fail_mode": "standalone", "flows": []},
        "s2": {
            "fail_mode": "secure",
            "flows": ["in_port=1,actions=output:2", "in_port=2,actions=output:1"],
        },
    }
    assert NetPlan.from_json(p.to_json()).ovs == p.ovs  # spec.json round trip
    # the same addresses and routes as with bridges: only the forwarding changes
    bridges, _ = load(tmp_path, "switches: [s1, s2]\n")
    assert planned(bridges).routes == p.routes and planned(bridges).links == p.links

    mixed, _ = load(tmp_path, "switches: [s1, {name: s2, switch: ovs}]\n")
    assert mixed.ovs_switches() == {"s2": {"fail_mode": "standalone", "flows": []}}
    dumped = mixed.model_dump(mode="json")["switches"]
    assert dumped == ["s1", {"name": "s2", "switch": "ovs"}]


@pytest.mark.parametrize(
    "snippet, expected",
    [
        (
            "switch: openflow\nswitches: [s1, s2]\n",
            r"topo.yaml:1: switch: value not allowed: Input should be 'bridge' or 'ovs'",
        ),
        (
            "switch: ovs\nfail_mode: closed\nswitches: [s1, s2]\n",
            r"topo.yaml:2: fail_mode: value not allowed: Input should be 'standalone' or 'secure'",
        ),
        (
            "switches:\n  - s1\n  - {name: s2, switch: ovs, fail_mode: open}\n",
            r"topo.yaml:3: switches.1.fail_mode: value not allowed: Input should be "
            r"'standalone' or 'secure'",
        ),
        (
            "switches:\n  - s1\n  - name: s2\n    flows: [in_port=1]\n",
            r"topo.yaml:4: switches.1.flows.0: 'in_port=1' has no actions=",
        ),
        (
            "switches:\n  - s1\n  - name: s2\n    fail_mode: secure\n",
            r"topo.yaml:4: switches.1.fail_mode: only an Open vSwitch switch has flows and a "
            r"fail mode, s2 is a bridge; allowed: switch: ovs",
        ),
        (
            "switches:\n  - s1\n  - {name: s2, colour: red}\n",
            r"topo.yaml:3: switches.1.colour: unknown field",
        ),
    ],
)
def test_bad_switch_fields_name_file_line_field_and_allowed(tmp_path, snippet, expected):
    with pytest.raises(SpecError, match=expected):
        load(tmp_path, snippet)


@pytest.mark.skipif(not shutil.which("ovs-ofctl"), reason="Open vSwitch not installed")
def test_a_flow_ovs_ofctl_cannot_parse_is_refused_with_its_reason(tmp_path):
    text = """\
    switch: ovs
    switches:
      - s1
      - name: s2
        fail_mode: secure
        flows:
          - in_port=1,actions=output:2
          - in_port=2,actions=outptu:1
    """
    with pytest.raises(SpecError) as err:
        load(tmp_path, text)
    assert "topo.yaml:8: switches.1.flows.1: unknown action outptu; allowed: a flow" in str(
        err.value
    )


class Switched(Topo):
    def build(self, **switch_opts):
        client, server = self.addHost("client"), self.addHost("server")
        for i in (1, 2):
            switch = self.addSwitch(f"s{i}", **switch_opts.get(f"s{i}", {}))
            self.addLink(client, switch)
            self.addLink(switch, server, bw=10, delay="5ms")


def ovs_of(topo: Topo) -> dict:
    return mininet.from_topo(topo).ovs_switches()


def test_mininet_switch_classes_map_to_switch_types():
    assert ovs_of(Switched()) == {}  # no cls: Linux bridges, as before
    standalone = {"fail_mode": "standalone", "flows": []}
    secure = {"fail_mode": "secure", "flows": []}
    assert ovs_of(Switched(s1={"cls": OVSBridge})) == {"s1": standalone}
    # Mininet's OVSSwitch (ovsk) is fail-mode secure unless told otherwise
    assert ovs_of(Switched(s1={"cls": OVSKernelSwitch}, s2={"cls": OVSSwitch})) == {
        "s1": secure,
        "s2": secure,
    }
    assert ovs_of(Switched(s1={"cls": OVSSwitch, "failMode": "standalone"})) == {"s1": standalone}
    partial = functools.partial(OVSSwitch, failMode="standalone")
    assert ovs_of(Switched(s2={"cls": partial, "dpid": "2"})) == {"s2": standalone}
    flows = ["in_port=1,actions=output:2", "in_port=2,actions=output:1"]
    assert ovs_of(Switched(s1={"cls": OVSKernelSwitch, "flows": flows})) == {
        "s1": {"fail_mode": "secure", "flows": flows}
    }
    assert ovs_of(Switched(s1={"cls": LinuxBridge})) == {}


def test_a_topo_may_make_every_switch_ovs():
    class AllOvs(Switched):
        switch = "ovs"

    assert set(ovs_of(AllOvs())) == {"s1", "s2"}
    # a cls= still wins over the Topo's default
    assert set(ovs_of(AllOvs(s2={"cls": LinuxBridge}))) == {"s1"}


def test_unsupported_mininet_switches_and_options_are_refused():
    with pytest.raises(ValueError, match="switch s1: cls=UserSwitch is not supported; allowed: "):
        mininet.from_topo(Switched(s1={"cls": UserSwitch}))
    with pytest.raises(ValueError, match="switch s2: option 'controller' is not supported"):
        mininet.from_topo(Switched(s2={"cls": OVSBridge, "controller": "c0"}))
    with pytest.raises(ValueError, match="fail_mode"):
        mininet.from_topo(Switched(s1={"cls": OVSSwitch, "failMode": "closed"}))
