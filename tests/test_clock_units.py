"""The guest's clock (``clock: real | virtual``) without booting a guest: the
language, the command line, the CPU pinning, limits, the runner's rules,
netem seeds and iperf3's preload (the guests themselves:
test_kernel_virtual_time.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mptlab import cli
from mptlab.campaign import boot
from mptlab.campaign.kernel import KernelBuild
from mptlab.campaign.runner import Campaign, Outcome
from mptlab.guest import netlab
from mptlab.guest.workload import WorkloadError
from mptlab.spec.catalog import Catalog
from mptlab.spec.yamlsrc import SpecError
from mptlab.workloads import bulk
from mptlab.workloads.helpers import spin

CAMPAIGN = (
    "experiments:\n  e:\n    topology: two-path\n    paths: [wlan, 3g]\n"
    "    workload: {type: bulk, duration: 3s}\n    repetitions: 2\n"
)


def runs(tmp_path: Path, extra: str = ""):
    camp = tmp_path / "c.yaml"
    camp.write_text(CAMPAIGN + extra)
    return Catalog.load(camp).expand("e")


def test_clock_is_virtual_unless_the_experiment_says_real(tmp_path):
    assert {r.config["clock"] for r in runs(tmp_path)} == {"virtual"}
    assert {r.config["clock"] for r in runs(tmp_path, "    clock: real\n")} == {"real"}
    with pytest.raises(SpecError, match="clock"):
        runs(tmp_path, "    clock: simulated\n")


def test_only_a_virtual_guest_boots_with_time_travel(tmp_path):
    kernel = KernelBuild(tmp_path, tmp_path)
    common = dict(umid="u", uml_dir=tmp_path)
    real = boot.command_line(kernel, tmp_path, "/x", **common)
    virtual = boot.command_line(kernel, tmp_path, "/x", clock="virtual", **common)
    assert not any(w.startswith("time-travel") for w in real) and "MPTLAB_CLOCK=real" in real
    assert "time-travel=inf-cpu" in virtual and "MPTLAB_CLOCK=virtual" in virtual
    with pytest.raises(ValueError, match="real, virtual"):
        boot.command_line(kernel, tmp_path, "/x", clock="fast", **common)  # type: ignore[arg-type]


def test_the_guest_sees_as_many_bytes_of_command_line_under_any_results_root(tmp_path):
    """The run dir's host path is on the guest's command line and in every
    guest process's environment; its length alone moved a virtual-time run
    (boot.HOST_PATH_WIDTH), so it is padded to a fixed width and still
    names the same directory."""
    kernel = KernelBuild(tmp_path, tmp_path)
    common = dict(umid="u", uml_dir=tmp_path, clock="virtual", rng_seed=1)
    lines = {}
    for root in ("r", "a/much/longer/results/root/than/that"):
        run_dir = tmp_path / root / "blest-3g-wlan" / "runs" / "v" / "rep-000"
        run_dir.mkdir(parents=True)
        line = boot.command_line(kernel, run_dir, str(run_dir / "entry"), **common)
        host = next(w for w in line if w.startswith("MPTLAB_HOST_RUN_DIR="))
        assert Path(host.split("=", 1)[1]).resolve() == run_dir.resolve()
        lines[root] = line
    short, long_ = lines.values()
    assert [len(w) for w in short] == [len(w) for w in long_]
    # a path beyond the width is padded to the next multiple of it
    deep = Path("/" + "d" * boot.HOST_PATH_WIDTH)
    assert len(boot.padded_host_path(deep)) == 2 * boot.HOST_PATH_WIDTH


def test_guests_get_a_cpu_each_then_double_up_round_robin():
    pool = boot.CpuPool({0, 1})
    assert [pool.acquire() for _ in range(3)] == [0, 1, 0]
    pool.release(1)
    assert pool.acquire() == 1  # the least used
    assert boot.pin_prefix(1)[1:3] == ["-c", "1"] and boot.pin_prefix(1)[-1] == "-R"


def test_guests_of_other_processes_on_the_host_count():
    host = {0: 1}  # another campaign's guest on CPU 0
    pool = boot.CpuPool({0, 1}, others=lambda: host)
    assert pool.acquire() == 1
    host[1] = 1  # ours, started: counted once, not twice
    assert pool.acquire() == 0


def test_pinned_guests_are_counted_per_cpu_by_umid():
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1]
    umid = f"mptlab-test-{os.getpid()}"

    def fake(name: str) -> list[str]:  # a guest's command line marks, nothing else
        return [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            "rootfstype=hostfs",
            f"umid={name}",
        ]

    # two host processes of one pinned guest, and a guest left on every CPU
    procs = [subprocess.Popen(["taskset", "-c", str(cpu), *fake(umid)]) for _ in range(2)]
    procs.append(subprocess.Popen(fake(umid + "-free")))
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until taskset has pinned and exec'd
            found = boot.pinned_umids()
            if umid in found.get(cpu, set()):
                break
            time.sleep(0.05)
        assert umid in found.get(cpu, set())
        assert sum(u == umid for us in found.values() for u in us) == 1  # once
        if len(cpus) > 1:
            assert not any(umid + "-free" in us for us in found.values())
        assert boot.pinned_guests()[cpu] >= 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert umid not in boot.pinned_umids().get(cpu, set())


def test_the_host_gives_a_virtual_guest_a_generous_wall_time_backstop():
    assert boot.wall_limit(80, "real") == 80
    assert boot.wall_limit(80, "virtual") == 80 * boot.VIRTUAL_WALL_FACTOR + 60


def test_a_virtual_time_run_is_never_starved():
    assert Outcome("a", "ok", cpu_wait_share=0.9).starved
    assert not Outcome("a", "ok", cpu_wait_share=0.9, clock="virtual").starved


def test_a_campaign_of_one_clock_is_not_resumed_with_the_other(tmp_path):
    kernel = KernelBuild(tmp_path, tmp_path)
    real, virtual = runs(tmp_path, "    clock: real\n"), runs(tmp_path)
    out = tmp_path / "out"
    campaign = Campaign(out, real, kernel)
    for run in real:
        campaign.dir.run_dir(run.variant, run.repetition).create()
        campaign.dir.run_dir(run.variant, run.repetition).write_spec(run)
    Campaign(out, real, kernel).check_clocks()  # same clock: resumes
    with pytest.raises(SpecError, match=r"another clock: base/rep-000 \(real there, virtual now\)"):
        Campaign(out, virtual, kernel).check_clocks()


def test_run_and_nightly_take_a_clock():
    args = cli.parser().parse_args(["run", "x", "--clock", "virtual"])
    assert args.clock == "virtual"
    assert cli.parser().parse_args(["nightly", "x"]).clock is None
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["run", "x", "--clock", "fast"])


def test_netem_seeds_differ_per_interface_and_repeat_per_run_seed():
    a = netlab.link_seed(7, "r1c-eth1")
    assert a == netlab.link_seed(7, "r1c-eth1")
    assert a != netlab.link_seed(7, "r1s-eth0") and a != netlab.link_seed(8, "r1c-eth1")
    assert 0 <= a < 2**64


def test_netlink_attributes_round_trip_with_padding():
    raw = netlab._nla(1, b"netem\0") + netlab._nla(14, (5).to_bytes(8, "little"))
    assert list(netlab._nlas(raw)) == [(1, b"netem\0"), (14, (5).to_bytes(8, "little"))]


def _ctx(clock: str, rcvlowat: int = 0) -> SimpleNamespace:
    return SimpleNamespace(
        config=SimpleNamespace(clock=clock),
        workload=SimpleNamespace(type="bulk", rcvlowat=rcvlowat),
        log=lambda msg: None,
    )


def test_iperf3_gets_the_spin_sleep_library_under_virtual_time_only(tmp_path, monkeypatch):
    lib = spin.build(tmp_path)
    assert lib.exists() and spin.build(tmp_path) == lib  # built once
    monkeypatch.delenv(spin.ENV, raising=False)
    monkeypatch.setenv(spin.VIRTUAL_ENV, "1")
    assert bulk.preload(_ctx("virtual")) == []  # the host could not build it
    with pytest.raises(WorkloadError, match="rcvlowat needs spin_sleep.so"):
        bulk.preload(_ctx("virtual", rcvlowat=16384))
    monkeypatch.setenv(spin.ENV, str(lib))
    monkeypatch.delenv(spin.VIRTUAL_ENV)
    assert bulk.preload(_ctx("real")) == []
    # a low-water mark is the workload's, under either clock
    assert "MPTLAB_RCVLOWAT=16384 " in bulk.preload(_ctx("real", rcvlowat=16384))[2]
    monkeypatch.setenv(spin.VIRTUAL_ENV, "1")
    prefix = bulk.preload(_ctx("virtual"))
    assert prefix[0] == "sh"
    # the shell keeps mptcpize's preload and adds ours
    out = subprocess.run(
        [*prefix, "sh", "-c", 'echo "$LD_PRELOAD"'],
        env={"LD_PRELOAD": "/nonexistent-but-kept.so", spin.ENV: str(lib), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["/nonexistent-but-kept.so", str(lib)]


def test_the_spin_sleep_library_delays_only_selects_that_spin(tmp_path):
    """With the library, a loop whose select() comes back at once and does no
    I/O (writability unused; a socket at end of file read again and again)
    sleeps ~1 ms per round; a loop that moves data does not."""
    lib = str(spin.build(tmp_path))
    program = (
        "import os, select, socket, time\n"
        "def timed(body):\n"
        "    t = time.monotonic()\n"
        "    for _ in range(50): body()\n"
        "    return time.monotonic() - t\n"
        "a, b = socket.socketpair()\n"
        "unused = timed(lambda: select.select([], [a], [], 1))\n"
        "def moving():\n"
        "    select.select([], [a], [], 1); os.write(a.fileno(), b'x'); b.recv(10)\n"
        "busy = timed(moving)\n"
        "b.close()\n"
        "def at_eof():\n"
        "    select.select([a], [], [], 1); assert os.read(a.fileno(), 10) == b''\n"
        "eof = timed(at_eof)\n"
        "print(unused, busy, eof)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": lib, spin.VIRTUAL_ENV: "1"}
    out = subprocess.run(
        ["python3", "-c", program], env=env, capture_output=True, text=True, check=True
    ).stdout
    unused, busy, eof = map(float, out.split())
    # 49 of 50 rounds follow a spinning one: 1 ms, doubling to 16 ms, ~0.7 s;
    # 25 ms allows for a loaded host where a select() now and then takes over 20 us
    assert unused >= 0.025 and eof >= 0.025, out
    assert busy < min(unused, eof) / 2, out


def test_a_campaign_records_its_clocks(tmp_path):
    kernel = KernelBuild(tmp_path, tmp_path)
    campaign = Campaign(tmp_path / "out", runs(tmp_path, "    clock: virtual\n"), kernel)
    campaign.write_campaign(campaign.order())
    assert json.loads((tmp_path / "out" / "campaign.json").read_text())["clocks"] == ["virtual"]


def _preloaded(lib: str, program: str, **env: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": lib, **env}
    return subprocess.run(
        ["python3", "-c", program], env=env, capture_output=True, text=True, check=True
    ).stdout


def test_clock_reads_between_waits_are_served_from_memory_under_virtual_time(tmp_path):
    """Under virtual time a clock read with no wait since the last one returns
    the same value (guest time does not move while a process computes); a
    select() that waited, or a read of a blocking fd, starts a new epoch; a
    read that said EAGAIN does not (it waited for nothing)."""
    lib = str(spin.build(tmp_path))
    program = (
        "import os, select, socket, time\n"
        "a, b = socket.socketpair()\n"
        "b.setblocking(False)\n"
        "t = [time.monotonic(), time.monotonic()]\n"
        "try:\n"
        "    b.recv(10)\n"
        "except BlockingIOError:\n"
        "    pass\n"
        "t.append(time.monotonic())\n"
        "select.select([b], [], [], 0.02)\n"
        "t.append(time.monotonic())\n"
        "a.send(b'x')\n"  # a blocking socket: its calls may wait
        "t.append(time.monotonic())\n"
        "os.read(b.fileno(), 10)\n"  # non-blocking, known since its EAGAIN
        "t.append(time.monotonic())\n"
        "r, w = os.pipe(); os.write(w, b'y'); os.read(r, 1)\n"
        "t.append(time.monotonic())\n"
        "print(*t)\n"
    )
    t = [float(x) for x in _preloaded(lib, program, **{spin.VIRTUAL_ENV: "1"}).split()]
    assert t[0] == t[1]  # no wait in between
    assert t[2] == t[1]  # a call that said EAGAIN waited for nothing
    assert t[3] - t[2] >= 0.015  # select() waited: a fresh read
    assert t[4] > t[3]  # a send on a blocking socket may have waited
    assert t[5] == t[4]  # a read of a non-blocking socket did not
    assert t[6] > t[5]  # a pipe's (blocking) read may have
    # under real time every read goes to the clock
    t = [float(x) for x in _preloaded(lib, program).split()]
    assert t[1] > t[0]


def test_a_receive_low_water_mark_holds_select_until_enough_bytes_or_a_tick(tmp_path):
    """With MPTLAB_RCVLOWAT, a non-blocking TCP socket read in large pieces
    gets SO_RCVLOWAT: select() waits while fewer bytes are there (until its
    timeout, when it still reports the socket readable so the few bytes are
    read), and comes back at once when enough are; a small blocking read (a
    control connection) is left alone."""
    lib = str(spin.build(tmp_path))
    program = (
        "import select, socket, time\n"
        "srv = socket.create_server(('127.0.0.1', 0))\n"
        "c = socket.create_connection(srv.getsockname()); s, _ = srv.accept()\n"
        "s.setblocking(False)\n"
        "try:\n"
        "    s.recv(1 << 17)\n"  # the first large read: sets the mark
        "except BlockingIOError:\n"
        "    pass\n"
        "lowat = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT)\n"
        "c.send(b'x' * 1000); time.sleep(0.05)\n"
        "t = time.monotonic(); r, _, _ = select.select([s], [], [], 0.2)\n"
        "few = (time.monotonic() - t, len(r), len(s.recv(1 << 17)))\n"
        "c.send(b'y' * 100000); time.sleep(0.05)\n"
        "t = time.monotonic(); r, _, _ = select.select([s], [], [], 0.2)\n"
        "many = (time.monotonic() - t, len(r))\n"
        "c.setblocking(True); c.recv(0)\n"
        "print(lowat, *few, *many, c.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT))\n"
    )
    out = _preloaded(lib, program, MPTLAB_RCVLOWAT="65536").split()
    lowat, few_s, few_ready, few_bytes, many_s, many_ready, control = out
    assert int(lowat) == 65536 and int(control) == 1
    assert float(few_s) >= 0.15 and int(few_ready) == 1 and int(few_bytes) == 1000
    assert float(many_s) < 0.1 and int(many_ready) == 1
    # without the variable nothing is set
    assert _preloaded(lib, program).split()[0] == "1"
