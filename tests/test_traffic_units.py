"""Workload building blocks without the kernel: parameters and their errors,
page sets, D-ITG log decoding, background schedules and their replayer (on
the host's loopback), the DASH player on a modelled link, frame/block
metrics, and content made with ffmpeg."""

from __future__ import annotations

import dataclasses
import json
import random
import signal
import socket
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from mptlab.spec.catalog import Catalog
from mptlab.spec.workloads import PAGE_SETS, Background, Blocks, Cbr, Dash, Web
from mptlab.spec.yamlsrc import SpecError
from mptlab.workloads import background, blocks, cbr, live, web
from mptlab.workloads.helpers import bgtraffic, dash_player, media, pages


# ------------------------------------------------------------ parameters
def campaign(tmp_path, workload: str, background_yaml: str = "") -> Catalog:
    f = tmp_path / "c.yaml"
    f.write_text(
        "experiments:\n"
        "  t:\n"
        "    topology: two-path\n"
        "    paths: [lab-20m-40ms, lab-20m-40ms]\n"
        f"    workload: {workload}\n"
        + (f"    background:\n{background_yaml}" if background_yaml else "")
    )
    cat = Catalog.load(f)
    cat.expand("t")
    return cat


def test_unknown_page_set_is_a_clear_error_with_the_allowed_ones(tmp_path):
    with pytest.raises(SpecError) as err:
        campaign(tmp_path, "{type: web, page: myspace}")
    msg = str(err.value)
    assert "c.yaml:5" in msg and "workload.page" in msg and "unknown page set 'myspace'" in msg
    assert "wikipedia" in msg and "espn" in msg


def test_negative_rates_are_clear_errors(tmp_path):
    with pytest.raises(SpecError, match=r"workload\.rate: rate must be positive"):
        campaign(tmp_path, "{type: cbr, rate: -1mbit}")
    with pytest.raises(SpecError, match=r"background\.0\.udp_rate: rate must be positive"):
        campaign(
            tmp_path,
            "{type: idle, duration: 5s}",
            "      - {preset: blest-3g-wlan, tcp_flows: 1, udp_flows: 1, seed: 1, udp_rate: -100kbit}\n",
        )
    with pytest.raises(ValidationError, match="rate must be positive"):
        Blocks(rate="-2mbit")
    with pytest.raises(ValidationError, match="rate must be positive"):
        Dash(ladder=[1, -2])


def test_background_entries_are_checked(tmp_path):
    with pytest.raises(SpecError, match=r"background\.0\.preset: value not allowed"):
        campaign(
            tmp_path,
            "{type: idle, duration: 5s}",
            "      - {preset: ns3, tcp_flows: 1, udp_flows: 1, seed: 1}\n",
        )
    with pytest.raises(SpecError, match=r"background\.0\.udp_flows: Field required"):
        campaign(
            tmp_path, "{type: idle, duration: 5s}", "      - {preset: sbd, tcp_flows: 1, seed: 1}\n"
        )
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Background(preset="fec", tcp_flows=-1, udp_flows=1, seed=1)
    with pytest.raises(ValidationError, match="udp_pps must be"):
        Background(preset="fec", tcp_flows=1, udp_flows=1, seed=1, udp_pps=[900, 100])
    with pytest.raises(ValidationError, match="no flows"):
        Background(preset="fec", tcp_flows=0, udp_flows=0, seed=1)
    ok = campaign(
        tmp_path,
        "{type: idle, duration: 5s}",
        "      - {preset: blest-wlan-wlan, tcp_flows: 2, udp_flows: 3, seed: 4}\n",
    )
    assert ok.expand("t")[0].plan["hosts"].count("bgs1") == 1  # background hosts are built


def test_background_generator_is_mptlab_unless_d_itg_is_asked_for(tmp_path):
    with pytest.raises(
        SpecError,
        match=r"c\.yaml:\d+.*background\.0\.generator: value not allowed: .*'mptlab' or 'd-itg'",
    ):
        campaign(
            tmp_path,
            "{type: idle, duration: 5s}",
            "      - {preset: sbd, tcp_flows: 1, udp_flows: 1, seed: 1, generator: iperf}\n",
        )
    assert Background(preset="sbd", tcp_flows=1, udp_flows=1, seed=1).generator == "mptlab"
    cat = campaign(
        tmp_path,
        "{type: idle, duration: 5s}",
        "      - {preset: sbd, tcp_flows: 1, udp_flows: 1, seed: 1}\n"
        "      - {preset: sbd, tcp_flows: 1, udp_flows: 0, seed: 2, generator: d-itg}\n",
    )
    entries = cat.expand("t")[0].config["background"]
    assert [e["generator"] for e in entries] == ["mptlab", "d-itg"]  # reaches the guest


def test_other_bad_parameters():
    with pytest.raises(ValidationError, match="unknown field|Extra inputs"):
        Cbr(rate=1, framesize=5000)
    with pytest.raises(ValidationError, match="segment is longer than the content"):
        Dash(duration="3s", segment="4s")
    with pytest.raises(ValidationError, match="sara thresholds"):
        Dash(sara=["10s", "5s", "20s"])
    with pytest.raises(ValidationError, match="Input should be"):
        Web(page="amazon", http="3")
    assert Web(page="amazon", http=2).http == "2"
    assert Cbr().frames_per_s == pytest.approx(1e6 / (8 * 5120))  # BLEST: 1 Mbit/s, 5 KiB frames
    assert cbr.frames_per_s(1, 5120) == Cbr().frames_per_s


# ------------------------------------------------------------- page sets
@pytest.mark.parametrize("name", sorted(PAGE_SETS))
def test_page_sets_have_the_thesis_counts_and_totals(name):
    count, kib, _ = PAGE_SETS[name]
    objs = pages.objects(name)
    sizes = [o["size"] for o in objs]
    assert len(objs) == count and sum(sizes) == kib * 1024
    assert objs[0]["path"] == "/index.html" and min(sizes) >= pages.MIN_OBJECT
    assert len({o["path"] for o in objs}) == count
    if count >= 15:  # a spread, not equal sizes: a heavy tail above the median
        assert max(sizes) > 3 * statistics.median(sizes)
    assert pages.objects(name) == objs  # deterministic


def test_page_files_link_every_object(tmp_path):
    objs = pages.write("wikipedia", tmp_path)
    document = (tmp_path / "index.html").read_bytes()
    assert len(document) == objs[0]["size"]
    linked = pages.links(document)
    assert sorted(linked) == sorted(o["path"] for o in objs[1:])
    kinds = {o["path"]: o["kind"] for o in objs}
    images = [i for i, path in enumerate(linked) if kinds[path] == "img"]
    assert images == list(
        range(len(linked) - len(images), len(linked))
    )  # stylesheets and scripts first
    for o in objs[1:]:
        assert (tmp_path / o["path"].lstrip("/")).stat().st_size == o["size"]
    with pytest.raises(ValueError, match="unknown page set 'nope'; allowed: wikipedia"):
        pages.objects("nope")


def test_page_content_is_cached_by_prepare():
    a = web.prepare({"page": "google", "http": "2"})
    b = web.prepare({"page": "google", "http": "1.1", "connections": 4})
    assert a == b and a["objects"] == 6 and a["bytes"] == 1080 * 1024


def test_har_timings_give_page_completion():
    har = {
        "log": {
            "entries": [
                {
                    "startedDateTime": "2026-01-01T00:00:00.000Z",
                    "time": 120.5,
                    "timings": {"dns": 0.1, "connect": 40.2, "receive": 10.0},
                    "request": {"url": "http://10.0.3.2:8080/index.html"},
                    "response": {"status": 200, "content": {"size": 5000}},
                },
                {
                    "startedDateTime": "2026-01-01T00:00:00.121Z",
                    "time": 200.25,
                    "timings": {"receive": 150.0},
                    "request": {"url": "http://10.0.3.2:8080/o/1.png"},
                    "response": {"status": 200, "content": {"size": 90000}},
                },
            ]
        }
    }
    start, fetches = web.parse_har(har)
    m = web.load_metrics([(start, fetches)], 95000, 2)
    assert m["page_load_s"] == pytest.approx(0.121 + 0.20025)
    assert [f.path for f in fetches] == ["/index.html", "/o/1.png"] and m["bytes"] == 95000
    assert m["object_times"][0][2] == pytest.approx(40.3)  # request after DNS + connect
    assert m["first_request_max_ms"] == pytest.approx(40.3) and m["late_first_request_loads"] == 0
    # a second load whose first SYN was lost: its first request waits the 1 s RTO
    late = [dataclasses.replace(f, start=f.start + 1.1, end=f.end + 1.1) for f in fetches]
    m = web.load_metrics([(start, fetches), (start, late)], 95000, 2)
    assert m["late_first_request_loads"] == 1
    assert m["first_request_max_ms"] == pytest.approx(1140.3)
    with pytest.raises(RuntimeError, match="fetched 2 distinct objects, the page has 3"):
        web.load_metrics([(start, fetches)], 95000, 3)


# ------------------------------------------------------------------ D-ITG
DITG = """\
Flow>0001 Seq>      1 Src>      10.0.3.2/41048 Dest>      10.0.0.1/8999 txTime>23:59:59.990000 rxTime>23:59:59.999500 Size> 5120
Flow>0001 Seq>      2 Src>      10.0.3.2/41048 Dest>      10.0.0.1/8999 txTime>0:0:0.030960 rxTime>0:0:0.052000 Size> 5120
Flow>0001 Seq>      4 Src>      10.0.3.2/41048 Dest>      10.0.0.1/8999 txTime>0:0:0.112880 rxTime>0:0:0.133880 Size> 5120
"""


def test_ditg_logs_decode_across_midnight():
    recs = cbr.parse_itgdec(DITG)
    cbr.unwrap_day(recs)
    assert [r["seq"] for r in recs] == [1, 2, 4]
    delays = [round((r["rx"] - r["tx"]) * 1000, 3) for r in recs]
    assert delays == [9.5, 21.04, 21.0]
    sent = [dict(r, rx=0) for r in recs] + [
        {"flow": 1, "seq": 3, "tx": recs[1]["tx"] + 0.04, "rx": 0, "size": 5120}
    ]
    m = cbr.frame_metrics(recs, sent, 0.0, 5120)
    assert m["frames_sent"] == 4 and m["frames_received"] == 3 and m["frames_lost"] == 1
    assert m["delay_min_ms"] == pytest.approx(9.5) and m["delay_max_ms"] == pytest.approx(21.04)
    assert m["jitter_ms"] == pytest.approx((11.54 + 0.04) / 2)
    after = cbr.frame_metrics(recs, sent, 0.1, 5120)  # warm-up drops the first frames
    assert after["frames_received"] == 1 and after["delay_mean_ms"] == pytest.approx(21.0)


# ------------------------------------------------------------- background
def flows(entry: dict, run_seed=1, horizon=600.0, pairs=2):
    return background.make_flows(
        [Background(**entry).resolved()], pairs, run_seed, horizon, {1: 25.0, 2: 65.0}
    )


def test_background_schedule_follows_the_preset():
    entry = {"preset": "blest-3g-wlan", "tcp_flows": 2, "udp_flows": 20, "seed": 5}
    fl = flows(entry, horizon=1200.0)
    assert len(fl) == 44 and {f.pair for f in fl} == {1, 2}
    tcp = [f for f in fl if f.kind == "tcp"]
    udp = [f for f in fl if f.kind == "udp"]
    for f in tcp:  # Poisson at 157 pps with 1000 B mean packets
        assert len(f.times) / 1200 == pytest.approx(157, rel=0.02)
        assert statistics.mean(f.sizes) == pytest.approx(1000, rel=0.02)
        assert min(f.sizes) >= 600 and max(f.sizes) <= 1400
    on, off = background.on_off_means(1.0, 5.0)
    for f in udp:  # 100 kbit/s while ON; ON and OFF periods within 1-5 s
        assert f.pps == pytest.approx(12.5)
        lengths = [b - a for a, b in f.periods[:-1]]
        gaps = [b[0] - a[1] for a, b in zip(f.periods, f.periods[1:], strict=False)]
        assert min(lengths) >= 1.0 - 1e-9 and max(lengths) <= 5.0 + 1e-9
        assert min(gaps) >= 1.0 - 1e-9 and max(gaps) <= 5.0 + 1e-9
        assert 20 <= f.rtt_ms <= 100 and f.rtt_ms >= (25.0 if f.pair == 1 else 65.0)
    # long-run load of the UDP flows: rate x duty cycle
    sched = sum(background.scheduled_bytes(f, 0, 1200) for f in udp) * 8 / 1200 / 1e6
    expected = sum(f.mean_mbps(on / (on + off)) for f in udp)
    assert sched == pytest.approx(expected, rel=0.08)
    lens = [b - a for f in udp for a, b in f.periods[:-1]]
    assert statistics.mean(lens) == pytest.approx(on, rel=0.1)


def test_background_seeds():
    entry = {"preset": "sbd", "tcp_flows": 1, "udp_flows": 3, "seed": 9}
    a, b = flows(entry), flows(entry)
    assert [f.times[:50] for f in a] == [f.times[:50] for f in b]
    c = flows(entry, run_seed=2)
    assert [f.times[:5] for f in a] != [f.times[:5] for f in c]
    fixed = {**entry, "seed_per_run": False}
    assert [f.times[:5] for f in flows(fixed)] == [f.times[:5] for f in flows(fixed, run_seed=2)]
    for f in a:
        if f.kind == "udp":
            assert 50 <= f.pps <= 150  # SBD chapter: 50-150 pps per flow
    with pytest.raises(ValueError, match="pair 3, but the topology has 2"):
        flows({**entry, "pairs": [3]})


def test_ditg_idt_files_never_hold_zero():
    times = [0.5, 0.5, 0.5000004, 1.25]
    values = [float(x) for x in background.idt_lines(times).split()]
    assert min(values) >= 0.001 and values[0] == 500.0
    assert sum(values) == pytest.approx(1250.0, abs=0.01)


def test_background_generator_does_not_change_the_schedule():
    entry = {"preset": "sbd", "tcp_flows": 1, "udp_flows": 3, "seed": 9}
    own, ditg = flows(entry), flows({**entry, "generator": "d-itg"})
    assert {f.generator for f in own} == {"mptlab"} and {f.generator for f in ditg} == {"d-itg"}
    assert [(f.port, f.times, f.sizes) for f in own] == [(f.port, f.times, f.sizes) for f in ditg]


def test_replayer_schedule_merges_every_flow_in_time_order():
    tcp = background.Flow(1, 1, "tcp", 20000, 0, 40.0, times=[0.5, 1.0000004], sizes=[700, 800])
    udp = background.Flow(1, 1, "udp", 20001, 0, 40.0, times=[0.25, 0.5, 0.5], sizes=[100, 9, 8])
    greedy = background.Flow(1, 1, "greedy", 20002, 0, 40.0)
    lines = background.schedule_text([tcp, udp, greedy]).splitlines()
    assert lines[:5] == ["flows 3", "tcp 20000", "udp 20001", "greedy 20002", "packets 5"]
    # microseconds; ties: flow order, then the flow's own order (not by size)
    assert lines[5:] == [
        "250000 1 100",
        "500000 0 700",
        "500000 1 9",
        "500000 1 8",
        "1000000 0 800",
    ]
    assert len(lines) == 10


def test_replayer_schedule_of_a_drawn_pair_keeps_every_packet():
    fl = [
        f
        for f in flows({"preset": "fec", "tcp_flows": 2, "udp_flows": 3, "seed": 3}, horizon=30)
        if f.pair == 1
    ]
    lines = background.schedule_text(fl).splitlines()
    packets = [tuple(map(int, ln.split())) for ln in lines[len(fl) + 2 :]]
    assert lines[len(fl) + 1] == f"packets {len(packets)}"
    assert len(packets) == sum(len(f.times) for f in fl)
    assert [us for us, _, _ in packets] == sorted(us for us, _, _ in packets)
    for i, f in enumerate(fl):
        assert [size for _, k, size in packets if k == i] == f.sizes
        assert [us for us, k, _ in packets if k == i] == [round(t * 1e6) for t in f.times]


def test_replayer_schedule_file_is_the_schedule_text(tmp_path):
    """What the guest writes for the replayer (streamed) is schedule_text."""
    fl = [
        f
        for f in flows({"preset": "sbd", "tcp_flows": 2, "udp_flows": 6, "seed": 4})
        if f.pair == 2
    ]
    background.write_schedule(tmp_path / "pair2.sched", fl)
    text = (tmp_path / "pair2.sched").read_text()
    assert text == background.schedule_text(fl)
    assert text.count("\n") == len(fl) + 2 + sum(len(f.times) for f in fl)


def test_replayer_start_is_read_from_its_output():
    assert background.replayer_t0("t0 12.000256000\nflows 3 packets 9 greedy 0\n") == 12.000256
    assert background.replayer_t0("bgtraffic: connect to port 20000: refused\n") is None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.parametrize("mode", ["io_uring", "sleep"])
def test_replayer_delivers_its_schedule_on_loopback(tmp_path, mode):
    """The C replayer on the host, on either of its sender's paths (io_uring
    falls back to sleep where the host has none, saying why): every
    scheduled byte of every flow arrives, a greedy flow sends more, and the
    receiver reports on SIGINT."""
    program = str(bgtraffic.build(tmp_path))
    assert bgtraffic.build(tmp_path) == Path(program)  # built once
    ports = _free_ports(5)
    tcp = background.Flow(1, 1, "tcp", ports[0], 0, 1.0)
    udp = background.Flow(1, 1, "udp", ports[1], 0, 1.0)
    udp2 = background.Flow(1, 1, "udp", ports[2], 0, 1.0)
    greedy = background.Flow(1, 1, "greedy", ports[3], 0, 1.0)
    rng = random.Random(1)
    for f in (tcp, udp, udp2):
        f.times = sorted(rng.uniform(0, 0.5) for _ in range(200))
        f.sizes = [rng.randint(600, 1400) for _ in f.times]
    udp2.times = udp.times[:]  # same due times: one sleep for both
    sched = tmp_path / "pair1.sched"
    sched.write_text(background.schedule_text([tcp, udp, udp2, greedy]))
    recv = subprocess.Popen(
        [program, "recv", str(sched), str(ports[4])], stdout=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):  # the readiness port is bound last
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", ports[4])) == 0:
                    break
            time.sleep(0.01)
        send = subprocess.Popen(
            [program, "send", "127.0.0.1", str(sched), mode], stdout=subprocess.PIPE, text=True
        )
        time.sleep(1.5)  # the schedule lasts 0.5 s, the greedy flow as long as the sender
        send.kill()
        out = send.communicate()[0]
        time.sleep(0.3)  # the receiver's last UDP tick
    finally:
        recv.send_signal(signal.SIGINT)
        report = recv.communicate(timeout=10)[0]
    assert background.replayer_t0(out) is not None and "done: 600 packets, 0 send errors" in out
    assert "sender: sleep" in out if mode == "sleep" else "sender: " in out
    got = {int(w[4]): int(w[6]) for w in map(str.split, report.splitlines()) if w[0] == "flow"}
    assert "wakeups" in report.splitlines()[-1]
    for f in (tcp, udp, udp2):
        assert got[f.port] == sum(f.sizes), f.kind
    assert got[greedy.port] > 10 * sum(tcp.sizes)


def test_replayer_rejects_an_unknown_sender_mode(tmp_path):
    sched = tmp_path / "pair1.sched"
    sched.write_text("flows 1\nudp 9\npackets 0\n")
    proc = subprocess.run(
        [str(bgtraffic.build(tmp_path)), "send", "127.0.0.1", str(sched), "epoll"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "epoll: the sender's mode must be io_uring or sleep" in proc.stderr


def test_rtt_classes_are_few_and_add_only_the_missing_delay():
    rng = random.Random(1)
    fl = [background.Flow(1, 1, "udp", 20000 + i, 0, rng.uniform(20, 100)) for i in range(60)]
    delays = background.rtt_classes(fl, 25.0)
    assert len({d for d in delays.values() if d > 0}) <= 15
    for f in fl:
        assert delays[f.port] == pytest.approx(max(0.0, f.rtt_ms - 25.0), abs=10)
    lines = background._tc_rtt_lines("bgs1-eth0", delays)
    assert lines[0].startswith("qdisc add dev bgs1-eth0 root handle 1: prio bands")
    assert sum("u32 match ip dport" in ln for ln in lines) == sum(d > 0 for d in delays.values())


GREEDY_IDLE = "{type: idle, duration: 5s}"


def test_greedy_window_is_checked_naming_the_field(tmp_path):
    entry = "      - {preset: blest-3g-wlan, tcp_flows: 0, udp_flows: 0, seed: 1, "
    with pytest.raises(SpecError) as err:
        campaign(tmp_path, GREEDY_IDLE, entry + "tcp_greedy: 1, tcp_greedy_window: 4KiB}\n")
    msg = str(err.value)
    assert "c.yaml:" in msg and "background.0.tcp_greedy_window" in msg
    assert "must be between 5792 B" in msg and "64 MiB" in msg and "got 4096 B" in msg
    with pytest.raises(SpecError, match=r"tcp_greedy_window.*got 134217728 B"):
        campaign(tmp_path, GREEDY_IDLE, entry + "tcp_greedy: 1, tcp_greedy_window: 128MiB}\n")
    with pytest.raises(
        SpecError,
        match=r"background\.0.*tcp_greedy_window caps greedy flows, "
        r"but tcp_greedy is 0",
    ):
        campaign(
            tmp_path,
            GREEDY_IDLE,
            "      - {preset: sbd, tcp_flows: 1, udp_flows: 0, seed: 1, "
            "tcp_greedy_window: 64KiB}\n",
        )
    with pytest.raises(SpecError, match="tcp_greedy_window needs generator mptlab"):
        campaign(
            tmp_path,
            GREEDY_IDLE,
            entry + "tcp_greedy: 1, tcp_greedy_window: 64KiB, generator: d-itg}\n",
        )
    with pytest.raises(ValidationError, match="tcp_greedy_window"):
        Background(
            preset="sbd", tcp_flows=0, udp_flows=0, tcp_greedy=1, seed=1, tcp_greedy_window="-1KiB"
        )
    # the bounds themselves are allowed; the unit is bytes
    for ok in ("5792", "64MiB"):
        b = Background(
            preset="sbd", tcp_flows=0, udp_flows=0, tcp_greedy=1, seed=1, tcp_greedy_window=ok
        )
        assert b.tcp_greedy_window == (5792 if ok == "5792" else 64 * 2**20)
    assert (
        Background(preset="sbd", tcp_flows=0, udp_flows=0, tcp_greedy=1, seed=1).tcp_greedy_window
        is None
    )
    cat = campaign(tmp_path, GREEDY_IDLE, entry + "tcp_greedy: 2, tcp_greedy_window: 256KiB}\n")
    (e,) = cat.expand("t")[0].config["background"]
    assert e["tcp_greedy_window"] == 262144  # reaches the guest in bytes
    # without a cap the run's config is what it was before the field existed
    cat = campaign(tmp_path, GREEDY_IDLE, entry + "tcp_greedy: 2}\n")
    (e,) = cat.expand("t")[0].config["background"]
    assert "tcp_greedy_window" not in e and e["tcp_greedy"] == 2


def test_greedy_window_goes_to_the_greedy_flows_and_their_schedule_line():
    entry = {
        "preset": "blest-3g-wlan",
        "tcp_flows": 1,
        "udp_flows": 2,
        "tcp_greedy": 2,
        "tcp_greedy_window": "256KiB",
        "seed": 1,
    }
    fl = flows(entry, horizon=5.0)
    assert [f.window for f in fl if f.kind == "greedy"] == [262144] * 4  # 2 per pair
    assert {f.window for f in fl if f.kind != "greedy"} == {None}
    # the same draws as without the cap: the cap changes no packet of the other flows
    plain = flows({**entry, "tcp_greedy_window": None}, horizon=5.0)
    assert [(f.port, f.times, f.sizes) for f in fl] == [(f.port, f.times, f.sizes) for f in plain]
    lines = background.schedule_text([f for f in fl if f.pair == 1]).splitlines()
    assert lines[1:6] == [
        "tcp 20000",
        "udp 20001",
        "udp 20002",
        "greedy 20003 262144",
        "greedy 20004 262144",
    ]
    uncapped = background.schedule_text([f for f in plain if f.pair == 1]).splitlines()
    assert uncapped[4:6] == ["greedy 20003", "greedy 20004"]  # as before the field
    bad = background.Flow(1, 1, "tcp", 20000, 0, 40.0, window=65536)
    with pytest.raises(ValueError, match="a window cap is for greedy flows, not tcp"):
        background.schedule_text([bad])
    capped = background.Flow(1, 1, "greedy", 20000, 0, 40.0, window=65536)
    with pytest.raises(ValueError, match="D-ITG cannot cap"):
        background.itgsend_line(capped, "10.0.0.1", Path("/nonexistent"), 1000)


@pytest.mark.parametrize(
    "line",
    ["udp 9 65536", "tcp 9 65536", "greedy 9 0", "greedy 9 -5"],
)
def test_replayer_refuses_a_window_it_cannot_apply(tmp_path, line):
    sched = tmp_path / "pair1.sched"
    sched.write_text(f"flows 1\n{line}\npackets 0\n")
    proc = subprocess.run(
        [str(bgtraffic.build(tmp_path)), "recv", str(sched), "9"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "a WINDOW is a positive byte count, for greedy flows only" in proc.stderr


def test_replayer_receiver_clamps_a_capped_greedy_flow_on_loopback(tmp_path):
    """On the host's loopback: the receiver of a capped greedy flow holds
    its window clamp at the cap to the end (setting it again where the
    kernel moved it), and an uncapped flow beside it has no cap."""
    program = str(bgtraffic.build(tmp_path))
    ports = _free_ports(3)
    capped = background.Flow(1, 1, "greedy", ports[0], 0, 1.0, window=256 * 1024)
    free = background.Flow(1, 1, "greedy", ports[1], 0, 1.0)
    sched = tmp_path / "pair1.sched"
    sched.write_text(background.schedule_text([capped, free]))
    recv = subprocess.Popen(
        [program, "recv", str(sched), str(ports[2])], stdout=subprocess.PIPE, text=True
    )
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", ports[2])) == 0:
                    break
            time.sleep(0.01)
        send = subprocess.Popen(
            [program, "send", "127.0.0.1", str(sched)], stdout=subprocess.PIPE, text=True
        )
        time.sleep(1.0)
        send.kill()
        send.communicate()
    finally:
        recv.send_signal(signal.SIGINT)
        report = recv.communicate(timeout=10)[0]
    rows = {int(w[4]): w for w in map(str.split, report.splitlines()) if w[0] == "flow"}
    cap = rows[capped.port]
    assert cap[9:13] == ["window", "262144", "clamp", "262144"], report
    assert int(cap[6]) > 0 and cap[13] == "reclamped" and int(cap[14]) >= 0, report
    assert "window" not in rows[free.port]


def test_counter_payload_estimate():
    before = {
        "rx_bytes": 0,
        "rx_packets": 0,
        "tx_bytes": 0,
        "tx_packets": 0,
        "udp_in": 0,
        "udp_out": 0,
        "tcp_in": 0,
        "tcp_out": 0,
        "t": 0,
    }
    after = dict(before, rx_bytes=10 * (1000 + 42) + 5 * (1448 + 66), udp_in=10, tcp_in=5)
    assert background.payload_bytes(before, after, "rx") == (
        10 * 1000 + 5 * 1448,
        after["rx_bytes"],
    )


# ------------------------------------------------------------------- DASH
LADDER = [331, 522, 791, 1033, 1547, 2134, 2484, 3079, 3527, 4220]


class VirtualClock:
    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t

    def sleep(self, s):
        self.t += max(0.0, s)


def modelled_session(algo, link_mbps, segments=45, rtt=0.04, ladder=LADDER):
    """A session over a link of ``link_mbps(t)`` Mbit/s (fluid model, one RTT per request)."""
    reps = [
        {
            "id": str(i),
            "bandwidth": k * 1000,
            "width": 1,
            "height": 1,
            "codecs": "avc1",
            "init_size": 800,
            "sizes": [k * 1000 * 4 // 8] * segments,
        }
        for i, k in enumerate(ladder)
    ]
    text = media.mpd({"duration_s": 4 * segments, "segment_s": 4, "fps": 25}, reps).encode()
    clock = VirtualClock()
    rate = link_mbps if callable(link_mbps) else (lambda _t: link_mbps)

    def fetch(url, keep):
        name = url.rsplit("/", 1)[1]
        size = (
            len(text)
            if name.endswith(".mpd")
            else 800
            if name.startswith("init")
            else reps[int(name.split("-")[1])]["sizes"][0]
        )
        clock.t += rtt
        left = size * 8.0
        while left > 0:  # integrate the (possibly changing) rate in 10 ms steps
            step = min(0.01, left / (rate(clock.t) * 1e6))
            left -= rate(clock.t) * 1e6 * step
            clock.t += step
        return size, text if keep else None

    return dash_player.Player(fetch, algo, clock).play("http://s/manifest.mpd").metrics()


@pytest.mark.parametrize("name", ["basic", "sara", "bba"])
def test_players_settle_below_a_2_mbit_link_and_reach_the_top_at_20(name):
    slow = modelled_session(dash_player.algorithm(name), 2.0)
    tail = slow["bitrates_mbps"][len(slow["bitrates_mbps"]) // 2 :]
    assert statistics.mean(tail) < 2.0 and slow["stalls"] == 0
    assert max(slow["bitrates_mbps"][2:]) > 1.0  # it did adapt up from the lowest
    fast = modelled_session(dash_player.algorithm(name), 20.0)
    assert fast["last_bitrate_mbps"] == 4.22 and fast["top_bitrate_share"] > 0.7
    assert fast["stalls"] == 0 and fast["startup_delay_s"] < 0.5


def test_basic_picks_one_level_below_the_measured_rate():
    m = modelled_session(dash_player.Basic(), 2.0)
    assert set(m["bitrates_mbps"][1:]) == {1.547}
    assert m["switches"] == 1 and m["avg_bitrate_mbps"] == pytest.approx((0.331 + 44 * 1.547) / 45)


def test_a_collapsing_link_causes_stalls_and_they_are_counted():
    m = modelled_session(dash_player.Basic(), lambda t: 20.0 if t < 20 else 0.3, segments=20)
    assert m["stalls"] >= 1 and m["stall_s"] > 1.0
    assert m["session_s"] == pytest.approx(80 + m["startup_delay_s"] + m["stall_s"], abs=0.05)


def test_sara_uses_the_segment_sizes_in_the_mpd():
    # same nominal bitrates, but the top representation's segments are tiny:
    # SARA (size-aware) takes it early, basic (nominal rates) never does
    ladder = [331, 1033, 4220]
    reps = [
        {
            "id": str(i),
            "bandwidth": k * 1000,
            "width": 1,
            "height": 1,
            "codecs": "a",
            "init_size": 1,
            "sizes": [k * 1000 * 4 // 8 if i < 2 else 50_000] * 20,
        }
        for i, k in enumerate(ladder)
    ]
    manifest = dash_player.parse_mpd(media.mpd({"duration_s": 80, "segment_s": 4, "fps": 25}, reps))
    assert manifest.reps[2].sizes[0] == 50_000 and manifest.segment_s == 4.0
    sara = dash_player.Sara()
    hist = dash_player.History(throughputs=[2e6] * 3, sizes=[500_000] * 3, seconds=[2.0] * 3)
    assert sara.choose(manifest, 5, 17.0, 1, hist)[0] == 2
    assert dash_player.Basic().choose(manifest, 5, 17.0, 1, hist)[0] == 1


# ------------------------------------------------------- frames and blocks
def test_live_frame_classification():
    frames = [{"type": t, "size": 100} for t in "IPBBP"]
    arr = {0: (10.0, 10.05), 1: (10.04, 11.2), 2: (10.08, 10.2), 4: (10.16, 10.3)}
    m = live.frame_metrics(frames, arr, 1.0)
    assert (m["frames_in_time"], m["frames_late"], m["frames_dropped"]) == (3, 1, 1)
    assert m["frames_by_type"] == {"I": 1, "P": 2, "B": 2}
    assert m["frames_in_time_by_type"] == {"I": 1, "B": 1, "P": 1}
    assert m["delay_max_ms"] == pytest.approx(1160)


def test_block_metrics():
    arr = [(i, 100 + i * 0.1, 100 + i * 0.1 + (0.02 if i != 5 else 0.2)) for i in range(10)]
    m = blocks.block_metrics(arr, 10, 0.0, 100.0, 8192)
    assert m["blocks_received"] == 10 and m["delay_min_ms"] == pytest.approx(20)
    assert m["worst_delay_increase_pct"] == pytest.approx(900)
    assert blocks.block_metrics(arr, 10, 0.5, 100.0, 8192)["blocks_received"] == 5


# ------------------------------------------------------------ media (ffmpeg)
def test_dash_content_segment_sizes_follow_the_ladder():
    prep = media.prepare_dash(12, 4, [400, 2000], 25)
    from pathlib import Path

    root = Path(prep["root"])
    m = dash_player.parse_mpd((root / prep["mpd"]).read_text())
    assert prep["segments"] == m.segments == 3
    for rep in m.reps:
        for n, size in enumerate(rep.sizes, start=1):
            assert (root / rep.segment_url(n)).stat().st_size == size
        assert (root / rep.init_url()).stat().st_size == rep.init_size
        actual = sum(rep.sizes) * 8 / 12
        assert actual == pytest.approx(rep.bandwidth, rel=0.2)


def test_live_content_has_every_frame_with_its_type():
    prep = media.prepare_live(4, 3565, 25, 50, 2)
    from pathlib import Path

    table = json.loads((Path(prep["root"]) / "frames.json").read_text())["frames"]
    assert len(table) == prep["frames"] == 100
    assert {f["type"] for f in table} == {"I", "P", "B"}
    assert [f["type"] for f in table].count("I") == 2
    size = (Path(prep["root"]) / "stream.h264").stat().st_size
    assert sum(f["size"] for f in table) == size
    assert size * 8 / 4 == pytest.approx(3565e3, rel=0.15)


def test_experiments_file_expands_every_workload_experiment():
    cat = Catalog.load()
    for name in cat.names():
        runs = cat.expand(name, repetitions=1)
        assert runs, name


def test_goodput_cov_uses_whole_seconds_only():
    from mptlab.workloads.bulk import goodput_cov, metrics

    steady = [{"start": i / 10, "seconds": 0.1, "bytes": 1000} for i in range(30)]
    assert goodput_cov(steady) == pytest.approx(0.0)
    # a 0.3 s tail would look like a 70 % dip: it is not a whole second
    tail = steady + [{"start": 3.0 + i / 10, "seconds": 0.1, "bytes": 1000} for i in range(3)]
    assert goodput_cov(tail) == pytest.approx(0.0)
    # seconds of 10 and 30 kB: mean 20, sd 14.14 -> CoV 0.707
    uneven = [{"start": float(i), "seconds": 1.0, "bytes": b} for i, b in enumerate([10e3, 30e3])]
    assert goodput_cov(uneven) == pytest.approx(2**0.5 / 2)
    assert goodput_cov(uneven[:1]) is None
    report = {"intervals": [{"sum": iv} for iv in uneven], "end": {}}
    assert metrics(report, 0.0)["goodput_cov"] == pytest.approx(2**0.5 / 2)


def test_background_payloads_fit_one_packet(tmp_path):
    with pytest.raises(
        SpecError, match=r"background\.0\.packet_size: .*less than or equal to 1000"
    ):
        campaign(
            tmp_path,
            "{type: idle, duration: 1s}",
            "      - {preset: fec, tcp_flows: 1, udp_flows: 1, seed: 1, packet_size: 1400}\n",
        ).expand("t")


@pytest.mark.parametrize(("lo", "hi"), [(600, 1400), (1, 1), (0, 7), (5, 2**40)])
def test_drawn_sizes_are_randint_s_own_values(lo, hi):
    """uniform_ints writes randint's draw out: the same values, so the same
    schedules (and runs) as before it."""
    a, b = random.Random(7), random.Random(7)
    assert background.uniform_ints(a, lo, hi, 2000) == [b.randint(lo, hi) for _ in range(2000)]
    assert a.random() == b.random()  # and the stream goes on in step
    with pytest.raises(ValueError, match="empty range"):
        background.uniform_ints(a, 3, 2, 1)


def test_poisson_times_are_expovariate_s_own_values():
    a, b = random.Random(11), random.Random(11)
    got = background.poisson_times(a, 157.0, 2.0, 30.0)
    want, t = [], 2.0 + b.expovariate(157.0)
    while t < 30.0:
        want.append(t)
        t += b.expovariate(157.0)
    assert got == want and len(got) > 4000 and a.random() == b.random()
