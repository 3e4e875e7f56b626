"""Emulated networks inside the guest: hosts are network namespaces, links are
veth pairs shaped per direction with tc (netem + tbf + a queue discipline).

This runs *inside* the UML guest (it needs root, netns and netem, which the
host kernel lacks).  The API follows Mininet's: make a ``Net``, add hosts
and links, then call ``build()``::

    net = Net()
    cli, srv = net.add_host("cli"), net.add_host("srv")
    net.add_link(cli, srv, "10.0.1.1/24", "10.0.1.2/24",
                 Shape(rate_mbit=25, delay_ms=12.5, queue=Queue(packets=100)))
    net.build()
    net.run(cli, "ping", "-c", "3", "10.0.1.2")

Why not Mininet's TCLink: it shapes both directions alike, has no
Gilbert-Elliott loss and no byte or BDP-relative queue limits, and its netem
``limit`` also counts packets in the delay line, so a "100 packet" queue
shrinks with the delay.  Here the delay line (netem, never dropping) and the
bottleneck queue (tbf + the queue discipline) are separate qdiscs:

    root netem (delay, jitter, loss; limit large) -> tbf (rate) -> queue (pfifo/bfifo/red/codel/fq_codel)
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import math
import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

MTU = 1500
ETH_FRAME = MTU + 14
# netem's queue holds the packets in the delay line; it must never be the
# one that drops, so its limit is far above any delay-bandwidth product here.
NETEM_LIMIT = 100_000

QDISCS = ("droptail", "red", "codel", "fq_codel")
JITTER_DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")


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


@dataclass(frozen=True)
class Queue:
    """Bottleneck queue limit: exactly one of packets, bytes or bdp (multiples of rate x RTT)."""

    packets: int | None = None
    bytes: int | None = None
    bdp: float | None = None

    def limit_bytes(self, rate_mbit: float, rtt_ms: float) -> int | None:
        if self.bytes is not None:
            return self.bytes
        if self.bdp is not None:
            return max(ETH_FRAME, int(self.bdp * rate_mbit * 1e6 / 8 * rtt_ms / 1e3))
        return None

    def limit_packets(self, rate_mbit: float, rtt_ms: float) -> int:
        """The limit in packets (full-size frames) for disciplines counted in packets."""
        if self.packets is not None:
            return self.packets
        return max(1, math.ceil(self.limit_bytes(rate_mbit, rtt_ms) / ETH_FRAME))


@dataclass(frozen=True)
class GilbertElliott:
    """netem's 4-state-free Gilbert-Elliott loss model (percentages).

    p: good->bad transition, r: bad->good, h: delivery in bad state (100 - loss in bad),
    k: delivery in good state (100 - loss in good).  netem takes ``gemodel p r 1-h 1-k``.
    """

    p: float
    r: float
    h: float = 0.0
    k: float = 100.0


@dataclass(frozen=True)
class Shape:
    """One direction of a link."""

    rate_mbit: float | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    jitter_distribution: str = "normal"
    loss_pct: float = 0.0
    gilbert_elliott: GilbertElliott | None = None
    queue: Queue = field(default_factory=lambda: Queue(packets=1000))
    qdisc: str = "droptail"


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
    if shape.delay_ms or shape.jitter_ms:
        netem += ["delay", _ms(shape.delay_ms)]
        if shape.jitter_ms:
            if shape.jitter_distribution not in JITTER_DISTRIBUTIONS:
                raise ValueError(
                    f"unknown jitter distribution {shape.jitter_distribution!r}; "
                    f"allowed: {', '.join(JITTER_DISTRIBUTIONS)}"
                )
            netem += [_ms(shape.jitter_ms)]
            if shape.jitter_distribution != "uniform":
                netem += ["distribution", shape.jitter_distribution]
    if shape.gilbert_elliott is not None:
        ge = shape.gilbert_elliott
        netem += ["loss", "gemodel", f"{ge.p:g}%", f"{ge.r:g}%"]
        netem += [f"{100 - ge.h:g}%", f"{100 - ge.k:g}%"]
    elif shape.loss_pct:
        netem += ["loss", "random", f"{shape.loss_pct:g}%"]
    cmds = [netem]
    if shape.rate_mbit is None:
        return cmds

    rate = shape.rate_mbit
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
        limit = q.limit_bytes(rate, rtt_ms) or q.packets * ETH_FRAME
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
    addrs: list[str] = field(default_factory=list)  # "10.0.1.1/24"
    interfaces: list[str] = field(default_factory=list)
    router: bool = False

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
        return sum(s.delay_ms for s in (self.a_to_b, self.b_to_a) if s is not None)


class Net:
    """A set of namespaced hosts joined by shaped point-to-point links."""

    def __init__(self, prefix: str = "", log=None):
        self.prefix = prefix
        self.hosts: dict[str, Host] = {}
        self.links: list[Link] = []
        self.log = log  # callable(str) for every command, or None
        # every process popen() started, with its namespace: the agent stops a
        # stalled workload's processes (mptlab.guest.agent.stop_workload)
        self.spawned: list[tuple[str, subprocess.Popen]] = []

    # -- construction --------------------------------------------------
    def add_host(self, name: str, router: bool = False) -> Host:
        if name in self.hosts:
            raise ValueError(f"host {name!r} defined twice")
        host = Host(name, router=router)
        self.hosts[name] = host
        return host

    def add_link(
        self,
        a: Host,
        b: Host,
        a_addr: str,
        b_addr: str,
        a_to_b: Shape | None = None,
        b_to_a: Shape | None = None,
    ) -> Link:
        """Link ``a`` and ``b``, shaping each direction (``b_to_a`` defaults to
        ``a_to_b``; no shape at all: an unshaped veth pair)."""
        if b_to_a is None:
            b_to_a = a_to_b
        a_dev = dev_name(a.name, len(a.interfaces))
        b_dev = dev_name(b.name, len(b.interfaces))
        for dev in (a_dev, b_dev):
            if len(dev) > 15:
                raise ValueError(f"interface name {dev!r} longer than 15 characters")
        ipaddress.ip_interface(a_addr)
        ipaddress.ip_interface(b_addr)
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

    def sysctl(self, host: Host | str, key: str, value: str | int) -> None:
        self.sysctls(host, {key: value})

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
        """(TCP state, local port) of every TCP socket in ``host``'s namespace,
        read from /proc without starting a process (MPTCP subflows included)."""
        out = []
        with in_netns(self.ns(host)):
            for name in ("tcp", "tcp6"):
                with open(f"/proc/thread-self/net/{name}") as f:
                    next(f)
                    for line in f:
                        fields = line.split()
                        out.append((int(fields[3], 16), int(fields[1].rsplit(":", 1)[1], 16)))
        return out

    def wait_listening(self, host: Host | str, port: int, timeout: float = 10.0) -> None:
        """Wait until something listens on TCP ``port`` in ``host``'s namespace."""
        deadline = time.monotonic() + timeout
        while (10, port) not in self.tcp_sockets(host):  # 10: TCP_LISTEN
            if time.monotonic() > deadline:
                raise NetError(
                    f"nothing listens on port {port} in {self.ns(host)} after {timeout:g} s"
                )
            time.sleep(0.02)

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
        """Create namespaces, veth pairs, addresses and shapes: one ``ip`` and at
        most one ``tc`` process per host.  ``extra_ip`` adds ``ip`` lines per
        host (routes, rules, MPTCP endpoints) to the same batch."""
        self.batch(None, "ip", [f"netns add {self.ns(h)}" for h in self.hosts.values()])
        self.batch(None, "ip", [
            f"link add {ln.a_dev} netns {self.ns(ln.a)} type veth peer {ln.b_dev} netns {self.ns(ln.b)}"
            for ln in self.links
        ])  # fmt: skip
        ip_lines: dict[str, list[str]] = {h: ["link set lo up"] for h in self.hosts}
        tc_lines: dict[str, list[str]] = {h: [] for h in self.hosts}
        for ln in self.links:
            for host, dev, addr, shape in (
                (ln.a, ln.a_dev, ln.a_addr, ln.a_to_b),
                (ln.b, ln.b_dev, ln.b_addr, ln.b_to_a),
            ):
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
                self.sysctl(host, "net.ipv4.ip_forward", 1)

    def _shape(self, host: Host, dev: str, shape: Shape | None, rtt_ms: float) -> None:
        if shape is None:
            return
        for cmd in shape_commands(dev, shape, rtt_ms):
            self.run(host, *cmd)

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
            if old is not None and old.rate_mbit is not None and shape.rate_mbit is None:
                raise ValueError(f"{dev}: a link change cannot remove the rate limit")
            setattr(link, attr, shape)
            self.batch(
                host, "tc", [" ".join(c[1:]) for c in shape_commands(dev, shape, link.rtt_ms)]
            )

    # -- MPTCP plumbing ------------------------------------------------
    def route_via(self, host: Host | str, dest: str, gateway: str) -> None:
        self.run(host, "ip", "route", "replace", dest, "via", gateway)

    def mptcp_limits(self, host: Host | str, subflows: int = 8, add_addr_accepted: int = 8) -> None:
        self.run(
            host, "ip", "mptcp", "limits", "set",
            "subflow", str(subflows), "add_addr_accepted", str(add_addr_accepted),
        )  # fmt: skip

    def mptcp_client_paths(self, host: Host, first_table: int = 100) -> None:
        """Policy routing + subflow endpoints so that every extra address of
        ``host`` opens its own subflow over its own interface."""
        for i, (addr, dev) in enumerate(zip(host.addrs, host.interfaces, strict=True)):
            ip = addr.split("/")[0]
            table = str(first_table + i)
            gateway = self._peer_of(host, dev)
            self.run(host, "ip", "rule", "add", "from", ip, "table", table)
            self.run(
                host, "ip", "route", "add", "default", "via", gateway, "dev", dev, "table", table
            )
            if i > 0:
                self.run(host, "ip", "mptcp", "endpoint", "add", ip, "dev", dev, "subflow")

    def _peer_of(self, host: Host, dev: str) -> str:
        for link in self.links:
            if link.a is host and link.a_dev == dev:
                return link.b_addr.split("/")[0]
            if link.b is host and link.b_dev == dev:
                return link.a_addr.split("/")[0]
        raise KeyError(f"{host.name} has no interface {dev}")

    def destroy(self) -> None:
        for host in self.hosts.values():
            self.sh("ip", "netns", "del", self.ns(host), check=False)
