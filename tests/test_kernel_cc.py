"""The coupled congestion controls (lia, olia, balia, wvegas) show their
signatures on real transfers in the real kernel (MPT-BM's, with the
``disjoint()`` transfer below, is the ``mptbm`` row of
tests/addon_matrix.py).

Networks are built from the shipped topologies and profiles, as a campaign
builds them; every flow is a download (iperf3 ``-R``: the server sends),
goodput is the receiver's, after the first 5 s (slow start left out).
Expected values were measured on this kernel (issue 12's notes): on a
shared 20 Mbit/s bottleneck with one Reno TCP flow, MPTCP's share was 0.67
uncoupled, 0.47 lia, 0.35-0.48 olia, 0.47-0.51 balia; on two disjoint 5 Mbit/s
bottlenecks (RTT 10 and 40 ms) the coupled controls got 9.0-9.2 of 10 Mbit/s;
wvegas kept the mean sRTT at 29-36 ms where lia's was 52-85 ms (4-BDP
queues); MPT-BM (lambda 1.5, theta 50 ms) cut a 3G subflow's mean sRTT from
0.9-2.4 s to 0.16-0.34 s and the mean MPTCP OFO wait from 837 to 172 ms.
"""

import pytest

pytestmark = pytest.mark.kernel


@pytest.fixture(autouse=True)
def _virtual_time(monkeypatch):
    """Every test here under virtual time.  These are statements about the
    controls, not about the emulator's real-time fidelity (that is
    test_link_fidelity's), and in real time a loaded host moved them: one CI
    run gave wvegas 16.4 Mbit/s beside lia's 18.5 on q20 (0.88x; on a quiet
    host 18.4-18.7 beside 17.8-18.7, three runs), because a 20 Mbit/s
    guest is CPU-bound in real-time UML and a delay-based control reads the
    guest's CPU waits as queueing.  Under virtual time (measured 2026-11-26,
    kernel d9f5124fc96c5ef4) every value below repeats exactly: q20 lia
    18.71 / wvegas 18.72 Mbit/s, sRTT 74.1 / 32.5 ms; d10+d40 9.4 Mbit/s for
    all three coupled controls; plain TCP 9.56 Mbit/s and cwnd 77.5 for all
    five; MPT-BM 3G sRTT 1996 -> 216 ms, OFO wait 793 -> 107 ms."""
    monkeypatch.setenv("MPTLAB_TEST_CLOCK", "virtual")


COMMON = """
import json, subprocess, threading, time
from mptlab.guest import modules, tracepoints
from mptlab.guest.build import build
from mptlab.guest.netlab import Net
from mptlab.guest.sampler import SUBFLOW_COLUMNS, Diag, subflow_rows
from mptlab.guest.netlab import in_netns
from mptlab.spec.catalog import Catalog
from mptlab.spec.models import Profile
from mptlab.spec.plan import plan

CAT = Catalog.load()
PROFILES = dict(CAT.profiles)
PROFILES.update({name: Profile.parse(fields) for name, fields in {
    # two disjoint 5 Mbit/s bottlenecks, RTT 10 and 40 ms, 2-BDP queues
    # (5, not 10 Mbit/s: on a loaded 2-CPU host a 20 Mbit/s MPTCP transfer
    # is partly CPU-bound, 13-15 Mbit/s where an idle host gives 17-18)
    "d10": {"rate": "5mbit", "delay": "5ms", "queue": "2 bdp"},
    "d40": {"rate": "5mbit", "delay": "20ms", "queue": "2 bdp"},
    # plain TCP: a Reno sawtooth between about 50 and 100 packets
    "p40": {"rate": "10mbit", "delay": "20ms", "queue": "2 bdp"},
    # deep queues (4 BDP) that a loss-based control fills and wvegas should not
    "q20": {"rate": "10mbit", "delay": "10ms", "queue": "4 bdp"},
    # the BLEST paper's 3G (3750-packet queue) and a loss-free WLAN
    "3g": {"rate": "5mbit", "delay": "32.5ms", "queue": 3750},
    "wlan0": {"rate": "25mbit", "delay": "12.5ms", "queue": 100},
}.items()})
modules.load_schedulers()
COUNT = iter(range(100))


def network(topology, paths, cc, sysctls=None, background=False):
    p = plan(CAT.topologies[topology], PROFILES, paths, background=background)
    net = build(p, "client", "server", subflows=2, add_addr_accepted=2,
                net=Net(prefix=f"c{next(COUNT)}-"))
    # add_addr_timeout 1 s, as the agent sets it: a lost ADD_ADDR is re-sent
    # only after 120 s by default, and the swap matrix's lossy workload (0.3 %)
    # once ran LIA on the fast path alone (slow share 0.0, no slow subflow)
    for host in p.hosts:
        net.sysctls(host, {"net.ipv4.tcp_congestion_control": cc,
                           "net.ipv4.tcp_no_metrics_save": 1,
                           "net.mptcp.add_addr_timeout": 1, **(sysctls or {})})
    return p, net


def iperf_server(net, host, port, mptcp):
    pre = ["mptcpize", "run"] if mptcp else []
    proc = net.popen(host, pre + ["iperf3", "-s", "-1", "-p", str(port)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    net.wait_listening(host, port)
    return proc


def iperf_client(net, host, dest, port, mptcp, secs=None, nbytes=None):
    pre = ["mptcpize", "run"] if mptcp else []
    amount = ["-n", str(nbytes)] if nbytes else ["-t", str(secs)]
    return net.popen(host, pre + ["iperf3", "-c", dest, "-p", str(port), "-R", "-J",
                                  "-i", "1", *amount],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def goodput(proc, skip=5):
    out, err = proc.communicate(timeout=240)
    report = json.loads(out)
    if "error" in report:
        raise RuntimeError(report["error"])
    ivs = [iv["sum"] for iv in report["intervals"] if iv["sum"]["start"] >= skip]
    if not ivs:
        ivs = [iv["sum"] for iv in report["intervals"]]
    return sum(iv["bytes"] for iv in ivs) * 8 / sum(iv["seconds"] for iv in ivs) / 1e6


class Srtt(threading.Thread):
    \"\"\"The sending host's data subflows' sRTT (ms) every 200 ms, by peer address.\"\"\"

    def __init__(self, net, host):
        super().__init__(daemon=True)
        self.ns, self.samples, self.stop = net.ns(host), {}, threading.Event()
        self.cwnd_flight = {}

    def run(self):
        with in_netns(self.ns):
            diag = Diag()
        while not self.stop.wait(0.2):
            for r in subflow_rows(diag, time.time()):
                row = dict(zip(SUBFLOW_COLUMNS, r))
                if row["state"] == 1 and row["srtt_us"] and row["bytes_acked"] > 1 << 20:
                    self.samples.setdefault(row["daddr"], []).append(row["srtt_us"] / 1000)
                    if row["unacked"]:
                        self.cwnd_flight.setdefault(row["daddr"], []).append(
                            row["cwnd"] / row["unacked"])

    def means(self):
        self.stop.set()
        self.join()
        return {a: sum(v) / len(v) for a, v in self.samples.items()}

    def cwnd_over_flight(self):
        \"\"\"Median cwnd / packets in flight per peer address.\"\"\"
        return {a: sorted(v)[len(v) // 2] for a, v in self.cwnd_flight.items()}
"""

SHARED = """
def shared(cc, secs=20):
    \"\"\"MPTCP (2 subflows, cc) and one Reno TCP flow download through one
    20 Mbit/s, 20 ms bottleneck (two-path-shared, background pair 1).\"\"\"
    p, net = network("two-path-shared", ["cc-20m-20ms"], cc, background=True)
    net.sysctls("bgs1", {"net.ipv4.tcp_congestion_control": "reno"})
    s1 = iperf_server(net, "server", 5201, True)
    s2 = iperf_server(net, "bgs1", 5202, False)
    a = iperf_client(net, "client", p.addresses("server")[0], 5201, True, secs=secs)
    b = iperf_client(net, "bgc1", p.addresses("bgs1")[0], 5202, False, secs=secs)
    m, t = goodput(a), goodput(b)
    s1.wait(10); s2.wait(10)
    net.destroy()
    return {"mptcp": m, "tcp": t, "share": m / (m + t)}
"""

DISJOINT = """
def disjoint(cc, paths, secs=20, sysctls=None, nbytes=None):
    \"\"\"An MPTCP download over two-path-direct: goodput, the sender's mean
    sRTT per path, and the receiver's mean MPTCP OFO-queue wait.\"\"\"
    p, net = network("two-path-direct", paths, cc, sysctls)
    tracepoints.enable((tracepoints.OFO_EVENT,), clock="mono")
    ofo_path = RUN_DIR / f"ofo-{next(COUNT)}.csv"
    reader = tracepoints.TraceReader(RUN_DIR / "trace.txt", ofo_path)
    server = iperf_server(net, "server", 5201, True)
    srtt = Srtt(net, "server")
    srtt.start()
    t0 = time.time()
    c = iperf_client(net, "client", p.addresses("server")[0], 5201, True, secs=secs, nbytes=nbytes)
    g = goodput(c, skip=0 if nbytes else 5)
    seconds = time.time() - t0
    means = srtt.means()
    server.wait(10)
    reader.stop()
    net.destroy()
    ratio = srtt.cwnd_over_flight()
    by_path = {paths[i]: means.get(addr) for i, addr in enumerate(p.addresses("client"))}
    cwnd_flight = {paths[i]: ratio.get(a) for i, a in enumerate(p.addresses("client"))}
    return {"goodput": g, "srtt_ms": by_path, "ofo_wait_ms": ofo_wait_ms(ofo_path, nbytes),
            "seconds": seconds, "cwnd_over_flight": cwnd_flight}


def ofo_wait_ms(path, nbytes):
    \"\"\"Mean time a byte spent in the receiver's MPTCP OFO queue (Little's
    law: the queue's integral over time divided by the bytes that passed).\"\"\"
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    if not rows or not nbytes:
        return 0.0
    by_token = {}
    for t, token, size, _ in rows:
        by_token.setdefault(token, []).append((float(t), int(size)))
    events = max(by_token.values(), key=lambda ev: max(s for _, s in ev))
    area = sum(s * (t2 - t1) for (t1, s), (t2, _) in zip(events, events[1:]))
    return area / nbytes * 1000
"""

PLAIN = """
def plain(cc, secs=20):
    \"\"\"One plain TCP download (no MPTCP) over a 10 Mbit/s, 40 ms, 2-BDP
    link (a Reno sawtooth between about 50 and 100 packets): goodput and
    the sender's mean cwnd.\"\"\"
    p, net = network("two-path-direct", ["p40", "p40"], cc)
    server = iperf_server(net, "server", 5201, False)
    cwnd = []
    stop = threading.Event()

    def sample():
        with in_netns(net.ns("server")):
            diag = Diag()
        while not stop.wait(0.1):
            for r in subflow_rows(diag, time.time()):
                row = dict(zip(SUBFLOW_COLUMNS, r))
                if row["state"] == 1 and row["bytes_acked"] > 1 << 20:
                    cwnd.append(row["cwnd"])
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    c = iperf_client(net, "client", p.addresses("server")[0], 5201, False, secs=secs)
    g = goodput(c)
    stop.set(); th.join()
    server.wait(10)
    net.destroy()
    return {"goodput": g, "cwnd": sum(cwnd) / len(cwnd)}
"""


def test_coupled_controls_take_one_tcp_share_of_a_shared_bottleneck(guest):
    r = guest(
        COMMON
        + SHARED
        + "for cc in ('reno', 'lia', 'olia', 'balia'):\n    RESULT[cc] = shared(cc)\n",
        timeout=600,
        mem_mb=1024,
        # Virtual time: in real time one 20 s transfer per control moved with
        # the host's load (olia 0.40-0.48 in development, 0.349 in one CI run,
        # 0.267 in a clean-clone run beside other campaigns).  Under virtual
        # time the shares do not depend on the load and repeat exactly
        # (measured 2026-11-24: reno 0.689, lia 0.528, olia 0.412, balia 0.357;
        # 2026-11-26, kernel d9f5124fc96c5ef4: 0.667, 0.458, 0.346, 0.386).
        clock="virtual",
    )
    print(r)
    # Each share is bounded loosely (none starves, none takes two TCP
    # shares), their mean more tightly (coupled MPTCP takes about one TCP share, RFC 6356 goal 1).
    for cc in ("lia", "olia", "balia"):
        assert 0.30 <= r[cc]["share"] <= 0.65, (cc, r)
        # the bottleneck stays used (15-18 of 20 Mbit/s measured on a loaded host)
        assert r[cc]["mptcp"] + r[cc]["tcp"] > 12, (cc, r)
    assert 0.38 <= sum(r[cc]["share"] for cc in ("lia", "olia", "balia")) / 3 <= 0.6, r
    # uncoupled, two subflows take about two TCP shares (2/3)
    assert r["reno"]["share"] > 0.58, r
    assert r["reno"]["share"] > max(r[cc]["share"] for cc in ("lia", "olia", "balia")) + 0.08, r


def test_coupled_controls_use_both_disjoint_bottlenecks(guest):
    r = guest(
        COMMON
        + DISJOINT
        + "for cc in ('lia', 'olia', 'balia'):\n"
        + "    RESULT[cc] = disjoint(cc, ['d10', 'd40'], secs=30)\n",
        timeout=600,
        mem_mb=1024,
    )
    print(r)
    for cc in ("lia", "olia", "balia"):
        assert r[cc]["goodput"] >= 0.8 * 10, (cc, r)


def test_wvegas_keeps_the_queues_shorter_than_lia_at_equal_throughput(guest):
    r = guest(
        COMMON
        + DISJOINT
        + "for cc in ('lia', 'wvegas'):\n"
        + "    RESULT[cc] = disjoint(cc, ['q20', 'q20'])\n",
        timeout=600,
        mem_mb=1024,
    )
    print(r)
    lia, wv = r["lia"], r["wvegas"]
    assert wv["goodput"] >= 0.9 * lia["goodput"], r
    for path in ("q20",):
        # base RTT 20 ms; a full 4-BDP queue adds up to 80 ms
        assert wv["srtt_ms"][path] < 0.75 * lia["srtt_ms"][path], r


def test_plain_tcp_under_a_coupled_control_is_reno(guest):
    r = guest(
        COMMON
        + PLAIN
        + "for cc in ('reno', 'lia', 'olia', 'balia', 'wvegas'):\n    RESULT[cc] = plain(cc)\n",
        timeout=600,
        mem_mb=1024,
    )
    print(r)
    # Measured on a loaded 2-CPU host: goodput 7.9-9.3 Mbit/s and mean cwnd
    # 65-73 packets for all five; a delay-based wvegas would sit near the
    # BDP (~35 packets) and a mis-coupled increase would double or halve it.
    reno = r["reno"]
    for cc in ("lia", "olia", "balia", "wvegas"):
        assert abs(r[cc]["goodput"] / reno["goodput"] - 1) < 0.15, (cc, r)
        assert abs(r[cc]["cwnd"] / reno["cwnd"] - 1) < 0.15, (cc, r)


FLOOR = """
PROFILES["tiny"] = Profile.parse({"rate": "1mbit", "delay": "5ms", "queue": 10, "loss": "5%"})

def min_ssthresh(cc, floor, secs=10):
    \"\"\"An MPTCP download over two lossy 1 Mbit/s paths (5 % loss, windows of
    a few packets) with the module's min_ssthresh = floor: the smallest
    ssthresh the server's subflows showed (sampled every 20 ms).\"\"\"
    param = Path(f"/sys/module/mptcp_{cc}/parameters/min_ssthresh")
    param.write_text(str(floor))
    p, net = network("two-path-direct", ["tiny", "tiny"], cc)
    server = iperf_server(net, "server", 5201, True)
    seen, stop = [], threading.Event()

    def sample():
        with in_netns(net.ns("server")):
            diag = Diag()
        while not stop.wait(0.02):
            for r in subflow_rows(diag, time.time()):
                row = dict(zip(SUBFLOW_COLUMNS, r))
                if row["state"] == 1 and row["ssthresh"] < 1 << 20 and row["bytes_acked"] > 65536:
                    seen.append(row["ssthresh"])

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    c = iperf_client(net, "client", p.addresses("server")[0], 5201, True, secs=secs)
    c.communicate(timeout=120)
    stop.set(); th.join()
    server.wait(10)
    net.destroy()
    param.write_text("2")
    return min(seen, default=None)
"""


def test_olia_and_balia_floor_ssthresh_at_their_min_ssthresh_parameter(guest):
    # min_ssthresh (kernel/modules/mptcp_olia.c, mptcp_balia.c): 2 by default
    # as Linux's Reno, 1 as the OLIA / Balia specifications (the thesis's
    # SBD runs, Ch. 5 Remark 1); kernel.congestion_params: {min_ssthresh: 1}
    r = guest(
        COMMON
        + FLOOR
        + "for cc in ('olia', 'balia'):\n"
        + "    for floor in (2, 1):\n"
        + "        RESULT[f'{cc} {floor}'] = min_ssthresh(cc, floor)\n",
        timeout=300,
        mem_mb=512,
    )
    print(r)
    for cc in ("olia", "balia"):
        assert r[f"{cc} 2"] == 2, r
        assert r[f"{cc} 1"] == 1, r


IDLE = """
import sys, textwrap
from mptlab.guest import nstat
# dedented: the guest fixture indents the program, these strings too
SENDER = textwrap.dedent(r'''
import socket, sys, time
proto, port, bursts, size, gap = map(int, sys.argv[1:6])
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", port))
srv.listen(1)
conn, _ = srv.accept()
for i in range(bursts):
    if i:
        time.sleep(gap / 1000)
    conn.sendall(bytes(size))
    conn.recv(1)  # the receiver's go-ahead: everything of this burst arrived
conn.close()
''')
RECEIVER = textwrap.dedent(r'''
import socket, sys
proto, addr, port, bursts, size = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, int(proto))
s.connect((addr, port))
for _ in range(bursts):
    got = 0
    while got < size:
        got += len(s.recv(1 << 16))
    s.sendall(b"k")
''')

def restarts(mptcp, paths, idle_restart=1, bursts=4, size=1 << 20, gap=1500):
    \"\"\"bursts of size bytes from the server, gap ms of silence after each has
    arrived: how often the server's TcpExtTCPCwndRestart moved.\"\"\"
    p, net = network("two-path-direct", paths, "reno",
                     {"net.ipv4.tcp_slow_start_after_idle": idle_restart})
    proto = "262" if mptcp else "6"
    def count():
        text = net.run("server", "cat", "/proc/net/netstat")
        return nstat.parse_counters(text)["TcpExt"]["TCPCwndRestart"]
    before = count()
    srv = net.popen("server", [sys.executable, "-c", SENDER, proto, "5300", str(bursts),
                               str(size), str(gap)])
    net.wait_listening("server", 5300)
    net.run("client", sys.executable, "-c", RECEIVER, proto, p.addresses("server")[0],
            "5300", str(bursts), str(size))
    srv.wait(60)
    after = count()
    net.destroy()
    return after - before
"""


def test_idle_restarts_are_counted_once_each_when_they_lower_the_window(guest):
    """Kernel patch 0012: TcpExtTCPCwndRestart counts RFC 2861's restart of
    a cwnd after the socket sent nothing for longer than its RTO, and only
    when the window is lowered.  Four 1 MiB bursts from the server, 1.5 s of
    silence between them (RTO ~0.2-0.3 s at these RTTs): three restarts for
    single-path TCP (the first burst follows no idle period); none with
    net.ipv4.tcp_slow_start_after_idle = 0.  Over two subflows at most two
    per silence.  Measured (virtual time, kernel c80970b897d1d82f,
    2026-11-26): 3, 0 and 4.  The patch's first version counted every
    tcp_cwnd_restart() call: the same program gave 3, 0 and 374 (each skb
    queued on a subflow before the first one leaves finds the socket idle;
    561 in the 60 chunks of the ECF experiment)."""
    r = guest(
        COMMON
        + IDLE
        + "RESULT['tcp'] = restarts(False, ['p40', 'p40'])\n"
        + "RESULT['tcp_off'] = restarts(False, ['p40', 'p40'], idle_restart=0)\n"
        + "RESULT['mptcp'] = restarts(True, ['d10', 'd40'])\n",
        timeout=300,
    )
    print(r)
    assert r["tcp"] == 3, r
    assert r["tcp_off"] == 0, r
    assert 3 <= r["mptcp"] <= 6, r
