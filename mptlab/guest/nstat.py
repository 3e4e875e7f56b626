"""The kernel's own counters, per network namespace, without a process per read.

    reader = Reader(net.ns("client"))        # opens the files inside the namespace
    start = reader.counters()                # {"TcpExt": {"TCPOFOQueue": 0, ...}, "MPTcpExt": ...}
    ...
    end = reader.counters()
    delta(start, end)                        # the counters that changed

``/proc/net/netstat`` (``TcpExt``, ``IpExt``, ``MPTcpExt``, ...) and
``/proc/net/snmp`` (``Ip``, ``Icmp``, ``IcmpMsg``, ``Tcp``, ``Udp``, ...) are
what ``nstat``/``netstat -s`` read: every group and field the kernel prints
is taken as printed, so a kernel with other counters (6.1 -> 6.12 renames and
adds some; ``MPTcpExt`` exists only with MPTCP) needs no change here.

The files are opened once, from this thread switched into the namespace
(``mptlab.guest.netlab.in_netns``): a ``/proc/net`` file stays bound to the
namespace it was opened in, so each later read is an ``lseek`` and a couple
of ``read`` calls (a system call costs ~70 us of host CPU in the UML guest;
``ip netns exec nstat`` would cost a process, tens of ms).

``memory()`` adds what helps diagnose memory pressure: ``/proc/meminfo``
(MemFree, MemAvailable), ``/proc/sys/net/ipv4/tcp_mem`` and, per namespace,
``/proc/net/sockstat`` (``TCP: inuse orphan tw alloc mem``; ``mem`` in pages
and global to the guest, ``inuse`` per namespace).
"""

from __future__ import annotations

import os
import time

from .netlab import in_netns

COUNTER_FILES = ("netstat", "snmp")
MEMINFO_FIELDS = ("MemTotal", "MemFree", "MemAvailable")


def parse_counters(text: str) -> dict[str, dict[str, int]]:
    """``/proc/net/netstat`` or ``/proc/net/snmp`` text -> {group: {field: value}}.

    Each group is a line of names followed by a line of values, both
    starting with ``Group:``.  Values that are not integers are left out; a
    values line shorter or longer than its names line keeps what pairs up."""
    out: dict[str, dict[str, int]] = {}
    names: dict[str, list[str]] = {}
    for line in text.splitlines():
        group, sep, rest = line.partition(":")
        if not sep or not group or " " in group:
            continue
        fields = rest.split()
        if group not in names or group in out:
            names[group] = fields  # the header line (or a repeated group: a new header)
            out.pop(group, None)
            continue
        values: dict[str, int] = {}
        for name, value in zip(names.pop(group), fields, strict=False):
            try:
                values[name] = int(value)
            except ValueError:
                continue
        out[group] = values
    return out


def parse_sockstat(text: str) -> dict[str, dict[str, int]]:
    """``/proc/net/sockstat`` text -> {"TCP": {"inuse": 3, "orphan": 0, ...}, ...}."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        group, sep, rest = line.partition(":")
        if not sep:
            continue
        words = rest.split()
        values = {}
        for key, value in zip(words[::2], words[1::2], strict=False):
            try:
                values[key] = int(value)
            except ValueError:
                continue
        out[group.strip()] = values
    return out


def parse_meminfo(text: str, fields=MEMINFO_FIELDS) -> dict[str, int]:
    """``/proc/meminfo`` -> {field: kB} for ``fields``."""
    out = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name in fields:
            try:
                out[name] = int(rest.split()[0])
            except (IndexError, ValueError):
                continue
    return out


def delta(start: dict, end: dict, nonzero: bool = True) -> dict[str, dict[str, int]]:
    """end - start per group and field (fields in both); only non-zero ones
    unless ``nonzero`` is false."""
    out: dict[str, dict[str, int]] = {}
    for group, values in end.items():
        before = start.get(group, {})
        d = {k: v - before[k] for k, v in values.items() if k in before}
        if nonzero:
            d = {k: v for k, v in d.items() if v}
        if d:
            out[group] = d
    return out


def read_fd(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class Reader:
    """The counter files of one network namespace (None: this thread's own),
    opened once; ``counters()`` and ``sockstat()`` re-read them."""

    def __init__(self, netns: str | None = None):
        self.netns = netns
        self.fds: dict[str, int] = {}
        if netns is None:
            self._open()
        else:
            with in_netns(netns):
                self._open()

    def _open(self) -> None:
        for name in (*COUNTER_FILES, "sockstat"):
            try:
                self.fds[name] = os.open(f"/proc/thread-self/net/{name}", os.O_RDONLY)
            except FileNotFoundError:
                continue

    def counters(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for name in COUNTER_FILES:
            if name in self.fds:
                out.update(parse_counters(read_fd(self.fds[name])))
        return out

    def sockstat(self) -> dict[str, dict[str, int]]:
        return parse_sockstat(read_fd(self.fds["sockstat"])) if "sockstat" in self.fds else {}

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def memory(readers: dict[str, Reader] | None = None) -> dict:
    """Guest-wide memory and, per reader's host, the socket counts."""
    tcp_mem = _read("/proc/sys/net/ipv4/tcp_mem").split()
    out: dict = {
        "meminfo_kb": parse_meminfo(_read("/proc/meminfo")),
        "tcp_mem_pages": [int(v) for v in tcp_mem] if tcp_mem else None,
    }
    if readers:
        out["sockstat"] = {host: r.sockstat() for host, r in readers.items()}
    return out


class Recorder:
    """Counters of several namespaces at named moments (``take("start")``,
    ``take("end")``), for ``result.json``."""

    def __init__(self, namespaces: dict[str, str]):
        self.readers = {host: Reader(ns) for host, ns in namespaces.items()}
        self.taken: dict[str, dict] = {}  # moment -> {"counters": {host: ...}, "memory": ...}

    def snapshot(self) -> dict:
        t = time.time()
        return {
            "counters": {host: r.counters() for host, r in self.readers.items()},
            "memory": {"t": t, **memory(self.readers)},
        }

    def take(self, moment: str) -> dict:
        self.taken[moment] = snap = self.snapshot()
        return snap

    def result(self) -> tuple[dict, dict]:
        """(``result["nstat"]``, ``result["memory"]``): per host the counters
        at each moment (``start``, ``end``) and their non-zero ``delta``; the
        memory figures at each moment, with its time ``t``."""
        nstat: dict = {}
        for host in self.readers:
            entry = {m: snap["counters"][host] for m, snap in self.taken.items()}
            if "start" in entry and "end" in entry:
                entry["delta"] = delta(entry["start"], entry["end"])
            nstat[host] = entry
        return nstat, {m: snap["memory"] for m, snap in self.taken.items()}

    def close(self) -> None:
        for r in self.readers.values():
            r.close()
