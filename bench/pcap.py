"""The MPTCP pcap reader (analysis/pcap.py) against tshark, and its agreement
with the kernel counters.

    python -m bench.run pcap

1. Runs tests/data/analysis/pcap-campaign.yaml (4 MiB over 3G + WLAN, minRTT
   and BLEST, tcpdump on every client and server interface) unless
   ``MPTLAB_BENCH_PCAP_CAMPAIGN`` names an existing campaign dir, and checks
   each run's captures against its kernel counters.
2. Builds a large capture (``MPTLAB_BENCH_PCAP_MB``, default 2048 MB) by
   repeating the largest real capture with shifted timestamps and client
   ports (each copy is its own set of connections), checks on the real capture
   that both tools extract identical fields, then times extracting the same
   fields from the large file: tshark ``-T fields`` against ``mptlab.analysis.pcap.read``,
   and the full analysis (``mptlab.analysis.pcap.analyze``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

import mptlab
from mptlab.analysis import pcap

from .report import write_section

WORK = Path(os.environ.get("MPTLAB_BENCH_DIR", "/var/tmp/mptlab-bench-pcap"))
SIZE_MB = int(os.environ.get("MPTLAB_BENCH_PCAP_MB", "2048"))
REPO = Path(__file__).resolve().parent.parent
CAMPAIGN_FILE = REPO / "tests" / "data" / "analysis" / "pcap-campaign.yaml"
SERVER_PORT = 5201

TSHARK_FIELDS = [
    "frame.time_epoch",
    "ip.src",
    "ip.dst",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.flags",
    "tcp.len",
    "tcp.options.mptcp.rawdataseqno",
    "tcp.options.mptcp.subflowseqno",
    "tcp.options.mptcp.datalvllen",
    "tcp.options.mptcp.rawdataack",
]


# tshark's best case for plain field extraction: its sequence analysis, reassembly and
# MPTCP analysis off (with them on it is ~1.7x slower and its memory grows with the file)
TSHARK_OFF = [
    "tcp.analyze_sequence_numbers",
    "tcp.relative_sequence_numbers",
    "tcp.track_bytes_in_flight",
    "tcp.calculate_timestamps",
    "tcp.desegment_tcp_streams",
    "mptcp.analyze_mptcp",
    "mptcp.relative_sequence_numbers",
]
TSHARK_FAST = [arg for pref in TSHARK_OFF for arg in ("-o", f"{pref}:FALSE")]


def campaign() -> Path:
    given = os.environ.get("MPTLAB_BENCH_PCAP_CAMPAIGN")
    if given:
        return Path(given)
    out = WORK / "campaign"
    camp = out / "pcap-check"
    if not (camp / "campaign.json").exists() or len(list(camp.glob("runs/*/rep-*/run.json"))) < 2:
        mptlab.run(mptlab.Experiment.from_yaml(CAMPAIGN_FILE), jobs=2, out=out)
    return camp


def merge(srcs: list[Path], dst: Path) -> Path:
    """One pcap of several (little-endian Ethernet) captures, records in time order."""
    records = []
    for src in srcs:
        buf = src.read_bytes()
        if buf[:4] != b"\xd4\xc3\xb2\xa1" or int.from_bytes(buf[20:24], "little") != 1:
            raise SystemExit(f"{src}: expected a little-endian Ethernet pcap")
        offs = pcap._walk_pcap(buf, 24, "<").tolist() + [len(buf)]
        for a, b in zip(offs[:-1], offs[1:], strict=True):
            sec, usec = (
                int.from_bytes(buf[a : a + 4], "little"),
                int.from_bytes(buf[a + 4 : a + 8], "little"),
            )
            records.append((sec, usec, buf[a:b]))
        header = buf[:24]
    records.sort(key=lambda r: (r[0], r[1]))
    dst.write_bytes(header + b"".join(r[2] for r in records))
    return dst


def replicate(src: Path, dst: Path, size_mb: int) -> int:
    """Write ``dst`` by repeating the records of ``src`` (a little-endian Ethernet pcap)
    until it is ``size_mb`` MB; returns the number of packets."""
    buf = src.read_bytes()
    body = np.frombuffer(buf, np.uint8)[24:].copy()
    rec = pcap._walk_pcap(buf, 24, "<") - 24
    sec = body[rec[:, None] + np.arange(4)].astype(np.uint32) @ (1 << (8 * np.arange(4))).astype(
        np.uint32
    )
    ihl = (body[rec + 16 + 14] & 0x0F).astype(np.int64) * 4
    p_src = rec + 16 + 14 + ihl
    ports = [(body[p].astype(np.int64) << 8) | body[p + 1] for p in (p_src, p_src + 2)]
    span = int(sec.max() - sec.min()) + 1
    copies = max(1, size_mb * 1_000_000 // len(body))
    with open(dst, "wb") as f:
        f.write(buf[:24])
        for k in range(copies):
            out = body.copy()
            s = sec + np.uint32(k * span)
            for j in range(4):
                out[rec + j] = (s >> np.uint32(8 * j)) & 0xFF
            for p, port in zip((p_src, p_src + 2), ports, strict=True):
                new = np.where(port == SERVER_PORT, port, 1024 + (port - 1024 + 7 * k) % 64000)
                out[p] = new >> 8
                out[p + 1] = new & 0xFF
            f.write(out.tobytes())
    return copies * len(rec)


def tshark_fields(path: Path, out: Path) -> float:
    cmd = ["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=,", *TSHARK_FAST]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    t = time.perf_counter()
    with open(out, "w") as fh:
        subprocess.run(cmd, stdout=fh, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def same_fields(path: Path) -> int:
    """Check that tshark and mptlab.analysis.pcap extract the same values; returns the packets compared."""
    import pandas as pd

    csv = WORK / "fields-small.csv"
    tshark_fields(path, csv)
    ts = pd.read_csv(csv, header=None, names=TSHARK_FIELDS, dtype=str, keep_default_na=False)
    pk = pcap.read(path)
    assert len(ts) == len(pk), (len(ts), len(pk))
    assert [pcap.ip_str(x) for x in pk.src] == ts["ip.src"].tolist()
    assert pk.sport.tolist() == ts["tcp.srcport"].astype(int).tolist()
    assert pk.seq.tolist() == ts["tcp.seq_raw"].astype(int).tolist()
    assert pk.ack.tolist() == ts["tcp.ack_raw"].astype(int).tolist()
    assert pk.paylen.tolist() == ts["tcp.len"].astype(int).tolist()
    assert np.allclose(pk.ts, ts["frame.time_epoch"].astype(float), atol=1e-6)
    # DSS mappings (the implicit mapping of data on an MP_CAPABLE ACK has no DSN field for tshark)
    m = ((pk.dss & pcap.DSS_M) != 0) & (pk.mp_sub != pcap.MP_CAPABLE)
    dsn_ts = ts["tcp.options.mptcp.rawdataseqno"]
    assert [int(x) for x in dsn_ts[m]] == [int(v) for v in pk.dsn[m]]
    assert (dsn_ts[~m] == "").all()
    a = (pk.dss & pcap.DSS_A) != 0
    assert [int(x) for x in ts["tcp.options.mptcp.rawdataack"][a]] == [int(v) for v in pk.dack[a]]
    return len(pk)


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    if not shutil.which("tshark"):
        raise SystemExit("tshark is not installed (scripts/install-deps.sh installs it)")
    camp = campaign()
    lines = [
        "Agreement of the capture analysis with the kernel counters (each run of "
        f"`{CAMPAIGN_FILE.relative_to(REPO)}`; bytes per data subflow from the best capture host):",
        "",
        "| run | path | kernel bytes | pcap bytes | kernel retrans | pcap retrans | FIN captured |",
        "|---|---|---|---|---|---|---|",
    ]
    ofo_lines = [
        "",
        "| run | OFO max, kernel | OFO max, pcap | reinjected, kernel | reinjected, pcap |",
        "|---|---|---|---|---|",
    ]
    biggest = None
    for run in sorted(camp.glob("runs/*/rep-*")):
        if not (run / "result.json").exists():
            continue
        ag = pcap.kernel_agreement(run)
        name = f"{run.parent.name}/{run.name}"
        for s in ag["subflows"]:
            lines.append(
                f"| {name} | {s['path']} | {s['kernel']} | {s['pcap']} | {s['kernel_retrans']} | "
                f"{s['pcap_retrans']} | {'yes' if s['fin_seen'] else 'no'} |"
            )
        ofo_lines.append(
            f"| {name} | {ag['ofo'][0]} | {ag['ofo'][1]} | {ag['reinjected'][0]} | {ag['reinjected'][1]} |"
        )
        caps = sorted((run / "traces").glob("client-*.pcap"))
        size = sum(f.stat().st_size for f in caps)
        if caps and (biggest is None or size > biggest[0]):
            biggest = (size, caps)
    print("\n".join(lines + ofo_lines))
    base = merge(biggest[1], WORK / "client.pcap")  # the client's interfaces: every subflow
    compared = same_fields(base)
    big = WORK / "big.pcap"
    t = time.perf_counter()
    n = replicate(base, big, SIZE_MB)
    print(
        f"built {big}: {big.stat().st_size / 1e6:.0f} MB, {n} packets in {time.perf_counter() - t:.1f} s",
        flush=True,
    )
    t_tshark = tshark_fields(big, WORK / "fields-big.csv")
    print(f"tshark: {t_tshark:.1f} s", flush=True)
    (WORK / "fields-big.csv").unlink()
    t = time.perf_counter()
    pk = pcap.read(big)
    t_read = time.perf_counter() - t
    assert len(pk) == n
    print(f"mptlab.analysis.pcap.read: {t_read:.1f} s", flush=True)
    t = time.perf_counter()
    res = pcap.analyze({"capture": pk})
    t_analyze = time.perf_counter() - t
    print(
        f"mptlab.analysis.pcap.analyze: {t_analyze:.1f} s ({len(res.connections)} connection directions)",
        flush=True,
    )
    size = big.stat().st_size
    del pk, res
    big.unlink()
    body = "\n".join(
        [
            f"Input: the client's captures of `{biggest[1][0].parent.parent.relative_to(camp.parent)}` "
            f"merged ({', '.join(f.name for f in biggest[1])}; a real transfer, snaplen 128), repeated to {size / 1e9:.2f} GB, {n:,} packets "
            "(timestamps and client ports shifted per copy, so each copy is its own connections).",
            f"Field check on the real capture: tshark and `mptlab.analysis.pcap.read` give identical addresses, ports, "
            f"raw TCP sequence/ACK numbers, payload lengths, timestamps, MPTCP DSNs and data ACKs for all {compared} packets.",
            "",
            "| step | seconds | packets/s | vs tshark |",
            "|---|---|---|---|",
            f"| tshark -T fields ({len(TSHARK_FIELDS)} fields incl. MPTCP DSN, SSN, data-level length, data ACK; "
            "its TCP/MPTCP analysis off) "
            f"| {t_tshark:.1f} | {n / t_tshark:,.0f} | 1x |",
            f"| `mptlab.analysis.pcap.read` (same fields, numpy arrays) | {t_read:.1f} | {n / t_read:,.0f} | "
            f"**{t_tshark / t_read:.1f}x faster** |",
            f"| `mptlab.analysis.pcap.analyze` (subflows, retransmissions, reinjections, OFO/HOL reconstruction) "
            f"| {t_analyze:.1f} | {n / t_analyze:,.0f} | |",
            f"| read + analyze | {t_read + t_analyze:.1f} | {n / (t_read + t_analyze):,.0f} | "
            f"{t_tshark / (t_read + t_analyze):.1f}x faster |",
            "",
            *lines,
            *ofo_lines,
        ]
    )
    write_section("pcap", "MPTCP pcap reader vs tshark", "python -m bench.run pcap", body)
    print(body)
