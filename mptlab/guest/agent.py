"""The guest agent: one run, inside the UML guest.

    python -m mptlab.guest.agent RUN_DIR

reads ``RUN_DIR/spec.json`` (an expanded ``RunSpec``) once, into one
frozen, typed ``mptlab.guest.config.GuestRun`` (a malformed spec is an
error naming its field before anything is built), then:

1. loads the scheduler modules (module parameters for the one under test)
   and records their hashes;
2. builds the planned network (``mptlab.guest.build``), sets the kernel
   knobs in every namespace (scheduler, congestion control, buffers, checksum, path
   manager limits and endpoints, any sysctl) and flushes TCP metrics;
3. starts the traces: sock_diag samplers on the client and the server,
   tcpdump headers per interface (optional), the kernel's stats tracepoints;
4. starts the background flows (``mptlab.workloads.background.start``, if any),
   records the kernel's counters of the client and the server
   (``mptlab.guest.nstat``), starts the stall watchdog
   (``mptlab.guest.stall``), runs the workload (``mptlab.workloads.<type>.run``,
   in a thread of its own), stops the background (``mptlab.workloads.background.stop``,
   whose metrics go to ``result.json``);
5. stops the traces, records the counters again and writes ``result.json``
   (metrics, per-subflow and per-connection kernel counters, nstat counters)
   and ``guest-provenance.json``.

A workload whose data level stands still with data outstanding for
``stall_timeout`` is stopped by the watchdog (its processes killed, its
sockets shut down): ``result.json`` says ``status: stalled`` with the
reason in words and ``traces/stall-snapshot.json`` holds the state.  Errors
are written as ``status: error`` with the message.  Either way the agent
exits non-zero; the host records the run as stalled or failed
(``mptlab.rundir.outcome``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from .. import rundir
from ..rundir import RunDir, RunDirError, RunSpec
from ..spec.knobs import buffer_sysctls, fec_hosts, fec_sysctls, mptbm_sysctls
from ..spec.plan import mptcp_endpoints
from . import fec, modules, nstat, sampler, sbdu, schedstats, stall, tracepoints
from .build import build
from .config import ConfigError, GuestRun
from .netlab import Net
from .sampler import SamplerProcess, SamplerThread, lateness_summary
from .sockets import abort_sockets
from .workload import WorkloadError
from .workload import load as load_workload

# After the watchdog fired: how long the workload's processes get to exit on
# SIGTERM (iperf3 writes its partial report) before SIGKILL, and how long
# run() gets to come back after that before the agent goes on without it.
STOP_TERM_S = 3.0
STOP_GRACE_S = 5.0


class Context:
    """What a workload gets: the network, the plan, the config, where to write.

    ``run`` is the run, typed (``GuestRun``); ``config``, ``workload``,
    ``topology``, ``plan``, ``client`` and ``server`` are its parts under
    the names workloads know.  ``spec`` is the ``RunSpec`` as read, for the
    workloads that still read its plain data (the agent does not)."""

    def __init__(self, run_dir: RunDir, spec: RunSpec, run: GuestRun):
        self.run_dir = run_dir.path
        self.spec = spec
        self.run = run
        self.config = run.config
        self.workload = run.config.workload
        self.topology = run.topology
        self.client = run.client
        self.server = run.server
        self.trace_dir = run_dir.traces
        self.trace_dir.mkdir(exist_ok=True)
        self.plan = run.plan
        self._net: Net | None = None
        self.marks: dict[str, float] = {}
        self._log = open(run_dir.file(rundir.AGENT_LOG), "a")  # noqa: SIM115
        self.procs: list[subprocess.Popen] = []
        self.samplers: list[SamplerProcess | SamplerThread] = []
        self.trace_reader: tracepoints.TraceReader | None = None
        self.nstat: nstat.Recorder | None = None
        self.watchdog: stall.Watchdog | None = None

    @property
    def net(self) -> Net:
        """The built network (``mptlab.guest.build``)."""
        if self._net is None:
            raise RuntimeError("the network is not built yet")
        return self._net

    @net.setter
    def net(self, net: Net) -> None:
        self._net = net

    def path_of(self, addr: str) -> int | None:
        """The path of one of the client's or the server's addresses (``NetPlan.path_of``)."""
        return self.run.path_of(addr)

    def prepared(self) -> dict:
        """What the workload's ``prepare()`` returned on the host, found by the
        run's content key in the host's content cache (``rundir.CONTENT_ENV``;
        ``mptlab.campaign.content``)."""
        key = self.run.content_key
        where = os.environ.get(rundir.CONTENT_ENV)
        if key is None or not where:
            missing = "no content key (spec.json from an older mptlab?)" if key is None else ""
            missing += "" if where else f"{' and ' if missing else ''}no ${rundir.CONTENT_ENV}"
            raise RuntimeError(
                f"workload {self.workload.type!r} needs content made on the host by its "
                f"prepare() (mptlab run does this), but the guest was given {missing}"
            )
        manifest = rundir.content_manifest(Path(where), key)
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError) as exc:
            raise RuntimeError(
                f"content {key}: {manifest} unreadable ({exc}); the host prepares it before "
                "the run (mptlab.campaign.content)"
            ) from None
        if not isinstance(data, dict) or data.get("key") != key or not data.get("prepared"):
            raise RuntimeError(f"content {key}: {manifest} holds no content for this key")
        return data["prepared"]

    def log(self, msg: str) -> None:
        self._log.write(f"{time.time():.3f} {msg}\n")
        self._log.flush()

    def mark(self, name: str) -> None:
        """Record a wall-clock instant (UML shares the host clock).  The
        workload calls ``mark("workload_start")``: link events count from it."""
        self.marks[name] = time.time()
        if name == "workload_start" and self.plan.events:
            threading.Thread(target=self._apply_events, daemon=True).start()

    def _apply_events(self) -> None:
        start = self.marks["workload_start"]
        for k, event in enumerate(sorted(self.plan.events, key=lambda e: e["at_ms"])):
            time.sleep(max(0.0, start + event["at_ms"] / 1000 - time.time()))
            link = self.net.links[event["link"]]
            try:
                self.net.change(link, event["a_to_b"], event["b_to_a"])
                self.mark(f"event{k}")
                self.log(
                    f"event {k}: {link.a_dev}-{link.b_dev} changed at +{time.time() - start:.3f} s"
                )
            except Exception as exc:  # noqa: BLE001 - recorded; the run goes on
                self.log(f"event {k} failed: {exc}")
                self.marks[f"event{k}_failed"] = time.time()


def guest_tcp_mem(meminfo: str = "/proc/meminfo") -> str:
    """``tcp_mem`` (pages: no pressure below, pressure from, hard limit) for
    this guest: 1/2, 5/8 and 3/4 of its RAM.

    The sender and the receiver of an experiment share one guest kernel, so
    one TCP memory budget, which Linux sizes at ~9 % of RAM (22 MB hard
    limit, pressure from 14.7 MB in a 256 MB guest).  Under memory pressure
    an MPTCP receiver drops even the segment that fills the hole in its
    out-of-order queue (MPTcpExt RcvPruned) and never prunes that queue, so
    the connection deadlocks: 4 of 4 blest and 2 of 4 default 64 MiB
    transfers over 3G+WLAN with 16 MiB buffers stalled that way in a 256 MB
    guest, 0 of 4 in a 1 GiB guest, whose peak TCP memory was 26 MB
    (docs/stalls.md).  Real endpoints each have GBs and their own budget;
    here pressure should only come when the guest is really short of memory.
    """
    with open(meminfo) as f:
        kb = int(f.readline().split()[1])  # MemTotal
    pages = kb // 4
    return f"{pages // 2} {pages * 5 // 8} {pages * 3 // 4}"


def guest_clock(cmdline: str = "/proc/cmdline") -> str:
    """The clock this guest kernel runs on, read from its command line
    (``mptlab.campaign.boot.CLOCK_ARGS``): ``virtual`` or ``real``."""
    with open(cmdline) as f:
        words = f.read().split()
    return "virtual" if "time-travel=inf-cpu" in words else "real"


def kernel_has_fec() -> bool:
    """Does the guest kernel have TCP-dFEC (its per-namespace sysctls)?"""
    return Path("/proc/sys/net/ipv4/tcp_fec").exists()


def configure(ctx: Context) -> dict:
    """Kernel knobs in every namespace; returns what was set (for provenance)."""
    k = ctx.config.kernel
    net = ctx.net
    applied: dict[str, object] = {}
    per_ns = {
        "net.ipv4.tcp_congestion_control": k.congestion_control,
        "net.ipv4.tcp_no_metrics_save": 1,
        "net.mptcp.enabled": 1,
        "net.mptcp.checksum_enabled": int(k.checksum),
        # The server announces its other addresses once, on a pure ACK; Linux
        # re-sends a lost ADD_ADDR only after add_addr_timeout (120 s by
        # default), so one loss on a lossy first path would leave a run on a
        # single subflow.  1 s unless the experiment's sysctls say otherwise.
        "net.mptcp.add_addr_timeout": 1,
    }
    if k.mptbm is not None:
        per_ns.update(mptbm_sysctls(k.mptbm.to_json()))
    per_ns.update(buffer_sysctls(k.rmem, k.wmem, k.buffers))
    if not k.opportunistic_retransmission:
        per_ns["net.mptcp.opportunistic_retrans"] = 0
    per_ns.update(k.sysctls)
    # global knobs live in the guest's initial namespace
    modules.allow_congestion_control(k.congestion_control)
    tcp_mem = per_ns.pop("net.ipv4.tcp_mem", None) or guest_tcp_mem()
    subprocess.run(["sysctl", "-qw", f"net.ipv4.tcp_mem={tcp_mem}"], check=True)
    applied["net.ipv4.tcp_mem"] = tcp_mem
    if k.rmem:
        subprocess.run(["sysctl", "-qw", f"net.core.rmem_max={k.rmem}"], check=True)
    if k.wmem:
        subprocess.run(["sysctl", "-qw", f"net.core.wmem_max={k.wmem}"], check=True)
    # TCP-dFEC: in the client's and/or the server's namespace only (background
    # hosts stay plain TCP); the experiment's own sysctls still win
    fec_cfg = k.fec.to_json() if k.fec is not None else None
    fec_values = {key: value for key, value in fec_sysctls(fec_cfg).items() if key not in k.sysctls}
    on = fec_hosts(fec_cfg, ctx.client, ctx.server)
    if fec_values and not kernel_has_fec():
        raise RuntimeError(
            "kernel.fec is set, but this kernel has no TCP-dFEC (no net.ipv4.tcp_fec): "
            "build the kernel with the FEC patch (make kernel)"
        )
    sbd = k.sbd
    for host in ctx.plan.hosts:
        values = dict(per_ns)
        if host in (ctx.client, ctx.server):
            values["net.mptcp.scheduler"] = k.scheduler
            if sbd is not None:  # microsecond TSvals and the OWD tracepoint (patch 0014)
                values["net.mptcp.owd_trace"] = 1
        if host in on:
            values.update(fec_values)
        net.sysctls(host, values)
    applied.update(per_ns)
    if k.fec_on:
        applied["fec"] = {"hosts": on, "sysctls": fec_values}
    applied["mptcp_endpoints"] = mptcp_endpoints(ctx.plan, ctx.client, ctx.server)
    if sbd is not None:
        applied["net.mptcp.owd_trace"] = {"hosts": [ctx.client, ctx.server], "value": 1}
    return applied


def start_traces(ctx: Context) -> None:
    """The sampler (one program, ``sampler.c``, or else one thread of this
    process, for the client's and the server's namespaces), tcpdump, and the kernel's tracepoints (drained
    into the run dir while the run goes on)."""
    t = ctx.config.traces
    if t.ss_interval or t.ofo_interval:
        ctx.samplers.append(
            sampler.start(
                {host: ctx.net.ns(host) for host in (ctx.client, ctx.server)},
                ctx.trace_dir,
                (t.ss_interval or 0) / 1000 or None,
                (t.ofo_interval or 0) / 1000 or None,
            )
        )
    if t.tcpdump:
        for host in (ctx.client, ctx.server):
            for dev in ctx.net.hosts[host].interfaces:
                pcap = ctx.trace_dir / f"{dev}.pcap"
                # -Z root: tcpdump would chown its file to the tcpdump user and give
                # up ("Couldn't change ownership of savefile") when the guest runs
                # confined in a user namespace (mptlab/campaign/launch.py), leaving
                # a 24-byte capture; the guest is a throw-away root anyway.
                args = [
                    "tcpdump",
                    "-Z",
                    "root",
                    "-i",
                    dev,
                    "-s",
                    str(t.snaplen),
                    "-w",
                    str(pcap),
                    "-U",
                    "--immediate-mode",
                    "tcp",
                ]
                err = open(ctx.trace_dir / f"{dev}.tcpdump.log", "w")  # noqa: SIM115
                ctx.procs.append(ctx.net.popen(host, args, stderr=err))
                err.close()  # the child holds its copy
        time.sleep(0.5)
        for log in sorted(ctx.trace_dir.glob("*.tcpdump.log")):
            # a capture that died at once is no capture: say so instead of an empty file
            if "listening on" not in log.read_text() and any(
                p.poll() is not None for p in ctx.procs
            ):
                raise RuntimeError(f"tcpdump failed: {log.name}: {log.read_text().strip()[-300:]}")
    events = tracepoints.STATS_EVENTS + ((tracepoints.OFO_EVENT,) if t.ofo_events else ())
    with_fec = ctx.config.kernel.fec_on
    if with_fec:  # the TCP-dFEC kernel's events (docs/fec.md)
        events += tracepoints.FEC_EVENTS
    sbd_config = ctx.config.kernel.sbd
    unit = None
    if sbd_config is not None:  # shared-bottleneck detection (mptlab.guest.sbdu)
        events += (sbdu.OWD_EVENT,)
        unit = sbdu.SbdUnit(
            sbdu.sbd_params(sbd_config),
            open(ctx.trace_dir / rundir.SBD_OBSERVATIONS, "w"),  # noqa: SIM115 - closed in stop_traces
            open(ctx.trace_dir / rundir.SBD_DECISIONS, "w"),  # noqa: SIM115
            ctx.path_of,
        )
    tracepoints.enable(events, clock="mono")
    ctx.trace_reader = tracepoints.TraceReader(
        ctx.trace_dir / rundir.KTRACE,
        ctx.trace_dir / rundir.OFO_EVENTS,
        # SBD's decisions are due every 3.5 s: read its delays often enough
        # that a decision is at most 0.1 s late
        interval=0.1 if unit else 0.5,
        fec_ratio_path=ctx.trace_dir / rundir.FEC_RATIO_EVENTS if with_fec else None,
        sbd=unit,
    )


def stop_traces(ctx: Context) -> tuple[list[dict], dict]:
    """Stop every trace; the kernel's stats events and what the traces say
    about the run's fidelity (sampler lateness, events the kernel lost)."""
    lateness: list[float] = []
    errors = []
    for each in ctx.samplers:
        each.stop()
        lateness += each.lateness
        if each.error:
            errors.append(each.error)
            ctx.log(f"sampler: {each.error}: its traces end early")
    for proc in ctx.procs:
        proc.send_signal(signal.SIGTERM)
    for proc in ctx.procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    ofo_events = ctx.trace_reader.stop() if ctx.trace_reader else 0
    lost = tracepoints.lost_events()
    if lost:
        ctx.log(f"kernel trace: {lost} events lost (ring buffer overrun)")
    fidelity = {
        "sampler_lateness": lateness_summary(lateness),
        "ktrace_lost_events": lost,
        "ofo_events": ofo_events,
        # why the sampler stopped before the run ended (its traces end there)
        "sampler_error": "; ".join(errors) or None,
        # how it sampled: the program through io_uring or by plain system
        # calls ("uring", "sync"), or the agent's thread ("thread")
        "sampler": (getattr(ctx.samplers[0], "path", None) or "thread") if ctx.samplers else None,
    }
    if ctx.trace_reader and ctx.trace_reader.fec is not None:
        fidelity["fec_ratio_events"] = ctx.trace_reader.fec_ratio_events
    unit = ctx.trace_reader.sbd if ctx.trace_reader else None
    if unit is not None:
        unit.close()
        fidelity["sbd"] = {
            "owd_samples": unit.samples,
            "decisions": unit.decisions,
            "apply_errors": unit.apply_errors[:10],
            "apply_gone": unit.apply_gone,
        }
        if not unit.samples:
            ctx.log("SBD: no one-way delay samples (no MPTCP data received?)")
    return tracepoints.parse((ctx.trace_dir / rundir.KTRACE).read_text()), fidelity


def wait_for_close(ctx: Context, timeout_s: float = 30) -> None:
    """Subflows report their final counters when they close: wait until the
    client and the server have no TCP socket left but listeners and TIME-WAIT."""
    idle = {10, 6}  # TCP_LISTEN, TCP_TIME_WAIT
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hosts = (ctx.client, ctx.server)
        if all(state in idle for h in hosts for state, _ in ctx.net.tcp_sockets(h)):
            return
        time.sleep(0.05)
    ctx.log(f"connections still open after {timeout_s} s; final counters may be missing")


def kernel_counters(ctx: Context, records: list[dict]) -> dict:
    """Final per-connection and per-subflow counters from the tracepoints,
    with each subflow's path (the client interface its address belongs to)."""
    client_addrs = ctx.plan.addresses(ctx.client)
    server_addrs = ctx.plan.addresses(ctx.server)
    conns = [r for r in records if r["event"] == "mptcp_conn_stats"]
    subflows = [r for r in records if r["event"] == "mptcp_subflow_stats"]
    for sf in subflows:
        sf["path"] = ctx.path_of(sf.get("saddr", ""))
    out = {"connections": conns, "subflows": subflows}
    if ctx.config.kernel.fec_on:

        def host_of(addr: str) -> str | None:
            return "client" if addr in client_addrs else "server" if addr in server_addrs else None

        # every FEC-negotiated socket of the guest (kernel.fec, docs/fec.md)
        out["fec"] = fec.annotate(records, ctx.path_of, host_of)
    return out


def sbd_metrics(ctx: Context) -> dict:
    """The SBD decisions of the run scored against the truth (``mptlab.guest.sbdu.score``);
    {} when the experiment did not ask for SBD."""
    config = ctx.config.kernel.sbd
    path = ctx.trace_dir / rundir.SBD_DECISIONS
    if config is None or not path.exists():
        return {}
    truth = sbdu.truth_phases(config, ctx.plan, ctx.client, ctx.server)
    warmup = ctx.config.warmup / 1000
    unit = ctx.trace_reader.sbd if ctx.trace_reader else None
    main = (
        max(unit.token_samples, key=unit.token_samples.__getitem__)
        if unit and unit.token_samples
        else None
    )
    judged = sbdu.judge(path, truth, ctx.marks.get("workload_start", 0.0), main)
    sbdu.write_scores(ctx.trace_dir / rundir.SBD_SCORES, judged)
    return sbdu.score(judged, truth, warmup)


def fec_metrics(ctx: Context, kernel: dict) -> dict:
    """The data connection's FEC metrics (``mptlab.guest.fec``); {} when the
    experiment did not ask for FEC (the metrics are then absent, not 0)."""
    if "fec" not in kernel:
        return {}
    return fec.metrics(kernel["fec"], kernel["subflows"])


def start_watchdog(ctx: Context) -> stall.Watchdog | None:
    """The stall watchdog on the client's and the server's namespaces (None:
    ``stall_timeout: off``)."""
    timeout_s, how = stall.resolve_timeout(
        ctx.config.stall_timeout, ctx.plan, ctx.client, ctx.server
    )
    if timeout_s is None:
        ctx.log("stall watchdog off")
        return None

    def extra() -> dict:
        return {"nstat": ctx.nstat.snapshot()} if ctx.nstat else {}

    ctx.log(f"stall watchdog: {timeout_s:g} s ({how})")
    return stall.Watchdog(
        {h: ctx.net.ns(h) for h in (ctx.client, ctx.server)},
        timeout_s,
        ctx.trace_dir / rundir.STALL_SNAPSHOT,
        path_of=ctx.path_of,
        extra_snapshot=extra,
        log=ctx.log,
        how=how,
        mptcp=ctx.config.kernel.mptcp,
    )


def stop_workload(ctx: Context) -> None:
    """Make a stalled workload's run() come back: SIGTERM (then SIGKILL) to
    the processes it started in the client's and the server's namespaces
    (not the traces'), and shut down the sockets it made in this process."""
    mine = {ctx.net.ns(ctx.client), ctx.net.ns(ctx.server)}
    procs = [
        p for ns, p in ctx.net.spawned if ns in mine and p not in ctx.procs and p.poll() is None
    ]
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    n = abort_sockets()
    ctx.log(f"stopping the workload: SIGTERM to {len(procs)} process(es), {n} socket(s) shut down")
    deadline = time.monotonic() + STOP_TERM_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            tool = proc.args[4] if isinstance(proc.args, list) and len(proc.args) > 4 else proc.pid
            ctx.log(f"killed {tool} (no exit on SIGTERM)")


class WorkloadOutcome:
    """What ``run_workload`` saw: metrics or an exception, and whether the
    watchdog stopped it (``stalled``) or run() never came back (``abandoned``)."""

    def __init__(self):
        self.metrics: dict | None = None
        self.exc: BaseException | None = None
        self.traceback = ""
        self.stalled = False
        self.abandoned = False
        self.done_at = float("inf")


def run_workload(ctx: Context, workload, watchdog: stall.Watchdog | None) -> WorkloadOutcome:
    """``workload.run(ctx)`` in a thread, stopped when the watchdog fires."""
    out = WorkloadOutcome()
    done = threading.Event()

    def target() -> None:
        try:
            out.metrics = workload.run(ctx)
        except BaseException as exc:  # noqa: BLE001 - reported by the agent
            out.exc = exc
            out.traceback = traceback.format_exc()
        finally:
            out.done_at = time.time()
            done.set()

    worker = threading.Thread(target=target, name="workload", daemon=True)
    worker.start()
    while not done.wait(0.25):
        if watchdog is not None and watchdog.fired.is_set():
            out.stalled = True
            stop_workload(ctx)
            if not done.wait(STOP_GRACE_S):
                out.abandoned = True
                ctx.log(f"the workload did not return {STOP_GRACE_S:g} s after being stopped")
            break
    if not out.stalled and watchdog is not None and watchdog.fired.is_set():
        # fired while the workload was ending by itself (its tool gave up too)
        out.stalled = watchdog.info.get("t", float("inf")) <= out.done_at
    if out.exc is not None:
        ctx.log(out.traceback)
    return out


def error_text(exc: BaseException) -> str:
    """A workload's failure in words: a ``WorkloadError`` is its message; any
    other exception is named, with where it came from when it is a lookup
    or type error (a bug in reading a tool's output, not the tool's fault)."""
    if isinstance(exc, WorkloadError):
        return str(exc)
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, LookupError | TypeError | AttributeError) and exc.__traceback__:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        mine = Path(__file__).resolve().parent.parent in Path(frame.filename).resolve().parents
        # else a workload of the user's own (mptlab.spec.usercode), or its test
        whose = "an mptlab bug" if mine else "a bug outside mptlab: the workload's own code?"
        text += f" (in {Path(frame.filename).name}:{frame.lineno} {frame.name}: {whose})"
    return text


def run(run_dir: RunDir) -> int:
    state: dict = {}
    code = _run(run_dir, state)
    if state.get("abandoned"):
        # the stopped workload's threads still block in the kernel; they must
        # not keep the guest up (result.json is written)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def read_run(run_dir: RunDir) -> tuple[RunSpec, GuestRun]:
    """spec.json, as plain data and typed; ``ConfigError`` naming what is wrong."""
    try:
        spec = run_dir.run_spec()
    except RunDirError as exc:
        raise ConfigError(str(exc)) from None
    except TypeError as exc:  # keys RunSpec does not have, or lacks
        raise ConfigError(f"spec.json: not a run spec: {exc}") from None
    return spec, GuestRun.from_spec(spec)


def set_up(ctx: Context, run_dir: RunDir) -> None:
    """Everything before the traces: check the clock, load the modules, build
    the network, seed netem, set the kernel knobs, write the provenance.
    The agent's runs and the control server's topologies
    (``mptlab.guest.control``, ``mptlab shell``) are set up by this one function."""
    run = ctx.run
    clock = guest_clock()
    ctx.log(f"run {run.experiment} {run.run_id} seed {run.seed} clock {clock}")
    if clock != run.config.clock:
        raise RuntimeError(
            f"the run asks for clock {run.config.clock} but the guest runs on "
            f"{clock} time: the host that booted it ignores clock: (an older mptlab?)"
        )
    kernel = run.config.kernel
    hashes = modules.load_schedulers(
        scheduler=kernel.scheduler,
        params=dict(kernel.scheduler_params),
        cc=kernel.congestion_control,
        cc_params=dict(kernel.congestion_params),
    )
    pm = kernel.path_manager
    ctx.net = build(
        ctx.plan,
        ctx.client,
        ctx.server,
        subflows=pm.subflows,
        add_addr_accepted=pm.add_addr_accepted,
        net=Net(log=ctx.log),
    )
    # netem's losses and jitter: drawn from the run's seed, the same at every rerun
    netem_seeds = ctx.net.seed_netem(run.seed)
    applied = configure(ctx)
    run_dir.write_provenance(
        {
            "kernel": os.uname().release,
            "clock": clock,
            "modules_sha256": hashes,
            "settings": applied,
            # read back from /sys/module: what the modules under test run with
            "module_params": {
                modules.module_of(name): modules.read_params(modules.module_of(name), params)
                for name, params in (
                    (kernel.scheduler, dict(kernel.scheduler_params)),
                    (kernel.congestion_control, dict(kernel.congestion_params)),
                )
                if params
            },
            "netem_seeds": netem_seeds,
            "attempt": os.environ.get(rundir.ATTEMPT_ENV),
        }
    )


def _run(run_dir: RunDir, state: dict) -> int:
    started = time.time()
    try:
        spec, run = read_run(run_dir)
    except ConfigError as exc:  # nothing to run: say why, as any other failure
        run_dir.write_result(
            {
                "status": rundir.RESULT_ERROR,
                "error": f"ConfigError: {exc}",
                "started": started,
                "finished": time.time(),
                "attempt": os.environ.get(rundir.ATTEMPT_ENV),
            }
        )
        return 1
    ctx = Context(run_dir, spec, run)
    result: dict = {"status": rundir.RESULT_ERROR, "started": started}
    outcome: WorkloadOutcome | None = None
    try:
        set_up(ctx, run_dir)
        start_traces(ctx)
        background = None
        if run.config.background:
            background = load_workload("background")
            background.start(ctx)
        workload = load_workload(ctx.workload.type, ctx.workload.fields().get("module_path"))
        ctx.nstat = nstat.Recorder({h: ctx.net.ns(h) for h in (ctx.client, ctx.server)})
        ctx.watchdog = watchdog = start_watchdog(ctx)
        ctx.nstat.take("start")
        outcome = run_workload(ctx, workload, watchdog)
        state["abandoned"] = outcome.abandoned
        if watchdog is not None:
            watchdog.stop()
        background_metrics = background.stop(ctx) if background else None
        # a stopped or failed workload leaves connections that may never close
        wait_for_close(ctx, 30 if outcome.exc is None and not outcome.stalled else 2)
        ctx.nstat.take("end")
        # the scheduler's counters, now that its connections have closed
        sched_stats = schedstats.collect(ctx)
        records, fidelity = stop_traces(ctx)
        metrics = outcome.metrics
        if metrics is None and outcome.exc is not None:
            metrics = getattr(outcome.exc, "metrics", None)
        kernel_records = kernel_counters(ctx, records)
        if isinstance(metrics, dict):  # the agent's own metrics beside the workload's
            metrics = {
                **metrics,
                **fec_metrics(ctx, kernel_records),
                **sbd_metrics(ctx),
                **schedstats.metrics(sched_stats),
            }
        result.update(
            fidelity=fidelity,
            metrics=metrics,
            background=background_metrics,
            kernel=kernel_records,
            marks=ctx.marks,
            addresses={h: ctx.plan.addresses(h) for h in ctx.plan.hosts},
        )
        if sched_stats is not None:
            result["schedstats"] = sched_stats
        result["nstat"], result["memory"] = ctx.nstat.result()
        result["watchdog"] = watchdog.summary() if watchdog else {"setting": "off"}
        memory_words = stall.memory_diagnosis(
            result["nstat"],
            watchdog.tcp_mem_peak if watchdog else 0,
            result["memory"].get("end", {}).get("tcp_mem_pages"),
        )
        if memory_words:
            result["memory_diagnosis"] = memory_words
        if outcome.stalled and watchdog is not None:
            reason = watchdog.reason + (f"; {memory_words}" if memory_words else "")
            result.update(status=rundir.RESULT_STALLED, reason=reason, stall=watchdog.info)
            if outcome.exc is not None:  # what the stopped workload said; the reason stays
                result["workload_error"] = error_text(outcome.exc)
            return 1
        if outcome.exc is not None:
            error = error_text(outcome.exc)
            seen = watchdog.observation() if watchdog else ""
            if seen:
                error += f"; stall watchdog: {seen}"
            result.update(error=error, traceback=outcome.traceback)
            return 1
        result["status"] = rundir.RESULT_OK
        return 0
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, then reported
        error = f"{type(exc).__name__}: {exc}"
        if outcome is not None and outcome.stalled and ctx.watchdog is not None:
            # the watchdog's reason stays the run's; this failure came after it
            result.update(
                status=rundir.RESULT_STALLED,
                reason=ctx.watchdog.reason,
                stall=ctx.watchdog.info,
                agent_error=error,
            )
        elif outcome is not None and outcome.exc is not None:
            result.update(
                error=f"{error_text(outcome.exc)}; then {error}",
                traceback=outcome.traceback + traceback.format_exc(),
            )
        else:
            result.update(error=error, traceback=traceback.format_exc())
        ctx.log(traceback.format_exc())
        return 1
    finally:
        if ctx.watchdog is not None and ctx.watchdog.thread.is_alive():
            ctx.watchdog.stop()
        if ctx._net is not None:
            ctx._net.stop_ovs()  # Open vSwitch daemons, if any: none outlives the run
        result["finished"] = time.time()
        # the boot this result belongs to: the host checks it against its own
        result["attempt"] = os.environ.get(rundir.ATTEMPT_ENV)
        run_dir.write_result(result)


def main(argv: list[str] | None = None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    if len(argv) != 1:
        print("usage: python -m mptlab.guest.agent RUN_DIR", file=sys.stderr)
        return 2
    return run(RunDir(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
