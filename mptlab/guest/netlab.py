"""Emulated networks inside the guest: hosts are network namespaces, links are
veth pairs shaped per direction with tc (netem + tbf + a queue discipline).

This runs *inside* the UML guest (it needs root, netns and netem, which the
host kernel lacks).  The API follows Mininet's: make a ``Net``, add hosts
(routers, switches) and links, then call ``build()``; an experiment's plan
is built through ``mptlab.guest.build``::

    net = Net()
    cli, srv = net.add_host("cli"), net.add_host("srv")
    net.add_link(cli, srv, "10.0.1.1/24", "10.0.1.2/24",
                 Shape(rate=25, delay=12.5, queue=Queue(packets=100)))
    net.build()
    net.run(cli, "ping", "-c", "3", "10.0.1.2")

A switch is a namespace holding one Linux bridge (``br0``) that enslaves
its interfaces: a learning switch, without STP (the planner refuses loops);
or, ``add_host(name, switch=True, ovs={...})``, an Open vSwitch bridge
(``mptlab.guest.ovs``) with its own daemons in that namespace.  The shapes
are on the veths either way, so a switch's type changes nothing but the
forwarding.

Why not Mininet's TCLink: it shapes both directions alike, has no
Gilbert-Elliott loss and no byte or BDP-relative queue limits, and its netem
``limit`` also counts packets in the delay line, so a "100 packet" queue
shrinks with the delay.  Here the delay line (netem, never dropping) and the
bottleneck queue (tbf + the queue discipline) are separate qdiscs:

    root netem (delay, jitter, loss; limit large) -> tbf (rate) -> queue (pfifo/bfifo/red/codel/fq_codel)

The shapes are ``mptlab.spec.shapes.Shape``, the one definition the YAML
profiles, the plan and this module share.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import ipaddress
import os
import shlex
import socket
import struct
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..spec.shapes import ETH_FRAME, JITTER_DISTRIBUTIONS, QDISCS, Shape
from .ovs import OvsSwitch

# netem's queue holds the packets in the delay line; it must never be the
# one that drops, so its limit is far above any delay-bandwidth product here.
NETEM_LIMIT = 100_000
BRIDGE = "br0"  # a switch's bridge, in the switch's namespace
TCP_LISTEN = 10


CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(name: str):
    """Switch this thread into network namespace ``name`` (``ip netns`` name)."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        yield
    finally:
        _libc.setns(own, CLONE_NEWNET)
        os.close(target)
        os.close(own)


class NetError(RuntimeError):
    """A command that builds the network failed; the message shows the command and its output."""


# ------------------------------------------------------- netem's random seed
# netem draws its losses and jitter from its own PRNG, seeded at random when
# the qdisc is made unless TCA_NETEM_PRNG_SEED (Linux >= 6.3) is given; the
# iproute2 of Debian 12 (6.1) has no `seed` word.  Without a seed two runs of
# the same spec draw different losses: with 1 % loss goodput varied between
# boots (2.92 vs 3.16 Mbit/s) even under virtual time.  So the seed is set by
# netlink after the build: the qdisc's options as the kernel reports them,
# with the seed, sent back as a change (netem_change takes the rest as it was).
RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_NETEM_PAD, TCA_NETEM_PRNG_SEED = 9, 14
TC_H_ROOT = 0xFFFFFFFF
_NLMSG = struct.Struct("=IHHII")
_TCMSG = struct.Struct("=BBHiIII")
_NETEM_QOPT_LEN = 24  # struct tc_netem_qopt: six u32


def _nla(kind: int, data: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(data), kind) + data
    return raw + b"\0" * (-len(raw) % 4)


def _nlas(data: bytes):
    off = 0
    while off + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, off)
        if length < 4:
            return
        yield kind & 0x3FFF, data[off + 4 : off + length]
        off += (length + 3) & ~3


def _netlink_call(sock: socket.socket, msg_type: int, flags: int, body: bytes) -> list[bytes]:
    """Send one rtnetlink request; the payloads of the answers (a dump's
    messages until DONE, or nothing for an ACK); OSError on a kernel error."""
    sock.send(_NLMSG.pack(_NLMSG.size + len(body), msg_type, flags, 1, 0) + body)
    out: list[bytes] = []
    while True:
        data = sock.recv(1 << 16)
        off = 0
        while off + _NLMSG.size <= len(data):
            length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, off)
            payload = data[off + _NLMSG.size : off + length]
            off += (length + 3) & ~3
            if kind == NLMSG_DONE:
                return out
            if kind == NLMSG_ERROR:
                (err,) = struct.unpack_from("=i", payload)
                if err:
                    raise OSError(-err, os.strerror(-err))
                return out
            out.append(payload)


def netem_seed(ns: str, dev: str, seed: int) -> None:
    """Seed the PRNG of the root netem qdisc of ``dev`` in namespace ``ns``."""
    with in_netns(ns), socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as sock:
        ifindex = socket.if_nametoindex(dev)
        options = None
        for msg in _netlink_call(
            sock, RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, _TCMSG.pack(0, 0, 0, ifindex, 0, 0, 0)
        ):
            _fam, _p1, _p2, index, handle, parent, _info = _TCMSG.unpack_from(msg)
            attrs = dict(_nlas(msg[_TCMSG.size :]))
            if index == ifindex and parent == TC_H_ROOT and attrs.get(TCA_KIND) == b"netem\0":
                options, root = attrs.get(TCA_OPTIONS, b""), handle
        if options is None:
            raise NetError(f"no root netem qdisc on {dev} in {ns} to seed")
        qopt = options[:_NETEM_QOPT_LEN]
        rest = b"".join(
            _nla(kind, data)
            for kind, data in _nlas(options[_NETEM_QOPT_LEN:])
            if kind not in (TCA_NETEM_PAD, TCA_NETEM_PRNG_SEED)
        )
        rest += _nla(TCA_NETEM_PRNG_SEED, struct.pack("=Q", seed))
        body = _TCMSG.pack(0, 0, 0, ifindex, root, TC_H_ROOT, 0)
        body += _nla(TCA_KIND, b"netem\0") + _nla(TCA_OPTIONS, qopt + rest)
        try:
            _netlink_call(sock, RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_ACK, body)
        except OSError as exc:
            raise NetError(f"seeding netem on {dev} in {ns}: {exc.strerror}") from None


def link_seed(seed: int, dev: str) -> int:
    """The netem seed of interface ``dev`` in a run seeded ``seed``: its own
    per interface (and fixed by the two), so no two links draw alike."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{dev}".encode()).digest()[:8], "little")


def dev_name(host: str, index: int) -> str:
    """Name of ``host``'s ``index``-th interface (interfaces follow link order)."""
    return f"{host}-eth{index}"


def _ms(value: float) -> str:
    return f"{value:g}ms"


def shape_commands(dev: str, shape: Shape, rtt_ms: float) -> list[list[str]]:
    """tc commands (argument lists) that shape egress of ``dev`` as ``shape``.

    ``rtt_ms`` is the link's round-trip delay, used for ``bdp`` queue limits.
    """
    if shape.qdisc not in QDISCS:
        raise ValueError(f"unknown qdisc {shape.qdisc!r}; allowed: {', '.join(QDISCS)}")
    netem = ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem"]
    netem += ["limit", str(NETEM_LIMIT)]
    if shape.delay or shape.jitter:
        netem += ["delay", _ms(shape.delay)]
        if shape.jitter:
            if shape.jitter_distribution not in JITTER_DISTRIBUTIONS:
                raise ValueError(
                    f"unknown jitter distribution {shape.jitter_distribution!r}; "
                    f"allowed: {', '.join(JITTER_DISTRIBUTIONS)}"
                )
            netem += [_ms(shape.jitter)]
            if shape.jitter_distribution != "uniform":
                netem += ["distribution", shape.jitter_distribution]
    if shape.gilbert_elliott is not None:
        ge = shape.gilbert_elliott
        netem += ["loss", "gemodel", f"{ge.p:g}%", f"{ge.r:g}%"]
        netem += [f"{100 - ge.h:g}%", f"{100 - ge.k:g}%"]
    elif shape.loss:
        netem += ["loss", "random", f"{shape.loss:g}%"]
    cmds = [netem]
    if shape.rate is None:
        return cmds

    rate = shape.rate
    # burst: at least two frames, and about 1 ms at line rate for high rates
    burst = max(2 * ETH_FRAME, int(rate * 1e6 / 8 / 1000))
    cmds.append(
        ["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "tbf"]
        + ["rate", f"{rate:g}mbit", "burst", str(burst), "limit", str(10 * burst)]
    )
    leaf = ["tc", "qdisc", "replace", "dev", dev, "parent", "10:1", "handle", "20:"]
    q = shape.queue
    if shape.qdisc == "droptail":
        if q.packets is not None:
            cmds.append(leaf + ["pfifo", "limit", str(q.packets)])
        else:
            cmds.append(leaf + ["bfifo", "limit", str(q.limit_bytes(rate, rtt_ms))])
    elif shape.qdisc == "red":
        limit = q.limit_bytes(rate, rtt_ms) or q.limit_packets(rate, rtt_ms) * ETH_FRAME
        # RED thresholds as fractions of the limit (Floyd's guidelines: max = 3 x min)
        min_th = max(ETH_FRAME, limit // 6)
        max_th = max(2 * ETH_FRAME, limit // 2)
        cmds.append(
            leaf
            + ["red", "limit", str(limit), "min", str(min_th), "max", str(max_th)]
            + ["avpkt", str(ETH_FRAME), "burst", str(max(2, min_th // ETH_FRAME + 1))]
            + ["bandwidth", f"{rate:g}mbit", "probability", "0.1"]
        )
    elif shape.qdisc == "codel":
        cmds.append(leaf + ["codel", "limit", str(q.limit_packets(rate, rtt_ms))])
    else:  # fq_codel
        cmds.append(leaf + ["fq_codel", "limit", str(q.limit_packets(rate, rtt_ms))])
    return cmds


@dataclass
class Host:
    name: str
    addrs: list[str] = field(default_factory=list)  # "10.0.1.1/24"; "" on a switch
    interfaces: list[str] = field(default_factory=list)
    router: bool = False
    switch: bool = False
    # an Open vSwitch switch: {"fail_mode": ..., "flows": [...]}; None: a Linux bridge
    ovs: dict | None = None

    def ip(self, i: int = 0) -> str:
        return self.addrs[i].split("/")[0]


@dataclass
class Link:
    a: Host
    b: Host
    a_dev: str
    b_dev: str
    a_addr: str
    b_addr: str
    a_to_b: Shape | None
    b_to_a: Shape | None

    @property
    def rtt_ms(self) -> float:
        return sum(s.delay for s in (self.a_to_b, self.b_to_a) if s is not None)


def tcp_sockets(ns: str) -> list[tuple[int, int]]:
    """(TCP state, local port) of every TCP socket in namespace ``ns``, read
    from /proc without starting a process (MPTCP subflows included)."""
    out = []
    with in_netns(ns):
        for name in ("tcp", "tcp6"):
            try:
                with open(f"/proc/thread-self/net/{name}") as f:
                    next(f)
                    for line in f:
                        fields = line.split()
                        out.append((int(fields[3], 16), int(fields[1].rsplit(":", 1)[1], 16)))
            except OSError:
                continue
    return out


def listening(ns: str, port: int) -> bool:
    """Does a TCP (or MPTCP) socket listen on ``port`` in namespace ``ns``?"""
    return (TCP_LISTEN, port) in tcp_sockets(ns)


def wait_listening(
    ns: str, port: int, proc: subprocess.Popen | None = None, timeout: float = 20.0
) -> None:
    """Wait until something listens on ``port`` in ``ns`` (NetError if
    ``proc``, the server meant to listen, exits first)."""
    deadline = time.monotonic() + timeout
    while not listening(ns, port):
        if proc is not None and proc.poll() is not None:
            name = proc.args[4] if isinstance(proc.args, list) and len(proc.args) > 4 else "server"
            raise NetError(f"{name} exited ({proc.returncode}) before listening on {port}")
        if time.monotonic() > deadline:
            raise NetError(f"nothing listens on port {port} in {ns} after {timeout:g} s")
        time.sleep(0.02)


class Net:
    """A set of namespaced hosts, routers and switches joined by shaped links."""

    def __init__(self, prefix: str = "", log=None):
        self.prefix = prefix
        self.hosts: dict[str, Host] = {}
        self.links: list[Link] = []
        self.log = log  # callable(str) for every command, or None
        # every process popen() started, with its namespace: the agent stops a
        # stalled workload's processes (mptlab.guest.agent.stop_workload)
        self.spawned: list[tuple[str, subprocess.Popen]] = []
        self.ovs: dict[str, OvsSwitch] = {}  # switch name -> its running OVS

    # -- construction --------------------------------------------------
    def add_host(
        self, name: str, router: bool = False, switch: bool = False, ovs: dict | None = None
    ) -> Host:
        """A host, router or switch; ``ovs`` ({"fail_mode", "flows"}) makes a
        switch an Open vSwitch bridge instead of a Linux one."""
        if name in self.hosts:
            raise ValueError(f"host {name!r} defined twice")
        if ovs is not None and not switch:
            raise ValueError(f"{name}: only a switch can be an Open vSwitch bridge")
        host = Host(name, router=router, switch=switch, ovs=ovs)
        self.hosts[name] = host
        return host

    def add_link(
        self,
        a: Host,
        b: Host,
        a_addr: str = "",
        b_addr: str = "",
        a_to_b: Shape | None = None,
        b_to_a: Shape | None = None,
    ) -> Link:
        """Link ``a`` and ``b``, shaping each direction (``b_to_a`` defaults to
        ``a_to_b``; no shape at all: an unshaped veth pair).  A switch's end
        has no address."""
        if b_to_a is None:
            b_to_a = a_to_b
        a_dev = dev_name(a.name, len(a.interfaces))
        b_dev = dev_name(b.name, len(b.interfaces))
        for dev in (a_dev, b_dev):
            if len(dev) > 15:
                raise ValueError(f"interface name {dev!r} longer than 15 characters")
        for host, addr in ((a, a_addr), (b, b_addr)):
            if host.switch != (not addr):
                raise ValueError(f"{host.name}: a switch's interface has no address, any other one")
            if addr:
                ipaddress.ip_interface(addr)
        a.interfaces.append(a_dev)
        b.interfaces.append(b_dev)
        a.addrs.append(a_addr)
        b.addrs.append(b_addr)
        link = Link(a, b, a_dev, b_dev, a_addr, b_addr, a_to_b, b_to_a)
        self.links.append(link)
        return link

    # -- execution -----------------------------------------------------
    def ns(self, host: Host | str) -> str:
        name = host.name if isinstance(host, Host) else host
        return self.prefix + name

    def sh(self, *args: str, check: bool = True) -> str:
        if self.log:
            self.log(shlex.join(args))
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise NetError(
                f"command failed ({proc.returncode}): {shlex.join(args)}\n"
                f"{proc.stdout}{proc.stderr}".rstrip()
            )
        return proc.stdout

    def run(self, host: Host | str, *args: str, check: bool = True) -> str:
        """Run a command inside ``host``'s namespace and return its stdout."""
        return self.sh("ip", "netns", "exec", self.ns(host), *args, check=check)

    def popen(self, host: Host | str, args: Sequence[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(host), *args], **kwargs)
        self.spawned.append((self.ns(host), proc))
        return proc

    def sysctls(self, host: Host | str, values: dict) -> None:
        """Set sysctls in ``host``'s namespace, in this process (no fork: process
        creation is the slow part of building a network in UML)."""
        if not values:
            return
        if self.log:
            self.log(f"sysctl [{self.ns(host)}] " + " ".join(f"{k}={v}" for k, v in values.items()))
        with in_netns(self.ns(host)):
            for key, value in values.items():
                path = Path("/proc/sys") / key.replace(".", "/")
                try:
                    path.write_text(str(value))
                except OSError as exc:
                    raise NetError(
                        f"sysctl {key}={value} in {self.ns(host)}: {exc.strerror}"
                    ) from None

    def tcp_sockets(self, host: Host | str) -> list[tuple[int, int]]:
        return tcp_sockets(self.ns(host))

    def wait_listening(self, host: Host | str, port: int, timeout: float = 10.0) -> None:
        """Wait until something listens on TCP ``port`` in ``host``'s namespace."""
        wait_listening(self.ns(host), port, timeout=timeout)

    def batch(self, host: Host | str | None, tool: str, lines: list[str]) -> None:
        """Run ``ip`` or ``tc`` commands (without the tool name) in one process,
        in ``host``'s namespace (None: the initial namespace)."""
        if not lines:
            return
        args = [tool] + (["-n", self.ns(host)] if host is not None else []) + ["-batch", "-"]
        if self.log:
            for line in lines:
                self.log(f"{' '.join(args[:-2])} {line}")
        proc = subprocess.run(
            args, input="\n".join(lines) + "\n", capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise NetError(
                f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}".rstrip()
            )

    def build(self, extra_ip: dict[str, list[str]] | None = None) -> None:
        """Create namespaces, veth pairs, bridges, addresses and shapes: one
        ``ip`` and at most one ``tc`` process per node.  ``extra_ip`` adds
        ``ip`` lines per node (routes, rules, MPTCP endpoints) to the same batch."""
        self.batch(None, "ip", [f"netns add {self.ns(h)}" for h in self.hosts.values()])
        veths = [
            f"link add {ln.a_dev} netns {self.ns(ln.a)} type veth peer {ln.b_dev} netns {self.ns(ln.b)}"
            for ln in self.links
        ]
        self.batch(None, "ip", veths)
        ip_lines: dict[str, list[str]] = {h: ["link set lo up"] for h in self.hosts}
        tc_lines: dict[str, list[str]] = {h: [] for h in self.hosts}
        for name, host in self.hosts.items():
            if host.switch and host.ovs is None:
                ip_lines[name] += [f"link add {BRIDGE} type bridge", f"link set {BRIDGE} up"]
        for ln in self.links:
            for host, dev, addr, shape in (
                (ln.a, ln.a_dev, ln.a_addr, ln.a_to_b),
                (ln.b, ln.b_dev, ln.b_addr, ln.b_to_a),
            ):
                if host.switch:
                    if host.ovs is None:  # an OVS switch's ports are added once it runs
                        ip_lines[host.name].append(f"link set {dev} master {BRIDGE}")
                else:
                    ip_lines[host.name].append(f"addr add {addr} dev {dev}")
                # one MSS per skb: no 64 KB "packets" through netem/tbf (GSO/TSO off)
                ip_lines[host.name].append(f"link set {dev} up gso_max_segs 1")
                if shape is not None:
                    tc_lines[host.name] += [
                        " ".join(c[1:]) for c in shape_commands(dev, shape, ln.rtt_ms)
                    ]
        for name, host in self.hosts.items():
            self.batch(host, "ip", ip_lines[name] + (extra_ip or {}).get(name, []))
            self.batch(host, "tc", tc_lines[name])
            if host.router:
                self.sysctls(host, {"net.ipv4.ip_forward": 1})
        self.start_ovs()

    def start_ovs(self) -> None:
        """Start the Open vSwitch switches (their interfaces exist and are up)."""
        for name, host in self.hosts.items():
            if host.ovs is None or name in self.ovs:
                continue
            sw = OvsSwitch(
                self.ns(host),
                name,
                host.interfaces,
                host.ovs.get("fail_mode", "standalone"),
                host.ovs.get("flows", ()),
                log=self.log,
            )
            self.ovs[name] = sw
            try:
                sw.start()
            except RuntimeError as exc:
                self.stop_ovs()  # the switches started so far: none is left behind
                raise NetError(str(exc)) from None

    def stop_ovs(self) -> None:
        """Stop every Open vSwitch switch's daemons (nothing left behind)."""
        while self.ovs:
            _name, sw = self.ovs.popitem()
            sw.stop()

    def seed_netem(self, seed: int) -> dict[str, int]:
        """Seed every shaped interface's netem from ``seed`` (``link_seed``);
        the seeds by interface.  A later ``change()`` keeps them (netem
        reseeds only when told a seed)."""
        seeds = {}
        for ln in self.links:
            for host, dev, shape in ((ln.a, ln.a_dev, ln.a_to_b), (ln.b, ln.b_dev, ln.b_to_a)):
                if shape is not None:
                    seeds[dev] = link_seed(seed, dev)
                    netem_seed(self.ns(host), dev, seeds[dev])
        if self.log and seeds:
            self.log(f"netem seeded from {seed} on {len(seeds)} interfaces")
        return seeds

    def change(self, link: Link, a_to_b: Shape | None = None, b_to_a: Shape | None = None) -> None:
        """Re-shape a built link in place (e.g. a rate drop at t=30 s): the
        qdiscs are replaced, so queued packets stay unless the discipline
        itself changes.  Removing the rate limit of a link is not supported."""
        for host, dev, shape, attr in (
            (link.a, link.a_dev, a_to_b, "a_to_b"),
            (link.b, link.b_dev, b_to_a, "b_to_a"),
        ):
            if shape is None:
                continue
            old = getattr(link, attr)
            if old is not None and old.rate is not None and shape.rate is None:
                raise ValueError(f"{dev}: a link change cannot remove the rate limit")
            setattr(link, attr, shape)
            self.batch(
                host, "tc", [" ".join(c[1:]) for c in shape_commands(dev, shape, link.rtt_ms)]
            )

    def destroy(self) -> None:
        self.stop_ovs()
        for host in self.hosts.values():
            self.sh("ip", "netns", "del", self.ns(host), check=False)
