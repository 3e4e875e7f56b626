"""Build a plan (``mptlab.spec.plan.NetPlan``) in the guest: namespaces,
links, bridges (Linux or Open vSwitch), shapes, routes, and the MPTCP path manager of the client and
the server (limits and endpoints, ``mptlab.spec.plan.mptcp_endpoints``).
The agent builds every run's network through ``build``; so do the tests
that boot the kernel."""

from __future__ import annotations

from ..spec.plan import NetPlan, mptcp_endpoints
from .netlab import Host, Net, dev_name


def ip_lines(
    p: NetPlan,
    nodes: dict[str, Host],
    client: str,
    server: str,
    subflows: int = 8,
    add_addr_accepted: int = 8,
) -> dict[str, list[str]]:
    """``ip`` lines per node: routes and routing rules; in every host a TCP
    metrics flush; in the client and the server the MPTCP limits and endpoints."""
    endpoints = mptcp_endpoints(p, client, server)
    lines: dict[str, list[str]] = {}
    for node in p.hosts + p.routers:
        ln = [f"route replace {dest} via {via}" for dest, via in p.routes.get(node, [])]
        for addr, i, gateway in p.policy.get(node, []):
            dev = nodes[node].interfaces[i]
            ln.append(f"rule add from {addr} table {100 + i}")
            ln.append(f"route add default via {gateway} dev {dev} table {100 + i}")
        if node in p.hosts:
            ln.append("tcp_metrics flush all")
        if node in (client, server):
            ln.append(f"mptcp limits set subflow {subflows} add_addr_accepted {add_addr_accepted}")
            ln += [
                f"mptcp endpoint add {a} dev {dev_name(node, i)} {flag}"
                for a, i, flag in endpoints.get(node, [])
            ]
        lines[node] = ln
    return lines


def build(
    p: NetPlan,
    client: str,
    server: str,
    subflows: int = 8,
    add_addr_accepted: int = 8,
    net: Net | None = None,
) -> Net:
    """Create the plan's namespaces, links, bridges, shapes and routes, and set
    up the MPTCP path manager of ``client`` and ``server``; return the Net."""
    net = net or Net()
    nodes: dict[str, Host] = {}
    for name in p.hosts:
        nodes[name] = net.add_host(name)
    for name in p.routers:
        nodes[name] = net.add_host(name, router=True)
    for name in p.switches:
        nodes[name] = net.add_host(name, switch=True, ovs=p.ovs.get(name))
    for link in p.links:
        net.add_link(
            nodes[link.a], nodes[link.b], link.a_addr, link.b_addr, link.a_to_b, link.b_to_a
        )
    net.build(extra_ip=ip_lines(p, nodes, client, server, subflows, add_addr_accepted))
    return net
