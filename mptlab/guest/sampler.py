"""Sample TCP subflows and MPTCP connections through sock_diag (what ``ss``
reads), inside the guest, in the client's and the server's namespaces.

``SamplerThread`` writes ``traces/<host>-subflows.csv`` (every TCP socket
every ``ss_interval``: cwnd, sRTT, in-flight, retransmissions, bytes, and
the MPTCP subflow counters of patch 0002) and ``traces/<host>-mptcp.csv``
(every MPTCP connection every ``mptcp_interval``: OFO queue now/max, bytes
sent/reinjected/acked/received, scheduler); both with the socket's receive
memory (``rmem_alloc``, ``rcvbuf``: ``SKMEMINFO`` below).  One netlink dump per sample,
no process per sample.  A sample still costs the guest a dozen system
calls, and a system call in a User-Mode Linux guest costs ~70 us of host
CPU here: the agent therefore samples at 100 ms and gets every OFO change
from the kernel tracepoint instead (``mptlab.guest.tracepoints``).

Runs sample through ``sampler.c`` (``SamplerProcess``), a program that
reads the plan this module writes (``plan_text``: the tables below), so
the columns are named and laid out here only; ``SamplerThread`` (``run``)
is the reference it is tested against and the fallback when the host has
no C compiler (``start`` picks).
"""

from __future__ import annotations

import csv
import ctypes
import errno
import os
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

from .. import rundir
from .netlab import in_netns

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2
INET_DIAG_SKMEMINFO = 7
INET_DIAG_ULP_INFO = 19
INET_DIAG_REQ_PROTOCOL = 3
INET_ULP_INFO_MPTCP = 3
IPPROTO_MPTCP = 262
TCP_LISTEN, TCP_TIME_WAIT = 10, 6

_NLMSG = struct.Struct("=IHHII")
# inet_diag_req: family, src_len, dst_len, ext, sockid (inline), states, dbs
_REQ_V1 = struct.Struct("=BBBB2s2s16s16sI8sII")
TCPDIAG_GETSOCK = 18
_MSG = struct.Struct("=BBBB2s2s16s16sI8sIIIII")  # inet_diag_msg
_RTA = struct.Struct("=HH")

# struct tcp_info (append-only since Linux 4.x; these offsets hold for 6.1 and 6.12)
TCP_INFO = {
    "rto": (8, "I"),
    "unacked": (24, "I"),
    "sacked": (28, "I"),
    "lost": (32, "I"),
    "retrans": (36, "I"),
    "pmtu": (60, "I"),
    "srtt_us": (68, "I"),
    "rttvar_us": (72, "I"),
    "ssthresh": (76, "I"),
    "cwnd": (80, "I"),
    "total_retrans": (100, "I"),
    "pacing_rate": (104, "Q"),
    "bytes_acked": (120, "Q"),
    "bytes_received": (128, "Q"),
    "notsent_bytes": (144, "I"),
    "min_rtt_us": (148, "I"),
    "delivery_rate": (160, "Q"),
    "bytes_sent": (200, "Q"),
    "bytes_retrans": (208, "Q"),
    "snd_wnd": (228, "I"),
}
# struct mptcp_info of Linux 6.12 with the mptlab extension (patch 0002),
# offsets checked with offsetof() against the patched uapi header.  The
# connection counters are upstream's: bytes_sent counts new data only,
# bytes_reinjected is upstream's mptcpi_bytes_retrans (every MPTCP-level
# re-send); the OFO fields and the scheduler name are appended by mptlab.
MPTCP_INFO = {
    "subflows": (0, "B"),
    "token": (12, "I"),
    "write_seq": (16, "Q"),
    "snd_una": (24, "Q"),
    "rcv_nxt": (32, "Q"),
    "bytes_reinjected": (48, "Q"),
    "bytes_sent": (56, "Q"),
    "bytes_received": (64, "Q"),
    "bytes_acked": (72, "Q"),
    "ofo_bytes": (96, "Q"),
    "ofo_bytes_max": (104, "Q"),
    "ofo_segs": (112, "I"),
    "ofo_segs_max": (116, "I"),
}
MPTCP_SCHEDULER = (120, 16)
# The socket's memory (INET_DIAG_SKMEMINFO: u32[SK_MEMINFO_VARS], filled by
# sk_get_meminfo(), net/core/sock.c:3923; indices from enum sk_meminfo_vars,
# include/uapi/linux/sock_diag.h:15).  Requested for both dumps, TCP and
# MPTCP: the MPTCP diag handler fills its sockets through the same
# inet_sk_diag_fill() as TCP (net/mptcp/mptcp_diag.c:23), which honours the
# request (net/ipv4/inet_diag.c:292).  ~40 bytes more per socket in the same
# reply: no extra system call.
#
# Why rmem_alloc is the MPT-BM paper's "memory allocated for segments"
# (its Table III): on an MPTCP socket (6.12) sk_rmem_alloc is the truesize
# (payload plus sk_buff overhead) of every skb the connection holds for the
# application, charged by mptcp_set_owner_r() (net/mptcp/protocol.c:229)
# when a segment moves from a subflow into the msk: into the out-of-order
# queue (protocol.c:380, mptcp_data_queue_ofo()) or the in-order receive
# queue (protocol.c:445, 470, and the coalescing delta at 184), and released
# only when the application has read it (mptcp_rfree(), protocol.c:220;
# recvmsg batches the release through msk->rmem_released,
# __mptcp_update_rmem(), protocol.c:2641).  So it is the OFO queue plus the
# data in order but not yet read, in allocated bytes, not payload bytes.
# A subflow's rmem_alloc is its own, first-level reordering (TCP's OFO
# queue) plus data the msk has not taken yet, which it leaves in the
# subflow only while its own memory is over its rcvbuf (protocol.c:962).
SKMEMINFO = {"rmem_alloc": 0, "rcvbuf": 1}  # SK_MEMINFO_RMEM_ALLOC, SK_MEMINFO_RCVBUF
SUBFLOW_ATTRS = {
    1: ("token_rem", "I"),
    2: ("token_loc", "I"),
    9: ("id_rem", "B"),
    10: ("id_loc", "B"),
    12: ("mptcp_bytes_sent", "Q"),
    13: ("mptcp_bytes_reinjected", "Q"),
}

_NO_SUBFLOW_ATTRS = {name: "" for name, _ in SUBFLOW_ATTRS.values()}
# SKMEMINFO's fields are its first two u32s: read at once when present
assert list(SKMEMINFO.values()) == [0, 1]
_MEMINFO = struct.Struct("=2I")

SUBFLOW_COLUMNS = [
    "t",
    "saddr",
    "sport",
    "daddr",
    "dport",
    "state",
    "token_loc",
    "token_rem",
    "id_loc",
    "id_rem",
    *TCP_INFO,
    "mptcp_bytes_sent",
    "mptcp_bytes_reinjected",
    *SKMEMINFO,
]
MPTCP_COLUMNS = ["t", "saddr", "sport", "daddr", "dport", *MPTCP_INFO, "scheduler", *SKMEMINFO]


def _attrs(data: bytes) -> dict[int, bytes]:
    """Netlink attributes: kind -> payload (the last of a kind wins)."""
    out = {}
    off, end = 0, len(data)
    unpack = _RTA.unpack_from
    while off + 4 <= end:
        length, kind = unpack(data, off)
        if length < 4:
            break
        out[kind & 0x3FFF] = data[off + 4 : off + length]
        off += (length + 3) & ~3
    return out


def _meminfo(blob: bytes | None) -> list:
    """The ``SKMEMINFO`` fields of an INET_DIAG_SKMEMINFO payload, in that
    order; "" (an empty cell: unknown, not 0) for a field the payload lacks
    or without the attribute."""
    blob = blob or b""
    if len(blob) >= _MEMINFO.size:
        return list(_MEMINFO.unpack_from(blob))
    out: list = []
    for index in SKMEMINFO.values():
        off = 4 * index
        out.append(struct.unpack_from("=I", blob, off)[0] if off + 4 <= len(blob) else "")
    return out


class FieldSet:
    """The fields of ``table`` (name -> (offset, struct format)) read from a
    payload by one precompiled ``struct.Struct``; a payload too short for
    all of them (another kernel's struct) is read field by field, "" (an
    empty cell) for each field it lacks.  Field by field was ~40 % of the
    sampler's Python time per subflow (20 format lookups a socket), and the
    sampler's Python was two thirds of its cost to a run (perf on the host:
    guest user code +0.40 s, guest kernel +0.13 s, host kernel +0.05 s).
    """

    def __init__(self, table: dict):
        self.table = table
        by_offset = sorted(table, key=lambda name: table[name][0])
        fmt, pos = "=", 0
        for name in by_offset:
            offset, code = table[name]
            fmt += (f"{offset - pos}x" if offset > pos else "") + code
            pos = offset + struct.calcsize(code)
        self.struct = struct.Struct(fmt)
        # unpack() yields offset order; rows want the table's order
        self.order = [by_offset.index(name) for name in table]

    def values(self, blob: bytes) -> list:
        if len(blob) >= self.struct.size:
            got = self.struct.unpack_from(blob)
            return [got[i] for i in self.order]
        return list(_fields(blob, self.table).values())


def _fields(blob: bytes, table: dict) -> dict:
    out = {}
    for name, (offset, fmt) in table.items():
        size = struct.calcsize(fmt)
        out[name] = (
            struct.unpack_from("=" + fmt, blob, offset)[0] if offset + size <= len(blob) else ""
        )
    return out


TCP_FIELDS = FieldSet(TCP_INFO)
MPTCP_FIELDS = FieldSet(MPTCP_INFO)
# Socket states asked of the kernel (idiag_states): the rows never show a
# listener, a TIME_WAIT socket or a request socket (none of the last two
# has INET_DIAG_INFO), so the kernel need not send them.
ALL_STATES = 0xFFFFFFFF
TCP_NEW_SYN_RECV = 12
SUBFLOW_STATES = ALL_STATES & ~(1 << TCP_LISTEN | 1 << TCP_TIME_WAIT | 1 << TCP_NEW_SYN_RECV)
MPTCP_STATES = ALL_STATES & ~(1 << TCP_LISTEN)


class _iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _msghdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(_iovec)),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _msghdr), ("msg_len", ctypes.c_uint)]


MSG_WAITFORONE = 0x10000
CLOCK_MONOTONIC, TIMER_ABSTIME = 1, 1
_LIBC = ctypes.CDLL(None, use_errno=True)


class _timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Receiver:
    """A dump's replies, several netlink messages per system call:
    ``recvmmsg(2)`` waiting for the first only (``MSG_WAITFORONE``).

    Why: a dump that found sockets ends in a second datagram, the
    ``NLMSG_DONE`` alone, which the kernel queues while it hands over the
    first (``netlink_recvmsg()`` runs the next dump round before it returns,
    net/netlink/af_netlink.c); ``recvmsg`` needs a second call for it, one
    more ptrace round trip per namespace, kind and sample in a UML guest."""

    SLOTS = 4

    def __init__(self, fd: int, size: int):
        self.fd = fd
        self.bufs = [ctypes.create_string_buffer(size) for _ in range(self.SLOTS)]
        self.iovs = (_iovec * self.SLOTS)()
        self.msgs = (_mmsghdr * self.SLOTS)()
        for i, buf in enumerate(self.bufs):
            self.iovs[i].iov_base = ctypes.addressof(buf)
            self.iovs[i].iov_len = size
            self.msgs[i].msg_hdr.msg_iov = ctypes.pointer(self.iovs[i])
            self.msgs[i].msg_hdr.msg_iovlen = 1

    def receive(self) -> list[bytes]:
        while True:
            n = _LIBC.recvmmsg(self.fd, self.msgs, self.SLOTS, MSG_WAITFORONE, None)
            if n >= 0:
                break
            err = ctypes.get_errno()
            if err != errno.EINTR:
                raise OSError(err, f"recvmmsg on sock_diag: {errno.errorcode.get(err, err)}")
        out = []
        for i in range(n):
            msg = self.msgs[i]
            if msg.msg_hdr.msg_flags & socket.MSG_TRUNC:
                raise OSError(f"sock_diag reply longer than {len(self.bufs[i])} bytes")
            out.append(ctypes.string_at(self.bufs[i], msg.msg_len))
        return out


def sleep_until(deadline: float) -> None:
    """Sleep until ``deadline`` on the monotonic clock (``time.monotonic()``'s
    clock), at once if it is past: ``clock_nanosleep(TIMER_ABSTIME)``
    without the clock read ``time.sleep()`` makes first."""
    ts = _timespec(int(deadline), int((deadline % 1) * 1e9))
    while (
        _LIBC.clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ctypes.byref(ts), None) == errno.EINTR
    ):
        pass


class Diag:
    """A sock_diag netlink socket in the current network namespace.

    Replies are read into one buffer kept for the socket's life: ``recv(1 <<
    20)`` made Python map, shrink and unmap a fresh 1 MiB buffer for every
    reply, three system calls that change the guest's address space (the
    costliest kind under UML) per reply; strace in a virtual-time guest,
    100 ticks of two namespaces: 6000 system calls, 3000 of them those.  A
    dump's reply comes in netlink messages of at most 32 KiB
    (``NLMSG_GOODSIZE`` up to the 32 KiB cap of ``netlink_dump()``)."""

    BUFFER = 64 * 1024

    def __init__(self, sock: socket.socket | None = None):
        """``sock``: a netlink socket to use (tests give a fake one)."""
        if sock is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
            sock.bind((0, 0))
        self.sock = sock
        self.seq = 0
        self.buf = bytearray(self.BUFFER)
        self.receiver = (
            Receiver(sock.fileno(), self.BUFFER) if isinstance(sock, socket.socket) else None
        )
        self.names: dict[tuple[int, bytes], str] = {}  # (family, raw) -> text: few, repeated

    def dump(self, protocol: int, states: int = ALL_STATES) -> list[tuple[tuple, int, dict]]:
        """[(addresses, state, attributes)] for the IPv4 and IPv6 sockets of
        ``protocol`` in ``states`` (a bit per TCP state; v4-mapped IPv6
        addresses, e.g. of a dual-stack server, are shown as IPv4), IPv4
        sockets first, each family in the kernel's hash order.

        One dump for both families: the first request type of inet_diag,
        ``TCPDIAG_GETSOCK`` with ``struct inet_diag_req``, dumps with the
        family unspecified (net/ipv4/inet_diag.c, ``inet_diag_dump_compat``)
        and takes the same attributes as the newer request
        (``INET_DIAG_REQ_PROTOCOL`` selects MPTCP).  ``SOCK_DIAG_BY_FAMILY``
        needs one dump per family, two system calls more per namespace and
        kind at every sample (one send, one receive): 3600 of the 12,700
        system calls the sampler added to a headline run."""
        self.seq += 1
        req = _REQ_V1.pack(
            socket.AF_UNSPEC,
            0,
            0,
            (1 << (INET_DIAG_INFO - 1)) | (1 << (INET_DIAG_SKMEMINFO - 1)),
            b"\0" * 2,
            b"\0" * 2,
            b"\0" * 16,
            b"\0" * 16,
            0,
            b"\xff" * 8,
            states,
            0,
        )
        if protocol != socket.IPPROTO_TCP:
            req += _RTA.pack(8, INET_DIAG_REQ_PROTOCOL) + struct.pack("=I", protocol)
        msg = _NLMSG.pack(
            _NLMSG.size + len(req), TCPDIAG_GETSOCK, NLM_F_REQUEST | NLM_F_DUMP, self.seq, 0
        )
        self.sock.send(msg + req)
        v4: list[tuple[tuple, int, dict]] = []
        v6: list[tuple[tuple, int, dict]] = []
        while True:
            for data in self._receive():
                if self._parse(data, v4, v6):
                    return v4 + v6

    def _receive(self) -> list[bytes]:
        if self.receiver is not None:
            return self.receiver.receive()
        view = memoryview(self.buf)
        size, _anc, flags, _addr = self.sock.recvmsg_into([view])
        if flags & socket.MSG_TRUNC:
            raise OSError(f"sock_diag reply longer than {len(self.buf)} bytes")
        return [bytes(view[:size])]

    def _parse(self, data: bytes, v4: list, v6: list) -> bool:
        """The sockets of one datagram appended to ``v4`` and ``v6``; True at
        the dump's end."""
        off = 0
        while off + _NLMSG.size <= len(data):
            length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, off)
            if kind == NLMSG_DONE:
                return True
            if kind == NLMSG_ERROR:
                err = struct.unpack_from("=i", data, off + _NLMSG.size)[0]
                raise OSError(-err, f"sock_diag dump failed: {err}")
            body = data[off + _NLMSG.size : off + length]
            fields = _MSG.unpack_from(body)
            family, state = fields[0], fields[1]
            addrs = (
                self._addr(family, fields[6]),
                int.from_bytes(fields[4], "big"),
                self._addr(family, fields[7]),
                int.from_bytes(fields[5], "big"),
            )
            entry = (addrs, state, _attrs(body[_MSG.size :]))
            (v4 if family == socket.AF_INET else v6).append(entry)
            off += (length + 3) & ~3
        return False

    def _addr(self, family: int, raw: bytes) -> str:
        name = self.names.get((family, raw))
        if name is None:
            if family == socket.AF_INET:
                name = socket.inet_ntoa(raw[:4])
            elif raw[:12] == b"\0" * 10 + b"\xff\xff":
                name = socket.inet_ntoa(raw[12:16])
            else:
                name = socket.inet_ntop(socket.AF_INET6, raw)
            if len(self.names) < 4096:
                self.names[(family, raw)] = name
        return name


def subflow_rows(diag: Diag, now: float) -> list[list]:
    rows = []
    for addrs, state, attrs in diag.dump(socket.IPPROTO_TCP, SUBFLOW_STATES):
        if state in (TCP_LISTEN, TCP_TIME_WAIT) or INET_DIAG_INFO not in attrs:
            continue
        info = TCP_FIELDS.values(attrs[INET_DIAG_INFO])
        mp = dict(_NO_SUBFLOW_ATTRS)
        nested = _attrs(attrs.get(INET_DIAG_ULP_INFO, b"")).get(INET_ULP_INFO_MPTCP)
        for akind, value in _attrs(nested or b"").items():
            if akind in SUBFLOW_ATTRS:
                name, fmt = SUBFLOW_ATTRS[akind]
                mp[name] = struct.unpack_from("=" + fmt, value)[0]
        rows.append(
            [
                round(now, 6),
                *addrs,
                state,
                mp["token_loc"],
                mp["token_rem"],
                mp["id_loc"],
                mp["id_rem"],
                *info,
                mp["mptcp_bytes_sent"],
                mp["mptcp_bytes_reinjected"],
                *_meminfo(attrs.get(INET_DIAG_SKMEMINFO)),
            ]
        )
    return rows


def mptcp_rows(diag: Diag, now: float) -> list[list]:
    rows = []
    for addrs, state, attrs in diag.dump(IPPROTO_MPTCP, MPTCP_STATES):
        if state == TCP_LISTEN or INET_DIAG_INFO not in attrs:
            continue
        blob = attrs[INET_DIAG_INFO]
        info = MPTCP_FIELDS.values(blob)
        off, size = MPTCP_SCHEDULER
        sched = blob[off : off + size].split(b"\0")[0].decode() if len(blob) >= off + size else ""
        mem = _meminfo(attrs.get(INET_DIAG_SKMEMINFO))
        rows.append([round(now, 6), *addrs, *info, sched, *mem])
    return rows


def run(
    targets: list[tuple[Path, Diag]],
    ss_interval: float | None,
    mptcp_interval: float | None,
    stop: threading.Event,
    lateness: list[float] | None = None,
) -> None:
    """Sample until ``stop`` is set.

    ``targets`` lists (trace file prefix, Diag) pairs sampled in turn by this
    one loop (one per network namespace): ``<prefix>-subflows.csv``,
    ``<prefix>-mptcp.csv``.  How late each wakeup came (s) is appended to
    ``lateness``: a loaded host shows there.
    """
    files = []
    jobs = []  # (kind, diag, writer)
    # the kinds sampled (an interval of None: off)
    intervals = {k: v for k, v in (("subflows", ss_interval), ("mptcp", mptcp_interval)) if v}
    samplers = {"subflows": subflow_rows, "mptcp": mptcp_rows}
    columns = {"subflows": SUBFLOW_COLUMNS, "mptcp": MPTCP_COLUMNS}
    for out_prefix, target_diag in targets:
        for kind in intervals:
            path = out_prefix.with_name(rundir.sampler_trace(out_prefix.name, kind))
            f = open(path, "w", newline="")  # noqa: SIM115
            files.append(f)
            writer = csv.writer(f)
            writer.writerow(columns[kind])
            jobs.append((kind, target_diag, writer))
    kinds = {kind for kind, _, _ in jobs}
    # Few clock reads per tick: each is a system call in a UML guest.  Wall
    # time is the monotonic clock plus the offset at the start, as the kernel
    # trace's times are (docs/run-dirs.md); an absolute sleep rather than
    # stop.wait(), whose timed lock wait read the clock 7 more times per
    # tick (strace in a guest), so a stop is seen at the next tick; and
    # rather than time.sleep(), which reads the clock to make its deadline
    # (one read a tick, one wait: was three and one).
    offset = time.time() - time.monotonic()
    now_mono = time.monotonic()
    due = {kind: now_mono for kind in kinds}
    try:
        while not stop.is_set():
            ready = {kind for kind in kinds if now_mono >= due[kind]}
            if ready and lateness is not None:
                lateness.append(now_mono - min(due[kind] for kind in ready))
            now = now_mono + offset
            for kind, target_diag, writer in jobs:
                if kind in ready:
                    writer.writerows(samplers[kind](target_diag, now))
            for kind in ready:
                due[kind] += intervals[kind]
                if due[kind] < now_mono:  # fell behind: skip, do not burst
                    due[kind] = now_mono + intervals[kind]
            sleep_until(min(due.values()) if due else now_mono + 1)
            now_mono = time.monotonic()
    finally:
        for f in files:
            f.close()


# the program, built on the host (``campaign.boot``, ``workloads.helpers.native``)
SOURCE = Path(__file__).with_name("sampler.c")
ENV = "MPTLAB_SAMPLER"  # its path in the guest, handed over by the host
PLAN_DIR = Path("/tmp/mptlab-sampler")  # the guest's tmpfs


def plan_text(
    targets: list[tuple[str, Path]],
    ss_interval: float | None,
    mptcp_interval: float | None,
    lateness: Path,
) -> str:
    """The program's plan (``sampler.c`` says what each line is): the field
    tables above, so the program writes the columns this module names.
    ``targets``: (netns path, trace file prefix) in sampling order."""
    size = struct.calcsize
    lines = [
        f"header subflows {','.join(SUBFLOW_COLUMNS)}",
        f"header mptcp {','.join(MPTCP_COLUMNS)}",
        f"interval subflows {round((ss_interval or 0) * 1e6)}",
        f"interval mptcp {round((mptcp_interval or 0) * 1e6)}",
        f"lateness {lateness}",
    ]
    for netns, prefix in targets:
        files = [prefix.with_name(rundir.sampler_trace(prefix.name, k)) for k in _KINDS]
        lines.append(f"target {netns} {files[0]} {files[1]}")
    lines += [f"tcp {off} {size(fmt)}" for off, fmt in TCP_INFO.values()]
    lines += [f"mptcp {off} {size(fmt)}" for off, fmt in MPTCP_INFO.values()]
    lines.append(f"sched {MPTCP_SCHEDULER[0]} {MPTCP_SCHEDULER[1]}")
    by_name = {name: (kind, fmt) for kind, (name, fmt) in SUBFLOW_ATTRS.items()}
    tcp_at = SUBFLOW_COLUMNS.index(next(iter(TCP_INFO)))
    for i, column in enumerate(SUBFLOW_COLUMNS):
        if column in by_name:
            kind, fmt = by_name[column]
            lines.append(f"attr {kind} {size(fmt)} {'post' if i > tcp_at else 'pre'}")
    return "\n".join(lines) + "\n"


_KINDS = ("subflows", "mptcp")


def _netns_path(name: str) -> str:
    """Where ``ip netns`` keeps a namespace (as ``netlab.in_netns`` opens it)."""
    return f"/run/netns/{name}"


class SamplerProcess:
    """``run()`` as a program (``sampler.c``): the same files, the same
    columns, a tick's parsing in C.  ``stop()`` ends it (SIGTERM: it
    finishes its tick) and reads its timer lateness."""

    def __init__(
        self,
        program: str,
        namespaces: dict[str, str],
        trace_dir: Path,
        ss_interval: float | None,
        mptcp_interval: float | None,
        path: str | None = None,
    ):
        """``path``: "uring" or "sync" to ask for one (default: io_uring
        where the kernel has it)."""
        PLAN_DIR.mkdir(parents=True, exist_ok=True)
        self.plan = PLAN_DIR / "plan"
        self.lateness_path = PLAN_DIR / "lateness"
        self.stderr_path = PLAN_DIR / "stderr"
        targets = [(_netns_path(ns), Path(trace_dir) / host) for host, ns in namespaces.items()]
        self.plan.write_text(plan_text(targets, ss_interval, mptcp_interval, self.lateness_path))
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                [program, str(self.plan), *([path] if path else [])], stdout=err, stderr=err
            )
        self.lateness: list[float] = []
        self.error: str | None = None
        self.path: str | None = None  # "uring" or "sync": how it waited and dumped

    def stop(self, timeout: float = 10) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        said = self.stderr_path.read_text()
        first = said.split("\n", 1)[0].split()
        if first[:1] == ["path"] and len(first) == 2:
            self.path = first[1]
        if self.proc.returncode != 0:
            self.error = (
                f"sampler exited with {self.proc.returncode}: {said.strip()[-300:] or 'no output'}"
            )
        try:
            text = self.lateness_path.read_text()
        except FileNotFoundError:
            text = ""
        self.lateness = [float(v) for v in text.split()]


def start(
    namespaces: dict[str, str],
    trace_dir: Path,
    ss_interval: float | None,
    mptcp_interval: float | None,
) -> SamplerProcess | SamplerThread:
    """The sampler: the program if the host handed one over (``$MPTLAB_SAMPLER``),
    else ``SamplerThread`` (no C compiler on the host)."""
    program = os.environ.get(ENV)
    if program:
        return SamplerProcess(program, namespaces, trace_dir, ss_interval, mptcp_interval)
    return SamplerThread(namespaces, trace_dir, ss_interval, mptcp_interval)


class SamplerThread:
    """``run()`` in one thread of the calling process, sampling the namespace of
    every host of ``namespaces`` ({host: netns name}) into ``trace_dir``; the
    netlink sockets are created in their namespaces, no process is spawned."""

    def __init__(
        self,
        namespaces: dict[str, str],
        trace_dir: Path,
        ss_interval: float | None,
        mptcp_interval: float | None,
    ):
        targets = []
        for host, netns in namespaces.items():
            with in_netns(netns):
                targets.append((Path(trace_dir) / host, Diag()))
        self.stop_event = threading.Event()
        self.lateness: list[float] = []
        self.error: str | None = None  # why run() ended early, if it did
        self.thread = threading.Thread(
            target=self._run,
            args=(targets, ss_interval, mptcp_interval),
            daemon=True,
        )
        self.thread.start()

    def _run(self, targets, ss_interval, mptcp_interval) -> None:
        try:
            run(targets, ss_interval, mptcp_interval, self.stop_event, self.lateness)
        except Exception as exc:  # noqa: BLE001 - kept for the result, not lost in a thread
            self.error = f"{type(exc).__name__}: {exc}"

    def stop(self, timeout: float = 10) -> None:
        self.stop_event.set()
        self.thread.join(timeout)


def lateness_summary(lateness: list[float]) -> dict:
    """Timer lateness of the sampling loop in ms: how long the guest waited
    for the host CPU beyond a due wakeup (median, 99th percentile, max, n)."""
    if not lateness:
        return {"n": 0}
    ms = sorted(v * 1000 for v in lateness)

    def pct(q: float) -> float:
        return round(ms[min(len(ms) - 1, int(q * (len(ms) - 1) + 0.5))], 3)

    return {"n": len(ms), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": round(ms[-1], 3)}
