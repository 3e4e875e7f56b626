"""The sock_diag sampler's parsing, on synthetic netlink replies (no guest):
the request asks for the socket memory (INET_DIAG_SKMEMINFO) and the rows
carry rmem_alloc and rcvbuf, empty (unknown) where a reply lacks them."""

import socket
import struct

from mptlab.guest import sampler
from mptlab.guest.sampler import (
    INET_DIAG_INFO,
    INET_DIAG_SKMEMINFO,
    IPPROTO_MPTCP,
    MPTCP_COLUMNS,
    SOCK_DIAG_BY_FAMILY,
    SUBFLOW_COLUMNS,
    Diag,
    mptcp_rows,
    subflow_rows,
)

TCP_ESTABLISHED = 1


def _rta(kind: int, payload: bytes) -> bytes:
    head = struct.pack("=HH", 4 + len(payload), kind)
    return head + payload + b"\0" * (-len(payload) % 4)


def _msg(payload: bytes, kind: int = SOCK_DIAG_BY_FAMILY, seq: int = 1) -> bytes:
    return struct.pack("=IHHII", 16 + len(payload), kind, 2, seq, 0) + payload


def _diag_msg(src: str, sport: int, dst: str, dport: int, attrs: bytes) -> bytes:
    body = sampler._MSG.pack(
        socket.AF_INET,
        TCP_ESTABLISHED,
        0,
        0,
        struct.pack(">H", sport),
        struct.pack(">H", dport),
        socket.inet_aton(src) + b"\0" * 12,
        socket.inet_aton(dst) + b"\0" * 12,
        0,
        b"\0" * 8,
        0,
        0,
        0,
        0,
        0,
    )
    return _msg(body + attrs)


def _meminfo(rmem_alloc: int, rcvbuf: int) -> bytes:
    # u32[SK_MEMINFO_VARS]: rmem_alloc, rcvbuf, wmem_alloc, sndbuf, fwd_alloc,
    # wmem_queued, optmem, backlog, drops (include/uapi/linux/sock_diag.h)
    return struct.pack("=9I", rmem_alloc, rcvbuf, 11, 22, 33, 44, 55, 66, 77)


def _mptcp_info(ofo_bytes: int, bytes_received: int) -> bytes:
    blob = bytearray(136)
    struct.pack_into("=I", blob, 12, 0xDEADBEEF)  # token
    struct.pack_into("=Q", blob, 64, bytes_received)
    struct.pack_into("=Q", blob, 96, ofo_bytes)
    blob[120:127] = b"default"
    return bytes(blob)


class FakeNetlink:
    """A netlink socket that answers every dump with ``replies`` (IPv4) and an
    empty dump (IPv6), and keeps the requests sent."""

    def __init__(self, replies: bytes):
        self.replies = replies
        self.sent: list[bytes] = []
        self.queue: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        family = data[16]
        done = _msg(struct.pack("=i", 0), kind=sampler.NLMSG_DONE)
        self.queue = [self.replies + done] if family == socket.AF_INET else [done]
        return len(data)

    def recvmsg_into(self, buffers):
        data = self.queue.pop(0)
        buffers[0][: len(data)] = data
        return len(data), [], 0, None


def _diag(replies: bytes) -> tuple[Diag, FakeNetlink]:
    diag = Diag.__new__(Diag)
    fake = FakeNetlink(replies)
    diag.sock = fake  # type: ignore[assignment]
    diag.seq = 0
    diag.buf = bytearray(Diag.BUFFER)
    return diag, fake


def test_every_dump_asks_for_the_socket_memory():
    diag, fake = _diag(b"")
    mptcp_rows(diag, 0.0)
    subflow_rows(diag, 0.0)
    assert len(fake.sent) == 4  # IPv4 and IPv6, MPTCP and TCP
    for req in fake.sent:
        ext = req[16 + 2]  # inet_diag_req_v2.idiag_ext after the netlink header
        assert ext & (1 << (INET_DIAG_INFO - 1)) and ext & (1 << (INET_DIAG_SKMEMINFO - 1))
    assert struct.unpack_from("=I", fake.sent[0], 16 + sampler._REQ.size + 4)[0] == IPPROTO_MPTCP


def test_the_mptcp_rows_carry_the_receivers_allocated_memory():
    replies = _diag_msg(
        "10.0.0.1",
        40000,
        "10.0.3.2",
        5201,
        _rta(INET_DIAG_INFO, _mptcp_info(ofo_bytes=3000, bytes_received=10**6))
        + _rta(INET_DIAG_SKMEMINFO, _meminfo(rmem_alloc=123456, rcvbuf=16 << 20)),
    )
    diag, _ = _diag(replies)
    (row,) = mptcp_rows(diag, 5.0)
    r = dict(zip(MPTCP_COLUMNS, row, strict=True))
    assert r["rmem_alloc"] == 123456 and r["rcvbuf"] == 16 << 20
    assert r["ofo_bytes"] == 3000 and r["bytes_received"] == 10**6
    assert r["scheduler"] == "default" and r["token"] == 0xDEADBEEF
    assert (r["saddr"], r["sport"], r["daddr"], r["dport"]) == ("10.0.0.1", 40000, "10.0.3.2", 5201)


def test_a_reply_without_the_memory_leaves_the_cells_empty_not_zero():
    # a kernel that ignored the request, or a short payload: unknown, not 0
    no_mem = _diag_msg("10.0.0.1", 40000, "10.0.3.2", 5201, _rta(INET_DIAG_INFO, _mptcp_info(0, 1)))
    short = _diag_msg(
        "10.0.0.1",
        40001,
        "10.0.3.2",
        5201,
        _rta(INET_DIAG_INFO, _mptcp_info(0, 1)) + _rta(INET_DIAG_SKMEMINFO, struct.pack("=I", 7)),
    )
    diag, _ = _diag(no_mem + short)
    rows = [dict(zip(MPTCP_COLUMNS, r, strict=True)) for r in mptcp_rows(diag, 0.0)]
    assert [(r["rmem_alloc"], r["rcvbuf"]) for r in rows] == [("", ""), (7, "")]


def test_the_subflow_rows_carry_their_own_memory():
    tcp_info = bytearray(232)
    struct.pack_into("=I", tcp_info, 80, 10)  # cwnd
    replies = _diag_msg(
        "10.0.1.1",
        40002,
        "10.0.3.2",
        5201,
        _rta(INET_DIAG_INFO, bytes(tcp_info)) + _rta(INET_DIAG_SKMEMINFO, _meminfo(4096, 131072)),
    )
    diag, _ = _diag(replies)
    (row,) = subflow_rows(diag, 0.0)
    r = dict(zip(SUBFLOW_COLUMNS, row, strict=True))
    assert r["cwnd"] == 10 and r["rmem_alloc"] == 4096 and r["rcvbuf"] == 131072
