"""TCP-dFEC and MPTCP-dFEC (kernel patch 0007) on real transfers.

Each transfer sends a file of random bytes from host ``a`` to host ``b``
(socat, the receiver reads to the end) over veth pairs with netem on the
sending side (20 Mbit/s, 10 ms each way, random loss), one packet per netem
skb (``gso_max_segs 1``, as the topologies do: netem drops a GSO skb whole,
which would turn 2 % random loss into bursts that XOR parity cannot repair).
The SHA-256 of what arrived must equal what was sent.  Counters come from
the socket's ``tcp:tcp_fec_stats`` record and nstat.

Measured on this kernel (real time, 8 MiB, 2 % loss): plain TCP 123
retransmitted segments; fixed ratio 9: 14 (110 segments rebuilt, 5 blocks
failed); dynamic: 71 (53 rebuilt); fixed ratio 4: 8.  Loss-free, the dynamic
ratio reaches its maximum (256) and the fixed ratios' overhead is 1/(r+1).
Runs use virtual time, so the numbers repeat.
"""

import pytest

pytestmark = pytest.mark.kernel

COMMON = r"""
import re, subprocess, threading, time
from pathlib import Path

TRACE = Path("/sys/kernel/tracing")
for ev in ("tcp_fec_stats", "tcp_fec_ratio"):
    (TRACE / "events/tcp" / ev / "enable").write_text("1")
N = iter(range(100))


def sh(ns, cmd, check=True):
    r = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", cmd],
                       capture_output=True, text=True)
    if check and r.returncode:
        raise RuntimeError(f"{ns}: {cmd}: {r.stderr}")
    return r.stdout


def nstat(ns):
    out = sh(ns, "nstat -az TcpExtTCPFECSent TcpExtTCPFECRecovered TcpExtTCPFECFailed TcpRetransSegs TcpExtTCPTimeouts")
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)", out, re.M)}


def stats():
    text = (TRACE / "trace").read_text()
    (TRACE / "trace").write_text("")
    recs = []
    for line in text.splitlines():
        if "tcp_fec_stats:" in line:
            body = line.split("tcp_fec_stats:", 1)[1]
            recs.append({k: (int(v) if v.isdigit() else v)
                         for k, v in re.findall(r"(\w+)=(\S+)", body)})
    return recs


def sample_ss(ns, stop, out):
    # (cwnd, reordering) of the sender's socket every 20 ms
    while not stop.wait(0.02):
        text = sh(ns, "ss -Htin dst 10.0.1.2", check=False)
        c, r = re.search(r"cwnd:(\d+)", text), re.search(r"reordering:(\d+)", text)
        if c:
            out.append((int(c.group(1)), int(r.group(1)) if r else 3))


def transfer(loss=0.0, fec_a=0, fec_b=0, ratio=9, nbytes=8 << 20, sample=False):
    i = next(N)
    a, b = f"a{i}", f"b{i}"
    subprocess.run(["ip", "netns", "add", a], check=True)
    subprocess.run(["ip", "netns", "add", b], check=True)
    for p in (1,):
        subprocess.run(f"ip link add va{p} netns {a} type veth peer name vb{p} netns {b}",
                       shell=True, check=True)
        sh(a, f"ip addr add 10.0.{p}.1/24 dev va{p}; ip link set va{p} up gso_max_segs 1")
        sh(b, f"ip addr add 10.0.{p}.2/24 dev vb{p}; ip link set vb{p} up gso_max_segs 1")
        sh(a, f"tc qdisc add dev va{p} root netem delay 10ms loss {loss}% rate 20mbit limit 1000")
        sh(b, f"tc qdisc add dev vb{p} root netem delay 10ms rate 20mbit limit 1000")
    for ns, mode in ((a, fec_a), (b, fec_b)):
        sh(ns, f"ip link set lo up; sysctl -qw net.ipv4.tcp_no_metrics_save=1 "
               f"net.ipv4.tcp_fec_ratio={ratio} net.ipv4.tcp_fec={mode}")
    sh(a, f"head -c {nbytes} /dev/urandom > /tmp/{a}.bin")
    sent = sh(a, f"sha256sum < /tmp/{a}.bin").split()[0]
    srv = subprocess.Popen(["ip", "netns", "exec", b, "sh", "-c",
                            "socat -u TCP-LISTEN:5000,reuseaddr - | sha256sum"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    stop, samples = threading.Event(), []
    th = threading.Thread(target=sample_ss, args=(a, stop, samples))
    if sample:
        th.start()
    sh(a, f"socat -u OPEN:/tmp/{a}.bin TCP:10.0.1.2:5000")
    stop.set()
    if sample:
        th.join()
    got = srv.communicate(timeout=300)[0].split()[0]
    time.sleep(1)  # the sockets' FEC records print when they are destroyed
    out = {"intact": got == sent, "a": nstat(a), "b": nstat(b), "stats": stats(),
           "ss": samples}
    sh(a, f"rm -f /tmp/{a}.bin")
    return out
"""


def sender(r):
    """The sending socket's FEC record (its peer listens on port 5000)."""
    return [s for s in r["stats"] if s["dport"] == 5000]


def receiver(r):
    return [s for s in r["stats"] if s["sport"] == 5000]


def test_tcp_dfec_repairs_single_losses_with_fewer_retransmissions(guest):
    r = guest(
        COMMON
        + """
RESULT["plain"] = transfer(loss=2)
RESULT["fixed9"] = transfer(loss=2, fec_a=2, fec_b=2, ratio=9)
RESULT["dynamic"] = transfer(loss=2, fec_a=1, fec_b=1)
""",
        timeout=600,
        mem_mb=512,
        clock="virtual",
    )
    plain, fixed, dyn = r["plain"], r["fixed9"], r["dynamic"]
    assert plain["intact"] and fixed["intact"] and dyn["intact"]
    assert plain["stats"] == [] and plain["a"]["TcpExtTCPFECSent"] == 0
    retrans = {k: v["a"]["TcpRetransSegs"] for k, v in r.items()}
    assert retrans["plain"] > 50, retrans  # 2 % of ~5800 segments
    for name in ("fixed9", "dynamic"):
        rx = receiver(r[name])
        assert len(rx) == 1 and rx[0]["fec_recovered"] > 0, (name, rx)
        assert r[name]["b"]["TcpExtTCPFECRecovered"] == rx[0]["fec_recovered"]
        # the sender learnt of each repair from the receiver's feedback
        assert sender(r[name])[0]["fb_recovered"] > 0
    # one parity packet per 9 segments repairs most single losses
    assert retrans["fixed9"] < 0.4 * retrans["plain"], retrans
    assert retrans["dynamic"] < 0.8 * retrans["plain"], retrans


def test_the_dupack_threshold_stays_below_cwnd_so_a_long_block_costs_no_rtos(guest):
    # 5 % loss keeps cwnd at a few segments; blocks of 64 segments span many
    # windows.  A dupACK threshold of block + 1 could never be reached there:
    # every loss the parity did not repair waited for the RTO (the lossy
    # subflow of fec-mptcp-bulk: 36-96 RTOs per run against 1-18 without FEC).
    r = guest(
        COMMON
        + """
RESULT["plain"] = transfer(loss=5, nbytes=2 << 20)
RESULT["fixed64"] = transfer(loss=5, fec_a=2, fec_b=2, ratio=64, nbytes=2 << 20, sample=True)
""",
        timeout=400,
        mem_mb=512,
        clock="virtual",
    )
    print(r)
    plain, fec = r["plain"], r["fixed64"]
    assert plain["intact"] and fec["intact"]
    assert sender(fec)[0]["fec_sent"] > 0, fec["stats"]
    assert plain["a"]["TcpRetransSegs"] > 50, plain["a"]  # 5 % of ~1450 segments
    # the threshold (ss "reordering") follows cwnd, not the block of 64
    ss = fec["ss"]
    assert len(ss) >= 10, ss
    # cwnd may halve between samples; after an RTO a sample can still see the
    # threshold of before, and the next one has followed: right after it
    # (cwnd 1; once in 230 samples, 2026-11-27: [24, 23], [1, 23], [2, 3]) or
    # when slow start has grown cwnd again (once in 300, a later realisation
    # of the same day: [37, 36], [16, 37], [14, 13], 2 RTOs in the run).  A
    # threshold stuck at the block's 65 would lag in every sample after it.
    lag = [i for i, (c, r) in enumerate(ss) if r > max(3, 2 * c)]
    assert all(i + 1 < len(ss) and ss[i + 1][1] <= max(3, 2 * ss[i + 1][0]) for i in lag), ss
    assert len(lag) <= len(ss) // 20, ss
    assert max(r for _, r in ss) < 65, ss
    rto = {k: v["a"]["TcpExtTCPTimeouts"] for k, v in r.items()}
    # a threshold of block + 1 left every unrepaired loss to the RTO: 36-96
    # RTOs per run; following cwnd, 4 against plain TCP's 0 (2026-11-27) and
    # 0-3 before (runs differ with any change of guest work: docs/reproduction.md)
    assert rto["fixed64"] <= 2 * rto["plain"] + 10, rto


def test_dynamic_ratio_climbs_to_its_maximum_and_fixed_ratios_cost_one_over_r_plus_1(guest):
    r = guest(
        COMMON
        + """
RESULT["dynamic"] = transfer(fec_a=1, fec_b=1)
RESULT["fixed4"] = transfer(fec_a=2, fec_b=2, ratio=4)
RESULT["fixed9"] = transfer(fec_a=2, fec_b=2, ratio=9)
""",
        timeout=600,
        mem_mb=512,
        clock="virtual",
    )
    for name, v in r.items():
        assert v["intact"], name
        tx = sender(v)
        assert len(tx) == 1, (name, v["stats"])
        tx = tx[0]
        overhead = tx["fec_sent"] / (tx["fec_sent"] + tx["data_segs"])
        if name == "dynamic":
            assert tx["ratio_milli"] == 256000, tx
            assert overhead < 0.03, (overhead, tx)
        else:
            ratio = int(name[5:])
            assert tx["ratio_mean_milli"] == ratio * 1000
            assert overhead == pytest.approx(1 / (ratio + 1), rel=0.05), (overhead, tx)
        # no loss: every parity packet answered "received"
        assert receiver(v)[0]["fec_recovered"] == 0 and receiver(v)[0]["fec_failed"] == 0


def test_a_peer_without_fec_interoperates_as_plain_tcp(guest):
    r = guest(
        COMMON
        + """
RESULT["client_only"] = transfer(loss=1, fec_a=1, fec_b=0)
RESULT["server_only"] = transfer(loss=1, fec_a=0, fec_b=1)
""",
        timeout=400,
        mem_mb=512,
        clock="virtual",
    )
    for name, v in r.items():
        assert v["intact"], name
        assert v["stats"] == [], (name, v["stats"])  # not negotiated: no FEC state
        assert v["a"]["TcpExtTCPFECSent"] == 0 and v["b"]["TcpExtTCPFECSent"] == 0


MPTCP = r"""
from mptlab.guest.build import build
from mptlab.guest.netlab import Net
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import plan

CAT = Catalog.load()


def mptcp_transfer(fec, nbytes=8 << 20):
    # two disjoint paths, both the FEC grid's B1 with 2 % loss (20 Mibit/s,
    # RTT 25 ms, 1-BDP queue), built as a campaign builds them
    p = plan(CAT.topologies["two-path-direct"], dict(CAT.profiles),
             ["fec-b1-loss2", "fec-b1-loss2"], background=False)
    net = build(p, "client", "server", subflows=2, add_addr_accepted=2,
                net=Net(prefix=f"m{next(N)}-"))
    for host in ("client", "server"):
        net.sysctls(host, {"net.ipv4.tcp_fec": fec, "net.ipv4.tcp_no_metrics_save": 1})
    # fork: the listener stays open for the second subflow's MP_JOIN
    srv = net.popen("server", ["mptcpize", "run", "socat", "-u", "TCP-LISTEN:5000,fork,reuseaddr",
                               "OPEN:/tmp/m.rx,creat,trunc"])
    net.wait_listening("server", 5000)
    net.run("client", "sh", "-c", f"head -c {nbytes} /dev/urandom > /tmp/m.bin")
    sent = net.run("client", "sh", "-c", "sha256sum < /tmp/m.bin").split()[0]
    net.run("client", "mptcpize", "run", "socat", "-u", "OPEN:/tmp/m.bin",
            f"TCP:{p.addresses('server')[0]}:5000")
    for _ in range(600):  # the receiver has read everything when all closed
        if not net.run("server", "ss", "-Htan", "exclude", "time-wait", "exclude",
                       "listening").strip():
            break
        time.sleep(0.1)
    srv.kill()
    srv.wait()
    got = net.run("server", "sh", "-c", "sha256sum < /tmp/m.rx").split()[0]
    time.sleep(1)
    joins = net.run("server", "nstat", "-az", "MPTcpExtMPJoinAckRx")
    out = {"intact": got == sent, "joins": int(joins.split()[-2]), "stats": stats()}
    net.run("client", "rm", "-f", "/tmp/m.bin")
    net.run("server", "rm", "-f", "/tmp/m.rx")
    net.destroy()
    return out
"""


def test_mptcp_dfec_delivers_the_stream_intact_under_loss_on_both_subflows(guest):
    r = guest(
        COMMON
        + MPTCP
        + """
RESULT["plain"] = mptcp_transfer(fec=0)
# the second subflow's MP_JOIN crosses the same 2 % loss: a lost handshake
# packet waits out a 1 s RTO, past the 1.7 s transfer (a clean clone's draw
# had no join).  The join is the precondition, not the behaviour under test:
# up to three transfers, each one checked for integrity
RESULT["tries"] = []
for _ in range(3):
    RESULT["tries"].append(mptcp_transfer(fec=1))
    if RESULT["tries"][-1]["joins"] == 1:
        break
RESULT["mptcp"] = RESULT["tries"][-1]
""",
        timeout=600,
        mem_mb=512,
        clock="virtual",
    )
    assert r["plain"]["joins"] == 1, r["plain"]
    assert all(t["intact"] for t in r["tries"]), r["tries"]  # with one subflow too
    v = r["mptcp"]
    assert v["joins"] == 1, r["tries"]  # the second subflow, in one of three draws
    rx = [s for s in v["stats"] if s["mptcp"] == 1 and s["fec_rcvd"] > 0]
    assert len(rx) == 2, v["stats"]  # both subflows received parity
    by_path = {s["daddr"]: s["fec_recovered"] for s in rx}
    assert all(n > 0 for n in by_path.values()), by_path
