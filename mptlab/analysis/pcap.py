"""An MPTCP-aware packet trace reader, vectorised with numpy.

    pk = read("client-eth0.pcap")                  # Packets: one numpy array per field
    res = analyze({"client": [pk0, pk1], "server": [...]},
                  client_addrs=["10.0.0.1", "10.0.5.1"])
    res.subflows, res.connections, res.ofo        # pandas DataFrames

Reading: the file is memory-mapped; the only per-packet Python work is the
walk along the record headers (pcap) or blocks (pcapng) that finds where each
packet starts.  Everything else (link, IPv4 and TCP headers, the TCP option
list, MPTCP MP_CAPABLE / MP_JOIN / DSS options) is decoded with numpy over
chunks of up to a million packets, from a fixed window of each packet's first
bytes gathered into a 2-D array.  Only IPv4/TCP packets are kept.

Analysis (:func:`analyze`):

- subflows are grouped into MPTCP connections by the MP_CAPABLE keys and the
  MP_JOIN tokens (SHA-1 of the keys, RFC 8684), falling back to overlapping
  data sequence numbers when the handshake was not captured;
- each data segment gets its data sequence number from its DSS mapping
  (``dsn + (subflow_seq - ssn)``), also for segments that carry no DSS option
  but fall inside the subflow's last mapping;
- per subflow and capture host: packets, payload bytes on the wire, unique
  subflow bytes (the sequence space covered), TCP retransmissions (segments
  below the highest sequence already sent), TCP-dFEC's FEC packets (option
  253, ExID 0xFEC0, ENCODED: parity, counted apart, never as data or as a
  retransmission; docs/fec.md), and MPTCP reinjections (data
  bytes already carried by an earlier *first* transmission under another
  subflow mapping; redundant copies count as reinjections too);
- at the receiver (the capture host that owns the destination address): the
  subflow-level in-order time of each byte (TCP reassembly), then the
  MPTCP-level in-order time (data reassembly); a byte sits in the MPTCP
  out-of-order queue from the first time it is in order on its subflow until
  the data level is contiguous up to it.  Bytes the capture missed are
  taken as arrived when the receiver's (data) ACK covered them.  This gives
  the OFO queue occupancy over time and each byte's head-of-line delay.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import mmap
import struct
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..rundir import RunDir, kernel_token

# link types
LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_LINUX_SLL2 = 276
_L3_OFFSET = {
    LINKTYPE_NULL: 4,
    LINKTYPE_ETHERNET: 14,
    LINKTYPE_RAW: 0,
    LINKTYPE_IPV4: 0,
    LINKTYPE_LINUX_SLL: 16,
    LINKTYPE_LINUX_SLL2: 20,
}

# TCP flags
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10

# MPTCP option subtypes and DSS flags (RFC 8684)
MP_CAPABLE, MP_JOIN, DSS = 0, 1, 2
DSS_A, DSS_a, DSS_M, DSS_m, DSS_F = 0x01, 0x02, 0x04, 0x08, 0x10

# TCP-dFEC's option (docs/fec.md): RFC 6994 experimental option 253 with
# ExID 0xFEC0; the byte after the ExID holds its flags, 0x01 = ENCODED (an
# FEC packet: XOR parity of a block, not data)
FEC_KIND, FEC_EXID, FEC_ENCODED = 253, 0xFEC0, 0x01

CHUNK = 1 << 20  # packets decoded at once
WINDOW = 18 + 60 + 60  # bytes per packet gathered: link (<=18) + IPv4 (<=60) + TCP (<=60)
U32 = 1 << 32


class PcapError(ValueError):
    """A file that is not a readable pcap/pcapng capture."""


FIELDS = {
    "ts": np.float64,  # epoch seconds
    "src": np.uint32,  # IPv4 addresses as integers
    "dst": np.uint32,
    "sport": np.uint16,
    "dport": np.uint16,
    "seq": np.uint32,
    "ack": np.uint32,
    "flags": np.uint8,
    "win": np.uint16,
    "paylen": np.int64,  # TCP payload bytes (from the IP total length, not the snap length)
    "mp_sub": np.int8,  # subtype of the MP_CAPABLE/MP_JOIN option, -1 for none
    "mp_ver": np.uint8,  # MP_CAPABLE version (0 or 1)
    "dss": np.uint8,  # DSS flags (0: no DSS option)
    "dack": np.uint64,  # data ACK (if dss & DSS_A; 32-bit if not dss & DSS_a)
    "dsn": np.uint64,  # mapping's data sequence number (if dss & DSS_M; 32-bit if not DSS_m)
    "ssn": np.uint32,  # mapping's relative subflow sequence number
    "dlen": np.uint16,  # mapping's data-level length
    "key_a": np.uint64,  # MP_CAPABLE sender's key (0: absent)
    "key_b": np.uint64,  # MP_CAPABLE receiver's key (0: absent)
    "token": np.uint32,  # MP_JOIN SYN: the receiver's token (0: absent)
    "fec_len": np.int64,  # TCP-dFEC FEC packet: its parity payload (paylen is then 0), else 0
}


@dataclass
class Packets:
    """IPv4/TCP packets as a struct of numpy arrays (see ``FIELDS``)."""

    cols: dict[str, np.ndarray]
    total: int = 0  # records in the file(s), TCP or not
    skipped: int = 0  # records that were not IPv4/TCP or were cut short
    source: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.cols["ts"])

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.cols[name]
        except KeyError:
            raise AttributeError(name) from None

    @staticmethod
    def empty() -> Packets:
        return Packets({k: np.zeros(0, t) for k, t in FIELDS.items()})

    @staticmethod
    def concat(parts: list[Packets], sort: bool = True) -> Packets:
        """Packets of several captures (e.g. a host's interfaces) in time order."""
        if not parts:
            return Packets.empty()
        cols = {k: np.concatenate([p.cols[k] for p in parts]) for k in FIELDS}
        if sort and len(parts) > 1:
            order = np.argsort(cols["ts"], kind="stable")
            cols = {k: v[order] for k, v in cols.items()}
        return Packets(
            cols,
            sum(p.total for p in parts),
            sum(p.skipped for p in parts),
            [s for p in parts for s in p.source],
        )

    def select(self, mask: np.ndarray) -> Packets:
        return Packets(
            {k: v[mask] for k, v in self.cols.items()}, self.total, self.skipped, self.source
        )

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.cols)
        df["src"] = [ip_str(x) for x in df["src"]] if len(df) < 100_000 else df["src"]
        df["dst"] = [ip_str(x) for x in df["dst"]] if len(df) < 100_000 else df["dst"]
        return df


def ip_int(addr: str) -> int:
    a, b, c, d = (int(x) for x in addr.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def ip_str(x: int) -> str:
    x = int(x)
    return f"{x >> 24}.{(x >> 16) & 255}.{(x >> 8) & 255}.{x & 255}"


# --------------------------------------------------------------------- reading
def _walk_pcap(buf, start: int, endian: str) -> np.ndarray:
    """Offsets of the record headers of a pcap file (the one sequential step)."""
    unpack = struct.Struct(endian + "I").unpack_from
    offs = array("q")
    append = offs.append
    off, end = start, len(buf) - 16
    while off <= end:
        (incl,) = unpack(buf, off + 8)
        append(off)
        off += 16 + incl
    out = np.frombuffer(offs, dtype=np.int64) if len(offs) else np.zeros(0, np.int64)
    # a record cut short by the end of the file (capture still running) is dropped
    if len(out):
        last_incl = struct.unpack_from(endian + "I", buf, int(out[-1]) + 8)[0]
        if out[-1] + 16 + last_incl > len(buf):
            out = out[:-1]
    return out


def _walk_pcapng(buf, path: str):
    """Enhanced packet blocks of a pcapng file: (offsets, interface ids, per-interface
    (linktype, seconds per tick), byte order per packet)."""
    offs = array("q")
    ifaces = array("q")
    iface_info: list[tuple[int, float]] = []
    base = 0  # index of this section's first interface in iface_info
    off, n = 0, len(buf)
    endian = "<"
    while off + 12 <= n:
        btype = struct.unpack_from(endian + "I", buf, off)[0]
        if btype == 0x0A0D0D0A:  # section header: byte order may change
            magic = buf[off + 8 : off + 12]
            if magic == b"\x4d\x3c\x2b\x1a":
                endian = "<"
            elif magic == b"\x1a\x2b\x3c\x4d":
                endian = ">"
            else:
                raise PcapError(
                    f"{path}: pcapng section header at byte {off} has a bad byte-order magic"
                )
            base = len(iface_info)
        blen = struct.unpack_from(endian + "I", buf, off + 4)[0]
        if blen < 12 or blen % 4:
            raise PcapError(f"{path}: pcapng block at byte {off} has an invalid length {blen}")
        if off + blen > n:
            break  # cut short
        if btype == 1:  # interface description
            linktype = struct.unpack_from(endian + "H", buf, off + 8)[0]
            resol = 1e-6
            p = off + 16
            while p + 4 <= off + blen - 4:
                code, olen = struct.unpack_from(endian + "HH", buf, p)
                if code == 0:
                    break
                if code == 9 and olen >= 1:  # if_tsresol
                    v = buf[p + 4]
                    resol = 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0**-v
                p += 4 + (olen + 3) // 4 * 4
            iface_info.append((linktype, resol))
        elif btype == 6:  # enhanced packet
            offs.append(off)
            ifaces.append(base + struct.unpack_from(endian + "I", buf, off + 8)[0])
        off += blen
    if endian == ">":
        raise PcapError(f"{path}: big-endian pcapng is not supported")
    return (
        np.frombuffer(offs, np.int64) if len(offs) else np.zeros(0, np.int64),
        np.frombuffer(ifaces, np.int64) if len(ifaces) else np.zeros(0, np.int64),
        iface_info,
    )


def _be(cols: np.ndarray) -> np.ndarray:
    """Big-endian unsigned integers from a (n, k) uint8 array."""
    out = np.zeros(len(cols), np.uint64)
    for j in range(cols.shape[1]):
        out = (out << np.uint64(8)) | cols[:, j].astype(np.uint64)
    return out


def _le(cols: np.ndarray) -> np.ndarray:
    return _be(cols[:, ::-1])


def _gather(data: np.ndarray, rows_start: np.ndarray, width: int) -> np.ndarray:
    """``data[s : s + width]`` for every start, as rows of a (n, width) array (zero-padded
    past the end).  Rows are copied from a strided view: one memcpy per row."""
    out = np.zeros((len(rows_start), width), np.uint8)
    if len(data) >= width:
        fits = rows_start <= len(data) - width
        out[fits] = np.lib.stride_tricks.sliding_window_view(data, width)[rows_start[fits]]
    else:
        fits = np.zeros(len(rows_start), bool)
    for i in np.nonzero(~fits)[0]:  # the last record(s) of the file
        chunk = data[rows_start[i] : rows_start[i] + width]
        out[i, : len(chunk)] = chunk
    return out


def _take(mat: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """``mat[i, pos[i] : pos[i] + width]`` for every row.  Past the row's end the bytes
    come from the next row (or zeros): callers only read fields the row's own
    lengths and flags say are there."""
    n, w = mat.shape
    flat = np.concatenate([np.ascontiguousarray(mat).ravel(), np.zeros(width, mat.dtype)])
    start = np.arange(n, dtype=np.int64) * w + np.clip(pos.astype(np.int64), 0, w)
    return np.lib.stride_tricks.sliding_window_view(flat, width)[start]


def read(path: str | Path) -> Packets:
    """The IPv4/TCP packets of a pcap or pcapng file."""
    path = Path(path)
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise PcapError(f"{path}: cannot open: {exc.strerror}") from None
    with f:
        size = path.stat().st_size
        if size == 0:
            return Packets(Packets.empty().cols, source=[str(path)])
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return _read_buf(buf, str(path))
        finally:
            # arrays of a failed read may still point into it; then GC closes it
            with contextlib.suppress(BufferError):
                buf.close()


def _read_buf(buf, path: str) -> Packets:
    data = np.frombuffer(buf, dtype=np.uint8)
    if len(buf) < 24 and buf[:4] != b"\x0a\x0d\x0d\x0a":
        raise PcapError(f"{path}: too short for a pcap header ({len(buf)} bytes)")
    magic = bytes(buf[:4])
    if magic in (
        b"\xd4\xc3\xb2\xa1",
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\xc3\xd4",
        b"\xa1\xb2\x3c\x4d",
    ):
        endian = "<" if magic[0] in (0xD4, 0x4D) else ">"
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        linktype = struct.unpack_from(endian + "I", buf, 20)[0] & 0x0FFFFFFF
        rec = _walk_pcap(buf, 24, endian)
        hdr = _gather(data, rec, 16)
        conv = _le if endian == "<" else _be
        sec = conv(hdr[:, 0:4]).astype(np.float64)
        frac = conv(hdr[:, 4:8]).astype(np.float64)
        ts = sec + frac * (1e-9 if nano else 1e-6)
        caplen = conv(hdr[:, 8:12]).astype(np.int64)
        start = rec + 16
        linktypes = np.full(len(rec), linktype, np.int64)
    elif magic == b"\x0a\x0d\x0d\x0a":
        blk, iface, info = _walk_pcapng(buf, path)
        if len(blk) and (iface.max() >= len(info)):
            raise PcapError(
                f"{path}: packet block names interface {iface.max()} that was never described"
            )
        hdr = _gather(data, blk, 28)
        hi = _le(hdr[:, 12:16])
        lo = _le(hdr[:, 16:20])
        ticks = (hi << np.uint64(32)) | lo
        resol = np.array([r for _, r in info] or [1e-6])[iface]
        # seconds + fraction, keeping precision for nanosecond clocks
        per_sec = np.round(1.0 / resol).astype(np.uint64)
        ts = (ticks // per_sec).astype(np.float64) + (ticks % per_sec).astype(np.float64) * resol
        caplen = _le(hdr[:, 20:24]).astype(np.int64)
        start = blk + 28
        linktypes = np.array([lt for lt, _ in info] or [1], np.int64)[iface]
    else:
        raise PcapError(
            f"{path}: not a pcap or pcapng file (magic {magic.hex()}); "
            "allowed: pcap (tcpdump -w) or pcapng"
        )
    parts = []
    for i in range(0, len(start), CHUNK):
        sl = slice(i, i + CHUNK)
        parts.append(_decode(data, start[sl], caplen[sl], ts[sl], linktypes[sl]))
    pk = Packets.concat(parts, sort=False) if parts else Packets.empty()
    pk.total = len(start)
    pk.skipped = len(start) - len(pk)
    pk.source = [path]
    return pk


def _decode(data, start, caplen, ts, linktypes) -> Packets:
    """The IPv4/TCP packets of one chunk of records (the others skipped) and their
    TCP, MPTCP (DSS, MP_CAPABLE, MP_JOIN) and TCP-dFEC fields, column-wise."""
    P = _gather(data, start, WINDOW)
    # bytes past a packet's captured length belong to the next record: every field read
    # below is guarded by caplen (headers) or by the captured option length (options)
    ok, IP, ihl, pos4 = _ipv4_tcp(P, _l3_offsets(P, linktypes), caplen)
    keep = np.nonzero(ok)[0]
    P, IP, pos4, caplen = P[keep], IP[keep], pos4[keep], caplen[keep]
    T = _take(P, pos4, 60)
    doff = (T[:, 12] >> 4).astype(np.int64) * 4
    cols = _tcp_columns(ts[keep], IP, ihl[keep], T, doff)
    avail = np.minimum(doff, caplen - pos4)  # option bytes actually captured
    dss_pos, mpc_pos, fec = _walk_options(T, doff, avail)
    _dss_columns(cols, T, dss_pos)
    _mp_capable_columns(cols, T, mpc_pos)
    # ---- TCP-dFEC: an FEC packet carries parity, not data, and its DSS option
    # is XORed too (MPTCP-dFEC).  It counts neither as data nor as a
    # retransmission: its payload moves to fec_len, its DSS option is ignored
    if fec.any():
        cols["fec_len"][fec] = cols["paylen"][fec]
        cols["paylen"][fec] = 0
        cols["dss"][fec] = 0
    return Packets(cols)


def _l3_offsets(P: np.ndarray, linktypes: np.ndarray) -> np.ndarray:
    """Where each record's IPv4 header starts (-1: not IPv4, or a link type mptlab
    does not read), from its link-layer header (Ethernet with one VLAN tag, Linux
    cooked v1 and v2, raw IP)."""
    l3 = np.full(len(P), -1, np.int64)
    for lt, off in _L3_OFFSET.items():
        l3[linktypes == lt] = off
    eth = linktypes == LINKTYPE_ETHERNET
    if eth.any():
        etype = (P[:, 12].astype(np.int64) << 8) | P[:, 13]
        vlan = eth & (etype == 0x8100)
        etype = np.where(vlan, (P[:, 16].astype(np.int64) << 8) | P[:, 17], etype)
        l3 = np.where(vlan, 18, l3)
        l3 = np.where(eth & (etype != 0x0800), -1, l3)
    sll = linktypes == LINKTYPE_LINUX_SLL
    if sll.any():
        proto = (P[:, 14].astype(np.int64) << 8) | P[:, 15]
        l3 = np.where(sll & (proto != 0x0800), -1, l3)
    sll2 = linktypes == LINKTYPE_LINUX_SLL2
    if sll2.any():
        proto = (P[:, 0].astype(np.int64) << 8) | P[:, 1]
        l3 = np.where(sll2 & (proto != 0x0800), -1, l3)
    return l3


def _ipv4_tcp(P: np.ndarray, l3: np.ndarray, caplen: np.ndarray):
    """(which records are unfragmented IPv4 TCP with a captured TCP header, their IP
    headers, IP header lengths and TCP header offsets), every record."""
    ok = l3 >= 0
    pos3 = np.where(ok, l3, 0)
    IP = _take(P, pos3, 20)
    ihl = (IP[:, 0] & 0x0F).astype(np.int64) * 4
    ok &= ((IP[:, 0] >> 4) == 4) & (ihl >= 20) & (IP[:, 9] == 6)
    frag_off = ((IP[:, 6].astype(np.int64) & 0x1F) << 8) | IP[:, 7]
    ok &= frag_off == 0
    pos4 = pos3 + ihl
    ok &= caplen >= pos4 + 20
    return ok, IP, ihl, pos4


_MPTCP_FIELDS = (
    "mp_sub",
    "mp_ver",
    "dss",
    "dack",
    "dsn",
    "ssn",
    "dlen",
    "key_a",
    "key_b",
    "token",
    "fec_len",
)


def _tcp_columns(ts, IP, ihl, T, doff) -> dict[str, np.ndarray]:
    """The IP and TCP header fields, and the MPTCP ones zeroed (``mp_sub`` -1)."""
    iplen = (IP[:, 2].astype(np.int64) << 8) | IP[:, 3]
    cols = {
        "ts": ts,
        "src": _be(IP[:, 12:16]).astype(np.uint32),
        "dst": _be(IP[:, 16:20]).astype(np.uint32),
        "sport": _be(T[:, 0:2]).astype(np.uint16),
        "dport": _be(T[:, 2:4]).astype(np.uint16),
        "seq": _be(T[:, 4:8]).astype(np.uint32),
        "ack": _be(T[:, 8:12]).astype(np.uint32),
        "flags": T[:, 13].copy(),
        "win": _be(T[:, 14:16]).astype(np.uint16),
        "paylen": np.maximum(iplen - ihl - doff, 0),
    }
    for k in _MPTCP_FIELDS:
        cols[k] = np.zeros(len(T), FIELDS[k])
    cols["mp_sub"][:] = -1
    return cols


def _walk_options(T: np.ndarray, doff: np.ndarray, avail: np.ndarray):
    """Walk all packets' TCP option lists in lock-step (at most 40 options each):
    (offset of the DSS option or -1, offset of MP_CAPABLE/MP_JOIN or -1, whether
    the packet carries an encoded TCP-dFEC option) per packet."""
    m = len(T)
    rows = np.nonzero(doff > 20)[0]
    cur = np.full(len(rows), 20, np.int64)
    end = avail[rows]
    dss_pos = np.full(m, -1, np.int64)
    mpc_pos = np.full(m, -1, np.int64)
    fec = np.zeros(m, bool)
    for _ in range(40):
        active = cur < end
        if not active.any():
            break
        rows, cur, end = rows[active], cur[active], end[active]
        kind = T[rows, np.minimum(cur, 59)]
        olen = T[rows, np.minimum(cur + 1, 59)].astype(np.int64)
        eol = kind == 0
        nop = kind == 1
        bad = ~nop & ~eol & ((olen < 2) | (cur + olen > end))
        mp = (kind == 30) & ~bad
        if mp.any():
            r, c = rows[mp], cur[mp]
            sub = T[r, np.minimum(c + 2, 59)] >> 4
            d = sub == DSS
            dss_pos[r[d]] = c[d]
            j = (sub == MP_CAPABLE) | (sub == MP_JOIN)
            mpc_pos[r[j]] = c[j]
        fo = (kind == FEC_KIND) & (olen >= 5) & ~bad
        if fo.any():
            r, c = rows[fo], cur[fo]
            exid = (T[r, np.minimum(c + 2, 59)].astype(np.int64) << 8) | T[r, np.minimum(c + 3, 59)]
            enc = (exid == FEC_EXID) & ((T[r, np.minimum(c + 4, 59)] & FEC_ENCODED) != 0)
            fec[r[enc]] = True
        step = np.where(nop, 1, olen)
        cur = np.where(eol | bad, end, cur + step)
    return dss_pos, mpc_pos, fec


def _dss_columns(cols: dict, T: np.ndarray, dss_pos: np.ndarray) -> None:
    """The DSS option's flags, data ACK and mapping (DSN, SSN, length), in place."""
    r = np.nonzero(dss_pos >= 0)[0]
    if not len(r):
        return
    D = _take(T[r], dss_pos[r], 28)
    fl = D[:, 3] & 0x1F
    a_present = (fl & DSS_A) != 0
    a8 = (fl & DSS_a) != 0
    m_present = (fl & DSS_M) != 0
    m8 = (fl & DSS_m) != 0
    dack = np.where(a8, _be(D[:, 4:12]), _be(D[:, 4:8]))
    p = 4 + np.where(a_present, np.where(a8, 8, 4), 0)
    X = _take(D, p, 16)
    dsn = np.where(m8, _be(X[:, 0:8]), _be(X[:, 0:4]))
    q = np.where(m8, 8, 4)
    Y = _take(X, q, 6)
    cols["dss"][r] = fl
    cols["dack"][r] = np.where(a_present, dack, 0)
    cols["dsn"][r] = np.where(m_present, dsn, 0)
    cols["ssn"][r] = np.where(m_present, _be(Y[:, 0:4]), 0).astype(np.uint32)
    cols["dlen"][r] = np.where(m_present, _be(Y[:, 4:6]), 0).astype(np.uint16)


def _mp_capable_columns(cols: dict, T: np.ndarray, mpc_pos: np.ndarray) -> None:
    """MP_CAPABLE's version and keys, MP_JOIN's token (SYN), in place; MPTCP v1's
    data on the third ACK gets the mapping its MP_CAPABLE implies."""
    r = np.nonzero(mpc_pos >= 0)[0]
    if not len(r):
        return
    D = _take(T[r], mpc_pos[r], 24)
    olen = D[:, 1].astype(np.int64)
    sub = (D[:, 2] >> 4).astype(np.int8)
    cols["mp_sub"][r] = sub
    cols["mp_ver"][r] = np.where(sub == MP_CAPABLE, D[:, 2] & 0x0F, 0)
    cap = sub == MP_CAPABLE
    cols["key_a"][r] = np.where(cap & (olen >= 12), _be(D[:, 4:12]), 0)
    cols["key_b"][r] = np.where(cap & (olen >= 20), _be(D[:, 12:20]), 0)
    syn = (cols["flags"][r] & (SYN | ACK)) == SYN
    cols["token"][r] = np.where((sub == MP_JOIN) & syn & (olen >= 12), _be(D[:, 4:8]), 0).astype(
        np.uint32
    )
    # MPTCP v1: data on the third ACK carries MP_CAPABLE with a data-level length
    # instead of a DSS; its mapping starts at IDSN + 1 and subflow sequence 1
    with_data = np.nonzero(cap & (olen >= 22) & (cols["paylen"][r] > 0) & (cols["dss"][r] == 0))[0]
    for j in with_data:
        i = r[j]
        cols["dss"][i] = DSS_M | DSS_m
        idsn = key_idsn(int(cols["key_a"][i]), int(cols["mp_ver"][i]))
        cols["dsn"][i] = (idsn + 1) % (1 << 64)
        cols["ssn"][i] = 1
        cols["dlen"][i] = (int(D[j, 20]) << 8) | int(D[j, 21])


# ------------------------------------------------------------------- analysis
def _digest(key: int, version: int) -> bytes:
    data = int(key).to_bytes(8, "big")
    return hashlib.sha1(data).digest() if version == 0 else hashlib.sha256(data).digest()


def key_token(key: int, version: int = 1) -> int:
    """The 32-bit token of an MPTCP key: the most significant 32 bits of its hash
    (SHA-256 for MPTCP v1, RFC 8684; SHA-1 for v0, RFC 6824)."""
    return int.from_bytes(_digest(key, version)[:4], "big")


def key_idsn(key: int, version: int = 1) -> int:
    """The initial data sequence number of an MPTCP key (least significant 64 bits of its hash)."""
    return int.from_bytes(_digest(key, version)[-8:], "big")


def _unwrap32(x: np.ndarray) -> np.ndarray:
    """32-bit sequence numbers (in time order) as monotone-ish 64-bit integers."""
    x = x.astype(np.int64)
    if len(x) < 2:
        return x
    d = np.diff(x)
    step = (d < -(1 << 31)).astype(np.int64) - (d > (1 << 31)).astype(np.int64)
    return x + np.concatenate([[0], np.cumsum(step)]) * U32


def _expand32(vals: np.ndarray, is64: np.ndarray) -> np.ndarray:
    """Expand 32-bit values to 64 bits next to the last 64-bit value seen (time order)."""
    vals = vals.astype(np.uint64)
    if is64.all() or not is64.any():
        return vals
    idx = np.where(is64, np.arange(len(vals)), -1)
    idx = np.maximum.accumulate(idx)
    idx = np.where(idx < 0, np.argmax(is64), idx)
    ref = vals[idx].astype(np.int64).astype(np.float64)  # only the high part matters
    refi = vals[idx]
    cand = (refi & np.uint64(0xFFFFFFFF00000000)) | (vals & np.uint64(0xFFFFFFFF))
    c = cand.astype(np.float64)
    cand = np.where(c - ref > 2**31, cand - np.uint64(U32), cand)
    cand = np.where(ref - c > 2**31, cand + np.uint64(U32), cand)
    return np.where(is64, vals, cand)


def _union_bytes(starts: np.ndarray, ends: np.ndarray) -> int:
    if not len(starts):
        return 0
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[s[0]], reach[:-1]])
    return int((np.maximum(e, prev) - np.maximum(s, prev)).clip(min=0).sum() + 0)


def _elementary(starts, ends, times):
    """Split the union of [starts, ends) at every boundary; for each elementary
    interval the earliest time of a segment covering it (inf: a hole) and the
    index of that segment (-1 for holes)."""
    b = np.unique(np.concatenate([starts, ends]))
    if len(b) < 2:
        return b, np.zeros(0), np.zeros(0, np.int64)
    si = np.searchsorted(b, starts)
    ei = np.searchsorted(b, ends)
    cnt = ei - si
    seg = np.repeat(np.arange(len(starts)), cnt)
    elem = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(si, cnt)
    t = times[seg]
    order = np.lexsort((t, elem))
    elem, t, seg = elem[order], t[order], seg[order]
    first = np.ones(len(elem), bool)
    first[1:] = elem[1:] != elem[:-1]
    earliest = np.full(len(b) - 1, np.inf)
    first_seg = np.full(len(b) - 1, -1, np.int64)
    earliest[elem[first]] = t[first]
    first_seg[elem[first]] = seg[first]
    return b, earliest, first_seg


def _fill_holes(b, earliest, ack_t, ack_v):
    """Holes (bytes never seen) count as arrived when a cumulative ACK covered them."""
    holes = ~np.isfinite(earliest)
    if holes.any() and len(ack_t):
        cum = np.maximum.accumulate(ack_v)
        k = np.searchsorted(cum, b[1:][holes], side="left")
        earliest = earliest.copy()
        earliest[holes] = np.where(k < len(ack_t), ack_t[np.minimum(k, len(ack_t) - 1)], np.inf)
    return earliest


def _in_order_times(b, earliest):
    """Time at which each elementary interval is in order (running max of arrivals)."""
    return np.maximum.accumulate(earliest) if len(earliest) else earliest


@dataclass
class PcapResult:
    subflows: pd.DataFrame
    connections: pd.DataFrame
    ofo: pd.DataFrame
    packets: int
    skipped: int


SUBFLOW_COLUMNS = [
    "host",
    "conn",
    "subflow",
    "saddr",
    "sport",
    "daddr",
    "dport",
    "direction",
    "path",
    "packets",
    "data_packets",
    "bytes_wire",
    "bytes_unique",
    "bytes_mapped",
    "retrans_segs",
    "retrans_bytes",
    "reinjected_bytes",
    "fec_packets",
    "fec_bytes",
    "fin_seen",
    "first_ts",
    "last_ts",
]
CONNECTION_COLUMNS = [
    "conn",
    "token_a",
    "token_b",
    "direction",
    "sender",
    "receiver",
    "subflows",
    "data_bytes",
    "reinjected_bytes",
    "ofo_bytes_max",
    "ofo_segs_max",
    "hol_bytes",
    "hol_delay_mean_ms",
    "hol_delay_p50_ms",
    "hol_delay_p75_ms",
    "hol_delay_p95_ms",
    "hol_delay_max_ms",
    "unresolved_bytes",
    "valid_until",
    "receiver_capture",
]
OFO_COLUMNS = ["conn", "direction", "t", "ofo_bytes", "ofo_bytes_max", "hol_delay_max_ms"]


def analyze(
    captures: Mapping[str, list[Packets] | Packets],
    client_addrs=(),
    server_addrs=(),
    bin_s: float = 0.01,
) -> PcapResult:
    """Per-subflow and per-connection metrics and the receiver's OFO queue over time.

    ``captures`` maps a capture host (e.g. ``client``) to its captures (one per
    interface).  ``client_addrs``/``server_addrs`` (in path order) name the
    directions (``c2s``/``s2c``) and each subflow's path; without them the
    direction is relative to the subflow's initiator (``fwd``/``rev``).
    """
    hosts = {h: Packets.concat(v if isinstance(v, list) else [v]) for h, v in captures.items()}
    caddr = [ip_int(a) for a in client_addrs]
    saddr = [ip_int(a) for a in server_addrs]
    host_addrs: dict[str, set[int]] = {}
    if caddr:
        host_addrs["client"] = set(caddr)
    if saddr:
        host_addrs["server"] = set(saddr)
    # address sets of the capture hosts, also learnt from the captures (src of SYNs etc. is
    # not enough); a host named like a role gets that role's addresses
    conns = _connections(hosts, caddr)
    sub_rows, conn_rows, ofo_parts = [], [], []
    for h, pk in hosts.items():
        sub_rows += _subflow_stats(h, pk, conns, caddr, saddr)
    everything = None
    for cid, info in conns.items():
        for direction in info["directions"]:
            recv_host = _receiver_host(hosts, info, direction, host_addrs)
            if recv_host:
                pk = hosts[recv_host]
            else:  # capture host unknown: every capture, merged once
                if everything is None:
                    everything = (
                        next(iter(hosts.values()))
                        if len(hosts) == 1
                        else Packets.concat(list(hosts.values()))
                    )
                pk = everything
            row, ofo = _reassemble(pk, info, direction, bin_s)
            row.update(
                conn=cid,
                token_a=info["token_a"],
                token_b=info["token_b"],
                direction=direction,
                receiver_capture=recv_host or "all",
            )
            conn_rows.append(row)
            if ofo is not None and row["ofo_bytes_max"] > 0:
                ofo_parts.append(ofo.assign(conn=cid, direction=direction))
    subflows = pd.DataFrame(sub_rows, columns=SUBFLOW_COLUMNS)
    connections = pd.DataFrame(conn_rows, columns=CONNECTION_COLUMNS)
    if len(subflows):
        reinj = subflows.groupby(["conn", "direction"])["reinjected_bytes"].max()
        # reinjections seen by the sender's capture (the max over capture hosts)
        connections["reinjected_bytes"] = [
            int(
                subflows[(subflows.conn == c) & (subflows.direction == d)]
                .groupby("host")["reinjected_bytes"]
                .sum()
                .max()
            )
            if (c, d) in reinj.index
            else 0
            for c, d in zip(connections["conn"], connections["direction"], strict=True)
        ]
    ofo = (
        pd.concat(ofo_parts, ignore_index=True)[OFO_COLUMNS]
        if ofo_parts
        else pd.DataFrame(columns=OFO_COLUMNS)
    )
    total = sum(p.total for p in hosts.values())
    skipped = sum(p.skipped for p in hosts.values())
    return PcapResult(subflows, connections, ofo, total, skipped)


def _subflow_ids(pk: Packets):
    a = (pk.src.astype(np.uint64) << np.uint64(16)) | pk.sport.astype(np.uint64)
    b = (pk.dst.astype(np.uint64) << np.uint64(16)) | pk.dport.astype(np.uint64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return lo, hi, a


def _flows(pk: Packets) -> dict:
    """The packets of each 4-tuple, grouped once per capture (sorted, not a scan per flow):
    {"a": sending endpoint per packet, "sel": {(lo, hi): packet indices in time order}}."""
    cached = pk.__dict__.get("_flows")
    if cached is not None:
        return cached
    lo, hi, a = _subflow_ids(pk)
    key = lo * np.uint64(0x9E3779B97F4A7C15) ^ hi
    codes, uniq = pd.factorize(key)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(uniq) + 1))
    sel = {}
    for k in range(len(uniq)):
        idx = order[bounds[k] : bounds[k + 1]]
        sel[(int(lo[idx[0]]), int(hi[idx[0]]))] = idx
    out = {"a": a, "sel": sel}
    pk.__dict__["_flows"] = out
    return out


def _connections(hosts: dict[str, Packets], caddr: list[int]) -> dict:
    """Group subflows (4-tuples) into MPTCP connections.

    Returns {conn_id: {"subflows": {(lo, hi): initiator_endpoint}, "keys": (ka, kb),
    "token_a", "token_b", "idsn": {direction: idsn or None}, "directions": [...],
    "side_a": set of endpoints of the MP_CAPABLE initiator}}.

    In three passes over the 4-tuples (sorted, so connection ids do not depend on
    the capture order): MP_CAPABLE subflows open connections, MP_JOIN subflows
    join theirs by token, and data subflows whose handshake was not captured are
    attached by the overlap of their data sequence numbers.
    """
    tuples = _tuple_info(hosts, caddr)
    conns: dict[int, dict] = {}
    token_to_conn: dict[int, tuple[int, str]] = {}
    _open_connections(tuples, conns, token_to_conn)
    _join_subflows(tuples, conns, token_to_conn)
    # a data subflow whose handshake was missed: attach by DSN overlap
    for t, d in sorted(tuples.items()):
        if not d["mp"] or d["token"] or any(t in c["subflows"] for c in conns.values()):
            continue
        hit = _match_by_dsn(conns, d)
        if hit:
            conns[hit[0]]["subflows"][t] = d["init"]
    for c in conns.values():
        c["caddr"] = caddr
        c["directions"] = _directions(c, caddr)
        c["idsn"] = {}
        for direction in ("c2s", "s2c", "fwd", "rev"):
            key = _direction_key(c, direction)
            c["idsn"][direction] = key_idsn(key, c.get("version", 1)) if key else None
    return conns


def _merge_dsn(into: dict, dsn: dict) -> None:
    """Widen the data sequence ranges per sending endpoint of ``into`` by ``dsn``'s."""
    for ep, (lo_v, hi_v) in dsn.items():
        old = into.get(ep)
        into[ep] = (min(lo_v, old[0]), max(hi_v, old[1])) if old else (lo_v, hi_v)


def _tuple_info(hosts: dict[str, Packets], caddr: list[int]) -> dict[tuple[int, int], dict]:
    """Per 4-tuple over every capture: initiator and responder endpoint, MPTCP
    version and keys, MP_JOIN token, DSN range per sending endpoint."""
    tuples: dict[tuple[int, int], dict] = {}
    for pk in hosts.values():
        if not len(pk):
            continue
        fl = _flows(pk)
        for t, sel in fl["sel"].items():
            d = tuples.setdefault(
                t,
                {"init": None, "ka": 0, "kb": 0, "token": 0, "mp": False, "dsn": {}, "payload": {}},
            )
            _scan_tuple(d, pk, fl["a"], sel)
    for t, d in tuples.items():
        if d["init"] is None:  # no SYN captured: the client side initiates
            d["init"] = t[0] if (t[0] >> 16) in caddr else (t[1] if (t[1] >> 16) in caddr else t[0])
        d["resp"] = t[1] if d["init"] == t[0] else t[0]
    return tuples


def _scan_tuple(d: dict, pk: Packets, a: np.ndarray, sel: np.ndarray) -> None:
    """Add what one capture shows of a 4-tuple (packets ``sel``) to its record ``d``."""
    flags = pk.flags[sel]
    syn = np.nonzero((flags & (SYN | ACK)) == SYN)[0]
    if len(syn) and d["init"] is None:
        d["init"] = int(a[sel[syn[0]]])
    mps = pk.mp_sub[sel]
    if (mps >= 0).any() or (pk.dss[sel] != 0).any():
        d["mp"] = True
    cap = sel[(mps == MP_CAPABLE)]
    if len(cap):
        d["ver"] = int(pk.mp_ver[cap[0]])
    for i in cap:
        ka, kb = int(pk.key_a[i]), int(pk.key_b[i])
        src_ep = int(a[i])
        if kb:  # third ACK: sender's key, receiver's key
            d["keys_from"] = (src_ep, ka, kb)
        elif ka and (pk.flags[i] & (SYN | ACK)) == (SYN | ACK):
            d.setdefault("synack_key", (src_ep, ka))
        elif ka and (pk.flags[i] & SYN):
            d.setdefault("syn_key", (src_ep, ka))  # MPTCP v0: key in the SYN
    tok = pk.token[sel]
    if (tok != 0).any():
        d["token"] = int(tok[tok != 0][0])
    m = sel[(pk.dss[sel] & DSS_M) != 0]
    for ep in np.unique(a[m]) if len(m) else []:
        v = pk.dsn[m][a[m] == ep]
        _merge_dsn(d["dsn"], {int(ep): (int(v.min()), int(v.max()))})


def _handshake_keys(d: dict) -> tuple[int, int]:
    """(initiator's key, responder's key) of a 4-tuple, 0 where not captured."""
    init_key = resp_key = 0
    if "keys_from" in d:
        ep, k1, k2 = d["keys_from"]
        init_key, resp_key = (k1, k2) if ep == d["init"] else (k2, k1)
    else:
        if "synack_key" in d:
            resp_key = d["synack_key"][1]
        if "syn_key" in d:
            init_key = d["syn_key"][1]
    return init_key, resp_key


def _open_connections(tuples: dict, conns: dict, token_to_conn: dict) -> None:
    """A connection per MPTCP 4-tuple without a join token (its first subflow);
    one without captured keys joins a connection of the same data sequence space."""
    for t, d in sorted(tuples.items()):
        if not d["mp"] or d["token"]:
            continue
        init_key, resp_key = _handshake_keys(d)
        if not (init_key or resp_key or d["dsn"]):
            continue  # e.g. an MP_CAPABLE SYN that fell back to TCP
        if not (init_key or resp_key):
            hit = _match_by_dsn(conns, d)  # handshake not captured: same data sequence space?
            if hit is not None:
                conns[hit[0]]["subflows"][t] = d["init"]
                _merge_dsn(conns[hit[0]]["dsn"], d["dsn"])
                continue
        ver = d.get("ver", 1)
        ta = key_token(init_key, ver) if init_key else None
        tb = key_token(resp_key, ver) if resp_key else None
        nid = len(conns)
        conns[nid] = {
            "subflows": {t: d["init"]},
            "key_a": init_key,
            "key_b": resp_key,
            "token_a": f"{ta:08x}" if ta is not None else None,
            "token_b": f"{tb:08x}" if tb is not None else None,
            "side_a": {d["init"]},
            "dsn": dict(d["dsn"]),
            "version": ver,
        }
        if ta is not None:
            token_to_conn[ta] = (nid, "a")
        if tb is not None:
            token_to_conn[tb] = (nid, "b")


def _join_subflows(tuples: dict, conns: dict, token_to_conn: dict) -> None:
    """MP_JOIN subflows to their connection: the token in the MP_JOIN SYN is the
    receiver's (the responder's) token; a connection whose MP_CAPABLE handshake
    was not captured is opened from the token alone."""
    for t, d in sorted(tuples.items()):
        if not d["token"]:
            continue
        hit = token_to_conn.get(d["token"])
        if hit is None:
            hit = _match_by_dsn(conns, d)
        if hit is None:  # its connection's MP_CAPABLE handshake was not captured
            nid = len(conns)
            conns[nid] = {
                "subflows": {},
                "key_a": 0,
                "key_b": 0,
                "token_a": None,
                "token_b": f"{d['token']:08x}",
                "side_a": set(),
                "dsn": {},
                "version": 1,
            }
            token_to_conn[d["token"]] = hit = (nid, "b")
        cid, side = hit
        conns[cid]["subflows"][t] = d["init"]
        # the join's responder owns the token: if that is side b, the initiator is side a
        if side == "b":
            conns[cid]["side_a"].add(d["init"])
        else:
            conns[cid]["side_a"].add(d["resp"])
        _merge_dsn(conns[cid]["dsn"], d["dsn"])


def _match_by_dsn(conns: dict, d: dict):
    for cid, c in conns.items():
        for _ep, (lo_v, hi_v) in d["dsn"].items():
            for lo2, hi2 in c["dsn"].values():
                if lo_v <= hi2 + (1 << 26) and lo2 <= hi_v + (1 << 26):
                    return cid, "?"
    return None


def _dir_of(c: dict, src_ep: np.ndarray) -> np.ndarray:
    """Direction labels of packets (by sending endpoint (ip << 16 | port))."""
    if c["caddr"]:
        ips = (src_ep >> np.uint64(16)).astype(np.uint32)
        return np.where(np.isin(ips, np.array(c["caddr"], np.uint32)), "c2s", "s2c")
    return np.where(np.isin(src_ep, np.array(sorted(c["side_a"]), np.uint64)), "fwd", "rev")


def _directions(c: dict, caddr) -> list[str]:
    dirs = set()
    for ep in c["dsn"]:
        dirs.add(str(_dir_of(c, np.array([ep], np.uint64))[0]))
    return sorted(dirs)


def _direction_key(c: dict, direction: str) -> int:
    """The MPTCP key of the sender of ``direction`` (its IDSN numbers that data)."""
    if direction in ("fwd", "rev"):
        return c["key_a"] if direction == "fwd" else c["key_b"]
    # c2s: is the client side a?
    a_is_client = any(((ep >> 16) in c["caddr"]) for ep in c["side_a"])
    if direction == "c2s":
        return c["key_a"] if a_is_client else c["key_b"]
    return c["key_b"] if a_is_client else c["key_a"]


def _receiver_host(hosts, info, direction, host_addrs) -> str | None:
    want = "server" if direction == "c2s" else "client" if direction == "s2c" else None
    if want and want in hosts:
        return want
    return None


def _per_subflow(pk: Packets, conns: dict):
    """(conn id, subflow index, 4-tuple, packet indices, sending endpoints) for every
    MPTCP subflow of ``conns`` in pk."""
    if not len(pk):
        return
    fl = _flows(pk)
    for cid, c in conns.items():
        for sfi, t in enumerate(c["subflows"]):
            sel = fl["sel"].get(t)
            if sel is not None:
                yield cid, sfi, t, sel, fl["a"]


def _direction_packets(pk: Packets, sel: np.ndarray, a: np.ndarray, ep: int):
    """Indices (time order) of the packets of one subflow direction and its
    relative sequence numbers (unwrapped; the SYN is at 0)."""
    idx = sel[a[sel] == np.uint64(ep)]
    if not len(idx):
        return idx, np.zeros(0, np.int64)
    seq = pk.seq[idx]
    syn = np.nonzero(pk.flags[idx] & SYN)[0]
    if len(syn):
        isn = int(seq[syn[0]])
    else:
        # put the first mapping's start at its subflow sequence number
        m = np.nonzero((pk.dss[idx] & DSS_M) != 0)[0]
        first = int(seq[m[0]]) - int(pk.ssn[idx[m[0]]]) if len(m) else int(seq[0]) - 1
        isn = first % U32
    rel = _unwrap32((seq.astype(np.int64) - isn) % U32)
    return idx, rel


def _data_seq(pk: Packets, idx: np.ndarray, rel: np.ndarray, idsn: int | None):
    """Data sequence number of the first payload byte of every packet (or -1),
    relative to the direction's IDSN + 1 (first data byte = 0) when known."""
    has_map = (pk.dss[idx] & DSS_M) != 0
    dsn = _expand32(pk.dsn[idx], (pk.dss[idx] & DSS_m) != 0)
    ssn = pk.ssn[idx].astype(np.int64)
    dlen = pk.dlen[idx].astype(np.int64)
    # forward-fill the last mapping on this subflow direction
    last = np.where(has_map, np.arange(len(idx)), -1)
    last = np.maximum.accumulate(last) if len(last) else last
    valid = last >= 0
    li = np.maximum(last, 0)
    m_dsn, m_ssn, m_len = dsn[li], ssn[li], dlen[li]
    # ssn is 32-bit relative; align it with the unwrapped relative sequence
    m_ssn = m_ssn + (rel[li] - m_ssn + (1 << 31)) // U32 * U32
    inside = valid & (rel >= m_ssn) & (rel < m_ssn + np.maximum(m_len, 1))
    off = rel - m_ssn
    base = np.uint64(((idsn + 1) % (1 << 64)) if idsn is not None else 0)
    d = (m_dsn - base).astype(np.int64) + off  # wraps modulo 2**64 as intended
    return np.where(inside, d, -1)


def _subflow_stats(host: str, pk: Packets, conns: dict, caddr, saddr) -> list[dict]:
    """One row per MPTCP subflow direction in ``host``'s capture (``SUBFLOW_COLUMNS``)."""
    rows = []
    per_dir: dict[tuple[int, str], list] = {}
    for cid, sfi, t, sel, a in _per_subflow(pk, conns):
        c = conns[cid]
        for ep in (t[0], t[1]):
            idx, rel = _direction_packets(pk, sel, a, ep)
            if not len(idx):
                continue
            direction = str(_dir_of(c, np.array([ep], np.uint64))[0])
            pay = pk.paylen[idx]
            data = pay > 0
            s, e = rel[data], rel[data] + pay[data]
            prev = np.concatenate([[-(1 << 62)], np.maximum.accumulate(e)[:-1]]) if len(e) else e
            rb = np.clip(np.minimum(e, prev) - s, 0, None)
            retrans = rb > 0
            dseq = _data_seq(pk, idx, rel, c["idsn"].get(direction))[data]
            other = t[1] if ep == t[0] else t[0]
            row = {
                "host": host,
                "conn": cid,
                "subflow": sfi,
                "saddr": ip_str(ep >> 16),
                "sport": ep & 0xFFFF,
                "daddr": ip_str(other >> 16),
                "dport": other & 0xFFFF,
                "direction": direction,
                "path": _path_of(ep >> 16, other >> 16, caddr, saddr),
                "packets": len(idx),
                "data_packets": int(data.sum()),
                "bytes_wire": int(pay.sum()),
                "bytes_unique": _union_bytes(s, e),
                "bytes_mapped": int(pay[data][dseq >= 0].sum()),
                "retrans_segs": int(retrans.sum()),
                "retrans_bytes": int(rb.sum()),
                "reinjected_bytes": 0,
                "fec_packets": int((pk.fec_len[idx] > 0).sum()),
                "fec_bytes": int(pk.fec_len[idx].sum()),
                "fin_seen": bool((pk.flags[idx] & (FIN | RST)).any()),
                "first_ts": float(pk.ts[idx[0]]),
                "last_ts": float(pk.ts[idx[-1]]),
            }
            rows.append(row)
            first_tx = ~retrans & (dseq >= 0)
            per_dir.setdefault((cid, direction), []).append(
                (
                    row,
                    dseq[first_tx],
                    dseq[first_tx] + pay[data][first_tx],
                    pk.ts[idx][data][first_tx],
                )
            )
    for parts in per_dir.values():
        _reinjections(parts)
    return rows


def _path_of(src_ip: int, dst_ip: int, caddr, saddr) -> int | None:
    """The path (1-based) of a subflow: the position of its first address found in
    the client's, else the server's addresses (path order); None if neither."""
    for addrs in (caddr, saddr):
        for addr in (src_ip, dst_ip):
            if addr in addrs:
                return addrs.index(addr) + 1
    return None


def _reinjections(parts: list) -> None:
    """Per subflow of one connection direction (``parts``: its row and the data
    ranges and times of its first transmissions), the data bytes whose earliest
    first transmission was on another subflow, in the row's ``reinjected_bytes``."""
    if not parts:
        return
    starts = np.concatenate([p[1] for p in parts])
    ends = np.concatenate([p[2] for p in parts])
    times = np.concatenate([p[3] for p in parts])
    owner = np.concatenate([np.full(len(p[1]), i) for i, p in enumerate(parts)])
    if not len(starts):
        return
    b, earliest, first_seg = _elementary(starts, ends, times)
    si = np.searchsorted(b, starts)
    ei = np.searchsorted(b, ends)
    cnt = ei - si
    seg = np.repeat(np.arange(len(starts)), cnt)
    elem = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(si, cnt)
    dup = first_seg[elem] != seg
    size = (b[elem + 1] - b[elem])[dup]
    sums = np.bincount(owner[seg[dup]], weights=size, minlength=len(parts))
    for i, p in enumerate(parts):
        p[0]["reinjected_bytes"] = int(sums[i])


def _reassemble(pk: Packets, c: dict, direction: str, bin_s: float):
    """The receiver's view of one connection direction: subflow reassembly, then
    data-level reassembly; OFO occupancy and head-of-line delay."""
    row: dict[str, Any] = {
        "sender": None,
        "receiver": None,
        "subflows": len(c["subflows"]),
        "data_bytes": 0,
        "ofo_bytes_max": 0,
        "ofo_segs_max": 0,
        "hol_bytes": 0,
        "hol_delay_mean_ms": None,
        "hol_delay_p50_ms": None,
        "hol_delay_p75_ms": None,
        "hol_delay_p95_ms": None,
        "hol_delay_max_ms": None,
        "unresolved_bytes": 0,
        "valid_until": None,
    }
    d_s, d_e, d_t, dack_t, dack_v, last_seen = _data_intervals(pk, c, direction, row)
    if not d_s or not sum(len(x) for x in d_s):
        return row, None
    s, e, t = np.concatenate(d_s), np.concatenate(d_e), np.concatenate(d_t)
    b, earliest, _ = _elementary(s, e, t)
    if dack_t:
        at, av = np.concatenate(dack_t), np.concatenate(dack_v)
        o = np.argsort(at, kind="stable")
        earliest = _fill_holes(b, earliest, at[o], av[o])
    ready = _in_order_times(b, earliest)
    size = np.diff(b)
    arrived = np.isfinite(earliest)
    ok = np.isfinite(ready) & arrived
    row["unresolved_bytes"] = int(size[~ok].sum())
    row["data_bytes"] = int(size[ok].sum())
    # Bytes that arrived but wait for data the capture never shows stay in the queue.  Once
    # one data subflow's capture has ended while bytes are unresolved, the queue is no
    # longer known: the occupancy is reported up to the earliest such end only.
    valid_until = min(last_seen) if row["unresolved_bytes"] and last_seen else math.inf
    row["valid_until"] = valid_until if math.isfinite(valid_until) else None
    held = arrived & (ready > earliest) & (earliest <= valid_until)
    gone = held & np.isfinite(ready)
    ev_t, occ, segs = _ofo_events(earliest, ready, size, held, gone)
    in_window = ev_t <= valid_until
    row["ofo_bytes_max"] = int(occ[in_window].max()) if in_window.any() else 0
    row["ofo_segs_max"] = int(segs[in_window].max()) if in_window.any() else 0
    held = gone  # head-of-line delays: bytes with a known in-order time
    delay = ready[held] - earliest[held]
    _hol_delays(row, delay, size[held])
    # binned time series over the connection's data
    t0 = float(np.min(earliest[ok])) if ok.any() else 0.0
    t1 = min(float(np.max(ready[ok])) if ok.any() else 0.0, valid_until)
    ofo = _ofo_series(t0, t1, bin_s, ev_t, occ, in_window, ready[held], delay)
    return row, ofo


def _data_intervals(pk: Packets, c: dict, direction: str, row: dict):
    """Every data subflow of ``direction``, reassembled at the subflow level: the
    data-level intervals [start, end) with the time each was in order on its
    subflow, the receiver's data ACKs (time, value relative to the IDSN + 1) and
    the time each subflow's capture ends.  Sets ``row``'s sender and receiver."""
    idsn = c["idsn"].get(direction)
    peer_idsn_base = np.uint64(((idsn + 1) % (1 << 64)) if idsn is not None else 0)
    d_s, d_e, d_t = [], [], []
    dack_t, dack_v = [], []
    last_seen: list[float] = []
    for _cid, _sfi, t, sel, a in _per_subflow(pk, {0: c}):
        for ep in (t[0], t[1]):
            if str(_dir_of(c, np.array([ep], np.uint64))[0]) != direction:
                continue
            other = t[1] if ep == t[0] else t[0]
            row["sender"], row["receiver"] = ip_str(ep >> 16), ip_str(other >> 16)
            idx, rel = _direction_packets(pk, sel, a, ep)
            ridx = sel[a[sel] == np.uint64(other)]  # the receiver's packets (ACKs)
            if not len(idx):
                continue
            data = pk.paylen[idx] > 0
            if not data.any():
                continue
            last_seen.append(float(pk.ts[sel[-1]]))
            ds, de, dt = _subflow_in_order(pk, idx, rel, ridx, idsn)
            d_s.append(ds)
            d_e.append(de)
            d_t.append(dt)
            # the receiver's data ACKs (for holes at the data level)
            if len(ridx):
                has = (pk.dss[ridx] & DSS_A) != 0
                if has.any():
                    v = _expand32(pk.dack[ridx][has], (pk.dss[ridx][has] & DSS_a) != 0)
                    dack_t.append(pk.ts[ridx][has])
                    dack_v.append((v - peer_idsn_base).astype(np.int64))
    return d_s, d_e, d_t, dack_t, dack_v, last_seen


def _subflow_in_order(pk: Packets, idx, rel, ridx, idsn: int | None):
    """One subflow direction (packets ``idx``, relative sequence numbers ``rel``; the
    receiver's packets ``ridx``): its elementary intervals mapped to data sequence
    numbers, and the time each was in order on the subflow (holes filled by the
    receiver's cumulative ACKs)."""
    pay = pk.paylen[idx]
    data = pay > 0
    dseq = _data_seq(pk, idx, rel, idsn)
    s, e, tt = rel[data], rel[data] + pay[data], pk.ts[idx][data]
    ds = dseq[data]
    # subflow-level: in-order time of every elementary interval
    b, earliest, first_seg = _elementary(s, e, tt)
    if len(ridx):
        syn = np.nonzero(pk.flags[idx] & SYN)[0]
        isn = (
            int(pk.seq[idx][syn[0]]) if len(syn) else (int(pk.seq[idx][data][0]) - int(s[0])) % U32
        )
        acks = pk.flags[ridx] & ACK != 0
        ack_rel = _unwrap32((pk.ack[ridx][acks].astype(np.int64) - isn) % U32)
        earliest = _fill_holes(b, earliest, pk.ts[ridx][acks], ack_rel)
    ready = _in_order_times(b, earliest)
    # map elementary subflow intervals to data sequence numbers
    seg = np.where(first_seg >= 0, first_seg, 0)
    off = np.where(ds[seg] >= 0, ds[seg] - s[seg], -1)
    mapped = (first_seg >= 0) & (ds[seg] >= 0) & np.isfinite(ready)
    return (b[:-1] + off)[mapped], (b[1:] + off)[mapped], ready[mapped]


def _ofo_events(earliest, ready, size, held, gone):
    """The OFO queue as events: +size at arrival, -size when in order (at equal
    times, removals first); (event times, bytes queued, segments queued)."""
    ev_t = np.concatenate([earliest[held], ready[gone]])
    ev_v = np.concatenate([size[held], -size[gone]])
    ev_n = np.concatenate([np.ones(held.sum(), np.int64), -np.ones(gone.sum(), np.int64)])
    o = np.lexsort((ev_v, ev_t))  # at equal times, removals first
    ev_t, ev_v, ev_n = ev_t[o], ev_v[o], ev_n[o]
    return ev_t, np.cumsum(ev_v), np.cumsum(ev_n)


def _hol_delays(row: dict, delay: np.ndarray, w: np.ndarray) -> None:
    """Head-of-line delay of the bytes held (``delay``, weights ``w`` bytes): mean,
    byte-weighted percentiles and maximum in ms, in ``row``."""
    row["hol_bytes"] = int(w.sum())
    if not len(delay):
        return
    row["hol_delay_mean_ms"] = float(np.average(delay, weights=w) * 1000)
    o2 = np.argsort(delay)
    cw = np.cumsum(w[o2])
    # byte-weighted percentiles: the MPT-BM paper's buffer delay counts
    # 1024-byte units (its Table II), i.e. weights every byte the same
    for q in (50, 75, 95):
        q_at = min(int(np.searchsorted(cw, q / 100 * cw[-1])), len(o2) - 1)
        row[f"hol_delay_p{q}_ms"] = float(delay[o2][q_at] * 1000)
    row["hol_delay_max_ms"] = float(delay.max() * 1000)


def _ofo_series(t0, t1, bin_s, ev_t, occ, in_window, ready_held, delay) -> pd.DataFrame:
    """The OFO queue per ``bin_s`` bin from t0 to t1: its level at the bin's end, its
    maximum in the bin, and the largest head-of-line delay of bytes in order then."""
    nb = max(1, int(np.ceil((t1 - t0) / bin_s)) + 1)
    edges = t0 + np.arange(nb) * bin_s
    if len(ev_t):
        k = np.clip(((ev_t[in_window] - t0) / bin_s).astype(np.int64), 0, nb - 1)
        mx = np.zeros(nb)
        np.maximum.at(mx, k, occ[in_window])
        last_k = np.searchsorted(ev_t, edges + bin_s, side="right") - 1
        level = np.where(last_k >= 0, occ[np.maximum(last_k, 0)], 0)
        mx = np.maximum(mx, level)  # a level held through the bin
        hk = ((ready_held - t0) / bin_s).astype(np.int64)
        keep = (hk >= 0) & (hk < nb)
        hol = np.zeros(nb)
        np.maximum.at(hol, hk[keep], delay[keep] * 1000)
    else:
        mx = level = hol = np.zeros(nb)
    return pd.DataFrame(
        {
            "t": edges,
            "ofo_bytes": level.astype(np.int64),
            "ofo_bytes_max": mx.astype(np.int64),
            "hol_delay_max_ms": hol,
        }
    )


def run_captures(run_dir: Path) -> dict[str, list[Packets]]:
    """A run dir's captures by host (files ``traces/<host>-<dev>.pcap``)."""
    caps: dict[str, list[Packets]] = {}
    for f in sorted(RunDir(run_dir).traces.glob("*.pcap*")):
        host = f.name.split(".")[0].rsplit("-", 1)[0] if "-" in f.name else "capture"
        caps.setdefault(host, []).append(read(f))
    return caps


def kernel_agreement(run_dir: Path) -> dict:
    """The captures of a run against its kernel counters (result.json).

    Per data subflow (kernel bytes_sent >= 10 kB of the sending connection):
    kernel bytes and TCP retransmissions, the capture's unique subflow bytes
    (best capture host) and retransmitted segments (sender's capture), and
    whether a FIN or RST of the subflow was captured; and the receiver's OFO
    maximum from the kernel and from the reconstruction.  A capture can only
    miss packets (tcpdump loses what is still in its buffer when stopped), so
    the capture's counts are at most the kernel's.
    """
    run_dir = Path(run_dir)
    res_json = RunDir(run_dir).result() or {}
    k = res_json["kernel"]
    addrs = res_json["addresses"]
    res = analyze(run_captures(run_dir), addrs["client"], addrs["server"])
    sender = max(k["connections"], key=lambda c: c["bytes_sent"])
    receiver = max(k["connections"], key=lambda c: c["bytes_received"])
    conn = res.connections.sort_values("data_bytes", ascending=False).iloc[0]
    subflows: list[dict] = []
    out = {
        "run": str(run_dir),
        "token_match": kernel_token(sender["token"]) in (conn["token_a"], conn["token_b"]),
        "subflows": subflows,
        "ofo": (receiver["ofo_bytes_max"], int(conn["ofo_bytes_max"])),
        "ofo_complete": conn["valid_until"] is None or pd.isna(conn["valid_until"]),
        "reinjected": (sender["bytes_reinjected"], int(conn["reinjected_bytes"])),
    }
    sf = res.subflows
    for s in k["subflows"]:
        if kernel_token(s["token"]) != kernel_token(sender["token"]) or s["bytes_sent"] < 10_000:
            continue
        mine = sf[
            (sf.saddr == s["saddr"])
            & (sf.sport == s["sport"])
            & (sf.daddr == s["daddr"])
            & (sf.dport == s["dport"])
        ]
        if not len(mine):
            subflows.append(
                {
                    "path": s["path"],
                    "kernel": s["bytes_sent"],
                    "pcap": 0,
                    "kernel_retrans": s["tcp_retrans"],
                    "pcap_retrans": 0,
                    "fin_seen": False,
                }
            )
            continue
        best = mine.loc[mine["bytes_unique"].idxmax()]
        # retransmissions are visible at the sender (the receiver never sees a lost original)
        at_sender = mine[mine.host == ("server" if s["saddr"] in addrs["server"] else "client")]
        subflows.append(
            {
                "path": s["path"],
                "kernel": s["bytes_sent"],
                "pcap": int(best["bytes_unique"]),
                "kernel_retrans": s["tcp_retrans"],
                "pcap_retrans": int(at_sender["retrans_segs"].max()) if len(at_sender) else 0,
                "fin_seen": bool(mine["fin_seen"].any()),
            }
        )
    return out
