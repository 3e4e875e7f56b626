"""mptlab.analysis.pcap: decoding of hand-built captures (pcap, pcapng, DSS variants),
the metrics on hand-built MPTCP exchanges, and a real capture (a 1 MiB
transfer on the mptlab kernel, tests/data/analysis/results/pcap-small) checked
against the kernel's counters."""

import struct
from pathlib import Path

import pytest

from mptlab.analysis import pcap

DATA = Path(__file__).parent / "data" / "analysis" / "results"
PCAP_RUN = DATA / "pcap-small" / "runs" / "scheduler=blest" / "rep-000"

C1, C2, S1, S2 = "10.0.0.1", "10.0.5.1", "10.0.3.2", "10.0.8.2"
KEY_C, KEY_S = 0x1111222233334444, 0x5555666677778888


def ip(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def dss(dack=None, dsn=None, ssn=0, dlen=0, ack64=True, dsn64=True, fin=False) -> bytes:
    flags, body = 0, b""
    if dack is not None:
        flags |= 0x01 | (0x02 if ack64 else 0)
        body += struct.pack(">Q", dack) if ack64 else struct.pack(">I", dack & 0xFFFFFFFF)
    if dsn is not None:
        flags |= 0x04 | (0x08 if dsn64 else 0)
        body += struct.pack(">Q", dsn) if dsn64 else struct.pack(">I", dsn & 0xFFFFFFFF)
        body += struct.pack(">IH", ssn, dlen)
    if fin:
        flags |= 0x10
    return bytes([30, 4 + len(body), 2 << 4, flags]) + body


def mpc(keys=(), dlen=None) -> bytes:
    body = b"".join(struct.pack(">Q", k) for k in keys)
    if dlen is not None:
        body += struct.pack(">H", dlen)
    return bytes([30, 4 + len(body), (0 << 4) | 1, 0x81]) + body


def join_syn(token: int) -> bytes:
    return bytes([30, 12, 1 << 4, 0]) + struct.pack(">II", token, 0xABCDEF01)


def packet(
    src, dst, sport, dport, seq, ack=0, flags=0x10, payload=0, opts=b"", vlan=False, snap=None
) -> bytes:
    opts = b"\x01\x01" + opts  # NOP NOP first, as Linux does
    opts += b"\x00" * (-len(opts) % 4)
    tcp = (
        struct.pack(
            ">HHIIBBHHH",
            sport,
            dport,
            seq & 0xFFFFFFFF,
            ack & 0xFFFFFFFF,
            (5 + len(opts) // 4) << 4,
            flags,
            500,
            0,
            0,
        )
        + opts
    )
    total = 20 + len(tcp) + payload
    iph = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 1, 0x4000, 64, 6, 0, ip(src), ip(dst))
    eth = b"\x02" * 6 + b"\x04" * 6 + (b"\x81\x00\x00\x05" if vlan else b"") + b"\x08\x00"
    frame = eth + iph + tcp + b"\xaa" * payload
    return frame[:snap] if snap else frame


def write_pcap(
    path: Path, pkts: list[tuple[float, bytes]], nano=False, big=False, orig=None
) -> Path:
    e = ">" if big else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)]
    for t, frame in pkts:
        sec = int(t)
        frac = round((t - sec) * (1e9 if nano else 1e6))
        out.append(struct.pack(e + "IIII", sec, frac, len(frame), orig or len(frame)) + frame)
    path.write_bytes(b"".join(out))
    return path


def write_pcapng(path: Path, pkts: list[tuple[float, bytes]]) -> Path:
    def block(btype: int, body: bytes) -> bytes:
        body += b"\x00" * (-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    # interface with if_tsresol = 9 (nanoseconds)
    out.append(
        block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHB3x", 9, 1, 9) + b"\x00" * 4)
    )
    for t, frame in pkts:
        ticks = round(t * 1e9)
        out.append(
            block(
                6,
                struct.pack("<IIIII", 0, ticks >> 32, ticks & 0xFFFFFFFF, len(frame), len(frame))
                + frame,
            )
        )
    path.write_bytes(b"".join(out))
    return path


def test_decodes_tcp_and_dss_fields(tmp_path):
    pkts = [
        (
            1.5,
            packet(
                S1,
                C1,
                5201,
                40000,
                1000,
                2000,
                0x18,
                1400,
                dss(dack=7, dsn=2**63 + 5, ssn=11, dlen=1400),
            ),
        ),
        (1.75, packet(C1, S1, 40000, 5201, 2000, 2400, 0x10, 0, dss(dack=123456789, ack64=False))),
        (
            2.0,
            packet(
                S1,
                C1,
                5201,
                40000,
                2400,
                2000,
                0x18,
                100,
                dss(dsn=77, ssn=1411, dlen=100, dsn64=False),
                vlan=True,
            ),
        ),
    ]
    for f in (
        write_pcap(tmp_path / "a.pcap", pkts),
        write_pcap(tmp_path / "b.pcap", pkts, nano=True, big=True),
        write_pcapng(tmp_path / "c.pcapng", pkts),
    ):
        pk = pcap.read(f)
        assert len(pk) == 3 and pk.total == 3 and pk.skipped == 0
        assert pk.ts.tolist() == pytest.approx([1.5, 1.75, 2.0], abs=1e-6)
        assert [pcap.ip_str(x) for x in pk.src] == [S1, C1, S1]
        assert pk.sport.tolist() == [5201, 40000, 5201] and pk.seq.tolist() == [1000, 2000, 2400]
        assert pk.paylen.tolist() == [1400, 0, 100]
        assert pk.dss.tolist() == [0x0F, 0x01, 0x04]
        assert int(pk.dack[0]) == 7 and int(pk.dack[1]) == 123456789
        assert int(pk.dsn[0]) == 2**63 + 5 and int(pk.ssn[0]) == 11 and int(pk.dlen[0]) == 1400
        assert int(pk.dsn[2]) == 77 and int(pk.ssn[2]) == 1411


def test_truncated_snaplen_keeps_the_ip_length_and_the_options(tmp_path):
    frame = packet(
        S1, C1, 5201, 40000, 1, 1, 0x18, 1400, dss(dack=1, dsn=9, ssn=1, dlen=1400), snap=128
    )
    pk = pcap.read(write_pcap(tmp_path / "t.pcap", [(1.0, frame)], orig=1400 + 54 + 32))
    assert pk.paylen.tolist() == [1400] and int(pk.dsn[0]) == 9


def test_non_tcp_and_cut_records_are_skipped(tmp_path):
    udp = bytearray(packet(C1, S1, 1, 2, 0))
    udp[14 + 9] = 17  # protocol UDP
    good = packet(C1, S1, 1, 2, 0)
    f = write_pcap(tmp_path / "u.pcap", [(1.0, bytes(udp)), (2.0, good), (3.0, good)])
    f.write_bytes(f.read_bytes()[:-10])  # the capture was still being written
    pk = pcap.read(f)
    assert len(pk) == 1 and pk.total == 2 and pk.skipped == 1


def test_bad_files_are_clear_errors(tmp_path):
    bad = tmp_path / "x.pcap"
    bad.write_bytes(b"GIF89a" + b"\x00" * 40)
    with pytest.raises(pcap.PcapError, match="not a pcap or pcapng file"):
        pcap.read(bad)
    with pytest.raises(pcap.PcapError, match="cannot open"):
        pcap.read(tmp_path / "missing.pcap")
    assert len(pcap.read((tmp_path / "empty.pcap").open("w").name)) == 0


def _exchange():
    """One MPTCP connection, data from server to client over two subflows.

    Subflow A (path 1) carries data bytes [0, 1000) at t=1.0 and [2000, 3000)
    at t=1.1; subflow B (path 2) carries [1000, 2000) at t=0.5 (ahead: it waits
    in the MPTCP OFO queue until t=1.0) and then reinjects [2000, 3000) at
    t=1.2.  Subflow A retransmits its first segment at t=1.3 (a TCP
    retransmission, not a reinjection).
    """
    idsn = pcap.key_idsn(KEY_S)
    token_s = pcap.key_token(KEY_S)
    A, B = (C1, 40000, S1, 5201), (C2, 40001, S2, 5201)
    isn_a, isn_b, isn_ca = 100, 5000, 900

    def s2c(sf, isn, t, rel, n, dsn, ssn):
        c, cp, s, sp = sf
        return (
            t,
            packet(
                s,
                c,
                sp,
                cp,
                isn + rel,
                1,
                0x18,
                n,
                dss(dack=1, dsn=idsn + 1 + dsn, ssn=ssn, dlen=n),
            ),
        )

    pk = [
        (0.0, packet(C1, S1, 40000, 5201, isn_ca, 0, 0x02, 0, mpc())),
        (0.01, packet(S1, C1, 5201, 40000, isn_a, isn_ca + 1, 0x12, 0, mpc([KEY_S]))),
        (0.02, packet(C1, S1, 40000, 5201, isn_ca + 1, isn_a + 1, 0x10, 0, mpc([KEY_C, KEY_S]))),
        (0.1, packet(C2, S2, 40001, 5201, 7000, 0, 0x02, 0, join_syn(token_s))),
        (0.11, packet(S2, C2, 5201, 40001, isn_b, 7001, 0x12, 0)),
        s2c(B, isn_b, 0.5, 1, 1000, 1000, 1),
        s2c(A, isn_a, 1.0, 1, 1000, 0, 1),
        s2c(A, isn_a, 1.1, 1001, 1000, 2000, 1001),
        s2c(B, isn_b, 1.2, 1001, 1000, 2000, 1001),
        s2c(A, isn_a, 1.3, 1, 1000, 0, 1),
    ]
    return sorted(pk, key=lambda p: p[0])


def test_metrics_of_a_hand_built_exchange(tmp_path):
    f = write_pcap(tmp_path / "client-eth0.pcap", _exchange())
    res = pcap.analyze({"client": pcap.read(f)}, [C1, C2], [S1, S2])
    sf = res.subflows[res.subflows.direction == "s2c"].set_index("path")
    assert sf.loc[1, "bytes_wire"] == 3000 and sf.loc[1, "bytes_unique"] == 2000
    assert sf.loc[1, "retrans_segs"] == 1 and sf.loc[1, "retrans_bytes"] == 1000
    assert sf.loc[1, "reinjected_bytes"] == 0
    assert sf.loc[2, "bytes_unique"] == 2000 and sf.loc[2, "retrans_segs"] == 0
    assert sf.loc[2, "reinjected_bytes"] == 1000  # [2000, 3000) was first sent on path 1
    conn = res.connections.set_index("direction").loc["s2c"]
    assert conn["token_b"] == f"{pcap.key_token(KEY_S):08x}" and conn["subflows"] == 2
    assert conn["data_bytes"] == 3000 and conn["reinjected_bytes"] == 1000
    # [1000, 2000) arrived at 0.5 and was in order at 1.0: 1000 bytes held 0.5 s
    assert conn["ofo_bytes_max"] == 1000 and conn["ofo_segs_max"] == 1
    assert conn["hol_bytes"] == 1000 and conn["hol_delay_max_ms"] == pytest.approx(500, abs=0.01)
    for q in (50, 75, 95):  # one held segment: every byte-weighted percentile is its wait
        assert conn[f"hol_delay_p{q}_ms"] == pytest.approx(500, abs=0.01)
    ofo = res.ofo[res.ofo.direction == "s2c"]
    held = ofo[(ofo.t >= 0.5) & (ofo.t < 0.99)]
    assert (held["ofo_bytes"] == 1000).all() and ofo[ofo.t >= 1.0]["ofo_bytes"].eq(0).all()


def fec_option(flags: int, exid: int = 0xFEC0) -> bytes:
    """TCP-dFEC's option (docs/fec.md): kind 253 (RFC 6994), ExID, flags (0x01 ENCODED)."""
    return bytes([253, 6]) + struct.pack(">H", exid) + bytes([flags, 0])


def test_fec_packets_are_neither_data_nor_retransmissions(tmp_path):
    """MPTCP-dFEC: subflow A sends the XOR parity of its block [0, 2000) at
    t=1.15, with a (XORed, meaningless) DSS mapping; the metrics of the
    exchange do not change, the parity is counted apart."""
    idsn = pcap.key_idsn(KEY_S)
    parity = packet(
        S1, C1, 5201, 40000, 100 + 1, 1, 0x18, 1000,
        dss(dack=1, dsn=idsn ^ 0xDEADBEEF, ssn=77, dlen=1000) + fec_option(0x01),
    )  # fmt: skip
    other = packet(S1, C1, 5201, 40000, 100 + 1, 1, 0x18, 1000, fec_option(0x01, exid=0xABCD))
    pk = pcap.read(write_pcap(tmp_path / "x.pcap", [(1.0, parity), (1.1, other)]))
    assert pk.fec_len.tolist() == [1000, 0] and pk.paylen.tolist() == [0, 1000]  # not our ExID
    assert pk.dss.tolist()[0] == 0  # the XORed mapping is not read
    f = write_pcap(tmp_path / "client-eth0.pcap", sorted([*_exchange(), (1.15, parity)]))
    res = pcap.analyze({"client": pcap.read(f)}, [C1, C2], [S1, S2])
    sf = res.subflows[res.subflows.direction == "s2c"].set_index("path")
    assert sf.loc[1, "bytes_wire"] == 3000 and sf.loc[1, "bytes_unique"] == 2000
    assert sf.loc[1, "retrans_segs"] == 1 and sf.loc[1, "reinjected_bytes"] == 0
    assert sf.loc[1, "fec_packets"] == 1 and sf.loc[1, "fec_bytes"] == 1000
    assert sf.loc[2, "fec_packets"] == 0
    conn = res.connections.set_index("direction").loc["s2c"]
    assert conn["data_bytes"] == 3000 and conn["reinjected_bytes"] == 1000
    assert conn["ofo_bytes_max"] == 1000 and conn["hol_delay_max_ms"] == pytest.approx(
        500, abs=0.01
    )


def test_a_missing_handshake_falls_back_to_data_sequence_numbers(tmp_path):
    pk = [p for p in _exchange() if p[0] >= 0.5]  # capture started late: no SYNs, no keys
    res = pcap.analyze(
        {"client": pcap.read(write_pcap(tmp_path / "c.pcap", pk))}, [C1, C2], [S1, S2]
    )
    conn = res.connections.set_index("direction").loc["s2c"]
    assert conn["subflows"] == 2 and conn["data_bytes"] == 3000 and conn["ofo_bytes_max"] == 1000


def check_against_kernel(run_dir: Path) -> dict:
    return pcap.kernel_agreement(run_dir)


def assert_agreement(agree: dict) -> None:
    subs = agree["subflows"]
    assert len(subs) >= 2, "expected a data subflow per path"
    for s in subs:
        # never more than the kernel sent; exact when the capture saw the subflow's FIN
        assert s["pcap"] <= s["kernel"]
        assert s["pcap_retrans"] <= s["kernel_retrans"]
        if s["fin_seen"]:
            assert s["pcap"] == s["kernel"]
    # the capture stops up to ~1 s early: at least 85 % of the bytes, and most subflows exact
    assert sum(s["pcap"] for s in subs) >= 0.85 * sum(s["kernel"] for s in subs)
    assert sum(s["pcap"] == s["kernel"] for s in subs) >= len(subs) / 2
    assert agree["token_match"]
    kern, ours = agree["ofo"]
    # the reconstructed OFO peak is the kernel's: since kernel patch 0002 counts the queue
    # between receive steps only, they agreed to the byte in the four fresh runs of the pcap
    # check (3G + WLAN, minRTT and BLEST, two results roots: 241,000, 566,240, 208,340 and
    # 261,780 bytes; counted within steps the kernel said 879,180 for the first).  Captures
    # have no order among packets of one instant on two interfaces, which the kernel has:
    # 2 % for that.  When a capture ended while bytes were still unresolved the queue is
    # reported up to that moment only, so a later peak can be missed.
    assert kern > 0
    low = 0.98 if agree["ofo_complete"] else 0.8
    assert low * kern <= ours <= 1.01 * kern


def test_a_real_capture_agrees_with_the_kernel_counters():
    assert_agreement(check_against_kernel(PCAP_RUN))
