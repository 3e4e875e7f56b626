"""Issue 9 without the kernel: nstat parsing, the stall detector fed with
synthetic polls, its words, the automatic timeout from planned links, tool
errors in words instead of KeyError, and how stalled runs are recorded,
counted and ingested."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mptlab import rundir as st
from mptlab.guest import nstat, stall
from mptlab.guest.workload import WorkloadError
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import NetPlan
from mptlab.spec.yamlsrc import SpecError
from mptlab.workloads import bulk, cbr, web

# ------------------------------------------------------------------ nstat
NETSTAT = """\
TcpExt: SyncookiesSent PruneCalled RcvPruned OfoPruned TCPOFOQueue TCPOFODrop
TcpExt: 0 3 0 2 1200 7
IpExt: InNoRoutes InOctets
IpExt: 0 123456789012
MPTcpExt: MPCapableSYNRX MPJoinSynRx DuplicateData OFOQueue NewFutureCounter
MPTcpExt: 1 1 5 4200 9
"""
SNMP = """\
Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 100
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens RetransSegs
Tcp: 1 200 120000 -1 4 17
"""


def test_counter_files_are_read_as_printed_with_whatever_groups_and_fields_there_are():
    c = nstat.parse_counters(NETSTAT + SNMP)
    assert set(c) == {"TcpExt", "IpExt", "MPTcpExt", "Ip", "Tcp"}
    assert c["TcpExt"]["OfoPruned"] == 2 and c["TcpExt"]["TCPOFOQueue"] == 1200
    assert c["MPTcpExt"]["NewFutureCounter"] == 9  # a field this code never heard of
    assert c["IpExt"]["InOctets"] == 123456789012
    assert c["Tcp"]["MaxConn"] == -1
    # a kernel without MPTCP, a values line cut short, a stray line
    c = nstat.parse_counters("TcpExt: A B C\nTcpExt: 1 2\nnonsense\n")
    assert c == {"TcpExt": {"A": 1, "B": 2}}


def test_deltas_keep_only_counters_that_moved():
    start = nstat.parse_counters(NETSTAT)
    end = json.loads(json.dumps(start))
    end["TcpExt"]["TCPOFOQueue"] += 300
    end["MPTcpExt"]["OFOQueue"] += 1
    end["TcpExt"]["Brand"] = 5  # only at the end: no delta
    assert nstat.delta(start, end) == {"TcpExt": {"TCPOFOQueue": 300}, "MPTcpExt": {"OFOQueue": 1}}


def test_sockstat_and_meminfo():
    s = nstat.parse_sockstat(
        "sockets: used 10\nTCP: inuse 3 orphan 1 tw 0 alloc 4 mem 77\nUDP: inuse 0 mem 0\n"
    )
    assert s["TCP"] == {"inuse": 3, "orphan": 1, "tw": 0, "alloc": 4, "mem": 77}
    assert s["sockets"] == {"used": 10}
    m = nstat.parse_meminfo("MemTotal:  250000 kB\nMemFree:   1000 kB\nMemAvailable: 9000 kB\n")
    assert m == {"MemTotal": 250000, "MemFree": 1000, "MemAvailable": 9000}


def test_reader_reads_this_namespace_without_a_process():
    r = nstat.Reader(None)
    try:
        first = r.counters()
        assert "Tcp" in first and "TcpExt" in first  # every Linux has these
        assert r.counters().keys() == first.keys()  # a second read of the kept file
        assert "TCP" in r.sockstat()
    finally:
        r.close()


# --------------------------------------------------------------- detector
def mconn(host="server", una=0, write=0, **kw):
    fields = {
        "saddr": "10.0.2.2",
        "sport": 5201,
        "daddr": "10.0.0.1",
        "dport": 40000,
        "token": 7,
        "snd_una": una,
        "write_seq": write,
        **kw,
    }
    return stall.connections(host, [fields], [])[0]


def test_a_frozen_level_with_data_outstanding_stalls_after_the_timeout():
    d = stall.Detector(4.0)
    assert d.update(0.0, [mconn(una=100, write=500)]) == []
    assert d.update(2.0, [mconn(una=200, write=500)]) == []  # progress: the clock restarts
    assert d.update(5.9, [mconn(una=200, write=500)]) == []  # frozen 3.9 s
    frozen = d.update(6.0, [mconn(una=200, write=500)])
    assert len(frozen) == 1 and frozen[0].seconds == pytest.approx(4.0) and frozen[0].level == 200


def test_idle_gaps_with_nothing_outstanding_never_stall():
    d = stall.Detector(1.0)
    t = 0.0
    level = 0
    for _ in range(50):  # a CBR-like sender: a burst, acknowledged, then 3 s of nothing
        level += 5000
        assert d.update(t, [mconn(una=level - 5000, write=level)]) == []
        assert d.update(t + 0.1, [mconn(una=level, write=level)]) == []
        t += 3.0
        assert d.update(t, [mconn(una=level, write=level)]) == []


def test_a_connection_seen_late_starts_its_clock_when_seen_and_one_that_left_is_forgotten():
    d = stall.Detector(2.0)
    assert d.update(0.0, []) == []
    assert d.update(10.0, [mconn(una=1, write=9)]) == []
    assert d.update(11.0, []) == []
    assert d.update(12.5, [mconn(una=1, write=9)]) == []  # back again: a new clock
    assert len(d.update(14.5, [mconn(una=1, write=9)])) == 1


def test_which_sockets_are_judged():
    subflows = [
        {
            "saddr": "10.0.2.2",
            "sport": 5201,
            "daddr": "10.0.0.1",
            "dport": 40000,
            "token_loc": 7,
            "unacked": 9,
            "notsent_bytes": 0,
            "bytes_acked": 1,
        },  # subflow of a working MPTCP connection
        {
            "saddr": "10.0.2.2",
            "sport": 5202,
            "daddr": "10.0.0.1",
            "dport": 40001,
            "token_loc": 8,
            "unacked": 4,
            "notsent_bytes": 0,
            "bytes_acked": 50,
        },  # subflow of a fallen-back one
        {
            "saddr": "10.0.2.2",
            "sport": 9000,
            "daddr": "10.0.0.1",
            "dport": 40002,
            "token_loc": "",
            "unacked": 0,
            "notsent_bytes": 10,
            "bytes_acked": 7,
        },  # plain TCP
    ]
    mptcp = [
        {
            "saddr": "10.0.2.2",
            "sport": 5201,
            "daddr": "10.0.0.1",
            "dport": 40000,
            "token": 7,
            "snd_una": 5,
            "write_seq": 5,
            "fallback": False,
        },
        {
            "saddr": "10.0.2.2",
            "sport": 5202,
            "daddr": "10.0.0.1",
            "dport": 40001,
            "token": 8,
            "snd_una": 9,
            "write_seq": 9,
            "fallback": True,
        },
    ]
    conns = stall.connections("server", mptcp, subflows)
    kinds = sorted((c.kind, c.fields["sport"], c.outstanding, c.level) for c in conns)
    assert kinds == [("mptcp", 5201, False, 5), ("tcp", 5202, True, 50), ("tcp", 9000, True, 7)]


def test_the_reason_says_direction_duration_outstanding_ofo_and_subflows():
    server = [
        {
            "saddr": "10.0.2.2",
            "sport": 5201,
            "daddr": "10.0.0.1",
            "dport": 40000,
            "token": 7,
            "snd_una": 1000,
            "write_seq": 4_301_000,
            "bytes_acked": 49_005_808,
        }
    ]
    client = [
        {
            "saddr": "10.0.0.1",
            "sport": 40000,
            "daddr": "10.0.2.2",
            "dport": 5201,
            "token": 9,
            "ofo_bytes": 4_300_000,
            "ofo_segs": 2950,
            "ofo_bytes_max": 4_400_000,
        }
    ]
    subflows = {
        "server": [
            {
                "saddr": "10.0.2.2",
                "sport": 5201,
                "daddr": "10.0.0.1",
                "dport": 40000,
                "state": 1,
                "token_loc": 7,
                "cwnd": 1,
                "unacked": 12,
                "lost": 12,
                "rto": 3_200_000,
                "srtt_us": 40_000,
                "total_retrans": 30,
                "notsent_bytes": 0,
            },
            {
                "saddr": "10.0.5.2",
                "sport": 5201,
                "daddr": "10.0.3.1",
                "dport": 40010,
                "state": 1,
                "token_loc": 7,
                "cwnd": 10,
                "unacked": 0,
                "lost": 0,
                "rto": 204_000,
                "srtt_us": 26_000,
                "total_retrans": 1,
                "notsent_bytes": 0,
            },
        ],
        "client": [],
    }
    d = stall.Detector(8.0)
    conns = stall.connections("server", server, subflows["server"])
    d.update(0.0, conns)
    frozen = d.update(8.0, conns)
    paths = {"10.0.2.2": 1, "10.0.5.2": 2}
    text = stall.describe(frozen, {"server": server, "client": client}, subflows, paths.get)
    assert text.startswith("server -> client: MPTCP data level frozen at 49005808 bytes for 8.0 s")
    assert "4.3 MB outstanding" in text
    assert "receiver's MPTCP OFO queue 4.3 MB (2950 segments" in text
    assert "path1 10.0.2.2:5201->10.0.0.1:40000: cwnd 1, 12 unacked, 12 lost, rto 3200 ms" in text
    assert "path2 10.0.5.2:5201->10.0.3.1:40010" in text


# ------------------------------------------------------ timeout from links
def plan_of(tmp_path, paths, extra=""):
    f = tmp_path / "c.yaml"
    f.write_text(
        "experiments:\n  e:\n    topology: two-path\n"
        f"    paths: [{', '.join(paths)}]\n    workload: {{type: bulk, bytes: 1MiB}}\n{extra}"
    )
    run = Catalog.load(f).expand("e")[0]
    return run, NetPlan.from_json(run.plan)


WLAN_RTT = 0.050 + 100 * 1514 * 8 / 25e6  # the wlan profile's RTT with a full queue
WLAN_AUTO = WLAN_RTT + (2 * WLAN_RTT + 0.2) + 6.2  # its RTO and the backoff margin


def test_auto_timeout_is_worst_rtt_plus_its_rto_plus_the_backoff_margin(tmp_path):
    _, plan = plan_of(tmp_path, ["wlan", "wlan"])
    rtts = stall.path_rtts(plan, "client", "server")
    assert len(rtts) == 2  # each client address reaches the server address on its own path
    # wlan: 2 x 25 ms, 100 packets at 25 Mbit/s drain in 48.4 ms
    assert rtts[0]["rtt_s"] == pytest.approx(0.050) and rtts[0]["queue_s"] == pytest.approx(
        100 * 1514 * 8 / 25e6
    )
    t, how = stall.auto_timeout(plan, "client", "server")
    assert t == pytest.approx(WLAN_AUTO, abs=0.01)  # 6.70 s
    # 3G's 3750-packet queue at 5 Mbit/s holds 9.1 s: the wait for it counts
    _, plan = plan_of(tmp_path, ["wlan", "3g"])
    t, how = stall.auto_timeout(plan, "client", "server")
    assert how["worst_rtt_s"] == pytest.approx(0.130 + 3750 * 1514 * 8 / 5e6, abs=1e-3)
    assert 30 < t < 40


def test_a_planned_outage_that_ends_lengthens_the_auto_timeout_one_that_never_ends_does_not(
    tmp_path,
):
    events = (
        "    events:\n"
        "      - {at: 2s, link: path1, set: {loss: 100%}}\n"
        "      - {at: 2s, link: path2, set: {loss: 100%}}\n"
    )
    _, plan = plan_of(tmp_path, ["wlan", "wlan"], events)
    t_forever, how = stall.auto_timeout(plan, "client", "server")
    assert how["planned_outage_s"] == 0 and t_forever == pytest.approx(WLAN_AUTO, abs=0.01)
    _, plan = plan_of(
        tmp_path, ["wlan", "wlan"], events + "      - {at: 12s, link: path1, set: {loss: 0}}\n"
    )
    t, how = stall.auto_timeout(plan, "client", "server")
    assert how["planned_outage_s"] == pytest.approx(10.0) and t == pytest.approx(t_forever + 20)


def test_stall_timeout_setting(tmp_path):
    run, plan = plan_of(tmp_path, ["wlan", "wlan"], "    stall_timeout: off\n")
    assert run.config["stall_timeout"] == "off"  # YAML's bare off (a boolean) means off
    assert stall.resolve_timeout("off", plan, "client", "server") == (None, {"setting": "off"})
    run, _ = plan_of(tmp_path, ["wlan", "wlan"], "    stall_timeout: 8s\n")
    assert run.config["stall_timeout"] == 8000.0
    assert stall.resolve_timeout(8000.0, plan, "client", "server")[0] == 8.0
    run, _ = plan_of(tmp_path, ["wlan", "wlan"])
    assert run.config["stall_timeout"] == "auto"
    with pytest.raises(SpecError, match=r"c.yaml:6: experiments.e.stall_timeout: .*or auto, off"):
        plan_of(tmp_path, ["wlan", "wlan"], "    stall_timeout: soon\n")


# ------------------------------------------------------ tool errors in words
def iperf3_report(error=None, end=True):
    rep = {
        "start": {},
        "intervals": [
            {"sum": {"start": i * 0.1, "end": (i + 1) * 0.1, "seconds": 0.1, "bytes": 100_000}}
            for i in range(30)
        ],
    }
    if end:
        rep["end"] = {
            "sum_received": {"bytes": 3_000_000, "seconds": 3.0, "bits_per_second": 8e6},
            "sum_sent": {"bytes": 3_100_000, "retransmits": 4},
        }
    if error:
        rep["error"] = error
    return rep


def test_an_iperf3_error_is_the_reason_not_a_key_error():
    # the real stalled run: an error, no end.sum_received
    rep = iperf3_report("idle timeout for receiving data", end=False)
    assert bulk.iperf3_error(rep, None, 1) == "iperf3: idle timeout for receiving data"
    partial = bulk.metrics(rep, 0.0)  # what it measured before
    assert partial["bytes_received"] == 3_000_000 and partial["bytes_sent"] is None
    assert partial["goodput_mbps"] == pytest.approx(8.0)
    assert bulk.iperf3_error(iperf3_report(), None, 0) is None
    assert bulk.metrics(iperf3_report(), 0.0)["retransmits"] == 4
    with pytest.raises(WorkloadError, match="neither an end section nor intervals: boom"):
        bulk.metrics({"error": "boom"}, 0.0)
    assert bulk.parse_report("", "iperf3 client") == "iperf3 client wrote no report"
    bad = bulk.parse_report('{"start": {', "iperf3 client")
    assert bulk.iperf3_error(bad, None, -9, "Killed").startswith("iperf3 client report is not JSON")
    assert "exited with 1" in bulk.iperf3_error(iperf3_report(), None, 1)
    up = bulk.iperf3_error(iperf3_report(), iperf3_report("the client has terminated"), 0)
    assert up == "iperf3 server: the client has terminated"


def test_other_tools_output_errors_are_words_too():
    with pytest.raises(
        WorkloadError, match=r"nghttp: unexpected HAR output \(KeyError: no 'log'\)"
    ):
        web.parse_har({"entries": []})
    with pytest.raises(WorkloadError, match="ITGDec: unreadable record"):
        cbr.parse_itgdec("Flow>  1 Seq>  1 Src> 10.0.0.1:9000\n")


def test_the_agent_names_a_lookup_bug_with_its_place():
    from mptlab.guest.agent import error_text

    try:
        {}["sum_received"]
    except KeyError as exc:
        text = error_text(exc)
    assert text.startswith("KeyError: 'sum_received' (in test_stall_units.py:")
    assert error_text(WorkloadError("iperf3: idle timeout")) == "iperf3: idle timeout"


# ------------------------------------------------------ stopping a workload
def test_a_fired_watchdog_stops_the_workload_processes_and_its_run_returns(tmp_path):
    from mptlab.guest import agent

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    tracer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ctx = SimpleNamespace(client="client", server="server", procs=[tracer], log=lambda m: None)
    ctx.net = SimpleNamespace(
        ns=lambda h: "ns-" + h, spawned=[("ns-server", sleeper), ("ns-server", tracer)]
    )
    watchdog = SimpleNamespace(fired=threading.Event(), info={})

    class Workload:
        @staticmethod
        def run(ctx):
            sleeper.wait()
            raise WorkloadError("iperf3: interrupt - the client has terminated", metrics={"x": 1})

    threading.Timer(0.3, watchdog.fired.set).start()
    t0 = time.monotonic()
    out = agent.run_workload(ctx, Workload, watchdog)
    try:
        assert out.stalled and not out.abandoned and time.monotonic() - t0 < 5
        assert sleeper.returncode is not None and tracer.poll() is None  # traces keep running
        assert out.exc.metrics == {"x": 1}
    finally:
        tracer.kill()
        tracer.wait()


def test_a_workload_that_never_returns_is_left_behind_after_the_grace(monkeypatch):
    from mptlab.guest import agent

    monkeypatch.setattr(agent, "STOP_GRACE_S", 0.3)
    ctx = SimpleNamespace(client="c", server="s", procs=[], log=lambda m: None)
    ctx.net = SimpleNamespace(ns=lambda h: h, spawned=[])
    watchdog = SimpleNamespace(fired=threading.Event(), info={})
    watchdog.fired.set()
    block = threading.Event()
    out = agent.run_workload(ctx, SimpleNamespace(run=lambda ctx: block.wait()), watchdog)
    block.set()
    assert out.stalled and out.abandoned


# ------------------------------------------------------ the run's status
def test_result_status_maps_to_the_run_outcome():
    stalled = {"status": "stalled", "reason": "server -> client: MPTCP data level frozen ..."}
    assert st.outcome("failed", "guest program exited with 1", stalled) == (
        "stalled",
        stalled["reason"],
    )
    err = {"status": "error", "error": "iperf3: idle timeout for receiving data"}
    assert st.outcome("failed", "exit 1", err) == (
        "failed",
        "iperf3: idle timeout for receiving data",
    )
    assert st.outcome("ok", "", {"status": "ok"}) == ("ok", "")
    assert st.outcome("timeout", "killed after 40 s", stalled) == ("timeout", "killed after 40 s")
    assert st.outcome("ok", "", None) == ("failed", "the guest wrote no result.json")
    assert st.breakdown(["ok", "stalled", "failed", "stalled", "weird"]) == (
        "1 failed, 2 stalled, 1 weird"
    )


def test_stalled_runs_are_not_ok_counted_by_name_and_retried_with_retry_failed(tmp_path):
    from mptlab.campaign.kernel import KernelBuild
    from mptlab.campaign.runner import Campaign, CampaignReport, Outcome

    rep = CampaignReport(
        [
            Outcome("a/rep-000", "ok"),
            Outcome("a/rep-001", "stalled", "frozen"),
            Outcome("a/rep-002", "failed", "iperf3: ..."),
        ]
    )
    assert [o.run_id for o in rep.failed] == ["a/rep-001", "a/rep-002"]
    assert rep.breakdown() == "1 failed, 1 stalled"
    camp = tmp_path / "c.yaml"
    camp.write_text(
        "experiments:\n  e:\n    topology: two-path\n    paths: [wlan, 3g]\n"
        "    workload: {type: bulk, duration: 3s}\n"
    )
    run = Catalog.load(camp).expand("e")[0]
    out = tmp_path / "out"
    d = out / "runs" / "base" / "rep-000"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"status": "stalled", "reason": "frozen", "seconds": 9}))
    kernel = KernelBuild(tmp_path, tmp_path)
    assert Campaign(out, [run], kernel)._previous(run).status == "stalled"
    assert Campaign(out, [run], kernel, retry_failed=True)._previous(run) is None
    assert (out / "runs" / "base" / "rep-000.failed-1" / "run.json").exists()


# ------------------------------------------------------ analysis
DATA = Path(__file__).parent / "data" / "analysis" / "results" / "fixture"


def stalled_campaign(tmp_path) -> Path:
    camp = tmp_path / "results" / "fixture"
    shutil.copytree(DATA, camp)
    run = camp / "runs" / "scheduler=blest" / "rep-001"
    info = json.loads((run / "run.json").read_text())
    info.update(status="stalled", reason="server -> client: MPTCP data level frozen at 7 bytes")
    (run / "run.json").write_text(json.dumps(info))
    result = json.loads((run / "result.json").read_text())
    counters = {"TcpExt": {"TCPOFOQueue": 10, "OfoPruned": 0}, "MPTcpExt": {"OFOQueue": 3}}
    end = {"TcpExt": {"TCPOFOQueue": 250, "OfoPruned": 4}, "MPTcpExt": {"OFOQueue": 3}}
    result.update(
        status="stalled",
        reason=info["reason"],
        stall={"frozen_s": 8.2, "after_s": 11.0, "host": "server", "bytes_acked": 7},
        watchdog={"stall_timeout_s": 8.0, "setting": "config"},
        nstat={"client": {"start": counters, "end": end, "delta": nstat.delta(counters, end)}},
        memory={
            "start": {
                "meminfo_kb": {"MemAvailable": 9000},
                "tcp_mem_pages": [1, 2, 3],
                "sockstat": {"client": {"TCP": {"inuse": 2, "mem": 5}}},
            },
            "end": {
                "meminfo_kb": {"MemAvailable": 8000},
                "tcp_mem_pages": [1, 2, 3],
                "sockstat": {"client": {"TCP": {"inuse": 1, "mem": 900}}},
            },
        },
    )
    (run / "result.json").write_text(json.dumps(result))
    return camp


def test_ingest_keeps_stalled_runs_and_the_nstat_counters_in_long_form(tmp_path):
    from mptlab.analysis import ingest, stats

    camp = stalled_campaign(tmp_path)
    assert ingest.ingest(camp, pcap=False).errors == []
    runs = ingest.load_runs(camp).set_index("run_id")
    row = runs.loc["fixture/scheduler=blest/rep-001"]
    assert row["status"] == "stalled" and row["result_status"] == "stalled"
    assert row["result_error"].startswith("server -> client") and row["stall_frozen_s"] == 8.2
    assert "fixture/scheduler=blest/rep-001" not in set(stats.ok_runs(runs.reset_index())["run_id"])
    assert "stall_frozen_s" not in stats.metric_columns(runs.reset_index())
    con = ingest.connect(camp)
    got = dict(
        con.execute(
            "SELECT name, delta FROM nstat WHERE host = 'client' AND kind = 'counter'"
        ).fetchall()
    )
    assert got == {"TcpExtTCPOFOQueue": 240, "TcpExtOfoPruned": 4, "MPTcpExtOFOQueue": 0}
    mem = con.execute(
        "SELECT host, mib, counter, start, \"end\" FROM nstat WHERE kind = 'gauge' ORDER BY 1, 2, 3"
    ).fetchall()
    assert ("client", "sockstat_TCP", "mem", 5, 900) in mem
    assert ("guest", "meminfo", "MemAvailable_kB", 9000, 8000) in mem


def test_kernel_counter_columns_sum_their_hosts_and_are_unknown_without_the_counter():
    from mptlab.analysis.ingest import counter_columns

    def snap(start, end, restarts=(0, 0)):
        return {
            "start": {"MPTcpExt": start, "TcpExt": {"TCPCwndRestart": restarts[0]}},
            "end": {"MPTcpExt": end, "TcpExt": {"TCPCwndRestart": restarts[1]}},
        }

    both = {
        "server": snap(
            {"OppRetrans": 2, "OppRetransBytes": 2800, "MPTCPRetrans": 9, "SbdTx": 0, "SbdRx": 0},
            {
                "OppRetrans": 14,
                "OppRetransBytes": 19600,
                "MPTCPRetrans": 240,
                "SbdTx": 3,
                "SbdRx": 6,
            },
            restarts=(3, 40),
        ),
        "client": snap(
            {"OppRetrans": 0, "OppRetransBytes": 0, "SbdTx": 0, "SbdRx": 1},
            {"OppRetrans": 1, "OppRetransBytes": 1400, "SbdTx": 6, "SbdRx": 4},
            restarts=(0, 5),
        ),
    }
    # the re-sends and SBD options summed over both hosts, the restarts per host
    assert counter_columns({"nstat": both}) == {
        "or_resent_segs": 13.0,
        "or_resent_bytes": 18200.0,
        "cwnd_restarts_server": 37.0,
        "cwnd_restarts_client": 5.0,
        "sbd_feedback_sent": 9.0,
        "sbd_feedback_received": 9.0,
    }
    # a kernel before patches 0011 / 0012 has no such counter: unknown, not 0
    old = {"server": {"start": {"MPTcpExt": {"MPTCPRetrans": 9}}, "end": {"MPTcpExt": {}}}}
    assert all(math.isnan(v) for v in counter_columns({"nstat": old}).values())
    assert all(math.isnan(v) for v in counter_columns({}).values())
    # a host without snapshots: its column is unknown, the others stand
    server_only = {"server": both["server"]}
    cols = counter_columns({"nstat": server_only})
    assert cols["cwnd_restarts_server"] == 37.0 and math.isnan(cols["cwnd_restarts_client"])


def test_stats_and_report_list_stalled_runs_by_name(tmp_path, mptlab):
    from mptlab.analysis import report

    camp = stalled_campaign(tmp_path)
    p = mptlab("stats", camp, "--no-pcap", "--metric", "goodput_mbps")
    assert p.returncode == 0, p.stderr
    assert "not ok: 1 stalled" in p.stdout
    assert (
        "stalled: fixture/scheduler=blest/rep-001: server -> client: MPTCP data level" in p.stdout
    )
    html = report.build(camp, pcap=False).read_text()
    assert "1 not ok (1 stalled)" in html and "Kernel counters (nstat)" in html
    assert "TcpExtOfoPruned" in html and "frozen at 7 bytes" in html


def test_memory_diagnosis_names_the_receive_memory_deadlock():
    from mptlab.guest.stall import memory_diagnosis

    quiet = {"client": {"delta": {"TcpExt.TCPTimeouts": 3}}, "server": {"delta": {}}}
    assert memory_diagnosis(quiet, 900, [2817, 3757, 5634]) == ""
    pruned = {
        "client": {"delta": {"MPTcpExt.RcvPruned": 2634}},
        "server": {"delta": {"TcpExt.TCPMemoryPressures": 5}},
    }
    words = memory_diagnosis(pruned, 4563, [2817, 3757, 5634])
    assert "dropped 2634 segments" in words and "pressure began 5 times" in words
    assert "4563 pages, tcp_mem 2817/3757/5634" in words and "docs/stalls.md" in words


def test_guest_tcp_mem_is_a_share_of_the_guest_ram(tmp_path):
    from mptlab.guest.agent import guest_tcp_mem

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        1015300 kB\nMemFree:          990000 kB\n")
    low, pressure, high = (int(v) for v in guest_tcp_mem(str(meminfo)).split())
    pages = 1015300 // 4
    assert (low, pressure, high) == (pages // 2, pages * 5 // 8, pages * 3 // 4)
    # the 256 MB guest's own limit (22 MB) was what the deadlocked runs hit
    assert high * 4096 > 700 * 2**20
