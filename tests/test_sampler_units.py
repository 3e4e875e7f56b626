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


def _diag_msg(
    src: str, sport: int, dst: str, dport: int, attrs: bytes, family: int = socket.AF_INET
) -> bytes:
    def raw(addr: str) -> bytes:
        if family == socket.AF_INET:
            return socket.inet_aton(addr) + b"\0" * 12
        return socket.inet_pton(socket.AF_INET6, addr)

    body = sampler._MSG.pack(
        family,
        TCP_ESTABLISHED,
        0,
        0,
        struct.pack(">H", sport),
        struct.pack(">H", dport),
        raw(src),
        raw(dst),
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
    """A netlink socket that answers every dump with ``replies``, and keeps
    the requests sent."""

    def __init__(self, replies: bytes):
        self.replies = replies
        self.sent: list[bytes] = []
        self.queue: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        done = _msg(struct.pack("=i", 0), kind=sampler.NLMSG_DONE)
        self.queue = [self.replies + done]
        return len(data)

    def recvmsg_into(self, buffers):
        data = self.queue.pop(0)
        buffers[0][: len(data)] = data
        return len(data), [], 0, None


def _diag(replies: bytes) -> tuple[Diag, FakeNetlink]:
    fake = FakeNetlink(replies)
    return Diag(fake), fake  # type: ignore[arg-type]


def test_every_dump_asks_for_the_socket_memory():
    diag, fake = _diag(b"")
    mptcp_rows(diag, 0.0)
    subflow_rows(diag, 0.0)
    assert len(fake.sent) == 2  # one dump each, MPTCP and TCP, both families
    for req in fake.sent:
        assert struct.unpack_from("=H", req, 4)[0] == sampler.TCPDIAG_GETSOCK
        assert req[16] == socket.AF_UNSPEC  # inet_diag_req.idiag_family: both
        ext = req[16 + 3]  # inet_diag_req.idiag_ext after the netlink header
        assert ext & (1 << (INET_DIAG_INFO - 1)) and ext & (1 << (INET_DIAG_SKMEMINFO - 1))
    assert struct.unpack_from("=I", fake.sent[0], 16 + sampler._REQ_V1.size + 4)[0] == IPPROTO_MPTCP
    assert len(fake.sent[1]) == 16 + sampler._REQ_V1.size  # TCP: no protocol attribute


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


def test_the_precompiled_field_sets_read_what_field_by_field_reads():
    # every field of tcp_info and mptcp_info, from a payload of distinct bytes,
    # and a payload too short for the last fields: those cells stay empty
    for table in (sampler.TCP_INFO, sampler.MPTCP_INFO):
        fields = sampler.FieldSet(table)
        blob = bytes(range(256)) + bytes(range(256))
        assert fields.values(blob) == list(sampler._fields(blob, table).values())
        short = blob[: max(off for off, _ in table.values()) - 1]
        got = fields.values(short)
        assert got == list(sampler._fields(short, table).values()) and got[-1] == ""


def test_the_subflow_dump_leaves_listeners_and_closing_sockets_to_the_kernel():
    # the rows never showed them; now the kernel does not send them either
    diag, fake = _diag(b"")
    subflow_rows(diag, 0.0)
    mptcp_rows(diag, 0.0)
    states_at = 16 + sampler._REQ_V1.size - 8  # inet_diag_req.idiag_states
    tcp_states = struct.unpack_from("=I", fake.sent[0], states_at)[0]
    mptcp_states = struct.unpack_from("=I", fake.sent[1], states_at)[0]
    for bit in (10, 6, 12):  # TCP_LISTEN, TCP_TIME_WAIT, TCP_NEW_SYN_RECV
        assert not tcp_states & (1 << bit)
    assert tcp_states & (1 << 1) and mptcp_states & (1 << 1)  # ESTABLISHED asked
    assert not mptcp_states & (1 << 10)


def test_one_dump_gives_both_families_ipv4_first_with_mapped_addresses_as_ipv4():
    info = _rta(INET_DIAG_INFO, _mptcp_info(0, 1))
    replies = (
        _diag_msg("::ffff:10.0.3.2", 5201, "::ffff:10.0.0.1", 40000, info, socket.AF_INET6)
        + _diag_msg("10.0.0.1", 40001, "10.0.3.2", 5201, info)
        + _diag_msg("fd00::1", 40002, "fd00::2", 5201, info, socket.AF_INET6)
    )
    diag, fake = _diag(replies)
    rows = [dict(zip(MPTCP_COLUMNS, r, strict=True)) for r in mptcp_rows(diag, 0.0)]
    assert len(fake.sent) == 1
    assert [(r["saddr"], r["sport"]) for r in rows] == [
        ("10.0.0.1", 40001),
        ("10.0.3.2", 5201),
        ("fd00::1", 40002),
    ]


def test_sleep_until_wakes_at_the_deadline_and_not_before():
    import time

    start = time.monotonic()
    sampler.sleep_until(start + 0.05)
    assert time.monotonic() >= start + 0.05
    start = time.monotonic()
    sampler.sleep_until(start - 10)  # a deadline already past: at once
    assert time.monotonic() - start < 0.05
