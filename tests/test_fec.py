"""TCP-dFEC / MPTCP-dFEC on the Python side (docs/fec.md): ``kernel.fec``
and its errors, the per-namespace sysctls and where they are set, the two
tracepoints' records, the run's FEC metrics, their tables and the report,
FEC packets in captures: tests/test_analysis_pcap.py.  No kernel is booted: the kernel's records are
hand-written in the formats the kernel prints."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from mptlab import rundir
from mptlab.analysis import figures, ingest, report
from mptlab.guest import agent, fec, tracepoints
from mptlab.guest.config import Kernel, read
from mptlab.spec.catalog import Catalog
from mptlab.spec.knobs import fec_hosts, fec_on, fec_sysctls
from mptlab.spec.models import FecSpec
from mptlab.spec.plan import NetPlan
from mptlab.spec.yamlsrc import SpecError


def campaign(tmp_path, text: str) -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(textwrap.dedent(text))
    return path


BASE = """\
experiments:
  mine:
    topology: two-path
    paths: [wlan, 3g]
    workload: {type: bulk, bytes: 8MiB}
    repetitions: 1
"""


# ------------------------------------------------------------------ spec
def test_fec_is_off_unless_given_and_translates_to_the_kernels_sysctls(tmp_path):
    runs = Catalog.load(campaign(tmp_path, BASE)).expand("mine")
    assert runs[0].config["kernel"]["fec"] is None
    assert fec_sysctls(None) == {} and not fec_on(None)
    text = BASE + "    kernel: {fec: {mode: dynamic, target: 0.5%, delta: 0.25, min: 2}}\n"
    cfg = Catalog.load(campaign(tmp_path, text)).expand("mine")[0].config["kernel"]["fec"]
    # the guest gets plain data with the YAML's names: fractions, min and max
    assert cfg == {
        "mode": "dynamic",
        "ratio": 9,
        "delta": 0.25,
        "target": 0.005,
        "min": 2,
        "max": 256,
        "hosts": "both",
    }
    got = fec_sysctls(cfg)
    assert got == {
        "net.ipv4.tcp_fec_min": 2,
        "net.ipv4.tcp_fec_max": 256,
        "net.ipv4.tcp_fec_ratio": 9,
        "net.ipv4.tcp_fec_delta": 250,  # permille
        "net.ipv4.tcp_fec_target": 5000,  # ppm
        "net.ipv4.tcp_fec": 1,
    }
    # the bounds before the ratio, the switch last: a fresh namespace accepts this order
    assert list(got)[-1] == "net.ipv4.tcp_fec" and list(got)[:2] == [
        "net.ipv4.tcp_fec_min",
        "net.ipv4.tcp_fec_max",
    ]
    assert FecSpec.model_validate(cfg).sysctls() == got
    # the thesis's defaults: start ratio 9, delta 0.33, target 1 %, ratio in [4, 256]
    assert FecSpec().sysctls() == {
        "net.ipv4.tcp_fec_min": 4,
        "net.ipv4.tcp_fec_max": 256,
        "net.ipv4.tcp_fec_ratio": 9,
        "net.ipv4.tcp_fec_delta": 330,
        "net.ipv4.tcp_fec_target": 10000,
        "net.ipv4.tcp_fec": 1,
    }
    fixed = FecSpec.model_validate({"mode": "fixed", "ratio": 4})
    assert (
        fixed.sysctls()["net.ipv4.tcp_fec"] == 2 and fixed.sysctls()["net.ipv4.tcp_fec_ratio"] == 4
    )
    assert (
        FecSpec.model_validate({"target": 0.01}).target
        == FecSpec.model_validate({"target": "1 %"}).target
        == pytest.approx(0.01)
    )


def test_fec_mode_is_a_matrix_key_and_off_is_no_fec(tmp_path):
    # unquoted off is YAML 1.1's false: taken as off; kernel.fec null + a matrix key works
    text = BASE + "    matrix:\n      kernel.fec.mode: [off, dynamic, fixed]\n"
    cat = Catalog.load(campaign(tmp_path, text))
    assert [v for v, _ in cat.variants("mine")] == ["mode=off", "mode=dynamic", "mode=fixed"]
    runs = cat.expand("mine")
    modes = [r.config["kernel"]["fec"]["mode"] for r in runs]
    assert modes == ["off", "dynamic", "fixed"]
    off = runs[0].config["kernel"]["fec"]
    assert not fec_on(off) and fec_sysctls(off) == {} and fec_hosts(off, "c", "s") == []
    assert [fec_sysctls(r.config["kernel"]["fec"]).get("net.ipv4.tcp_fec") for r in runs] == [
        None,
        1,
        2,
    ]
    # a target sweep
    text = BASE + "    kernel: {fec: {}}\n    matrix:\n      kernel.fec.target: ['0.2%', '3%']\n"
    runs = Catalog.load(campaign(tmp_path, text)).expand("mine")
    assert [r.variant for r in runs] == ["target=0.2%", "target=3%"]
    assert [fec_sysctls(r.config["kernel"]["fec"])["net.ipv4.tcp_fec_target"] for r in runs] == [
        2000,
        30000,
    ]


def test_fec_on_one_end_only():
    assert fec_hosts({"mode": "dynamic"}, "client", "server") == ["client", "server"]
    assert fec_hosts({"mode": "dynamic", "hosts": "client"}, "client", "server") == ["client"]
    assert fec_hosts({"mode": "fixed", "hosts": "server"}, "client", "server") == ["server"]


@pytest.mark.parametrize(
    "fec,expected",
    [
        (
            "{target: 1}",
            r"campaign.yaml:8: experiments.mine.kernel.fec.target: 1 as a fraction is 1 x 100 %: "
            r"write a percentage \('1%'\)",
        ),
        ("{target: 150%}", r"kernel.fec.target: must be between 0 and 100 %"),
        ("{delta: 0}", r"kernel.fec.delta: Input should be greater than or equal to 0.001"),
        ("{delta: 1.5}", r"kernel.fec.delta: 1.5 as a fraction"),
        (
            "{mode: on}",
            r"kernel.fec.mode: value not allowed: Input should be 'off', 'dynamic' or 'fixed'",
        ),
        ("{ratio: 300}", r"kernel.fec.ratio: Input should be less than or equal to 256"),
        ("{min: 10, max: 5}", r"kernel.fec: min \(10\) must not be above max \(5\)"),
        ("{ratio: 2}", r"kernel.fec: ratio 2 must lie within \[min, max\] = \[4, 256\]"),
        ("{hosts: router}", r"kernel.fec.hosts: value not allowed: .*'both', 'client' or 'server'"),
        ("{ratios: 9}", r"campaign.yaml:8: experiments.mine.kernel.fec.ratios: unknown field"),
    ],
)
def test_bad_fec_settings_name_file_line_field_and_allowed(tmp_path, fec, expected):
    text = BASE + f"    kernel:\n      fec: {fec}\n"
    with pytest.raises(SpecError, match=expected):
        Catalog.load(campaign(tmp_path, text)).expand("mine")


# ------------------------------------------------------------ the guest
class FakeNet:
    def __init__(self):
        self.set: dict[str, dict] = {}

    def sysctls(self, host, values):
        self.set[host] = dict(values)


def _ctx(fec_cfg: dict | None, sysctls: dict | None = None):
    from mptlab.spec.models import KernelSpec

    # every kernel field as a run's config has it (the model's defaults)
    kernel = KernelSpec(congestion_control="olia").model_dump(mode="json")
    kernel.update(fec=fec_cfg, sysctls=sysctls or {})
    return SimpleNamespace(
        config=SimpleNamespace(kernel=read(Kernel, kernel, "config.kernel")),
        net=FakeNet(),
        client="client",
        server="server",
        plan=SimpleNamespace(hosts=["client", "server", "r1", "bgc1", "bgs1"]),
    )


@pytest.fixture
def guest(monkeypatch):
    monkeypatch.setattr(agent.subprocess, "run", lambda *a, **k: None)  # global sysctls
    monkeypatch.setattr(agent.modules, "allow_congestion_control", lambda name: None)
    monkeypatch.setattr(agent, "guest_tcp_mem", lambda: "1 2 3")
    monkeypatch.setattr(agent, "mptcp_endpoints", lambda *a: [])
    monkeypatch.setattr(agent, "kernel_has_fec", lambda: True)


def test_fec_sysctls_are_set_in_the_client_and_server_namespaces_only(guest):
    ctx = _ctx({"mode": "dynamic", "ratio": 9, "delta": 0.33, "target": 0.01, "min": 4, "max": 256})
    applied = agent.configure(ctx)  # type: ignore[arg-type]
    for host in ("client", "server"):
        assert ctx.net.set[host]["net.ipv4.tcp_fec"] == 1
        assert ctx.net.set[host]["net.ipv4.tcp_fec_target"] == 10000
    for host in ("r1", "bgc1", "bgs1"):  # routers and background hosts: plain TCP
        assert not any(k.startswith("net.ipv4.tcp_fec") for k in ctx.net.set[host])
    assert applied["fec"]["hosts"] == ["client", "server"]
    # one end only (interoperability); the experiment's own sysctls win
    ctx = _ctx({"mode": "fixed", "ratio": 5, "hosts": "server"}, {"net.ipv4.tcp_fec_ratio": 7})
    agent.configure(ctx)  # type: ignore[arg-type]
    assert "net.ipv4.tcp_fec" not in ctx.net.set["client"]
    assert ctx.net.set["server"]["net.ipv4.tcp_fec"] == 2
    assert all(ctx.net.set[h]["net.ipv4.tcp_fec_ratio"] == 7 for h in ctx.plan.hosts)
    # off: nothing set, nothing recorded
    for off in (None, {"mode": "off"}):
        ctx = _ctx(off)
        applied = agent.configure(ctx)  # type: ignore[arg-type]
        assert "fec" not in applied
        assert not any("tcp_fec" in k for v in ctx.net.set.values() for k in v)


def test_a_kernel_without_fec_is_a_clear_error(guest, monkeypatch):
    monkeypatch.setattr(agent, "kernel_has_fec", lambda: False)
    with pytest.raises(RuntimeError, match="kernel.fec is set, but this kernel has no TCP-dFEC"):
        agent.configure(_ctx({"mode": "dynamic"}))  # type: ignore[arg-type]


# ------------------------------------------------------------ tracepoints
def stats_line(ts, saddr, sport, daddr, dport, mptcp=0, mode=1, **kw) -> str:
    f = {
        "fec_sent": 0,
        "fec_acked": 0,
        "fec_lost": 0,
        "fb_recovered": 0,
        "fb_failed": 0,
        "fec_rcvd": 0,
        "fec_recovered": 0,
        "fec_failed": 0,
        "ratio_mean_milli": 0,
        "ratio_milli": 9000,
        "data_segs": 0,
        "retrans_segs": 0,
    }
    f.update(kw)
    body = " ".join(f"{k}={v}" for k, v in f.items())
    return (
        f"          <idle>-0       [000] b.s1.   {ts:.6f}: tcp_fec_stats: saddr={saddr} "
        f"daddr={daddr} sport={sport} dport={dport} mptcp={mptcp} mode={mode} {body}"
    )


RATIO = (
    "          iperf3-71     [000] ..s1.   {ts}: tcp_fec_ratio: saddr=10.0.3.2 daddr=10.0.0.1 "
    "sport=5201 dport=41234 ratio_milli={r} residual_ppm={res} srtt_us=26000"
)

# a TCP download: the data connection (server 10.0.3.2:5201 -> client :41234) and
# iperf3's control connection (:41230), each seen from both ends
TCP_TRACE = "\n".join(
    [
        "# tracer: nop",
        stats_line(
            20.5,
            "10.0.3.2",
            5201,
            "10.0.0.1",
            41234,
            fec_sent=500,
            fec_acked=480,
            fec_lost=20,
            fb_recovered=90,
            fb_failed=10,
            ratio_mean_milli=12000,
            ratio_milli=16000,
            data_segs=9000,
            retrans_segs=90,
        ),
        stats_line(
            20.5,
            "10.0.0.1",
            41234,
            "10.0.3.2",
            5201,
            fec_rcvd=480,
            fec_recovered=92,
            fec_failed=9,
            data_segs=2,
        ),
        stats_line(20.6, "10.0.3.2", 5201, "10.0.0.1", 41230, fec_sent=1, data_segs=5),
        stats_line(20.6, "10.0.0.1", 41230, "10.0.3.2", 5201, fec_rcvd=1, data_segs=6),
        RATIO.format(ts="10.000000", r=9000, res=20000),
        RATIO.format(ts="10.075000", r=6030, res=15000),
    ]
)


def test_the_fec_events_are_parsed_and_the_ratio_series_split_off():
    records = tracepoints.parse(TCP_TRACE)
    stats = [r for r in records if r["event"] == "tcp_fec_stats"]
    assert len(stats) == 4
    assert stats[0]["saddr"] == "10.0.3.2" and stats[0]["sport"] == 5201
    assert stats[0]["fec_sent"] == 500 and stats[0]["ratio_mean_milli"] == 12000
    assert stats[0]["mptcp"] == 0 and stats[0]["mode"] == 1
    rows, fec_rows, other = tracepoints.split_events(TCP_TRACE.splitlines(), offset=1000.0)
    assert rows == [] and len(other) == 5  # the comment line and the four stats records
    assert fec_rows == [
        "1010.000000,10.0.3.2,5201,10.0.0.1,41234,9.000,0.020000,26000\n",
        "1010.075000,10.0.3.2,5201,10.0.0.1,41234,6.030,0.015000,26000\n",
    ]
    assert tracepoints.FEC_RATIO_COLUMNS.split(",") == [
        "t",
        "saddr",
        "sport",
        "daddr",
        "dport",
        "ratio",
        "residual",
        "srtt_us",
    ]
    # the OFO split is unchanged: a ratio line is just another line there
    assert tracepoints.split_ofo([RATIO.format(ts="1.0", r=1, res=1)], 0.0)[1]


def test_events_are_named_system_slash_name_or_by_their_mptcp_name():
    assert tracepoints.event_path("tcp/tcp_fec_stats") == (
        tracepoints.TRACEFS / "events" / "tcp" / "tcp_fec_stats"
    )
    assert tracepoints.event_path("mptcp_ofo_queue") == (
        tracepoints.TRACEFS / "events" / "mptcp" / "mptcp_ofo_queue"
    )
    assert tracepoints.FEC_EVENTS == ("tcp/tcp_fec_stats", "tcp/tcp_fec_ratio")
    assert [tracepoints.event_name(e) for e in tracepoints.FEC_EVENTS] == [
        "tcp_fec_stats",
        "tcp_fec_ratio",
    ]


# ------------------------------------------------------------ metrics
CLIENT, SERVER = ["10.0.0.1", "10.0.5.1"], ["10.0.3.2", "10.0.8.2"]


def path_of(addr: str) -> int | None:
    for addrs in (CLIENT, SERVER):
        if addr in addrs:
            return addrs.index(addr) + 1
    return None


def host_of(addr: str) -> str | None:
    return "client" if addr in CLIENT else "server" if addr in SERVER else None


def test_tcp_metrics_are_the_data_connections():
    records = fec.annotate(tracepoints.parse(TCP_TRACE), path_of, host_of)
    assert [r["path"] for r in records] == [1, 1, 1, 1]
    assert [r["host"] for r in records] == ["server", "client", "server", "client"]
    m = fec.metrics(records, [])
    assert m["fec_sent"] == 500 and m["fec_lost"] == 20
    # the receiver's own counts (not what the sender heard back)
    assert m["fec_recovered"] == 92 and m["fec_failed"] == 9 and m["fec_rcvd"] == 480
    assert m["fec_ratio_mean"] == pytest.approx(12.0) and m["fec_ratio_end"] == pytest.approx(16.0)
    assert m["fec_overhead"] == pytest.approx(500 / 9500)  # FEC packets among all sent
    assert m["fec_residual"] == pytest.approx(90 / 8910)
    assert m["fec_data_segs"] == 9000 and m["fec_retrans_segs"] == 90
    assert m["fec_sockets"] == 1
    assert not any(k.startswith("path") for k in m)  # single path: no per-path copies
    # without the receiver's record: what the sender heard back
    m = fec.metrics([r for r in records if r["sport"] == 5201], [])
    assert (m["fec_recovered"], m["fec_failed"]) == (90, 10) and "fec_rcvd" not in m


def test_mptcp_metrics_per_subflow_follow_the_data_connections_token():
    sub = "{} mptcp_subflow_stats: token={} local_id={} remote_id=0 saddr={} sport={} daddr={} dport={} bytes_sent={} bytes_reinjected=0 tcp_retrans=1"
    lines = [
        "  <idle>-0 [000] b.s.. 30.000000: "
        + sub.format("", "aa11bb22", 0, "10.0.3.2", 5201, "10.0.0.1", 40000, 9_000_000)[1:],
        "  <idle>-0 [000] b.s.. 30.000000: "
        + sub.format("", "aa11bb22", 1, "10.0.8.2", 5201, "10.0.5.1", 40001, 3_000_000)[1:],
        "  <idle>-0 [000] b.s.. 30.000000: "
        + sub.format("", "cc33dd44", 0, "10.0.3.2", 5201, "10.0.0.1", 39999, 300)[1:],
        stats_line(
            30.1,
            "10.0.3.2",
            5201,
            "10.0.0.1",
            40000,
            mptcp=1,
            fec_sent=300,
            ratio_mean_milli=20000,
            ratio_milli=30000,
            data_segs=6000,
            retrans_segs=30,
        ),
        stats_line(
            30.1,
            "10.0.8.2",
            5201,
            "10.0.5.1",
            40001,
            mptcp=1,
            fec_sent=100,
            ratio_mean_milli=40000,
            ratio_milli=50000,
            data_segs=2000,
            retrans_segs=0,
        ),
        stats_line(
            30.1, "10.0.0.1", 40000, "10.0.3.2", 5201, mptcp=1, fec_recovered=25, fec_failed=3
        ),
        stats_line(30.1, "10.0.5.1", 40001, "10.0.8.2", 5201, mptcp=1, fec_recovered=2),
        # the control connection: another token, not counted
        stats_line(30.2, "10.0.3.2", 5201, "10.0.0.1", 39999, mptcp=1, fec_sent=7, data_segs=7),
    ]
    records = tracepoints.parse("\n".join(lines))
    subflows = [r for r in records if r["event"] == "mptcp_subflow_stats"]
    m = fec.metrics(fec.annotate(records, path_of, host_of), subflows)
    assert m["fec_sent"] == 400 and m["fec_sockets"] == 2
    assert m["fec_recovered"] == 27 and m["fec_failed"] == 3
    assert m["fec_ratio_mean"] == pytest.approx((20 * 300 + 40 * 100) / 400)
    assert m["fec_overhead"] == pytest.approx(400 / 8400)
    assert m["path1_fec_sent"] == 300 and m["path2_fec_sent"] == 100
    assert m["path1_fec_recovered"] == 25 and m["path2_fec_recovered"] == 2
    assert m["path1_fec_ratio_mean"] == pytest.approx(20.0)
    assert m["path2_fec_overhead"] == pytest.approx(100 / 2100)


def test_fec_asked_on_one_end_only_gives_zeros_not_absence():
    m = fec.metrics([], [])
    assert m["fec_sent"] == 0 and m["fec_sockets"] == 0 and m["fec_ratio_mean"] is None


def test_the_agent_writes_fec_metrics_only_when_fec_was_asked_for():
    records = tracepoints.parse(TCP_TRACE)

    def ctx(fec_cfg):
        plan = SimpleNamespace(addresses=lambda h: CLIENT if h == "client" else SERVER)
        return SimpleNamespace(
            config=SimpleNamespace(kernel=read(Kernel, {"fec": fec_cfg}, "config.kernel")),
            client="client",
            server="server",
            plan=plan,
            path_of=lambda addr: NetPlan.path_of(plan, addr, ("client", "server")),  # type: ignore[arg-type]
        )

    off = agent.kernel_counters(ctx(None), records)  # type: ignore[arg-type]
    assert "fec" not in off and agent.fec_metrics(ctx(None), off) == {}  # type: ignore[arg-type]
    on = agent.kernel_counters(ctx({"mode": "dynamic"}), records)  # type: ignore[arg-type]
    assert len(on["fec"]) == 4 and on["fec"][0]["host"] == "server"
    assert agent.fec_metrics(ctx({"mode": "dynamic"}), on)["fec_sent"] == 500  # type: ignore[arg-type]


# ------------------------------------------------------------ analysis
def _run_dir(tmp_path: Path, fec_on_: bool, variant: str = "v", rep: int = 0) -> rundir.RunDir:
    rd = rundir.RunDir(tmp_path / "c" / "runs" / variant / rundir.rep_name(rep))
    rd.traces.mkdir(parents=True)
    kernel = {"mptcp": False, "tcp_path": 1, "scheduler": "default", "fec": None}
    rd.file(rundir.SPEC).write_text(
        json.dumps(
            {
                "experiment": "e",
                "variant": variant,
                "repetition": rep,
                "seed": 1,
                "variant_keys": {},
                "config": {"kernel": kernel, "workload": {"type": "bulk"}},
            }
        )
    )
    rd.write_run_info({"status": "ok", "seconds": 10})
    records = fec.annotate(tracepoints.parse(TCP_TRACE), path_of, host_of)
    metrics = {"goodput_mbps": 10.0 + rep}
    kc: dict = {"connections": [], "subflows": []}
    if fec_on_:
        metrics.update(fec.metrics(records, []))
        kc["fec"] = records
        rows, fec_rows, _ = tracepoints.split_events(TCP_TRACE.splitlines(), 1000.0)
        rd.trace(rundir.FEC_RATIO_EVENTS).write_text(
            tracepoints.FEC_RATIO_COLUMNS + "\n" + "".join(fec_rows)
        )
    rd.write_result(
        {
            "status": "ok",
            "metrics": metrics,
            "kernel": kc,
            "marks": {"workload_start": 1005.0},
            "addresses": {"client": CLIENT, "server": SERVER},
        }
    )
    return rd


def test_ingest_has_the_fec_columns_and_tables_and_none_without_fec(tmp_path):
    rt = ingest.read_run(_run_dir(tmp_path / "on", True), "on/v/rep-000", "on")
    assert rt.row["fec_sent"] == 500 and rt.row["fec_overhead"] == pytest.approx(500 / 9500)
    assert len(rt.tables["kernel_fec"]) == 4 and "event" not in rt.tables["kernel_fec"]
    fr = rt.tables["fec_ratio"]
    assert fr["ratio"].tolist() == [9.0, 6.03] and fr["t_rel"].tolist() == pytest.approx(
        [5.0, 5.075]
    )
    assert fr["socket"].iloc[0] == "10.0.3.2:5201>10.0.0.1:41234" and fr["path"].iloc[0] == 1
    rt = ingest.read_run(_run_dir(tmp_path / "off", False), "off/v/rep-000", "off")
    assert not any(k.startswith("fec_") for k in rt.row)  # absent, not 0
    assert "kernel_fec" not in rt.tables and "fec_ratio" not in rt.tables
    assert {"kernel_fec", "fec_ratio"} <= set(ingest.TABLES)


def test_the_report_lists_fec_metrics_and_draws_the_ratio(tmp_path):
    runs = pd.DataFrame(
        {
            "run_id": ["a", "b"],
            "status": ["ok", "ok"],
            "attempt": ["current", "current"],
            "workload": ["bulk", "bulk"],
            "goodput_mbps": [10.0, 12.0],
            "fec_overhead": [None, 0.05],
            "fec_ratio_mean": [None, 12.0],
            "fec_sent": [None, 500],
        }
    )
    km = report.key_metrics(runs)
    assert km[:1] == ["goodput_mbps"] and {"fec_overhead", "fec_ratio_mean", "fec_sent"} <= set(km)
    assert "fec_recovered" not in km  # no values
    assert "fec" in report.NSTAT_PATTERNS  # TCPFECSent, TCPFECRecovered, TCPFECFailed
    rt = ingest.read_run(_run_dir(tmp_path, True), "x/v/rep-000", "x")
    fig = figures.fec_ratio(rt.tables["fec_ratio"].assign(run_id="x/v/rep-000"), "x/v/rep-000")
    paths = figures.save(fig, tmp_path, "fec-ratio")
    assert paths["png"].stat().st_size > 0


def test_background_losses_are_summed_over_pairs(tmp_path):
    rd = _run_dir(tmp_path, False)
    result = json.loads(rd.file(rundir.RESULT).read_text())
    result["background"] = {
        "pairs": [
            {"pair": 1, "received_mbps": 5.0, "tcp_out_segs": 1000, "tcp_retrans_segs": 30},
            {"pair": 2, "received_mbps": 1.0, "tcp_out_segs": 500, "tcp_retrans_segs": 0},
        ]
    }
    rd.write_result(result)
    row = ingest.read_run(rd, "x/v/rep-000", "x").row
    assert row["bg_tcp_retrans_segs"] == 30 and row["bg_tcp_retrans_share"] == pytest.approx(0.02)
    assert row["bg_received_mbps"] == 6.0


def test_a_campaign_with_and_without_fec_reports_both(tmp_path):
    for rep in (0, 1):
        _run_dir(tmp_path, False, "mode=off", rep)
        _run_dir(tmp_path, True, "mode=dynamic", rep)
    html = report.build(tmp_path / "c", pcap=False).read_text()
    assert "FEC ratio over time" in html and "fec_overhead" in html and "mode=off" in html
