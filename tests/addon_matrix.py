"""The swap matrix of the mechanisms that are not modules of their own:
MPT-BM (kernel patch 0004, the subflows' cwnd cap) and TCP-dFEC (patch
0007, in its two modes), each told from the other and from neither, with
the same Cond / Signature records as tests/sched_matrix.py.

Candidates: ``none`` (both off, the reference), ``mptbm`` (lambda 1.5,
theta 50 ms, as the MPT-BM experiments run it), ``fec-fixed`` (one FEC
packet per 9 data segments, always) and ``fec-dynamic`` (dFEC: the ratio
moves with the residual loss, from the same 9).

Workloads (virtual time):

- ``bloat``: a 16 MiB MPTCP download (OLIA, minRTT) over the BLEST paper's
  3G (5 Mbit/s, 65 ms, 3750-packet queue) and a clean WLAN (25 Mbit/s,
  25 ms): the server's mean sRTT per subflow (test_kernel_cc's MPT-BM test).
- ``lossy``: 6 MiB of plain TCP over the FEC grid's B1 with 2 % random
  loss (20 Mibit/s, RTT 25 ms, 1-BDP queue; test_kernel_rules_cc_fec's):
  the sender's FEC packets and data segments (``tcp:tcp_fec_stats``) and
  its ratio re-evaluations (``tcp:tcp_fec_ratio``).
"""

from __future__ import annotations

from swap import Cond, Signature
from test_kernel_cc import COMMON, DISJOINT

CANDIDATES = ["none", "mptbm", "fec-fixed", "fec-dynamic"]

FEATURES = """
import re
# every candidate writes all three, so no setting of the last one lingers
SYSCTLS = {
    "none": {},
    "mptbm": {"net.mptcp.mptbm_lambda": 1500},
    "fec-fixed": {"net.ipv4.tcp_fec": 2},
    "fec-dynamic": {"net.ipv4.tcp_fec": 1},
}
BASE = {"net.mptcp.mptbm_lambda": 0, "net.mptcp.mptbm_theta_ms": 50, "net.ipv4.tcp_fec": 0}


def lossy(sysctls, nbytes=6 << 20):
    tracepoints.enable(("tcp/tcp_fec_ratio", "tcp/tcp_fec_stats"))
    p = plan(CAT.topologies["two-path-direct"], PROFILES,
             ["fec-b1-loss2", "fec-b1-loss2"], background=False)
    net = build(p, "client", "server", subflows=1, add_addr_accepted=0,
                net=Net(prefix=f"f{next(COUNT)}-"))
    for host in ("client", "server"):
        net.sysctls(host, {"net.ipv4.tcp_no_metrics_save": 1, **sysctls})
    srv = net.popen("server", ["socat", "-u", "TCP-LISTEN:5000,reuseaddr", "OPEN:/dev/null"])
    net.wait_listening("server", 5000)
    net.run("client", "sh", "-c",
            f"head -c {nbytes} /dev/zero | socat -u - TCP:{p.addresses('server')[0]}:5000")
    srv.wait(60)
    net.destroy()
    time.sleep(1)  # the sockets' FEC state is released (tcp_fec_stats) as they go
    records = tracepoints.read(("tcp_fec_ratio", "tcp_fec_stats"))
    ratios = [r["ratio_milli"] for r in records if r["event"] == "tcp_fec_ratio"]
    sender = max((r for r in records if r["event"] == "tcp_fec_stats"),
                 key=lambda r: r["data_segs"], default=None)
    sent = sender["fec_sent"] if sender else 0
    data = sender["data_segs"] if sender else 0
    return {"fec_sent": sent, "data_segs": data,
            "data_per_fec": data / sent if sent else 0.0,
            "ratio_events": len(ratios),
            "ratio_changes": sum(a != b for a, b in zip([9000] + ratios, ratios)),
            "ratio_min": min(ratios, default=0) / 1000}


def features(workload, candidate):
    sysctls = {**BASE, **SYSCTLS[candidate]}
    if workload == "bloat":
        r = disjoint("olia", ["3g", "wlan0"], None,
                     {"net.mptcp.scheduler": "minrtt", **sysctls}, nbytes=16 << 20)
        return {"srtt_3g": r["srtt_ms"]["3g"], "srtt_wlan": r["srtt_ms"]["wlan0"],
                "ofo_wait_ms": r["ofo_wait_ms"], "goodput": r["goodput"]}
    if workload == "lossy":
        return lossy(sysctls)
    raise ValueError(workload)
"""

WORKLOADS = ["bloat", "lossy"]
GUEST = {"timeout": 900, "mem_mb": 1024}


# the guest code that defines features() (tests/swap.py program())
PROGRAM = COMMON + DISJOINT + FEATURES


C = Cond
SIGNATURES = [
    Signature(
        "none",
        "no coded packets, and the 3G subflow's queue left to fill as its cwnd grows",
        (C("lossy", "fec_sent", high=1), C("bloat", "srtt_3g", low=800)),
        neighbour="mptbm",
    ),
    Signature(
        "mptbm",
        "a subflow whose RTT exceeds theta has its cwnd capped at lambda x its"
        " minimum-RTT BDP; one below theta is left alone",
        (
            C("bloat", "srtt_3g", high=0.5, rel=True),
            C("bloat", "ofo_wait_ms", high=0.5, rel=True),  # the receiver waits less
            C("bloat", "srtt_wlan", high=100),
            C("lossy", "fec_sent", high=1),
        ),
        neighbour="none",
    ),
    Signature(
        "fec-fixed",
        "one FEC packet per `ratio` data segments, the ratio never re-evaluated",
        (
            C("lossy", "fec_sent", low=1),
            C("lossy", "ratio_events", high=1),
            C("lossy", "data_per_fec", low=8, high=10),
        ),
        neighbour="none",  # the bench's nearest: 2 conditions failed, fec-dynamic's far beyond,
    ),
    Signature(
        "fec-dynamic",
        "the ratio re-evaluated every 3 sRTTs, lowered while the residual loss is above target",
        (
            C("lossy", "fec_sent", low=1),
            C("lossy", "ratio_changes", low=5),
            C("lossy", "ratio_min", high=8),
        ),
        neighbour="fec-fixed",
    ),
]

REFERENCE = "none"
