"""Single rules of the scheduler modules, each seen in a transfer that
changes when the rule is taken out of the module (issue 22, item 4).

The uploads run over the BLEST paper's 3G + WLAN pair as in
test_kernel_sched_signatures (``two-path-direct``: WLAN 25 Mbit/s 12.5 ms
one way 100-packet queue, 3G 5 Mbit/s 32.5 ms 3750-packet queue), under
virtual time, in one guest per test (rng seed 1).  Bytes per path come from
the kernel's per-subflow counters (tracepoint at subflow close), re-sends
from the sender's MPTcpExt counters (patch 0011).

OR&P's "re-send only on a subflow that has not carried the segment"
(sched_orp() in kernel/modules/sched_util.h) is seen in a packet capture:
test_the_opportunistic_resend_avoids_the_carriers.  It needs kernel patch
0013, which tells the scheduler which subflows carried the blocking byte;
before it the kernel knew that per 32 KiB data fragment (patch 0005), most
fragments counted as carried by both subflows, and the re-send fell back to
a carrier (550-571 KB re-sent per 8 MiB upload, 11-15 re-sends on a
carrier, 2026-11-26).

DAPS's in-order arrival is seen in the receiver's OFO queue:
test_daps_plans_arrival_order_so_the_receiver_waits_less.  It needs the
module's cap on each subflow's unsent data (one run's share, mptcp_daps.c):
without it the fast subflow's queue ran ahead of the plan and the OFO queue
was no smaller than minRTT's.
"""

import pytest

pytestmark = pytest.mark.kernel

UPLOAD = """
import subprocess, time
from pathlib import Path
from mptlab.guest import modules, nstat, tracepoints
from mptlab.guest.build import build
from mptlab.guest.netlab import Net
from mptlab.spec.catalog import Catalog
from mptlab.spec.models import Profile
from mptlab.spec.plan import plan

LINKS = {name: Profile.parse(fields) for name, fields in {
    "wlan": {"rate": "25mbit", "delay": "12.5ms", "queue": 100},
    "3g": {"rate": "5mbit", "delay": "32.5ms", "queue": 3750},
}.items()}
PAIR = Catalog.load().topologies["two-path-direct"]

def mptcp_counters(net, host):
    return nstat.parse_counters(net.run(host, "cat", "/proc/net/netstat"))["MPTcpExt"]

def upload(scheduler, paths, nbytes, params, sysctls, hooks=None):
    # an upload of nbytes with the scheduler's module parameters set for it
    # (and put back after): bytes sent per path, MPTCP-level and
    # opportunistic re-sends; hooks: (start(net), stop() -> packets)
    pdir = Path(f"/sys/module/mptcp_{scheduler}/parameters")
    saved = {k: (pdir / k).read_text().strip() for k in params}
    for k, v in params.items():
        (pdir / k).write_text(str(v))
    p = plan(PAIR, LINKS, paths)
    net = build(p, "client", "server", net=Net(prefix=scheduler[:6] + "-"))
    for host in ("client", "server"):
        net.sysctls(host, {"net.mptcp.scheduler": scheduler, **sysctls})
    tracepoints.enable()
    sink = net.popen("server", ["mptcpize", "run", "socat", "-u", "-b", "131072",
                                "TCP-LISTEN:5201,fork,reuseaddr", "GOPEN:/dev/null"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    net.wait_listening("server", 5201)
    if hooks:
        hooks[0](net)
    before = mptcp_counters(net, "client")
    net.run("client", "mptcpize", "run", "socat", "-u", "-b", "131072",
            f"OPEN:/dev/zero,readbytes={nbytes}", f"TCP:{p.addresses('server')[0]}:5201")
    for _ in range(600):  # the subflows report their bytes when they close
        if not net.run("client", "ss", "-Htan", "exclude", "time-wait").strip():
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("connections still open 60 s after the upload")
    after = mptcp_counters(net, "client")
    sink.kill()
    sink.wait()
    client = p.addresses("client")
    out = {k: after[c] - before[c] for k, c in (("opp_retrans", "OppRetrans"),
                                                ("retrans", "MPTCPRetrans"))}
    if hooks:
        out["packets"] = hooks[1]()
    for r in tracepoints.sender_subflows(tracepoints.read()):
        out[paths[client.index(r["saddr"])]] = r["bytes_sent"]
    net.destroy()
    for k, v in saved.items():
        (pdir / k).write_text(v)
    return out

modules.load_schedulers()
"""

MIB2 = "4096 2097152 2097152"
BLEST = UPLOAD + (
    "for init in (100, 4000):\n"
    "    for delta in (0, 100):\n"
    "        RESULT[f'{init}/{delta}'] = upload('blest', ['3g', 'wlan'], 16 << 20,\n"
    "            {'lambda_init': init, 'delta': delta},\n"
    f"            {{'net.ipv4.tcp_rmem': {MIB2!r}, 'net.ipv4.tcp_wmem': {MIB2!r}}})\n"
)


def test_blest_lambda_moves_towards_the_same_value_from_either_end(guest):
    """BLEST's lambda adaptation (mptcp_blest.c, blest_update_lambda()):
    once per RTT of the fast subflow, lambda grows by ``delta`` when the
    connection-level window ran out during that RTT, and shrinks otherwise.

    16 MiB uploads over 3G + WLAN with 2 MiB socket buffers (fixed: min =
    max on both hosts), lambda started at either end of its range,
    ``lambda_init`` 100 (0.1, lambda_min) or 4000 (4.0, lambda_max), and
    either frozen (``delta=0``) or adapting by 0.1 per RTT_F (``delta=100``;
    the default 1 would need minutes to cross the range).  Frozen, the start
    decides: 0.1 is nearly minRTT (the 3G data blocks the window, hundreds of
    opportunistic re-sends), 4.0 keeps off 3G.  Adapting, both starts move
    towards the same lambda: from 4.0 down (no blocking) and 3G carries
    about as much as from 0.1; from 0.1 up (after the blocking), and the
    re-sends halve.

    Measured under virtual time (kernel 074b4c7c39396a53, modules
    f5b57f5d055b03f6, 2026-11-26), rng seeds 1-4, this program (3G MB;
    opportunistic re-sends):

    | lambda_init / delta | 3G bytes | re-sends |
    |---|---|---|
    | 100 / 0 (frozen) | 3.45-3.70 | 834-951 |
    | 100 / 100 | 2.95-3.20 | 424-457 |
    | 4000 / 0 (frozen) | 0.341-0.361 | 0 |
    | 4000 / 100 | 2.96-2.97 | 297-326 |

    So adapting from 4.0 puts 8.2x or more the frozen 3G bytes there (bound
    4x), from 0.1 it re-sends 0.46-0.55 times as often (bound 0.75), and
    the two adapting runs end 0.6-7.7 % of the frozen spread apart (bound
    25 %).  Without the rule (the two lambda moves deleted from
    blest_update_lambda(), so lambda stays at lambda_init whatever delta):
    4000/100 put 0.36 MB on 3G against 0.55 MB frozen, 100/100 re-sent 852
    times against 904, the adapting runs 3.18 MB apart for a spread of
    3.04 MB (seed 1); every bound fails.  12 s of wall time on 2 CPUs.
    """
    r = guest(BLEST, timeout=300, mem_mb=1024, clock="virtual")
    print(r)
    frozen_low, adapt_low = r["100/0"], r["100/100"]
    frozen_high, adapt_high = r["4000/0"], r["4000/100"]
    # down when nothing blocks: from 4.0, 3G is used again
    assert adapt_high["3g"] > 4 * frozen_high["3g"], r
    # up after blocking: from 0.1, fewer segments hold the window
    assert adapt_low["opp_retrans"] < 0.75 * frozen_low["opp_retrans"], r
    # both ends end up close together, the frozen ones far apart
    spread = frozen_low["3g"] - frozen_high["3g"]
    assert spread > 0, r
    assert abs(adapt_low["3g"] - adapt_high["3g"]) < 0.25 * spread, r


CAPTURE = """
import signal
import numpy as np
from mptlab.analysis import pcap

def resends(pk, client, size):
    # the client's MPTCP-level re-sends (segments with data the connection
    # sent before; TCP retransmissions left out) as (subflow, mapping's data
    # sequence number, bytes this subflow itself had carried, payload)
    src = [pcap.ip_int(a) for a in client]
    isn, top, mapping, carried, out, base = {}, {}, {}, {}, [], None
    cols = {k: getattr(pk, k).tolist()
            for k in ("src", "sport", "flags", "seq", "paylen", "dss", "dsn", "ssn")}
    for i in np.argsort(pk.ts, kind="stable").tolist():
        flow = (cols["src"][i], cols["sport"][i])
        if flow[0] not in src:
            continue
        if cols["flags"][i] & pcap.SYN:
            isn[flow] = cols["seq"][i]
            continue
        pay = cols["paylen"][i]
        if pay <= 0 or flow not in isn:
            continue
        rel = (cols["seq"][i] - isn[flow]) % (1 << 32)
        if cols["dss"][i] & pcap.DSS_M:
            mapping[flow] = (cols["dsn"][i] & 0xFFFFFFFF, cols["ssn"][i])
        if flow not in mapping or rel + pay <= top.get(flow, 0):
            continue
        top[flow] = rel + pay
        if base is None:
            base = mapping[flow][0]
        dsn = (mapping[flow][0] - base) % (1 << 32)
        d = dsn + rel - mapping[flow][1]
        if not 0 <= d <= size - pay:
            continue
        mine = carried.setdefault(flow, np.zeros(size, bool))
        own = int(mine[d:d + pay].sum())
        if own or any(c[d:d + pay].any() for f, c in carried.items() if f != flow):
            out.append((src.index(flow[0]), dsn, own, pay))
        mine[d:d + pay] = True
    return out

def captured_upload(scheduler, nbytes, params, sysctls):
    # upload() with the client's packets captured: its MIB counters and
    # its re-sends, on a subflow that had carried them or not
    p = plan(PAIR, LINKS, ["3g", "wlan"])
    caps = []

    def capture(net):
        for dev in net.hosts["client"].interfaces:
            path = RUN_DIR / f"{dev}.pcap"
            caps.append((path, net.popen("client", ["tcpdump", "-Z", "root", "-i", dev, "-s", "128",
                                                    "-U", "-w", str(path), "tcp"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        time.sleep(1)

    def stop():
        for _, proc in caps:
            proc.send_signal(signal.SIGINT)
        for _, proc in caps:
            proc.wait(timeout=30)
        return pcap.Packets.concat([pcap.read(path) for path, _ in caps])

    out = upload(scheduler, ["3g", "wlan"], nbytes, params, sysctls, hooks=(capture, stop))
    rs = resends(out.pop("packets"), p.addresses("client"), nbytes + (4 << 20))
    carriers = {(sf, dsn) for sf, dsn, own, _ in rs if own}
    out.update(carrier_maps=len(carriers),
               carrier_bytes=sum(pay for _, _, own, pay in rs if own),
               fresh_bytes=sum(pay for _, _, own, pay in rs if not own))
    return out
"""

ORP = (
    UPLOAD
    + CAPTURE
    + "BLK = {'net.ipv4.tcp_congestion_control': 'reno', 'net.ipv4.tcp_slow_start_after_idle': 0,\n"
    + "       'net.ipv4.tcp_rmem': '4096 131072 2097152', 'net.ipv4.tcp_wmem': '4096 16384 1048576'}\n"
    + "RESULT['minrtt_pr'] = captured_upload('minrtt_pr', 8 << 20, {'rtt_ratio': 0}, BLK)\n"
)


def test_the_opportunistic_resend_avoids_the_carriers(guest):
    """OR&P (sched_orp(), kernel/modules/sched_util.h): the blocking segment
    is re-sent opportunistically only on a subflow that has not carried it,
    or not at all; a re-send after an MPTCP-level timeout may go to a
    carrier (when every subflow with room carried it).

    An 8 MiB minrtt_pr upload over 3G + WLAN with the blocking buffers of
    test_kernel_sched_signatures (Reno, receive buffer up to 2 MiB, send
    buffer up to 1 MiB) and ``rtt_ratio=0``, so that every opportunity is
    taken, with the client's packets captured.  In the capture every
    MPTCP-level re-send (data sent before, not a TCP retransmission) is on a
    subflow that carried some of its bytes before (a carrier) or not.  Each
    re-send after a timeout is a mapping counted by MPTCPRetrans but not
    OppRetrans, so the carrier mappings may not outnumber
    ``MPTCPRetrans - OppRetrans``; and the rule must leave re-sends to make.

    Measured under virtual time (2026-11-27, kernel afc542660af75907 with
    patch 0013), rng seeds 1-4:

    | kernel, modules | OppRetrans | timeout re-sends | carrier mappings | other re-sent bytes |
    |---|---|---|---|---|
    | patch 0013, skip when every subflow with room carried it | 341-364 | 20-90 | 6-41 | 318-477 KB |
    | patch 0013, fall back to a carrier (the module before) | 458-488 | 15-81 | 15-55 | 492-501 KB |
    | without 0013 (fragment-wide carriers), skip | 27-30 | 15-37 | 15-23 | 40-50 KB |

    Without patch 0013 the rule starves (OppRetrans below 50: fails).  The
    fallback's extra ~120 re-sends are not classified as carrier re-sends
    in the capture (not verified why; perhaps the subflow it picks has the
    byte queued but not yet on the wire), so this test does not tell the skip from
    the fallback; OppRetrans does (341-364 against 458-488) but is not
    asserted, having no bound from the paper.  8 s of wall time.
    """
    r = guest(ORP, timeout=300, mem_mb=1024, clock="virtual")
    print(r)
    pr = r["minrtt_pr"]
    # not vacuous: the blocking segment was re-sent, and seen on the wire
    assert pr["opp_retrans"] >= 50, r
    assert pr["fresh_bytes"] >= 50 * 1400, r
    # every re-send on a carrier is one after a timeout
    assert pr["carrier_maps"] <= pr["retrans"] - pr["opp_retrans"], r


DAPS = (
    UPLOAD
    + r"""
LINKS["3g-q100"] = Profile.parse({"rate": "5mbit", "delay": "32.5ms", "queue": 100})

def ofo_hooks(out):
    # the receiver's MPTCP OFO queue over the transfer: its integral over
    # time (byte-seconds) from the tracepoint of patch 0002
    def start(net):
        tracepoints.enable((*tracepoints.STATS_EVENTS, tracepoints.OFO_EVENT), buffer_kb=32768)
    def stop():
        ev = [r for r in tracepoints.read() if r["event"] == "mptcp_ofo_queue"]
        out["area"] = sum(a["ofo_bytes"] * (b["ts"] - a["ts"]) for a, b in zip(ev, ev[1:]))
        out["last"] = ev[-1]["ofo_bytes"] if ev else 0
        return len(ev)
    return start, stop

for s in ("minrtt", "daps"):
    ofo = {}
    RESULT[s] = upload(s, ["3g-q100", "wlan"], NBYTES, {}, {}, hooks=ofo_hooks(ofo))
    RESULT[s].update(ofo)
"""
)


def test_daps_plans_arrival_order_so_the_receiver_waits_less(guest):
    """DAPS (kernel/modules/mptcp_daps.c) gives each subflow's segments the
    sequence numbers that make them arrive in order, so a byte waits less
    in the receiver's out-of-order queue than under minRTT, which sends in
    sequence order on whichever subflow has room.

    8 MiB uploads over 3G (5 Mbit/s, 32.5 ms one way, a 100-packet queue)
    + WLAN; the mean time a byte spends in the receiver's MPTCP OFO queue
    (Little's law: the queue's integral over the whole transfer / the
    bytes).  Measured under virtual time (2026-11-27), seeds 1-4, DAPS's
    wait as a fraction of minRTT's, on kernel afc542660af75907 and on
    784556e0370b1926 (patch 0014, which left DAPS's wait as it was,
    0.071-0.073 s, but moved minRTT's realisations from 0.19-0.22 to
    0.157-0.165 s per byte):

    | module | DAPS / minRTT, afc54 | 78455 |
    |---|---|---|
    | daps (opportunities taken in order of arrival, unsent data capped at one run's share) | 0.32-0.38 | 0.44-0.46 |
    | no cap (the module before) | 0.47-0.61 | 0.63-0.73 |
    | capped, planned by departure (t instead of t + D_i) | 0.56-0.66 | 0.75-0.79 |

    The bound, 0.55, sits between the first row and the others on the
    current kernel (it was 0.42 on the earlier one).  With the
    3750-packet 3G queue instead the departure-ordered plan came as close
    as the real one in one seed of four (mean OFO 191 KB, clipped at the
    client's exit): the 100-packet queue keeps the delays the plan is made
    from close to the real ones.  ~5 s.
    """
    r = guest(f"NBYTES = {8 << 20}\n" + DAPS, timeout=300, mem_mb=1024, clock="virtual")
    print(r)
    wait = {s: r[s]["area"] / (8 << 20) for s in ("minrtt", "daps")}
    # not vacuous: minRTT's queue holds data (a wait of 0.1 s per byte)
    assert wait["minrtt"] > 0.05, r
    assert r["daps"]["last"] == 0 and r["minrtt"]["last"] == 0, r
    assert wait["daps"] < 0.55 * wait["minrtt"], wait
    # DAPS still uses the slow path (it is not minRTT waiting for WLAN)
    share = r["daps"]["3g-q100"] / (r["daps"]["3g-q100"] + r["daps"]["wlan"])
    assert share > 0.1, r
