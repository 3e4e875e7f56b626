"""From a topology spec to a built network: addresses, shapes and routes.

``plan()`` is pure (unit-tested): every link gets a /24 (10.<i/256>.<i%256>.0,
``.1`` on its first node, ``.2`` on its second), link shapes come from the
profiles (``pathN`` slots from the experiment's ``paths``), and every node
gets a static /32 route to every host address, along a shortest path (only
routers forward; ties: the earlier link wins) to the router that address is
attached to.  Hosts with several interfaces also get one routing table per
address (``ip rule from ADDR``), so that traffic from an address leaves
through that address's interface.  Together: each address of a multi-homed
host is one symmetric path, which is what makes each MPTCP subflow take
its own path.

``build()`` runs the plan inside the guest with ``mptlab.guest.netlab``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ..guest.netlab import GilbertElliott, Host, Net, Queue, Shape

if TYPE_CHECKING:  # the guest builds from JSON and never imports the pydantic specs
    from .models import ProfileSpec, TopologySpec


@dataclass
class PlannedLink:
    a: str
    b: str
    a_addr: str  # "10.0.3.1/24"
    b_addr: str
    a_to_b: Shape | None
    b_to_a: Shape | None
    label: str  # "path1", a profile name, or "" (unshaped)


@dataclass
class NetPlan:
    hosts: list[str]
    routers: list[str]
    links: list[PlannedLink]
    routes: dict[str, list[tuple[str, str]]] = field(
        default_factory=dict
    )  # node -> [(dest/32, via)]
    # host -> [(addr, interface index, gateway)] for hosts with several interfaces
    policy: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    # link changes during the run: {at_ms, link (index), a_to_b, b_to_a (Shape, or None: unchanged)}
    events: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> NetPlan:
        def shape(d):
            if d is None:
                return None
            ge = d.get("gilbert_elliott")
            return Shape(
                **{
                    **d,
                    "queue": Queue(**d["queue"]),
                    "gilbert_elliott": GilbertElliott(**ge) if ge else None,
                }
            )

        links = [PlannedLink(**{**ln, "a_to_b": shape(ln["a_to_b"]), "b_to_a": shape(ln["b_to_a"])})
                 for ln in data["links"]]  # fmt: skip
        events = [
            {**e, "a_to_b": shape(e["a_to_b"]), "b_to_a": shape(e["b_to_a"])}
            for e in data.get("events", [])
        ]
        return cls(
            hosts=data["hosts"],
            routers=data["routers"],
            links=links,
            events=events,
            routes={k: [tuple(r) for r in v] for k, v in data["routes"].items()},
            policy={k: [tuple(e) for e in v] for k, v in data["policy"].items()},
        )

    def addresses(self, node: str) -> list[str]:
        """The node's addresses in interface order (without prefix length)."""
        out = []
        for link in self.links:
            if link.a == node:
                out.append(link.a_addr.split("/")[0])
            if link.b == node:
                out.append(link.b_addr.split("/")[0])
        return out


def link_subnet(i: int) -> str:
    return f"10.{i // 256}.{i % 256}"


def plan(
    topo: TopologySpec, profiles: dict[str, ProfileSpec], paths: list[str], background: bool = True
) -> NetPlan:
    """The network for ``topo`` with ``paths`` filling its path slots; without
    ``background`` the background hosts (and their links) are left out."""
    unused = set()
    if not background:
        unused = {h for pair in topo.roles.background for h in (pair.sender, pair.receiver)}
    links = []
    for i, spec in enumerate(topo.links):
        if spec.a in unused or spec.b in unused:
            continue
        net = link_subnet(i)
        profile_name = spec.shape
        if profile_name and profile_name.startswith("path") and profile_name[4:].isdigit():
            profile_name = paths[int(profile_name[4:]) - 1]
        if profile_name:
            fwd, rev = profiles[profile_name].directions()
            a_to_b, b_to_a = fwd.to_shape(), rev.to_shape()
        else:
            a_to_b = b_to_a = None
        links.append(
            PlannedLink(
                spec.a, spec.b, f"{net}.1/24", f"{net}.2/24", a_to_b, b_to_a, spec.shape or ""
            )
        )
    p = NetPlan(
        hosts=[h for h in topo.hosts if h not in unused], routers=list(topo.routers), links=links
    )
    _routes(p)
    return p


def _neighbours(p: NetPlan) -> dict[str, list[tuple[str, str]]]:
    """node -> [(neighbour, neighbour's address on the shared link)] in link order."""
    nb: dict[str, list[tuple[str, str]]] = {n: [] for n in p.hosts + p.routers}
    for link in p.links:
        nb[link.a].append((link.b, link.b_addr.split("/")[0]))
        nb[link.b].append((link.a, link.a_addr.split("/")[0]))
    return nb


def _first_hops(src: str, nb: dict, routers: set[str]) -> dict[str, str]:
    """node -> gateway address of src's first hop towards it (BFS; only
    routers forward; on equal length the earlier link wins)."""
    first_hop: dict[str, str] = {}
    seen = {src}
    queue = deque()
    for node, addr in nb[src]:
        if node not in seen:
            seen.add(node)
            first_hop[node] = addr
            queue.append(node)
    while queue:
        node = queue.popleft()
        if node not in routers:
            continue
        for nxt, _ in nb[node]:
            if nxt not in seen:
                seen.add(nxt)
                first_hop[nxt] = first_hop[node]
                queue.append(nxt)
    return first_hop


def _routes(p: NetPlan) -> None:
    """A /32 route to every host address, towards the router it is attached
    to: traffic to an address arrives over that address's own link, so that
    every path of a multi-homed host stays symmetric."""
    nb = _neighbours(p)
    routers = set(p.routers)
    attachments = []  # (address, owner host, attached node)
    for link in p.links:
        for owner, addr, other in ((link.a, link.a_addr, link.b), (link.b, link.b_addr, link.a)):
            if owner in p.hosts:
                attachments.append((addr.split("/")[0], owner, other))
    for src in p.hosts + p.routers:
        hops = _first_hops(src, nb, routers)
        routes = []
        for addr, owner, attached in attachments:
            if src in (owner, attached) or attached not in routers or attached not in hops:
                continue  # own address, connected link, or unreachable
            routes.append((f"{addr}/32", hops[attached]))
        p.routes[src] = routes
        if src in p.hosts and len(nb[src]) > 1:
            p.policy[src] = [(addr, i, nb[src][i][1]) for i, addr in enumerate(p.addresses(src))]


def build(p: NetPlan, net: Net | None = None, extra_ip: dict[str, list[str]] | None = None) -> Net:
    """Create namespaces, links, shapes and routes (plus ``extra_ip`` lines per
    host); return the Net."""
    net = net or Net()
    nodes: dict[str, Host] = {}
    for name in p.hosts:
        nodes[name] = net.add_host(name)
    for name in p.routers:
        nodes[name] = net.add_host(name, router=True)
    for link in p.links:
        net.add_link(
            nodes[link.a], nodes[link.b], link.a_addr, link.b_addr, link.a_to_b, link.b_to_a
        )
    lines: dict[str, list[str]] = {}
    for node in p.hosts + p.routers:
        ln = [f"route replace {dest} via {via}" for dest, via in p.routes.get(node, [])]
        for addr, i, gateway in p.policy.get(node, []):
            dev = nodes[node].interfaces[i]
            ln += [f"rule add from {addr} table {100 + i}",
                   f"route add default via {gateway} dev {dev} table {100 + i}"]  # fmt: skip
        lines[node] = ln + (extra_ip or {}).get(node, [])
    net.build(extra_ip=lines)
    return net


def mptcp_endpoints(p: NetPlan, client: str, server: str) -> dict[str, list[tuple[str, int, str]]]:
    """``ip mptcp endpoint`` entries (address, interface index, flag) per host.

    A multi-homed server announces its other addresses (``signal``) and the
    client opens one subflow to each, from the address routing picks (the
    one on that path).  With a single-homed server, the client opens a
    subflow from each of its other addresses (``subflow``), policy routing
    sending each over its own interface.
    """
    server_addrs = p.addresses(server)
    if len(server_addrs) > 1:
        return {server: [(a, i, "signal") for i, a in enumerate(server_addrs) if i > 0]}
    return {client: [(a, i, "subflow") for i, a in enumerate(p.addresses(client)) if i > 0]}


def find_link(p: NetPlan, name: str) -> int:
    """Index of the link called ``pathN`` (its slot) or ``a-b`` (its two nodes)."""
    for i, link in enumerate(p.links):
        if link.label == name or name in (f"{link.a}-{link.b}", f"{link.b}-{link.a}"):
            return i
    slots = sorted({ln.label for ln in p.links if ln.label.startswith("path")})
    raise KeyError(f"no link {name!r}; links: {', '.join(slots)} or 'a-b' for nodes a, b")


def plan_events(p: NetPlan, events, profiles: dict, paths: list[str]) -> None:
    """Resolve ``events`` (LinkEventSpec) into new shapes per direction, in
    time order, each change building on the link's shape before it."""
    current: dict[tuple[int, str], object] = {}
    for event in sorted(events, key=lambda e: e.at):
        i = find_link(p, event.link)
        name = p.links[i].label
        if name.startswith("path") and name[4:].isdigit():
            name = paths[int(name[4:]) - 1]
        source = event.profile or name
        base_fwd, base_rev = profiles[source].directions() if source else (None, None)
        out = {"at_ms": event.at, "link": i, "a_to_b": None, "b_to_a": None}
        for attr, base in (("a_to_b", base_fwd), ("b_to_a", base_rev)):
            if event.direction not in ("both", attr):
                continue
            start = current.get((i, attr), base) if not event.profile else base
            if start is None:
                raise ValueError(
                    f"link {event.link!r} is unshaped: give `profile:` for its new shape"
                )
            new = type(start).model_validate({**start.model_dump(), **event.set})
            current[(i, attr)] = new
            out[attr] = asdict(new.to_shape())
        p.events.append(out)
