"""A small reproducer of the MPTCP receive-memory deadlock (docs/stalls.md).

    .venv/bin/python -m bench.stall_repro [--runs 8] [--scheduler blest]
        [--mem-mb 256] [--tcp-mem auto|PAGES,PAGES,PAGES] [--bytes 64MiB]

One guest, the ``two-path-direct`` network with the links of
``blest-3g-wlan`` (WLAN 25 Mbit/s 12.5 ms one way, 1 % loss, 100 packets;
3G 5 Mbit/s 32.5 ms, 3750 packets), built as a campaign builds it, 16 MiB
socket buffers, no background traffic.  Each run is one ``iperf3 -n`` MPTCP
download that may take at most ``--limit`` seconds; once a second the guest
records the data level (bytes the receiver got in order), the receiver's
MPTCP out-of-order queue, TCP memory in use against ``tcp_mem`` and the
kernel's drop counters.  A run is ``stalled`` when the data level stays
frozen for ``--frozen`` seconds (10) with data outstanding.  Prints one line per run and writes
everything to ``--out`` (default ``results/stall-repro``).

``--tcp-mem mptlab`` (the default) sets ``tcp_mem`` as the guest agent does
(``mptlab.guest.agent.guest_tcp_mem``), ``auto`` leaves Linux's own limit
(about 9 % of the guest's RAM), three numbers set it; ``--mem-mb`` is the
guest's RAM (mptlab's default: 1024).  ``--scheduler default`` loads no
module, so the reproducer also runs on an unpatched kernel
(``MPTLAB_KERNEL_DIR``).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
import time
from pathlib import Path

from mptlab.campaign.boot import run_script
from mptlab.campaign.kernel import find_kernel
from mptlab.spec.catalog import Catalog
from mptlab.spec.models import Profile
from mptlab.spec.plan import plan

# the blest-3g-wlan links
PROFILES = {
    "wlan": {"rate": "25mbit", "delay": "12.5ms", "loss": "1%", "queue": 100},
    "3g": {"rate": "5mbit", "delay": "32.5ms", "queue": 3750},
}

GUEST = r'''
import json, subprocess, threading, time, sys
from mptlab.guest import modules
from mptlab.guest.build import build
from mptlab.guest.netlab import Net, in_netns
from mptlab.guest.sampler import MPTCP_COLUMNS, Diag, mptcp_rows
from mptlab.spec.plan import NetPlan

if SCHED != "default":
    modules.load_schedulers(MODULES_DIR)
if TCP_MEM == "mptlab":
    from mptlab.guest.agent import guest_tcp_mem
    TCP_MEM = guest_tcp_mem()
if TCP_MEM:
    subprocess.run(["sysctl", "-qw", f"net.ipv4.tcp_mem={TCP_MEM}"], check=True)
for key in ("rmem_max", "wmem_max"):
    subprocess.run(["sysctl", "-qw", f"net.core.{key}={BUF}"], check=True)

def counters(ns):
    """TcpExt + MPTcpExt of namespace ns (whole /proc/net/netstat)."""
    text = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/netstat"],
                          capture_output=True, text=True).stdout.splitlines()
    out = {}
    for head, vals in zip(text[::2], text[1::2]):
        group, names = head.split(":", 1)
        for n, v in zip(names.split(), vals.split(":", 1)[1].split()):
            out[f"{group}.{n}"] = int(v)
    return out

def sockstat():
    for line in open("/proc/net/sockstat"):
        if line.startswith("TCP:"):
            f = line.split()
            return int(f[f.index("mem") + 1])

def one(k):
    p = NetPlan.from_json(PLAN)
    net = build(p, "client", "server", net=Net(prefix=f"r{k}-"))
    for h in ("client", "server"):
        net.sysctls(h, {"net.mptcp.scheduler": SCHED, "net.mptcp.add_addr_timeout": 1,
                        "net.ipv4.tcp_rmem": f"4096 131072 {BUF}",
                        "net.ipv4.tcp_wmem": f"4096 16384 {BUF}",
                        "net.ipv4.tcp_congestion_control": "reno"})
    before = {h: counters(net.ns(h)) for h in ("client", "server")}
    server = net.popen("server", ["mptcpize", "run", "iperf3", "-s", "-1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    net.wait_listening("server", 5201)
    client = net.popen("client", ["mptcpize", "run", "iperf3", "-c", p.addresses("server")[0], "-R",
                             "-n", str(NBYTES), "-J"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples, frozen_since, last, status, longest = [], 0.0, None, "ok", 0.0
    diag = {}
    start = time.monotonic()
    while client.poll() is None:
        time.sleep(1)
        t = time.monotonic() - start
        row = {"t": round(t, 1), "tcp_mem_pages": sockstat()}
        for h in ("client", "server"):
            if h not in diag:
                with in_netns(net.ns(h)):
                    diag[h] = Diag()
            conns = [dict(zip(MPTCP_COLUMNS, r)) for r in mptcp_rows(diag[h], 0)]
            conns = [c for c in conns if c.get("write_seq")]
            if conns:
                c = max(conns, key=lambda c: c.get("bytes_received") or 0)
                row[h] = {x: c.get(x) for x in ("rcv_nxt", "snd_una", "write_seq", "ofo_bytes",
                                                 "ofo_segs", "bytes_received", "bytes_reinjected")}
        samples.append(row)
        level = (row.get("client") or {}).get("rcv_nxt")
        if level != last:
            last, frozen_since = level, t
        longest = max(longest, t - frozen_since)
        if t - frozen_since >= FROZEN:
            status = "stalled"
            break
        if t > LIMIT:
            status = "limit"
            break
    if client.poll() is None:
        client.kill()
    out, err = client.communicate()
    server.kill()
    after = {h: counters(net.ns(h)) for h in ("client", "server")}
    delta = {h: {n: after[h][n] - before[h].get(n, 0) for n in after[h]
                 if after[h][n] != before[h].get(n, 0)} for h in after}
    try:
        end = json.loads(out)["end"]["sum_received"]
        got = end["bytes"]
    except (ValueError, KeyError):
        got = None
    if status == "ok" and client.returncode:
        status = "failed"
    net.destroy()
    return {"status": status, "seconds": round(time.monotonic() - start, 1),
            "longest_freeze_s": round(longest, 1),
            "bytes_received": got, "samples": samples, "mib_delta": delta,
            "tcp_mem": open("/proc/sys/net/ipv4/tcp_mem").read().split(),
            "mem_total_kb": int(open("/proc/meminfo").readline().split()[1])}

RESULT["runs"] = []
for k in range(RUNS):
    RESULT["runs"].append(one(k))
    (RUN_DIR / "progress").write_text(str(k + 1))
'''


def repro_plan() -> dict:
    """The two-path-direct network with the blest-3g-wlan links, as a campaign plans it."""
    profiles = {name: Profile.parse(fields) for name, fields in PROFILES.items()}
    return plan(Catalog.load().topologies["two-path-direct"], profiles, ["wlan", "3g"]).to_json()


def parse_size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for unit, mult in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * mult)
    return int(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--scheduler", default="blest")
    ap.add_argument("--mem-mb", type=int, default=1024)
    ap.add_argument("--tcp-mem", default="mptlab", help="mptlab, auto or PAGES,PAGES,PAGES")
    ap.add_argument("--bytes", default="64MiB")
    ap.add_argument("--buffer", default="16MiB")
    ap.add_argument("--limit", type=float, default=120.0, help="seconds per run at most")
    ap.add_argument(
        "--frozen",
        type=float,
        default=10.0,
        help="seconds of frozen data level that count as a stall",
    )
    ap.add_argument("--out", type=Path, default=Path("results/stall-repro"))
    args = ap.parse_args(argv)

    kernel = find_kernel()
    tag = f"{args.scheduler}-mem{args.mem_mb}-tcpmem-{args.tcp_mem.replace(',', '_')}"
    run_dir = (args.out / f"{tag}-{time.strftime('%H%M%S')}").resolve()
    run_dir.mkdir(parents=True)
    head = (
        "import json, os, sys\nfrom pathlib import Path\n"
        f"PLAN = {repro_plan()!r}\n"
        "RUN_DIR = Path(os.environ['MPTLAB_RUN_DIR'])\n"
        "MODULES_DIR = Path(os.environ['MPTLAB_MODULES_DIR'])\n"
        f"SCHED = {args.scheduler!r}\nRUNS = {args.runs}\nNBYTES = {parse_size(args.bytes)}\n"
        f"BUF = {parse_size(args.buffer)}\nLIMIT = {args.limit}\nFROZEN = {args.frozen}\n"
        f"TCP_MEM = {None if args.tcp_mem == 'auto' else args.tcp_mem.replace(',', ' ')!r}\n"
        "RESULT = {}\ntry:\n"
    )
    program = (
        head
        + textwrap.indent(GUEST, "    ")
        + ("\nfinally:\n    (RUN_DIR / 'result.json').write_text(json.dumps(RESULT))\n")
    )
    (run_dir / "repro.py").write_text(program)
    res = run_script(
        kernel,
        run_dir,
        f"exec {sys.executable} $MPTLAB_RUN_DIR/repro.py\n",
        timeout=args.runs * (args.limit + 30) + 60,
        mem_mb=args.mem_mb,
        env={"MPTLAB_MODULES_DIR": str(kernel.modules_dir)},
    )
    result = (
        json.loads((run_dir / "result.json").read_text())
        if (run_dir / "result.json").exists()
        else {}
    )
    runs = result.get("runs", [])
    for k, r in enumerate(runs):
        last = r["samples"][-1] if r["samples"] else {}
        peak = max((s.get("tcp_mem_pages") or 0 for s in r["samples"]), default=0)
        cli = last.get("client") or {}
        drops = {
            n: v
            for h in r["mib_delta"].values()
            for n, v in h.items()
            if any(w in n for w in ("Prune", "Drop", "Pressure", "Collapse", "NoDSSInWindow"))
        }
        print(
            f"run {k}: {r['status']:8s} {r['seconds']:6.1f} s  longest freeze "
            f"{r.get('longest_freeze_s', '?')} s  received {r['bytes_received']}  "
            f"peak TCP mem {peak} pages (tcp_mem {'/'.join(r['tcp_mem'])})  "
            f"rx OFO {cli.get('ofo_bytes')}  drops {drops}"
        )
    print(f"guest: {res.status} {res.reason}; details in {run_dir}/result.json")
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
