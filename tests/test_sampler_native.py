"""The sampler program (``guest/sampler.c``) against the Python sampler
(``guest/sampler.py``, its reference), on this host's own kernel: both read
the same idle TCP and MPTCP sockets at once and must write the same rows
(but the time).  The host kernel lacks mptlab's patch 0002, so fields past
upstream's ``struct mptcp_info`` read whatever upstream has there, in both,
or nothing: the same either way."""

from __future__ import annotations

import csv
import io
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from mptlab.guest import sampler
from mptlab.workloads.helpers import native


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    try:
        return native.build(sampler.SOURCE, tmp_path_factory.mktemp("cache"))
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def sockets():
    """An idle TCP pair and, if this kernel has MPTCP, an idle MPTCP pair."""
    opened = []
    ports = []
    for proto in (socket.IPPROTO_TCP, sampler.IPPROTO_MPTCP):
        try:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        except OSError:
            continue
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        cli = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        cli.connect(srv.getsockname())
        acc, _ = srv.accept()
        cli.sendall(b"x" * 5000)
        acc.recv(10000)
        opened += [srv, cli, acc]
        ports.append(srv.getsockname()[1])
    time.sleep(0.3)  # ACKs settled: the sockets stay as they are
    yield ports
    for s in opened:
        s.close()


def _ours(rows, ports):
    return sorted(
        [str(v) for v in r[1:]]
        for r in rows
        if int(r[2]) in ports or int(r[4]) in ports  # sport, dport
    )


def _run_program(program: Path, tmp_path: Path, interval: float = 0.1, path: str = "sync") -> Path:
    lateness = tmp_path / "lateness"
    plan = tmp_path / "plan"
    prefix = tmp_path / "host"
    plan.write_text(
        sampler.plan_text([("/proc/self/ns/net", prefix)], interval, interval, lateness)
    )
    proc = subprocess.Popen(
        [program, plan, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(5 * interval)  # a few ticks (its files are written at the end)
    mptcp = tmp_path / "host-mptcp.csv"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert out.splitlines()[0] == f"path {path}"
    assert mptcp.exists()
    return tmp_path


def _uring_here() -> bool:
    try:
        return Path("/proc/sys/kernel/io_uring_disabled").read_text().strip() == "0"
    except OSError:
        return True


PATHS = [
    "sync",
    pytest.param(
        "uring",
        marks=pytest.mark.skipif(not _uring_here(), reason="io_uring is disabled on this host"),
    ),
]


@pytest.mark.parametrize("path", PATHS)
def test_the_program_writes_the_python_sampler_s_rows(program, sockets, tmp_path, path):
    diag = sampler.Diag()
    py_sub = sampler.subflow_rows(diag, 0.0)
    py_mp = sampler.mptcp_rows(diag, 0.0)
    out = _run_program(program, tmp_path, path=path)
    sub = list(csv.reader(io.StringIO((out / "host-subflows.csv").read_text())))
    mp = list(csv.reader(io.StringIO((out / "host-mptcp.csv").read_text())))
    assert sub[0] == sampler.SUBFLOW_COLUMNS and mp[0] == sampler.MPTCP_COLUMNS
    # the first tick's rows (all share its time); the kernel's own order
    first = [r for r in sub[1:] if r[0] == sub[1][0]]
    assert _ours(first, sockets) == _ours(py_sub, sockets)
    assert len(_ours(first, sockets)) >= 2  # the TCP pair, both ends
    first_mp = [r for r in mp[1:] if r[0] == mp[1][0]] if len(mp) > 1 else []
    assert _ours(first_mp, sockets) == _ours(py_mp, sockets)
    if len(sockets) == 2:  # MPTCP here: both ends of its connection were seen
        assert len(_ours(py_mp, sockets)) >= 2
        assert len(_ours(first, sockets)) >= 4  # and its subflows
    # times: CLOCK_REALTIME's scale, one per tick, in order
    times = sorted({float(r[0]) for r in sub[1:]})
    assert abs(times[0] - time.time()) < 60 and len(times) >= 2


@pytest.mark.parametrize("path", PATHS)
def test_the_program_keeps_its_ticks_and_reports_lateness(program, tmp_path, path):
    out = _run_program(program, tmp_path, interval=0.05, path=path)
    late = [float(v) for v in (out / "lateness").read_text().split()]
    assert len(late) >= 2 and all(0 <= v < 1 for v in late)
    assert sampler.lateness_summary(late)["n"] == len(late)


def test_a_bad_plan_is_refused_saying_which_line(program, tmp_path):
    plan = tmp_path / "plan"
    plan.write_text("header subflows a\nheader mptcp b\nfrobnicate 3\n")
    p = subprocess.run([program, plan], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and "unknown line: frobnicate 3" in p.stderr


def test_the_sampler_process_stops_and_reads_its_lateness(program, tmp_path, monkeypatch):
    monkeypatch.setattr(sampler, "PLAN_DIR", tmp_path / "plan")
    monkeypatch.setattr(sampler, "_netns_path", lambda ns: "/proc/self/ns/net")
    monkeypatch.setenv(sampler.ENV, str(program))
    s = sampler.start({"host": "unused"}, tmp_path, 0.05, None)
    assert isinstance(s, sampler.SamplerProcess)
    time.sleep(0.4)
    s.stop()
    assert s.error is None and len(s.lateness) >= 2 and s.path in ("uring", "sync")
    assert (tmp_path / "host-subflows.csv").exists()
    assert not (tmp_path / "host-mptcp.csv").exists()  # that kind off
    monkeypatch.setenv(sampler.ENV, "")
    t = sampler.start({}, tmp_path, 0.05, None)  # no program: the thread
    assert isinstance(t, sampler.SamplerThread)
    t.stop()


def test_a_sampler_that_dies_says_why(program, tmp_path, monkeypatch):
    monkeypatch.setattr(sampler, "PLAN_DIR", tmp_path / "plan")
    monkeypatch.setattr(sampler, "_netns_path", lambda ns: "/nonexistent/netns")
    s = sampler.SamplerProcess(str(program), {"host": "x"}, tmp_path, 0.1, 0.1)
    time.sleep(0.3)
    s.stop()
    assert s.error and "/nonexistent/netns" in s.error and os.path.exists(s.stderr_path)
