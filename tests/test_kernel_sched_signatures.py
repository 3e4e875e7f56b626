"""Each scheduler module shows its signature on a real two-path transfer.

Topology: ``two-path-direct`` (client and server joined by two shaped
links), built as a campaign builds it: one subflow per link (the server
announces its second address).  Profiles, one-way delay per
direction: WLAN 25 Mbit/s 12.5 ms 100-packet queue, 3G 5 Mbit/s 32.5 ms
3750-packet queue (the BLEST paper's values, delays read as RTTs).  Byte
counts come from the kernel's per-subflow counters (tracepoint at subflow
close).
"""

import pytest

pytestmark = pytest.mark.kernel

TRANSFER = """
import subprocess, time
from mptlab.guest import modules, tracepoints
from mptlab.guest.build import build
from mptlab.guest.netlab import Net
from mptlab.spec.catalog import Catalog
from mptlab.spec.models import Profile
from mptlab.spec.plan import plan
from mptlab.workloads.helpers import spin

PROFILES = {name: Profile.parse(fields) for name, fields in {
    "wlan": {"rate": "25mbit", "delay": "12.5ms", "queue": 100},
    # the BLEST paper's 3G router queue: 3750 packets (~9 s at 5 Mbit/s)
    "3g": {"rate": "5mbit", "delay": "32.5ms", "queue": 3750},
    "3g-q100": {"rate": "5mbit", "delay": "32.5ms", "queue": 100},
}.items()}
TOPOLOGY = Catalog.load().topologies["two-path-direct"]

def transfer(scheduler, paths, nbytes):
    p = plan(TOPOLOGY, PROFILES, paths)
    net = build(p, "client", "server", net=Net(prefix=scheduler + "-"))
    net.sysctls("client", {"net.mptcp.scheduler": scheduler})
    tracepoints.enable()
    # spin.prefix(): under virtual time (MPTLAB_TEST_CLOCK=virtual) iperf3's
    # end-of-test select() spins would freeze guest time; nothing under real time
    server = net.popen("server", ["mptcpize", "run", *spin.prefix(), "iperf3", "-s", "-1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    net.wait_listening("server", 5201)
    net.run("client", "mptcpize", "run", *spin.prefix(), "iperf3", "-c", p.addresses("server")[0],
            "-n", str(nbytes))
    server.wait(timeout=60)
    # subflows report their counters when they close, which can be after
    # the application is done (a slow path still drains its queue)
    for _ in range(600):
        if not net.run("client", "ss", "-Htan", "exclude", "time-wait").strip():
            break
        time.sleep(0.1)
    else:
        raise RuntimeError("connections still open 60 s after the transfer")
    records = tracepoints.read()
    subflows = tracepoints.sender_subflows(records)
    conn = [r for r in records if r["event"] == "mptcp_conn_stats"
            and r["token"] == subflows[0]["token"]]
    by_path = {"acked": conn[0]["bytes_acked"]}
    client = p.addresses("client")
    for r in subflows:
        i = client.index(r["saddr"])  # the client's address on link i: path i + 1
        key = paths[i] + "'" * paths[:i].count(paths[i])
        by_path[key] = {"bytes": r["bytes_sent"], "reinjected": r["bytes_reinjected"]}
    net.destroy()
    return by_path

modules.load_schedulers()
"""

MB = 1 << 20


def share(stats, path):
    total = sum(s["bytes"] for k, s in stats.items() if k != "acked")
    return stats[path]["bytes"] / total


def test_roundrobin_splits_identical_paths_evenly(guest):
    r = guest(
        TRANSFER + "RESULT['rr'] = transfer('roundrobin', ['wlan', 'wlan'], 24 * 1024 * 1024)\n",
        timeout=180,
    )
    stats = r["rr"]
    assert set(stats) == {"wlan", "wlan'", "acked"}, stats
    assert 0.45 <= share(stats, "wlan") <= 0.55, stats


def test_redundant_sends_every_byte_on_every_subflow(guest):
    n = 6 * MB
    r = guest(
        TRANSFER + f"RESULT['red'] = transfer('redundant', ['3g-q100', 'wlan'], {n})\n", timeout=180
    )
    stats = r["red"]
    assert set(stats) == {"3g-q100", "wlan", "acked"}, stats
    assert stats["acked"] >= n / 2, stats
    for path in ("3g-q100", "wlan"):
        assert stats[path]["bytes"] >= 0.95 * stats["acked"], (path, stats)


def test_minrtt_prefers_low_rtt_and_blest_spares_the_slow_path(guest):
    n = 16 * MB
    r = guest(
        TRANSFER
        + f"RESULT['minrtt'] = transfer('minrtt', ['3g', 'wlan'], {n})\n"
        + f"RESULT['blest'] = transfer('blest', ['3g', 'wlan'], {n})\n",
        timeout=240,
    )
    minrtt, blest = r["minrtt"], r["blest"]
    assert share(minrtt, "wlan") > 0.5, minrtt
    assert blest["3g"]["bytes"] < minrtt["3g"]["bytes"], (minrtt, blest)
    assert blest["3g"]["reinjected"] + blest["wlan"]["reinjected"] < (
        minrtt["3g"]["reinjected"] + minrtt["wlan"]["reinjected"]
    ), (minrtt, blest)
