"""Rules of dFEC and OLIA (issue 22 item 4): each test fails without its rule.

Virtual time, rng seed 1 (the ``guest`` fixture); the bounds come from seeds
1-4 measured on kernel 074b4c7c39396a53 (the numbers are in each test).
"""

from __future__ import annotations

import pytest
from test_kernel_cc import COMMON as CC_COMMON

pytestmark = pytest.mark.kernel

# ---------------------------------------------------------------------------
# dFEC: every 3 sRTTs the ratio is multiplied by (1 - delta) when the mean
# residual loss of the last two periods is above the target (kernel patch
# 0007, fec_tick(); docs/fec.md "Dynamic ratio").  Each re-evaluation is a
# tcp:tcp_fec_ratio event with the new ratio and the residual it was judged
# on, so the trace alone gives every step.

# The constants the docs give (Ferlin thesis ch. 6): ratio 9 at the start,
# delta 0.33, target 1 %, ratio within [4, 256]; the kernel keeps the ratio
# in thousandths, the delta in permille, the target in ppm.
DFEC = {"ratio": 9, "delta": 330, "target": 10000, "min": 4, "max": 256}

DFEC_PROGRAM = r"""
import re, subprocess, time
from mptlab.guest.build import build
from mptlab.guest.netlab import Net
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import plan

TRACE = Path("/sys/kernel/tracing")
(TRACE / "events/tcp/tcp_fec_ratio/enable").write_text("1")
CAT = Catalog.load()
# plain TCP over the FEC grid's B1 with 2 % random loss (20 Mibit/s, RTT
# 25 ms, 1-BDP queue), built as a campaign builds it
p = plan(CAT.topologies["two-path-direct"], dict(CAT.profiles),
         ["fec-b1-loss2", "fec-b1-loss2"], background=False)
net = build(p, "client", "server", subflows=1, add_addr_accepted=0, net=Net(prefix="f-"))
for host in ("client", "server"):
    net.sysctls(host, {"net.ipv4.tcp_fec": 1, "net.ipv4.tcp_no_metrics_save": 1,
                       **SYSCTLS})
RESULT["sysctls"] = {k: int(net.run("client", "sysctl", "-n", f"net.ipv4.tcp_fec_{k}"))
                     for k in ("ratio", "delta", "target", "min", "max")}
srv = net.popen("server", ["socat", "-u", "TCP-LISTEN:5000,reuseaddr", "OPEN:/dev/null"])
net.wait_listening("server", 5000)
net.run("client", "sh", "-c",
        f"head -c {NBYTES} /dev/zero | socat -u - TCP:{p.addresses('server')[0]}:5000")
srv.wait(60)
events = []
for line in (TRACE / "trace").read_text().splitlines():
    if "tcp_fec_ratio:" in line:
        f = dict(re.findall(r"(\w+)=(\S+)", line.split("tcp_fec_ratio:", 1)[1]))
        events.append([f"{f['sport']}>{f['dport']}", int(f["ratio_milli"]),
                       int(f["residual_ppm"])])
RESULT["events"] = events
net.destroy()
"""


def dfec_program(nbytes: int = 6 << 20, sysctls: dict | None = None) -> str:
    return f"NBYTES = {nbytes}\nSYSCTLS = {dict(sysctls or {})!r}\n" + DFEC_PROGRAM


def dfec_steps(events, ratio=9, delta=330, target=10000, lo=4, hi=256):
    """Each socket's ratio events as steps (before, after, residual ppm,
    expected after) under the rule: x (1 - delta) above the target, x (1 +
    delta) otherwise, in the kernel's integer arithmetic (thousandths,
    rounded down), clamped to [lo, hi].  A socket starts from ``ratio``."""
    prev: dict[str, int] = {}
    steps = []
    for sock, after, residual in events:
        before = prev.get(sock, ratio * 1000)
        factor = 1000 - delta if residual > target else 1000 + delta
        expected = min(max(before * factor // 1000, lo * 1000), hi * 1000)
        steps.append({"before": before, "after": after, "residual": residual, "expected": expected})
        prev[sock] = after
    return steps


def decreases(steps, lo=4):
    """The steps judged above the target, and of those the ones the lower
    bound did not cut (the multiplication alone decides them)."""
    down = [s for s in steps if s["residual"] > DFEC["target"]]
    free = [s for s in down if s["expected"] > lo * 1000]
    return down, free


def test_dfec_decreases_its_ratio_by_exactly_one_minus_delta(guest):
    """Every re-evaluation judged above the 1 % target takes the ratio to
    ratio x (1 - 0.33) (thousandths, rounded down), and there are many of them.

    Seeds 1-4 (virtual time, kernel 074b4c7c39396a53, 6 MiB of plain TCP
    over fec-b1-loss2, run as this test runs them): 67 / 76 / 94 / 70
    re-evaluations, of them 26 / 30 / 39 / 29 above the target and 26 / 30 /
    37 / 28 not cut by the lower bound of 4; every step, up and down, exactly
    as the rule computes it.  With delta 0.5 (the sysctl; 0 is refused) every
    unclamped decrease misses x 0.67 (21 / 21 / 33 / 31 per seed), with delta
    0.001 both of seed 1's.  Replayed on seed 1's residuals, a halving, x 0.75,
    -1 segment, / 1.33, a held or raised ratio all fail on every decrease,
    x 0.67 rounded to the nearest thousandth on 10 of 26.
    """
    r = guest(dfec_program(), timeout=300, mem_mb=512, clock="virtual")
    assert r["sysctls"] == DFEC, r["sysctls"]
    steps = dfec_steps(r["events"])
    down, free = decreases(steps)
    print(len(steps), len(down), len(free))
    bad = [s for s in down if s["after"] != s["expected"]]
    assert not bad, bad[:5]
    # and the ratio falls only on those steps
    falls = [s for s in steps if s["after"] < s["before"] and s not in down]
    assert not falls, falls[:5]
    assert len(free) >= 10, (len(steps), len(down), len(free))


# ---------------------------------------------------------------------------
# OLIA's alpha (kernel/modules/mptcp_olia.c, Khalili et al. 2013): on top of
# the coupled increase, alpha_r / w_r per ACK with alpha_r = 1 / (n |C|) on
# the best paths (largest l_r / rtt_r^2) that do not have the largest window
# (C = B \ M), -1 / (n |M|) on the largest-window paths M when C is not
# empty, 0 otherwise: window moves from the largest-window path to a best
# one that has less.
#
# Two identical clean paths (10 Mbit/s, RTT 20 ms, 1-BDP queue, no random
# loss): losses are queue overflows, so the path with the smaller window
# has the shorter queue, the smaller RTT and so the larger l / rtt^2: it is
# the best path without the largest window, and alpha hands it window until
# the two are equal (then both are in M, C is empty and alpha is 0).  The
# coupled increase alone (Kelly-Voice) has no such pull: per RTT it adds
# w_r^2 / W^2 to path r, the larger window the more, and LIA's per-RTT
# increase is proportional to each window too.  Goodput is the same for all
# three (both links full); what differs is how far apart the windows stay.

BALANCE_PROGRAM = r"""
PROFILES["twin"] = Profile.parse({"rate": "10mbit", "delay": "10ms", "queue": "1 bdp"})
p, net = network("two-path-direct", ["twin", "twin"], CC)
server = iperf_server(net, "server", 5201, True)
peers = {a: i for i, a in enumerate(p.addresses("client"))}
pairs, stop = [], threading.Event()


def sample():
    # each 50 ms, the window of both data subflows (iperf3's control
    # connection is MPTCP too, but carries next to nothing)
    with in_netns(net.ns("server")):
        diag = Diag()
    while not stop.wait(0.05):
        w = {}
        for r in subflow_rows(diag, time.time()):
            row = dict(zip(SUBFLOW_COLUMNS, r))
            if row["state"] == 1 and row["daddr"] in peers and row["bytes_acked"] > 1 << 20:
                w[peers[row["daddr"]]] = row["cwnd"]
        if len(w) == 2:
            pairs.append([w[0], w[1]])


th = threading.Thread(target=sample, daemon=True)
th.start()
c = iperf_client(net, "client", p.addresses("server")[0], 5201, True, secs=SECS)
RESULT["goodput"] = goodput(c)
stop.set()
th.join()
server.wait(10)
net.destroy()
RESULT["pairs"] = pairs
"""


def balance_program(cc: str = "olia", secs: int = 30) -> str:
    return CC_COMMON + f"CC = {cc!r}\nSECS = {secs}\n" + BALANCE_PROGRAM


def window_gap(pairs) -> float:
    """Mean of |w1 - w2| / (w1 + w2) over the samples after the first quarter
    (slow start and the first losses left out)."""
    late = pairs[len(pairs) // 4 :]
    return sum(abs(a - b) / (a + b) for a, b in late) / len(late)


def test_olia_alpha_moves_window_to_the_best_path_without_the_largest_window(guest):
    """Two identical clean paths: OLIA keeps the two windows within a few
    per cent of each other; without alpha they stay about 10 % apart, with
    LIA about 17 %.

    Mean |w1 - w2| / (w1 + w2) over the last 3/4 of a 30 s download, seeds 1-4
    (virtual time, kernel 074b4c7c39396a53, run as this test runs them): olia
    0.005 / 0.004 / 0.004 / 0.006; olia with alpha forced to 0 (modules built
    from mptcp_olia.c with the alpha term multiplied by 0) 0.096 / 0.091 /
    0.107 / 0.091; lia in olia's place 0.164 / 0.164 / 0.172 / 0.163.
    Goodput 18.65-18.69 Mbit/s in all twelve runs.  Alpha is at work
    throughout: counted in an instrumented copy of the module (an exploration
    run of this topology, seeds 1-3), it was non-zero on 4-13 % of OLIA's
    congestion-avoidance ACKs, and on 95 % of them when computed but left out
    of the window.
    """
    r = guest(balance_program("olia"), timeout=300, mem_mb=1024, clock="virtual")
    gap = window_gap(r["pairs"])
    print(f"goodput {r['goodput']:.2f} samples {len(r['pairs'])} gap {gap:.3f}")
    assert r["goodput"] > 18, r["goodput"]  # both 10 Mbit/s links full
    assert len(r["pairs"]) > 300, len(r["pairs"])
    # 0.004-0.006 with alpha, 0.091 and more without it or with LIA
    assert gap < 0.03, gap
