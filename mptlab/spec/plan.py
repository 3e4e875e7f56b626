"""From a topology to the network as it will be built: addresses, shapes, routes.

``plan()`` is pure (unit-tested).  The network is made of L2 segments: a
link between two hosts or routers is one, and every link joined by switches
(Linux bridges, or Open vSwitch bridges: ``NetPlan.ovs``) forms one with
them.  Each segment gets a /24,
``10.<i/256>.<i%256>.0`` where i is the index of its first link, and its
hosts and routers get ``.1``, ``.2``, ... in link order (a before b; a
plain link: ``.1`` on its first node, ``.2`` on its second).  Link shapes
come from the profiles (``pathN`` slots from the experiment's ``paths``).

Every node gets a static /32 route to every host address, along a shortest
path (only routers forward; ties: the earlier link wins) to the first
router on the segment that address is on.  A host with several interfaces
gets one routing table per address whose segment has a router (``ip rule
from ADDR``, default route via that router), so that traffic from an
address leaves through that address's interface.  Together: each address
of a multi-homed host is one symmetric path, which is what makes each MPTCP
subflow take its own path.

The plan is plain data (``NetPlan``, in ``spec.json``): the guest builds it
(``mptlab.guest.build``) without the language's models.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from .shapes import Shape, shape_from_json, shape_with

if TYPE_CHECKING:  # the guest reads plans from JSON and never imports the pydantic models
    from .models import Profile, TopologySpec

Hop = tuple[int, str]  # (link index, "a_to_b" | "b_to_a")


@dataclass
class PlannedLink:
    a: str
    b: str
    a_addr: str  # "10.0.3.1/24"; "" on a switch
    b_addr: str
    a_to_b: Shape | None
    b_to_a: Shape | None
    label: str  # "path1", a profile name, or "" (unshaped or shaped inline)


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
    switches: list[str] = field(default_factory=list)
    # the switches that are Open vSwitch bridges (the others are Linux
    # bridges): name -> {"fail_mode": "standalone" | "secure", "flows": [ovs-ofctl flows]}
    ovs: dict[str, dict] = field(default_factory=dict)

    def to_json(self) -> dict:
        data = asdict(self)
        if not self.ovs:  # a plan without OVS is written as before switch types
            del data["ovs"]
        return data

    @classmethod
    def from_json(cls, data: dict) -> NetPlan:
        links = [
            PlannedLink(
                **{
                    **ln,
                    "a_to_b": shape_from_json(ln["a_to_b"]),
                    "b_to_a": shape_from_json(ln["b_to_a"]),
                }
            )
            for ln in data["links"]
        ]
        events = [
            {**e, "a_to_b": shape_from_json(e["a_to_b"]), "b_to_a": shape_from_json(e["b_to_a"])}
            for e in data.get("events", [])
        ]
        return cls(
            hosts=data["hosts"],
            routers=data["routers"],
            switches=data.get("switches", []),
            ovs=data.get("ovs", {}),
            links=links,
            events=events,
            routes={k: [tuple(r) for r in v] for k, v in data["routes"].items()},
            policy={k: [tuple(e) for e in v] for k, v in data["policy"].items()},
        )

    def addresses(self, node: str) -> list[str]:
        """The node's addresses in interface order (without prefix length)."""
        out = []
        for link in self.links:
            if link.a == node and link.a_addr:
                out.append(link.a_addr.split("/")[0])
            if link.b == node and link.b_addr:
                out.append(link.b_addr.split("/")[0])
        return out

    def path_of(self, addr: str, hosts: Iterable[str]) -> int | None:
        """The path (1-based) an address stands for: the index of the
        interface it belongs to among the first of ``hosts`` (the client,
        then the server) that has it; None for any other address.  The
        one rule by which the agent labels subflows, FEC sockets, SBD
        flows and stall snapshots, and the analysis its tables."""
        for host in hosts:
            addrs = self.addresses(host)
            if addr in addrs:
                return addrs.index(addr) + 1
        return None

    def segments(self) -> list[list[int]]:
        """The L2 segments: the indices of their links, in link order."""
        return l2_segments([(ln.a, ln.b) for ln in self.links], set(self.switches))

    def route(self, src: str, src_addr: str, dst_addr: str) -> list[Hop] | None:
        """The links (index, direction) a packet from ``src_addr`` of host
        ``src`` to ``dst_addr`` crosses, following the policy routing, the
        connected segments and the /32 routes as the kernel would; None: no
        route."""
        owner: dict[str, tuple[str, int]] = {}  # address -> (node, link)
        for i, ln in enumerate(self.links):
            for node, addr in ((ln.a, ln.a_addr), (ln.b, ln.b_addr)):
                if addr:
                    owner[addr.split("/")[0]] = (node, i)
        seg_of = {i: k for k, seg in enumerate(self.segments()) for i in seg}

        def on_segment(node: str, k: int) -> bool:
            return any(node in (ln.a, ln.b) for i, ln in enumerate(self.links) if seg_of[i] == k)

        def connected(node: str) -> str | None:
            if dst_addr in owner and on_segment(node, seg_of[owner[dst_addr][1]]):
                return dst_addr
            return None

        policy = {addr: gw for addr, _i, gw in self.policy.get(src, [])}
        via = (
            policy.get(src_addr)
            or connected(src)
            or dict(self.routes.get(src, [])).get(f"{dst_addr}/32")
        )
        node, out = src, []
        for _ in range(len(self.links) + 1):
            if via is None or via not in owner:
                return None
            nxt, link = owner[via]
            hops = self._l2_path(node, nxt, [i for i, k in seg_of.items() if k == seg_of[link]])
            if hops is None:
                return None
            out += hops
            node = nxt
            if dst_addr in self.addresses(node):
                return out
            via = connected(node) or dict(self.routes.get(node, [])).get(f"{dst_addr}/32")
        return None

    def _l2_path(self, src: str, dst: str, segment: list[int]) -> list[Hop] | None:
        """The links from ``src`` to ``dst`` through the switches of one segment."""
        prev: dict[str, tuple[str, Hop] | None] = {src: None}
        queue = deque([src])
        while queue:
            node = queue.popleft()
            if node == dst:
                hops: list[Hop] = []
                while prev[node] is not None:
                    node, hop = prev[node]  # type: ignore[misc]
                    hops.append(hop)
                return hops[::-1]
            if node != src and node not in self.switches:
                continue  # only switches pass frames on
            for i in segment:
                ln = self.links[i]
                for here, there, direction in ((ln.a, ln.b, "a_to_b"), (ln.b, ln.a, "b_to_a")):
                    if here == node and there not in prev:
                        prev[there] = (node, (i, direction))
                        queue.append(there)
        return None


def path_slot(name: str | None) -> int | None:
    """N for a path slot's name ``pathN`` (the profile an experiment gives path N), else None."""
    if isinstance(name, str) and name.startswith("path") and name[4:].isdigit():
        return int(name[4:])
    return None


def link_subnet(i: int) -> str:
    return f"10.{i // 256}.{i % 256}"


def l2_segments(ends: list[tuple[str, str]], switches: set[str]) -> list[list[int]]:
    """Links (as their two ends) grouped into L2 segments: links that share a
    switch are one segment, any other link is one by itself.  ValueError if
    the switches form a loop (a bridge without STP would flood it forever)
    or a node has two interfaces on one segment."""
    parent = list(range(len(ends)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    at_switch: dict[str, int] = {}
    for i, (a, b) in enumerate(ends):
        for end in (a, b):
            if end in switches:
                if end in at_switch:
                    parent[find(i)] = find(at_switch[end])
                else:
                    at_switch[end] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(ends)):
        groups.setdefault(find(i), []).append(i)
    segments = sorted(groups.values())
    for seg in segments:
        nodes = {end for i in seg for end in ends[i]}
        if len(seg) >= len(nodes):
            loop = sorted(n for n in nodes if n in switches)
            raise ValueError(f"the switches {loop} form a loop (bridges here have no STP)")
        ports = [end for i in seg for end in ends[i] if end not in switches]
        twice = sorted({n for n in ports if ports.count(n) > 1})
        if twice:
            raise ValueError(f"{twice[0]} has two interfaces on one L2 segment ({len(seg)} links)")
    return segments


def plan(
    topo: TopologySpec, profiles: dict[str, Profile], paths: list[str], background: bool = True
) -> NetPlan:
    """The network for ``topo`` with ``paths`` filling its path slots; without
    ``background`` the background hosts (and their links) are left out."""
    unused = set()
    if not background:
        unused = {h for pair in topo.roles.background for h in (pair.sender, pair.receiver)}
    kept = [(i, ln) for i, ln in enumerate(topo.links) if ln.a not in unused and ln.b not in unused]
    switches = set(topo.switch_names)
    segments = l2_segments([(ln.a, ln.b) for _, ln in kept], switches)
    addrs: dict[tuple[int, str], str] = {}  # (kept index, end) -> address
    for seg in segments:
        net = link_subnet(kept[seg[0]][0])
        host = 0
        for k in seg:
            for end in ("a", "b"):
                if getattr(kept[k][1], end) not in switches:
                    host += 1
                    addrs[(k, end)] = f"{net}.{host}/24"
    links = []
    for k, (_i, spec) in enumerate(kept):
        shape = spec.shape
        slot = path_slot(shape) if isinstance(shape, str) else None
        profile = (
            profiles[paths[slot - 1]]
            if slot
            else profiles[shape]
            if isinstance(shape, str)
            else shape
        )
        a_to_b, b_to_a = profile.directions() if profile is not None else (None, None)
        a_addr, b_addr = addrs.get((k, "a"), ""), addrs.get((k, "b"), "")
        links.append(PlannedLink(spec.a, spec.b, a_addr, b_addr, a_to_b, b_to_a, spec.label))
    p = NetPlan(
        hosts=[h for h in topo.hosts if h not in unused],
        routers=list(topo.routers),
        switches=topo.switch_names,
        ovs=topo.ovs_switches(),
        links=links,
    )
    _routes(p)
    return p


def _ends(link: PlannedLink) -> tuple[tuple[str, str], tuple[str, str]]:
    return (link.a, link.a_addr), (link.b, link.b_addr)


def _ports(p: NetPlan) -> list[tuple[str, str, int]]:
    """Every (node, address, segment) of a host or router, in link order (a before b)."""
    seg_of = {i: k for k, seg in enumerate(p.segments()) for i in seg}
    return [
        (end, addr.split("/")[0], seg_of[i])
        for i, ln in enumerate(p.links)
        for end, addr in _ends(ln)
        if addr
    ]


def _neighbours(
    ports: list[tuple[str, str, int]], nodes: list[str]
) -> dict[str, list[tuple[str, str]]]:
    """node -> [(neighbour, neighbour's address on the shared segment)], in
    the order of the node's interfaces."""
    nb: dict[str, list[tuple[str, str]]] = {n: [] for n in nodes}
    for node, _addr, k in ports:
        nb[node] += [(other, addr) for other, addr, k2 in ports if k2 == k and other != node]
    return nb


def _first_hops(src: str, nb: dict, routers: set[str]) -> dict[str, str]:
    """node -> gateway address of src's first hop towards it (BFS; only
    routers forward; on equal length the earlier link wins)."""
    first_hop: dict[str, str] = {}
    seen = {src}
    queue: deque[str] = deque()
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
    """A /32 route to every host address, towards the first router on its
    segment: traffic to an address arrives over that address's own segment,
    so that every path of a multi-homed host stays symmetric."""
    ports = _ports(p)
    nb = _neighbours(ports, p.hosts + p.routers)
    routers = set(p.routers)
    members: dict[int, list[str]] = {}
    for node, _addr, k in ports:
        members.setdefault(k, []).append(node)
    gateway = {k: next((n for n in m if n in routers), None) for k, m in members.items()}
    for src in p.hosts + p.routers:
        hops = _first_hops(src, nb, routers)
        routes = []
        for owner, addr, k in ports:
            gw = gateway[k]
            if owner not in p.hosts or src in members[k] or gw is None or gw not in hops:
                continue  # a router's address, connected, or not reachable through a router
            routes.append((f"{addr}/32", hops[gw]))
        p.routes[src] = routes
        mine = [(addr, k) for node, addr, k in ports if node == src]
        if src in p.hosts and len(mine) > 1:
            p.policy[src] = [
                (addr, i, gw_addr)
                for i, (addr, k) in enumerate(mine)
                for gw_addr in [
                    next((a for n, a, k2 in ports if k2 == k and n in routers and n != src), None)
                ]
                if gw_addr is not None
            ]


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


def plan_events(p: NetPlan, events, profiles: dict[str, Profile], paths: list[str]) -> None:
    """Resolve ``events`` (LinkEventSpec) into new shapes per direction, in
    time order, each change building on the link's shape before it."""
    current: dict[tuple[int, str], Shape] = {}
    for event in sorted(events, key=lambda e: e.at):
        i = find_link(p, event.link)
        link = p.links[i]
        slot = path_slot(link.label)
        source = event.profile or (paths[slot - 1] if slot else link.label)
        base_fwd, base_rev = profiles[source].directions() if source else (link.a_to_b, link.b_to_a)
        out = {"at_ms": event.at, "link": i, "a_to_b": None, "b_to_a": None}
        for attr, base in (("a_to_b", base_fwd), ("b_to_a", base_rev)):
            if event.direction not in ("both", attr):
                continue
            start = current.get((i, attr), base) if not event.profile else base
            if start is None:
                raise ValueError(
                    f"link {event.link!r} is unshaped: give `profile:` for its new shape"
                )
            new = shape_with(start, event.set)
            current[(i, attr)] = new
            out[attr] = asdict(new)
        p.events.append(out)
