"""The control server: a run's topology, kept up and driven from the host.

    python -m mptlab.guest.control RUN_DIR TTY [--hold]

sets the run up exactly as the agent does (``mptlab.guest.agent.set_up``:
modules, network, netem seeds, kernel knobs, provenance), runs no
workload, and then serves requests on ``TTY``, the guest's end of the
control channel (``mptlab.campaign.boot.CHANNEL_TTY``, two host pipes),
until it is told to stop; the guest then powers off.  ``mptlab shell`` and
``mptlab.Network`` are its clients (``mptlab.campaign.control``).

The protocol: one JSON object per line, each way (ASCII: ``json.dumps``
escapes the rest, so the tty's raw mode passes every byte as sent).

The server first says ``{"hello": {...}}`` (the nodes with their kinds,
interfaces and addresses, the links with their shapes, the clock, the
client, the server, the schedulers) or ``{"fatal": "..."}`` when the
set-up failed (then it exits).  Requests carry an ``id``; every request
but ``signal`` ends with one reply carrying the same ``id`` and either
``rc`` (an exit status) or ``error`` (the request was refused: unknown
node, busy, ...):

- ``{"op": "run", "node": N, "cmd": "sh words" | [argv], "merge": bool,
  "timeout": s | null}``: run a command in node ``N``'s network namespace
  (``null``: the guest's initial one); its output streams as ``{"id", "out":
  text}`` (and ``"err"`` unless ``merge``) while it runs; a ``timeout``
  (guest seconds) kills it (``"timed_out": true``).
- ``{"op": "background", "node": N, "cmd": "..."}``: start a command and
  do not wait; its output goes to ``background/<node>-<k>.log`` in the run
  dir (reply: ``pid``, ``log``); killed at ``stop``.
- ``{"op": "signal", "target": ID, "signal": 2}``: signal the running
  command's process group (Ctrl-C in the shell); for ``workload``: stop it
  as the stall watchdog stops one (``agent.stop_workload``).  No reply.
- ``{"op": "workload"}``: run the experiment's workload once (``run(ctx)``,
  no background flows, no samplers); reply ``metrics``.
- ``{"op": "load", "path": "/x/mptcp_foo.ko", "params": {...}}``: load a
  kernel module (``modules.insmod``); reply ``schedulers`` (registered now).
- ``{"op": "stop"}``: kill the background commands, reply, exit.

One command runs at a time (as in Mininet's CLI); a request other than
``signal`` or ``stop`` while one runs is refused (``error``).

``--hold`` (virtual time): between requests the server does not idle but
polls the channel, yielding the CPU, so that guest time stands still until
the next request (inf-cpu time advances only while the guest is idle); the
host stops the UML process meanwhile (SIGSTOP), so the poll costs no host
CPU.  Left idle instead, a waiting guest burned a host CPU and its clock
moved by fits: 0 s of guest time in 8 s of wall time, then 31 hours at once
(the conntrack garbage collector's 60 s sleeps, skipped one after the other).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import termios
import threading
import time
import traceback
import tty
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..rundir import RunDir
from ..spec.shapes import Shape
from . import agent, modules
from .config import ConfigError
from .workload import load as load_workload
from .workload import settle_clock

BACKGROUND_DIR = "background"  # in the run dir: the output of `node cmd &`
# Held (virtual time): the guest time a background command gets before the
# reply, so that it is up (listening, say) when the next command runs.
# Without it the start was a race with the host's SIGSTOP: `server iperf3 -s
# &` then `client iperf3 -c server &` transferred in 1 session of 2 (the
# server was started, or not, while the held server polled); starting costs
# no guest time, so 100 ms is plenty.
BACKGROUND_START_S = 0.1
CHUNK = 1 << 14


def describe_shape(shape: Shape | None) -> str:
    """A link direction's shape in a few words: ``25mbit 12.5ms loss 1% q 100p droptail``."""
    if shape is None:
        return "unshaped"
    words = []
    if shape.rate is not None:
        words.append(f"{shape.rate:g}mbit")
    if shape.delay:
        words.append(f"{shape.delay:g}ms")
    if shape.jitter:
        words.append(f"jitter {shape.jitter:g}ms")
    if shape.gilbert_elliott is not None:
        words.append("loss gilbert-elliott")
    elif shape.loss:
        words.append(f"loss {shape.loss:g}%")
    if shape.rate is not None:
        q = shape.queue
        limit = (
            f"{q.packets}p"
            if q.packets is not None
            else f"{q.bytes:g}B"
            if q.bytes is not None
            else f"{q.bdp:g}bdp"
        )
        words.append(f"q {limit} {shape.qdisc}")
    return " ".join(words) or "no delay, no limit"


def hello(ctx: agent.Context) -> dict:
    """What the host learns once the topology is up."""
    net = ctx.net
    nodes = {
        name: {
            "kind": "switch" if h.switch else "router" if h.router else "host",
            "interfaces": [[dev, addr] for dev, addr in zip(h.interfaces, h.addrs, strict=True)],
        }
        for name, h in net.hosts.items()
    }
    links = [
        {
            "a": ln.a.name,
            "a_dev": ln.a_dev,
            "b": ln.b.name,
            "b_dev": ln.b_dev,
            "a_to_b": describe_shape(ln.a_to_b),
            "b_to_a": describe_shape(ln.b_to_a),
        }
        for ln in net.links
    ]
    kernel = ctx.config.kernel
    return {
        "experiment": ctx.run.experiment,
        "variant": ctx.run.variant,
        "clock": agent.guest_clock(),
        "client": ctx.client,
        "server": ctx.server,
        "nodes": nodes,
        "links": links,
        "scheduler": kernel.scheduler,
        "congestion_control": kernel.congestion_control,
        "schedulers": modules.available_schedulers(),
        "workload": ctx.workload.type,
        "pid": os.getpid(),
    }


class Channel:
    """The guest's end of the control channel: a tty in raw mode (no echo,
    no line editing, no CR/LF translation), JSON lines in and out."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd, termios.TCSANOW)
        self.buf = b""
        self.lock = threading.Lock()  # the workload's thread may not write, but be safe

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg, ensure_ascii=True, default=str) + "\n").encode()
        with self.lock:
            while data:
                try:
                    n = os.write(self.fd, data)
                except BlockingIOError:
                    time.sleep(0.001)
                    continue
                data = data[n:]

    def read(self) -> list[dict | str]:
        """The requests that arrived (a line that is not JSON: its text); [] at none."""
        chunk = os.read(self.fd, CHUNK)
        if not chunk:
            raise EOFError("control channel closed")
        self.buf += chunk
        out: list[dict | str] = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            line = line.strip(b"\r ")
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                out.append(line.decode(errors="replace"))
                continue
            out.append(msg if isinstance(msg, dict) else repr(msg))
        return out


@dataclass
class Job:
    """The one command (or workload) running now."""

    id: int
    proc: subprocess.Popen | None = None
    pidfd: int | None = None
    pipes: dict[int, tuple[IO[bytes], str, Any]] = field(default_factory=dict)
    deadline: float | None = None
    timed_out: bool = False
    # a workload: the thread's outcome and the pipe it pokes when done
    thread: threading.Thread | None = None
    done_r: int | None = None
    outcome: dict = field(default_factory=dict)


class Server:
    def __init__(self, ctx: agent.Context, channel: Channel, hold: bool = False):
        self.ctx = ctx
        self.channel = channel
        self.hold = hold
        self.sel = selectors.DefaultSelector()
        self.job: Job | None = None
        self.background: list[subprocess.Popen] = []
        self.stopping = False

    # -------------------------------------------------------------- helpers
    def _ns(self, node: Any) -> str | None:
        """The namespace of ``node`` (None: the initial one); KeyError naming the nodes."""
        if node is None:
            return None
        if not isinstance(node, str) or node not in self.ctx.net.hosts:
            raise KeyError(f"no node {node!r}; nodes: {', '.join(self.ctx.net.hosts)}")
        return self.ctx.net.ns(node)

    def _popen(self, node: Any, cmd: Any, **kwargs) -> subprocess.Popen:
        ns = self._ns(node)
        if isinstance(cmd, str):
            argv = ["sh", "-c", cmd]
        elif isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd):
            argv = cmd
        else:
            raise ValueError(f"cmd: a string or a non-empty list of strings, not {cmd!r}")
        # a session of its own: a signal (Ctrl-C) reaches the command's whole group
        kwargs.update(start_new_session=True, stdin=subprocess.DEVNULL)
        if ns is None:
            return subprocess.Popen(argv, **kwargs)
        return self.ctx.net.popen(node, argv, **kwargs)

    # -------------------------------------------------------------- requests
    def handle(self, msg: dict | str) -> None:
        if not isinstance(msg, dict):
            self.channel.send({"error": f"not a JSON object: {msg[:200]!r}"})
            return
        rid, op = msg.get("id"), msg.get("op")
        if op == "signal":
            self.signal(msg)
            return
        if not isinstance(rid, int):
            self.channel.send({"error": f"a request needs an integer id: {msg!r:.200}"})
            return
        if op == "stop":
            self.stopping = True
            self.stop_background()
            self.channel.send({"id": rid, "rc": 0})
            return
        if self.job is not None:
            self.channel.send({"id": rid, "error": f"busy: request {self.job.id} is running"})
            return
        try:
            if op == "run":
                self.start_run(rid, msg)
            elif op == "background":
                self.start_background(rid, msg)
            elif op == "workload":
                self.start_workload(rid)
            elif op == "load":
                path = Path(str(msg.get("path", "")))
                modules.insmod(path, dict(msg.get("params") or {}))
                self.channel.send(
                    {"id": rid, "rc": 0, "schedulers": modules.available_schedulers()}
                )
            else:
                self.channel.send({"id": rid, "error": f"unknown op {op!r}"})
        except (KeyError, ValueError, OSError, RuntimeError) as exc:
            text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            self.channel.send({"id": rid, "error": str(text)})

    def start_run(self, rid: int, msg: dict) -> None:
        merge = bool(msg.get("merge", True))
        proc = self._popen(
            msg.get("node"),
            msg.get("cmd"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        )
        job = Job(rid, proc=proc)
        timeout = msg.get("timeout")
        if isinstance(timeout, int | float) and timeout > 0:
            job.deadline = time.monotonic() + float(timeout)
        for pipe, kind in ((proc.stdout, "out"), (proc.stderr, "err")):
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                job.pipes[pipe.fileno()] = (pipe, kind, decoder)
                self.sel.register(pipe.fileno(), selectors.EVENT_READ, "pipe")
        # the process's end: a pidfd turns readable when it exits, so that a
        # command that left a child holding its output (`sleep 100 &`) ends too
        job.pidfd = os.pidfd_open(proc.pid)
        self.sel.register(job.pidfd, selectors.EVENT_READ, "exit")
        self.job = job

    def start_background(self, rid: int, msg: dict) -> None:
        node = msg.get("node")
        self._ns(node)
        logs = self.ctx.run_dir / BACKGROUND_DIR
        logs.mkdir(exist_ok=True)
        log = logs / f"{node or 'guest'}-{len(self.background) + 1}.log"
        with open(log, "wb") as out:
            proc = self._popen(node, msg.get("cmd"), stdout=out, stderr=subprocess.STDOUT)
        if self.hold:
            time.sleep(BACKGROUND_START_S)
        self.background.append(proc)
        # spared when a `workload` is stopped (agent.stop_workload spares ctx.procs)
        self.ctx.procs.append(proc)
        self.channel.send(
            {"id": rid, "rc": 0, "pid": proc.pid, "log": str(log.relative_to(self.ctx.run_dir))}
        )

    def start_workload(self, rid: int) -> None:
        job = Job(rid)
        done_r, done_w = os.pipe()
        job.done_r = done_r
        workload = load_workload(self.ctx.workload.type)

        def target() -> None:
            try:
                job.outcome = {"rc": 0, "metrics": workload.run(self.ctx)}
            except BaseException as exc:  # noqa: BLE001 - reported to the host
                job.outcome = {"rc": 1, "error": agent.error_text(exc)}
                self.ctx.log(traceback.format_exc())
            finally:
                os.write(done_w, b"x")
                os.close(done_w)

        self.ctx.marks.clear()
        job.thread = threading.Thread(target=target, name="workload", daemon=True)
        self.sel.register(done_r, selectors.EVENT_READ, "workload")
        self.job = job
        job.thread.start()

    def signal(self, msg: dict) -> None:
        job = self.job
        if job is None or msg.get("target") != job.id:
            return  # it ended meanwhile
        sig = msg.get("signal", signal.SIGINT)
        if job.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError, TypeError, ValueError):
                os.killpg(job.proc.pid, int(sig))
        elif job.thread is not None:
            agent.stop_workload(self.ctx)

    def stop_background(self) -> None:
        for proc in self.background:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.background:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    # -------------------------------------------------------------- the job
    def drain(self, job: Job, fd: int, final: bool = False) -> bool:
        """Forward what a pipe holds; False at its end (or, ``final``, when it holds nothing)."""
        pipe, kind, decoder = job.pipes[fd]
        while True:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return not final
            text = decoder.decode(data, final=not data)
            if text:
                self.channel.send({"id": job.id, kind: text})
            if not data:
                return False
            if not final:
                return True

    def close_pipe(self, job: Job, fd: int) -> None:
        self.sel.unregister(fd)
        job.pipes.pop(fd)[0].close()

    def finish_run(self, job: Job) -> None:
        assert job.proc is not None and job.pidfd is not None
        # what the command wrote before it exited; a child it left in the
        # background keeps the pipe open: what it writes later is not read
        for fd in list(job.pipes):
            self.drain(job, fd, final=True)
            self.close_pipe(job, fd)
        self.sel.unregister(job.pidfd)
        os.close(job.pidfd)
        rc = job.proc.wait()
        reply: dict[str, Any] = {"id": job.id, "rc": rc}
        if job.timed_out:
            reply["timed_out"] = True
        self.job = None
        self.channel.send(reply)

    def finish_workload(self, job: Job) -> None:
        assert job.done_r is not None and job.thread is not None
        self.sel.unregister(job.done_r)
        os.close(job.done_r)
        job.thread.join()
        self.job = None
        self.channel.send({"id": job.id, **job.outcome})

    def on_ready(self, fd: int, what: str) -> None:
        job = self.job
        if job is None:
            return
        if what == "pipe" and fd in job.pipes:
            if not self.drain(job, fd):
                self.close_pipe(job, fd)
        elif what == "exit":
            self.finish_run(job)
        elif what == "workload":
            self.finish_workload(job)

    def check_deadline(self) -> None:
        job = self.job
        if job is None or job.deadline is None or job.proc is None or job.timed_out:
            return
        if time.monotonic() >= job.deadline:
            job.timed_out = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(job.proc.pid, signal.SIGKILL)

    # -------------------------------------------------------------- the loop
    def wait_held(self) -> None:
        """Wait for a request without letting guest time pass: a poll that
        never blocks and reads no clock.  A select with timeout 0 succeeds
        without reading the clock; a failed system call (a read that would
        block) costs 1 us of inf-cpu guest time and every clock read 256 ns
        (sched_yield() reads the scheduler's): with a yield in this loop the
        same commands gave other numbers from session to session (a ping's
        100.001 ms against 100.002 ms), the loop running more or fewer times
        before the host stopped the guest."""
        while not self.stopping and self.job is None:
            ready, _, _ = select.select([self.channel.fd], [], [], 0)
            if ready:
                for msg in self.channel.read():
                    self.handle(msg)

    def serve(self) -> None:
        self.sel.register(self.channel.fd, selectors.EVENT_READ, "channel")
        while not self.stopping:
            if self.hold and self.job is None:
                self.wait_held()
                continue
            timeout = None
            if self.job is not None and self.job.deadline is not None and not self.job.timed_out:
                timeout = max(0.0, self.job.deadline - time.monotonic())
            for key, _ in self.sel.select(timeout):
                if key.data == "channel":
                    for msg in self.channel.read():
                        self.handle(msg)
                else:
                    self.on_ready(key.fd, key.data)
            self.check_deadline()


def main(argv: list[str] | None = None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    hold = "--hold" in argv
    argv = [a for a in argv if a != "--hold"]
    if len(argv) != 2:
        print("usage: python -m mptlab.guest.control RUN_DIR TTY [--hold]", file=sys.stderr)
        return 2
    run_dir, channel = RunDir(argv[0]), Channel(argv[1])
    try:
        spec, run = agent.read_run(run_dir)
        ctx = agent.Context(run_dir, spec, run)
        agent.set_up(ctx, run_dir)
        settle_clock()  # the prompt at 1.5 s of uptime at least (ping: guest/workload.py)
        info = hello(ctx)
    except (ConfigError, Exception) as exc:  # noqa: BLE001 - the host shows it
        traceback.print_exc()
        channel.send({"fatal": f"{type(exc).__name__}: {exc}"})
        return 1
    channel.send({"hello": info})
    server = Server(ctx, channel, hold=hold)
    try:
        server.serve()
    except EOFError:  # the host went away: nothing to serve
        server.stop_background()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
