"""Addressing and routing plans (pure); the built network is tested in the guest."""

from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import plan


def two_path_plan():
    cat = Catalog.load()
    return plan(cat.topologies["two-path"], cat.profiles, ["wlan", "3g"])


def test_every_link_gets_its_own_subnet_and_path_slots_take_profiles():
    p = two_path_plan()
    subnets = {ln.a_addr.rsplit(".", 1)[0] for ln in p.links}
    assert len(subnets) == len(p.links)
    bottlenecks = {ln.label: ln for ln in p.links if ln.label}
    assert bottlenecks["path1"].a_to_b.rate == 25 and bottlenecks["path1"].a_to_b.loss == 1
    assert (
        bottlenecks["path2"].a_to_b.rate == 5 and bottlenecks["path2"].a_to_b.queue.packets == 3750
    )
    assert all(ln.a_to_b is None for ln in p.links if not ln.label)


def test_each_address_is_reached_over_its_own_path():
    p = two_path_plan()
    s1, s2 = p.addresses("server")
    c1, c2 = p.addresses("client")
    gw = {(ln.a, ln.b): (ln.a_addr.split("/")[0], ln.b_addr.split("/")[0]) for ln in p.links}
    client = dict(p.routes["client"])
    server = dict(p.routes["server"])
    assert client[f"{s1}/32"] == gw[("client", "r1c")][1]  # to s1 via path 1
    assert client[f"{s2}/32"] == gw[("client", "r2c")][1]  # to s2 via path 2
    assert server[f"{c2}/32"] == gw[("r2s", "server")][0]  # back to c2 via path 2
    assert server[f"{c1}/32"] == gw[("r1s", "server")][0]
    # background pair 2 stays on path 2
    assert dict(p.routes["bgs2"])[f"{p.addresses('bgc2')[0]}/32"] == gw[("r2s", "bgs2")][0]
    # routers forward towards the attachment router
    assert dict(p.routes["r1c"])[f"{s1}/32"] == gw[("r1c", "r1s")][1]


def test_single_homed_server_is_reached_from_every_client_address():
    cat = Catalog.load()
    p = plan(cat.topologies["two-path-shared"], cat.profiles, ["wlan"])
    (s,) = p.addresses("server")
    c1, c2 = p.addresses("client")
    server = dict(p.routes["server"])
    gw = {(ln.a, ln.b): (ln.a_addr.split("/")[0], ln.b_addr.split("/")[0]) for ln in p.links}
    assert server[f"{c1}/32"] == server[f"{c2}/32"] == gw[("rs", "server")][0]
    assert (
        dict(p.routes["rb"])[f"{c2}/32"] == gw[("r2c", "rb")][0]
    )  # via the client's second access


def test_multihomed_hosts_get_a_table_per_address():
    p = two_path_plan()
    assert [a for a, _, _ in p.policy["client"]] == p.addresses("client")
    assert [i for _, i, _ in p.policy["server"]] == [0, 1]
    assert "bgc1" not in p.policy
