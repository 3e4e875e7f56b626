"""Background traffic between the topology's background pairs.

An experiment's ``background:`` list holds entries like::

    background:
      - {preset: blest-3g-wlan, tcp_flows: 2, udp_flows: 5, seed: 1}
      - {preset: fec, pairs: [2], tcp_flows: 1, udp_flows: 1, seed: 7, udp_pps: [395, 600]}

Each entry starts, on every background pair it names (``pairs``, 1-based
indices into the topology's ``roles.background``; default: all), from the
pair's sender to its receiver across that pair's bottleneck:

- ``tcp_flows`` rate-limited TCP flows: Poisson packets (exponential
  inter-departure times) at ``tcp_pps``;
- ``tcp_greedy`` saturating TCP flows (the sender always has data), whose
  window ``tcp_greedy_window`` caps (None: unbounded): the replayer's
  receiver clamps the flow's advertised window, so at most that many bytes
  are in flight and a path with BDP B keeps about ``window - B`` queued;
- ``udp_flows`` UDP on/off flows: Pareto-distributed ON periods,
  exponentially distributed OFF periods (both truncated to ``on_off``),
  Poisson packets while ON at the flow's rate (``udp_rate``, or a rate drawn
  uniformly from ``udp_pps``).

Packet payloads are uniform in ``packet_size`` x [0.6, 1.4] (mean
``packet_size``).  Each flow gets an RTT drawn uniformly from ``rtt``: the
part above the path's own RTT is added as delay on the sender's access link
(one netem class per 5-10 ms RTT step, selected by destination port).

Every packet time and size is drawn here, from ``seed`` (combined with the
run's seed unless ``seed_per_run: false``), so the offered load is known
exactly and recorded (``traces/background-schedule.json``).  A generator
only replays that schedule (the entry's ``generator``):

- ``mptlab`` (default): ``helpers/bgtraffic.c``, one sender and one
  receiver per pair, fed the pair's flows and merged packet timeline
  (``schedule_text``).  Its sender hands the packets to the guest kernel
  through io_uring (one system call per 128 packets; a sleep and a send
  per packet where io_uring is missing), D-ITG costs ~9.4 system calls
  per packet, and each costs 15-70 us of host CPU in UML (numbers in
  docs/workloads.md).  The sender prints its start time (``t0``,
  CLOCK_MONOTONIC), which places the schedule's window exactly.
- ``d-itg``: ``ITGSend`` with inter-departure-time and size files
  (``-Ft``/``-Fs``) and ``ITGRecv``.

Presets (paper values; what the papers leave open is marked chosen in
``mptlab.spec.workloads.PRESETS`` and docs/workloads.md): ``blest-3g-wlan``,
``blest-wlan-wlan``, ``sbd``, ``fec``.  The entries reach the guest with
their preset's values filled in (``Background.resolved()`` on the host).

``start(ctx)`` launches the flows; ``stop(ctx)`` stops them and returns per
pair the configured, scheduled, sent and received load (payload Mbit/s),
measured from the namespaces' interface and protocol counters.
"""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..guest.netlab import in_netns, wait_listening
from ..spec.metrics import Metric
from ..spec.seeds import derive_seed
from .helpers import bgtraffic
from .helpers.common import stop as stop_proc

BASE_PORT = 20000  # data ports: BASE_PORT + flow index (per run)
SIGNAL_PORT = 9000  # ITGRecv's control port; the replayer's receiver listens there last
REPLAYER_SIGNAL_PORT = SIGNAL_PORT + 1  # ... or here, beside an ITGRecv on the same pair
T0_WAIT_S = 20.0  # the replayer prints t0 once its TCP flows are connected (one handshake)
MAX_FLOWS_PER_SENDER = 400  # ITGSend 2.8.1 crashes above ~500 flows in one script
SIZE_SPREAD = 0.4  # payload uniform in mean x [1 - spread, 1 + spread] (chosen)
PARETO_SHAPE = 1.5  # shape of the ON-period Pareto distribution (chosen)
GREEDY_PPS = 20000  # a rate no bottleneck here can carry: the sender always has data
UDP_OVERHEAD = 14 + 20 + 8  # Ethernet + IPv4 + UDP header bytes per packet
TCP_OVERHEAD = 14 + 20 + 32  # Ethernet + IPv4 + TCP header with timestamps
LOAD_TOLERANCE = 0.10  # sent vs scheduled payload beyond this: the run's load_ok is false
# stop()'s result, which the run records as ``background``: the runs table
# prefixes its keys with bg_ (lists go to the series table)
METRICS = (
    Metric(
        "bg_pairs",
        "",
        None,
        "per background pair: configured, scheduled, sent and received Mbit/s, packets/s, "
        "TCP segments out and retransmitted, sent_vs_scheduled, load_ok",
        table="series",
    ),
    Metric("bg_seeds", "", None, "each background entry's seed", table="series"),
    Metric("bg_schedule", "", None, "where the flow schedule is (traces/...json, text)"),
)


# --------------------------------------------------------------- schedules
@dataclass
class Flow:
    entry: int
    pair: int  # 1-based
    kind: str  # tcp | udp | greedy
    port: int
    seed: int
    rtt_ms: float
    pps: float | None = None  # packets/s (while ON for udp)
    size: int = 1000  # mean payload
    periods: list[tuple[float, float]] = field(default_factory=list)  # ON periods (s)
    times: list[float] = field(default_factory=list, repr=False)
    sizes: list[int] = field(default_factory=list, repr=False)
    generator: str = "mptlab"  # mptlab | d-itg: what replays the flow
    window: int | None = None  # greedy: cap of the advertised window (bytes); None: unbounded

    def mean_mbps(self, duty: float) -> float | None:
        if self.kind == "greedy":
            return None
        return (self.pps or 0.0) * self.size * 8 / 1e6 * (duty if self.kind == "udp" else 1.0)


def truncated_pareto(rng: random.Random, shape: float, lo: float, hi: float) -> float:
    """Inverse-CDF draw of a Pareto(shape, scale=lo) truncated to [lo, hi]."""
    if hi <= lo:
        return lo
    u = rng.random()
    return (-(u * hi**shape - u * lo**shape - hi**shape) / (hi**shape * lo**shape)) ** (-1 / shape)


def truncated_exponential(rng: random.Random, mean: float, lo: float, hi: float) -> float:
    """lo + an exponential of ``mean`` truncated to [lo, hi] (inverse CDF)."""
    if hi <= lo:
        return lo
    c = 1 - math.exp(-(hi - lo) / mean)
    return lo - mean * math.log(1 - rng.random() * c)


def on_off_means(lo: float, hi: float) -> tuple[float, float]:
    """Expected ON and OFF period lengths for bounds [lo, hi] (same units)."""
    a = PARETO_SHAPE
    if hi <= lo:
        return lo, lo
    norm = 1 - (lo / hi) ** a
    mean_on = (a * lo**a / norm) * (hi ** (1 - a) - lo ** (1 - a)) / (1 - a)
    m = (hi - lo) / 2
    c = 1 - math.exp(-(hi - lo) / m)
    mean_off = lo + m - (hi - lo) * math.exp(-(hi - lo) / m) / c
    return mean_on, mean_off


def on_periods(
    rng: random.Random, lo: float, hi: float, horizon: float
) -> list[tuple[float, float]]:
    """ON periods (s) up to ``horizon``: a random phase (first ON starts
    uniformly in [0, hi]), then Pareto ON / exponential OFF (chosen: OFF
    mean (hi - lo) / 2 above lo)."""
    t = rng.uniform(0, hi)
    out = []
    while t < horizon:
        on = truncated_pareto(rng, PARETO_SHAPE, lo, hi)
        out.append((t, min(horizon, t + on)))
        t += on + truncated_exponential(rng, (hi - lo) / 2, lo, hi)
    return out


def poisson_times(rng: random.Random, pps: float, start: float, end: float) -> list[float]:
    """Poisson arrivals in [start, end): ``rng.expovariate(pps)`` gaps, its
    expression written out (CPython's own, same draws, same floats): a
    blest-3g-wlan run draws ~150,000 of them in the guest's agent, and the
    method calls were half their cost."""
    draw = rng.random
    log = math.log
    out: list[float] = []
    append = out.append
    t = start - log(1.0 - draw()) / pps
    while t < end:
        append(t)
        t -= log(1.0 - draw()) / pps
    return out


def uniform_ints(rng: random.Random, lo: int, hi: int, n: int) -> list[int]:
    """``[rng.randint(lo, hi) for _ in range(n)]`` with CPython's draw written
    out (``_randbelow_with_getrandbits``: the fewest bits that hold the
    width, redrawn while out of range), so the same values: the 150,000
    packet sizes of a blest-3g-wlan run cost the guest's agent 0.1 s through
    randint's three calls each (tests/test_traffic_units.py checks both
    agree)."""
    width = hi - lo + 1
    if width <= 0:
        raise ValueError(f"empty range for uniform_ints ({lo}, {hi})")
    bits = width.bit_length()
    getrandbits = rng.getrandbits
    out: list[int] = []
    append = out.append
    for _ in range(n):
        r = getrandbits(bits)
        while r >= width:
            r = getrandbits(bits)
        append(lo + r)
    return out


def make_flows(
    entries: list, n_pairs: int, run_seed: int, horizon_s: float, base_rtt_ms: dict[int, float]
) -> list[Flow]:
    """Every flow of every entry (with its preset's values filled in) on every
    pair it names, with its packets (times in s from the start, payload
    sizes) for non-greedy flows."""
    flows: list[Flow] = []
    for e, entry in enumerate(entries):
        seed = (
            derive_seed(entry.seed, run_seed, e)
            if entry.seed_per_run
            else derive_seed(entry.seed, e)
        )
        rng = random.Random(seed)
        pairs = entry.pairs or list(range(1, n_pairs + 1))
        for pair in pairs:
            if pair > n_pairs:
                raise ValueError(
                    f"background entry {e + 1}: pair {pair}, but the topology has {n_pairs} pair(s)"
                )
            kinds = (
                ["tcp"] * entry.tcp_flows
                + ["udp"] * entry.udp_flows
                + ["greedy"] * entry.tcp_greedy
            )
            for kind in kinds:
                fseed = rng.getrandbits(32)
                frng = random.Random(fseed)
                rtt = max(base_rtt_ms.get(pair, 0.0), frng.uniform(*entry.rtt))
                size = entry.packet_size
                flow = Flow(
                    entry=e + 1,
                    pair=pair,
                    kind=kind,
                    port=BASE_PORT + len(flows),
                    seed=fseed,
                    rtt_ms=rtt,
                    size=size,
                    generator=getattr(entry, "generator", "mptlab"),
                    window=getattr(entry, "tcp_greedy_window", None) if kind == "greedy" else None,
                )
                if kind == "tcp":
                    flow.pps = entry.tcp_pps
                    flow.periods = [(0.0, horizon_s)]
                elif kind == "udp":
                    if entry.udp_rate:
                        flow.pps = entry.udp_rate * 1e6 / 8 / size
                    else:
                        flow.pps = frng.uniform(*entry.udp_pps)
                    lo, hi = (x / 1000 for x in entry.on_off)
                    flow.periods = on_periods(frng, lo, hi, horizon_s)
                if kind != "greedy":
                    lo_size = max(1, round(size * (1 - SIZE_SPREAD)))
                    hi_size = round(size * (1 + SIZE_SPREAD))
                    for a, b in flow.periods:
                        flow.times += poisson_times(frng, flow.pps or 0.0, a, b)
                    flow.sizes = uniform_ints(frng, lo_size, hi_size, len(flow.times))
                flows.append(flow)
    return flows


def scheduled_bytes(flow: Flow, t0: float, t1: float) -> int:
    """Payload bytes the flow's schedule sends in [t0, t1) (s from the start)."""
    return sum(s for t, s in zip(flow.times, flow.sizes, strict=True) if t0 <= t < t1)


def idt_lines(times: list[float]) -> str:
    """D-ITG ``-Ft`` file: inter-departure times in ms with microsecond
    resolution; packet k leaves after the sum of the first k values.  D-ITG
    rejects 0, so packets drawn within the same microsecond are 1 us apart."""
    out, prev = [], 0
    for t in times:
        us = max(prev + 1, round(t * 1e6))
        out.append(f"{(us - prev) / 1000:.3f}")
        prev = us
    return "\n".join(out) + "\n"


def itgsend_line(flow: Flow, dest: str, files: Path, horizon_ms: int) -> str:
    if flow.kind == "greedy":
        if flow.window is not None:  # Background refuses it; a Flow made by hand could
            raise ValueError("D-ITG cannot cap a greedy flow's window (generator mptlab can)")
        return f"-a {dest} -rp {flow.port} -T TCP -C {GREEDY_PPS} -c 1448 -t {horizon_ms}"
    idt = files / f"flow{flow.port}.idt"
    sizes = files / f"flow{flow.port}.size"
    idt.write_text(idt_lines(flow.times) if flow.times else f"{horizon_ms + 1000}\n")
    sizes.write_text("\n".join(map(str, flow.sizes or [flow.size])) + "\n")
    proto = "TCP" if flow.kind == "tcp" else "UDP"
    return f"-a {dest} -rp {flow.port} -T {proto} -Ft {idt} -Fs {sizes} -t {horizon_ms}"


def schedule_lines(flows: list[Flow]) -> Iterator[str]:
    """The replayer's schedule (``helpers/bgtraffic.c``) for one pair's flows,
    line by line: ``flows N``, one ``KIND PORT`` line per flow (flow i is the
    i-th; a greedy flow with a window cap: ``greedy PORT WINDOW``), then ``packets M`` and every packet of every flow merged into one
    timeline, ``US FLOW SIZE`` (due time in microseconds after the
    replayer's start, flow index, payload bytes), in time order; ties in
    flow order, then in the flow's own order.

    The merge is one stable sort of integer keys (due us x flows + flow):
    equal keys are one flow's packets, left in their own order.  It made
    the same bytes as ``heapq.merge`` of per-flow generators in 0.08 s
    instead of 0.15 s for a blest-3g-wlan run's two schedules (host CPU)."""
    yield f"flows {len(flows)}\n"
    for f in flows:
        if f.window is not None and f.kind != "greedy":
            raise ValueError(f"flow {f.port}: a window cap is for greedy flows, not {f.kind}")
        yield f"{f.kind} {f.port}" + (f" {f.window}" if f.window is not None else "") + "\n"
    yield f"packets {sum(len(f.times) for f in flows)}\n"
    n = len(flows)
    keys: list[int] = []
    lines: list[str] = []
    for i, f in enumerate(flows):
        due = [round(t * 1e6) for t in f.times]
        if len(due) != len(f.sizes):
            raise ValueError(f"flow {i}: {len(due)} times but {len(f.sizes)} sizes")
        keys += [us * n + i for us in due]
        lines += [f"{us} {i} {size}\n" for us, size in zip(due, f.sizes, strict=True)]
    for j in sorted(range(len(keys)), key=keys.__getitem__):
        yield lines[j]


def schedule_text(flows: list[Flow]) -> str:
    """``schedule_lines`` as one string."""
    return "".join(schedule_lines(flows))


def write_schedule(path: Path, flows: list[Flow]) -> None:
    """``schedule_lines`` into ``path`` through a 1 MiB buffer."""
    with open(path, "w", buffering=1 << 20) as out:
        out.writelines(schedule_lines(flows))


# ------------------------------------------------------------- counters
def _counters(ns: str, dev: str) -> dict:
    """Interface bytes/packets and UDP/TCP segment counts of namespace ``ns``."""
    with in_netns(ns):
        net_dev = Path("/proc/thread-self/net/dev").read_text()
        snmp = Path("/proc/thread-self/net/snmp").read_text()
    out: dict[str, float] = {}
    for line in net_dev.splitlines()[2:]:
        name, data = line.split(":", 1)
        if name.strip() == dev:
            v = data.split()
            out.update(
                rx_bytes=int(v[0]), rx_packets=int(v[1]), tx_bytes=int(v[8]), tx_packets=int(v[9])
            )
    rows = [ln.split() for ln in snmp.splitlines()]
    for head, vals in zip(rows[::2], rows[1::2], strict=False):
        table = dict(zip(head[1:], vals[1:], strict=False))
        if head[0] == "Udp:":
            out.update(udp_in=int(table["InDatagrams"]), udp_out=int(table["OutDatagrams"]))
        elif head[0] == "Tcp:":
            out.update(
                tcp_in=int(table["InSegs"]),
                tcp_out=int(table["OutSegs"]),
                tcp_retrans=int(table.get("RetransSegs", 0)),
            )
    out["t"] = time.time()
    return out


def payload_bytes(before: dict, after: dict, direction: str) -> tuple[int, int]:
    """(payload bytes, wire bytes) between two counter readings: interface
    bytes minus Ethernet/IP/transport headers per UDP datagram and TCP segment."""
    d = {k: after[k] - before[k] for k in before if k != "t"}
    wire = d[f"{direction}_bytes"]
    udp, tcp = (
        d[f"udp_{'in' if direction == 'rx' else 'out'}"],
        d[f"tcp_{'in' if direction == 'rx' else 'out'}"],
    )
    return max(0, wire - udp * UDP_OVERHEAD - tcp * TCP_OVERHEAD), wire


# ------------------------------------------------------------------ guest
def _pairs(ctx) -> list:
    return list(ctx.topology.roles.background)


def _access(ctx, host: str):
    """(interface, link) of a single-homed host's access link."""
    for link in ctx.plan.links:
        if host in (link.a, link.b):
            return ctx.net.hosts[host].interfaces[0], link
    raise RuntimeError(f"background host {host} has no link")


def base_rtt(ctx, pair) -> float:
    """The pair's path RTT without the per-flow extra: its bottleneck link
    (``pathN``) plus the two access links."""
    rtt = 0.0
    for link in ctx.plan.links:
        if (
            link.label == f"path{pair.path}"
            or pair.sender in (link.a, link.b)
            or pair.receiver in (link.a, link.b)
        ):
            rtt += sum(s.delay for s in (link.a_to_b, link.b_to_a) if s is not None)
    return rtt


def rtt_classes(flows: list[Flow], base: float, max_classes: int = 15) -> dict[int, float]:
    """port -> extra one-way delay (ms) on the sender side, rounded to a step
    so that at most ``max_classes`` netem classes are needed."""
    extras = {f.port: max(0.0, f.rtt_ms - base) for f in flows}
    if not extras:
        return {}
    step = 5.0
    while len({round(x / step) for x in extras.values() if x > 0}) > max_classes:
        step *= 2
    return {port: round(x / step) * step for port, x in extras.items()}


def _tc_rtt_lines(dev: str, delays: dict[int, float]) -> list[str]:
    values = sorted({d for d in delays.values() if d > 0})
    if not values:
        return []
    lines = [
        f"qdisc add dev {dev} root handle 1: prio bands {len(values) + 1} priomap "
        + " ".join(["0"] * 16)
    ]
    for k, d in enumerate(values, start=2):
        lines.append(
            f"qdisc add dev {dev} parent 1:{k} handle {k + 10}: netem delay {d:g}ms limit 100000"
        )
    band = {d: k for k, d in enumerate(values, start=2)}
    for port, d in sorted(delays.items()):
        if d > 0:
            lines.append(
                f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dport {port} 0xffff flowid 1:{band[d]}"
            )
    return lines


def _start_ditg(ctx, state: dict, n: int, pair, dest: str, flows: list[Flow], files: Path) -> None:
    """ITGRecv in the receiver, one ITGSend per MAX_FLOWS_PER_SENDER flows in the sender."""
    horizon_ms = int(ctx.config.timeout)
    out = open(ctx.trace_dir / f"ditg-bg{n}-recv.out", "w")  # noqa: SIM115
    recv = ctx.net.popen(pair.receiver, ["ITGRecv"], stdout=out, stderr=subprocess.STDOUT)
    state["recv"].append((recv, out))
    wait_listening(ctx.net.ns(pair.receiver), SIGNAL_PORT, recv)
    for k in range(0, len(flows), MAX_FLOWS_PER_SENDER):
        script = files / f"pair{n}-{k // MAX_FLOWS_PER_SENDER}.itg"
        script.write_text(
            "".join(
                itgsend_line(f, dest, files, horizon_ms) + "\n"
                for f in flows[k : k + MAX_FLOWS_PER_SENDER]
            )
        )
        name = f"ditg-bg{n}-send{k // MAX_FLOWS_PER_SENDER}.out"
        out = open(ctx.trace_dir / name, "w")  # noqa: SIM115
        send = ctx.net.popen(
            pair.sender, ["ITGSend", str(script)], stdout=out, stderr=subprocess.STDOUT
        )
        state["send"].append((send, out, name))


def _start_replayer(
    ctx, state: dict, n: int, pair, dest: str, flows: list[Flow], files: Path, port: int
) -> None:
    """bgtraffic's receiver (ready once it listens on ``port``), then its sender."""
    program = bgtraffic.program()
    sched = files / f"pair{n}.sched"
    write_schedule(sched, flows)
    out = open(ctx.trace_dir / f"bg-pair{n}-recv.out", "w")  # noqa: SIM115
    recv = ctx.net.popen(
        pair.receiver,
        [program, "recv", str(sched), str(port)],
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    state["recv"].append((recv, out))
    wait_listening(ctx.net.ns(pair.receiver), port, recv)
    name = f"bg-pair{n}-send.out"
    out = open(ctx.trace_dir / name, "w")  # noqa: SIM115
    send = ctx.net.popen(
        pair.sender, [program, "send", dest, str(sched)], stdout=out, stderr=subprocess.STDOUT
    )
    state["send"].append((send, out, name))
    state["replayers"][n] = (send, ctx.trace_dir / name)


def replayer_t0(text: str) -> float | None:
    """The replayer's start (CLOCK_MONOTONIC s) from its output's ``t0`` line."""
    for line in text.splitlines():
        if line.startswith("t0 "):
            return float(line.split()[1])
    return None


def _wait_t0(proc: subprocess.Popen, out: Path, timeout: float = T0_WAIT_S) -> float:
    deadline = time.monotonic() + timeout
    while True:
        t0 = replayer_t0(out.read_text())
        if t0 is not None:
            return t0
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"background replayer did not start its schedule (exit status "
                f"{proc.poll()}): {out.read_text().strip()[-300:] or 'no output'} "
                f"(traces/{out.name})"
            )
        time.sleep(0.02)


def start(ctx) -> None:
    entries = ctx.config.background
    pairs = _pairs(ctx)
    if not pairs:
        raise RuntimeError(
            "the experiment has background entries, but the topology has no background pairs"
        )
    horizon_s = ctx.config.timeout / 1000
    bases = {i + 1: base_rtt(ctx, p) for i, p in enumerate(pairs)}
    flows = make_flows(entries, len(pairs), ctx.spec.seed, horizon_s, bases)
    files = Path(
        "/tmp/mptlab-background"
    )  # the guest's tmpfs; the schedule summary goes to traces/
    files.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {
        "flows": flows,
        "recv": [],
        "send": [],
        "pairs": {},
        "rtt": {},
        "replayers": {},
        "t0": {},
    }
    ctx.background_state = state
    used = sorted({f.pair for f in flows})
    for n in used:
        pair = pairs[n - 1]
        dest = ctx.plan.addresses(pair.receiver)[0]
        dev_s, _ = _access(ctx, pair.sender)
        dev_r, _ = _access(ctx, pair.receiver)
        mine = [f for f in flows if f.pair == n]
        delays = rtt_classes(mine, bases[n])
        lines = _tc_rtt_lines(dev_s, delays)
        if lines:
            try:
                ctx.net.batch(pair.sender, "tc", lines)
                state["rtt"][n] = delays
            except Exception as exc:  # noqa: BLE001 - e.g. a shaped access link: keep the path RTT
                ctx.log(f"background: per-flow RTTs not emulated on pair {n}: {exc}")
        state["pairs"][n] = {
            "sender": pair.sender,
            "receiver": pair.receiver,
            "path": pair.path,
            "dev_s": dev_s,
            "dev_r": dev_r,
        }
        ditg = [f for f in mine if f.generator == "d-itg"]
        own = [f for f in mine if f.generator != "d-itg"]
        if ditg:
            _start_ditg(ctx, state, n, pair, dest, ditg, files)
        if own:  # beside an ITGRecv (port 9000) its readiness port moves
            port = REPLAYER_SIGNAL_PORT if ditg else SIGNAL_PORT
            _start_replayer(ctx, state, n, pair, dest, own, files, port)
        ctx.log(
            f"background: pair {n} ({pair.sender} -> {pair.receiver}): {len(own)} flows "
            f"replayed by bgtraffic, {len(ditg)} by D-ITG"
        )
    state["t_launch"] = time.monotonic()
    time.sleep(max(e.settle for e in entries) / 1000)
    for n, (proc, out) in state["replayers"].items():
        state["t0"][n] = _wait_t0(proc, out)
    state["t_start"] = time.monotonic()
    for info in state["pairs"].values():
        info["before_s"] = _counters(ctx.net.ns(info["sender"]), info["dev_s"])
        info["before_r"] = _counters(ctx.net.ns(info["receiver"]), info["dev_r"])
    for proc, _, name in state["send"]:
        if proc.poll() is not None:
            raise RuntimeError(
                f"background sender exited early ({proc.returncode}); see traces/{name}"
            )
    _write_schedule(ctx, flows, state)
    ctx.mark("background_start")


def _origin(state: dict, flow: Flow) -> float:
    """When the flow's schedule started (monotonic s): the replayer's t0, or,
    for D-ITG, when the senders were launched."""
    return (
        state["t0"].get(flow.pair, state["t_launch"])
        if flow.generator != "d-itg"
        else state["t_launch"]
    )


def _write_schedule(ctx, flows: list[Flow], state: dict) -> None:
    record = {
        "entries": ctx.spec.config["background"],
        "run_seed": ctx.spec.seed,
        "generators": sorted({f.generator for f in flows}),
        # when each pair's replayer started its schedule, s after the senders' launch
        "replayer_start_s": {
            str(n): round(t0 - state["t_launch"], 6) for n, t0 in sorted(state["t0"].items())
        },
        "flows": [
            # the flow's fields but its packets (asdict would deep-copy the
            # ~150,000 times and sizes first: 0.4 s of the agent's CPU)
            {k.name: getattr(f, k.name) for k in fields(f) if k.name not in ("times", "sizes")}
            | {
                "packets": len(f.times),
                "bytes": sum(f.sizes),
                "extra_delay_ms": state["rtt"].get(f.pair, {}).get(f.port, 0.0),
            }
            for f in flows
        ],
    }
    (ctx.trace_dir / "background-schedule.json").write_text(json.dumps(record, indent=1))


def stop(ctx) -> dict:
    state = getattr(ctx, "background_state", None)
    if state is None:
        return {}
    t_stop = time.monotonic()
    after = {
        n: (
            _counters(ctx.net.ns(i["sender"]), i["dev_s"]),
            _counters(ctx.net.ns(i["receiver"]), i["dev_r"]),
        )
        for n, i in state["pairs"].items()
    }
    for proc, out, _ in state["send"]:
        # ITGSend's own shutdown takes ~1 s per flow; bgtraffic's greedy writers
        # die with their sender (parent-death signal)
        stop_proc(proc, signal.SIGKILL, timeout=5)
        out.close()
    for proc, out in state["recv"]:
        stop_proc(proc, signal.SIGINT, timeout=5)
        out.close()
    ctx.mark("background_end")
    flows: list[Flow] = state["flows"]
    window = t_stop - state["t_start"]
    entries = ctx.config.background
    pairs_out = []
    for n, info in sorted(state["pairs"].items()):
        mine = [f for f in flows if f.pair == n]
        configured = 0.0
        for f in mine:
            on, off = on_off_means(*entries[f.entry - 1].on_off)
            mbps = f.mean_mbps(on / (on + off))
            configured += mbps or 0.0
        sent, _ = payload_bytes(info["before_s"], after[n][0], "tx")
        # what the pair's TCP flows lost: the sender namespace's retransmitted
        # segments (it holds only this pair's flows; Linux counts them in OutSegs)
        tcp_out = after[n][0]["tcp_out"] - info["before_s"]["tcp_out"]
        tcp_retrans = after[n][0].get("tcp_retrans", 0) - info["before_s"].get("tcp_retrans", 0)
        received, wire = payload_bytes(info["before_r"], after[n][1], "rx")
        scheduled = sum(
            scheduled_bytes(f, state["t_start"] - _origin(state, f), t_stop - _origin(state, f))
            for f in mine
        )
        ratio = sent / scheduled if scheduled else None
        generators = sorted({f.generator for f in mine})
        if ratio is not None and abs(ratio - 1) > LOAD_TOLERANCE:
            why = (
                "D-ITG does not catch up after the guest was descheduled: an overloaded host?"
                if "d-itg" in generators
                else "a TCP flow's send buffer full for long?"
            )
            ctx.log(f"background: pair {n} sent {ratio:.2f} x its schedule ({why})")
        pairs_out.append(
            {
                "pair": n,
                "sender": info["sender"],
                "receiver": info["receiver"],
                "path": info["path"],
                "flows": {k: sum(f.kind == k for f in mine) for k in ("tcp", "udp", "greedy")},
                # each greedy flow's window cap in bytes, in flow order (null: unbounded)
                "greedy_window": [f.window for f in mine if f.kind == "greedy"],
                "generator": "+".join(generators),
                "window_s": window,
                "configured_mbps": configured,
                "scheduled_mbps": scheduled * 8 / window / 1e6,
                "sent_mbps": sent * 8 / window / 1e6,
                "received_mbps": received * 8 / window / 1e6,
                "received_wire_mbps": wire * 8 / window / 1e6,
                "received_pps": (after[n][1]["rx_packets"] - info["before_r"]["rx_packets"])
                / window,
                "tcp_out_segs": tcp_out,
                "tcp_retrans_segs": tcp_retrans,
                "tcp_retrans_share": tcp_retrans / tcp_out if tcp_out else None,
                "sent_vs_scheduled": ratio,
                "load_ok": None if ratio is None else abs(ratio - 1) <= LOAD_TOLERANCE,
                "extra_delay_ms": sorted(set(state["rtt"].get(n, {}).values())),
            }
        )
    return {
        "pairs": pairs_out,
        "seeds": [
            derive_seed(e.seed, ctx.spec.seed, i) if e.seed_per_run else derive_seed(e.seed, i)
            for i, e in enumerate(entries)
        ],
        "schedule": "traces/background-schedule.json",
    }
