"""The language of ``workload:`` and ``background:``: every workload's fields.

An experiment's ``workload: {type: bulk, bytes: 64MiB}`` is checked on the
host against the model its ``type`` names here (``WORKLOADS``), so that an
error names the file, the line and the field; its values are normalised to
the base units (ms, Mbit/s, bytes) before they reach the guest, where
``mptlab.workloads.<type>`` runs it from that plain data.  ``quick()`` is
the workload's short version (``mptlab run --quick``).

The same classes are the Python API's workloads: ``mptlab.Bulk(bytes="64MiB")``.
docs/workloads.md documents every field and where its default comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from .metrics import UNITS, Metric
from .units import Duration, Rate, Size


def _regex(v: str | None) -> str | None:
    """``v`` if it compiles as a Python regex (None passes)."""
    if v is not None:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regex: {exc}") from None
    return v


class Workload(BaseModel):
    """A workload's parameters (the YAML's ``workload:`` mapping without ``type``)."""

    model_config = ConfigDict(extra="forbid")
    type: ClassVar[str]

    def quick(self) -> Workload:
        """The short version for a first look (``--quick``)."""
        return self

    def to_config(self) -> dict:
        """The ``workload`` mapping of a run's ``config``: ``type`` and every field, in base units."""
        return {"type": self.type, **self.model_dump(mode="json")}


def _at_most(value: float | None, limit: float) -> float:
    return min(value if value is not None else limit, limit)


# ------------------------------------------------------------------ bulk
class Bulk(Workload):
    """iperf3 bulk transfer, by bytes or by duration."""

    type: ClassVar[str] = "bulk"
    bytes: Size | None = Field(None, gt=0)
    duration: Duration | None = Field(None, gt=0)
    direction: Literal["download", "upload"] = "download"
    # 16 KiB: the receiver wakes ~7x less often (iperf3 read 2.4 KB per
    # wake-up); on blest-3g-wlan's headline run no metric moved beyond its
    # run-to-run spread (n = 10 each, docs/benchmarks.md "Per-run host CPU")
    rcvlowat: Size = Field(
        16 << 10,
        ge=0,
        le=1 << 20,
        description="receive low-water mark of iperf3's data socket (SO_RCVLOWAT): the "
        "receiver wakes per this many bytes or per 0.1 s report tick, not per segment "
        "(0: per segment, as before issue 26)",
    )

    @model_validator(mode="after")
    def _bytes_or_duration(self):
        if (self.bytes is None) == (self.duration is None):
            raise ValueError("give exactly one of bytes (e.g. '64MiB') or duration (e.g. '90s')")
        return self

    def quick(self) -> Bulk:
        """1/8 of the bytes or duration, at least 1 MiB or 5 s."""
        if self.bytes:
            return self.model_copy(update={"bytes": max(1 << 20, self.bytes // 8)})
        return self.model_copy(update={"duration": max(5000.0, (self.duration or 0) / 8)})


# ------------------------------------------------------------------- cbr
CBR_MIN_FRAME = 64  # D-ITG puts its own header (flow, sequence number, timestamps) in each frame


class Cbr(Workload):
    """Constant bit rate frames with D-ITG (the BLEST paper's "video streaming")."""

    type: ClassVar[str] = "cbr"
    rate: Rate = Field(1.0, description="application bit rate (BLEST paper: 1 Mbit/s)")
    frame_size: Size = Field(
        5 * 1024, ge=CBR_MIN_FRAME, le=65000, description="bytes per frame (BLEST: 5 KiB)"
    )
    duration: Duration = Field(90_000.0, gt=0, description="sending time (BLEST analyses 90 s)")
    direction: Literal["download", "upload"] = "download"
    nodelay: bool = Field(True, description="disable Nagle (TCP_NODELAY), as real-time senders do")

    @property
    def frames_per_s(self) -> float:
        return self.rate * 1e6 / (8 * self.frame_size)

    def quick(self) -> Cbr:
        return self.model_copy(update={"duration": _at_most(self.duration, 15_000.0)})


# ---------------------------------------------------------------- blocks
BLOCK_HEADER = 16  # bytes: the block's index and due time (mptlab.workloads.blocks.HEADER)


class Blocks(Workload):
    """Fixed-size blocks at a fixed rate (the scheduler-framework paper's sender)."""

    type: ClassVar[str] = "blocks"
    block_size: Size = Field(
        8 * 1024, ge=BLOCK_HEADER, description="bytes per block (thesis: 8 KB)"
    )
    rate: Rate = Field(description="application rate (thesis, NorNet: 500 kbit/s, 1875 kbit/s)")
    duration: Duration = Field(60_000.0, gt=0)
    direction: Literal["download", "upload"] = "download"

    def quick(self) -> Blocks:
        return self.model_copy(update={"duration": _at_most(self.duration, 15_000.0)})


# ------------------------------------------------------------------- web
# The page sets of the Ferlin thesis, Table 3.2: name -> (objects, total KiB, source).
# mptlab.workloads.helpers.pages makes their files.
PAGE_SETS: dict[str, tuple[int, int, str]] = {
    "wikipedia": (15, 72, "Ferlin thesis Table 3.2; BLEST paper Table I (small)"),
    "amazon": (54, 1024, "Ferlin thesis Table 3.2; BLEST paper Table I (medium)"),
    "huffingtonpost": (138, 3994, "Ferlin thesis Table 3.2; BLEST paper Table I (large)"),
    "google": (6, 1080, "Ferlin thesis Table 3.2; FEC chapter Table II"),
    "youtube": (26, 3204, "Ferlin thesis Table 3.2; FEC chapter Table II"),
    "espn": (111, 6072, "Ferlin thesis Table 3.2; FEC chapter Table II"),
}


class Web(Workload):
    """Page loads over HTTP/1.1 (parallel connections) or HTTP/2."""

    type: ClassVar[str] = "web"
    page: str = Field(description=f"page set: {', '.join(PAGE_SETS)}")
    http: Literal["1.1", "2"] = "1.1"
    connections: int = Field(
        6, ge=1, le=32, description="HTTP/1.1 parallel connections (browsers: 6)"
    )
    loads: int = Field(1, ge=1, description="page loads per run")
    gap: Duration = Field(1000.0, description="pause between loads")

    @field_validator("page")
    @classmethod
    def _known_page(cls, v: str) -> str:
        if v not in PAGE_SETS:
            raise ValueError(f"unknown page set {v!r}; allowed: {', '.join(PAGE_SETS)}")
        return v

    @field_validator("http", mode="before")
    @classmethod
    def _http_text(cls, v):
        return str(v) if isinstance(v, int | float) else v

    def quick(self) -> Web:
        return self.model_copy(update={"loads": 1})


# ------------------------------------------------------------------ dash
# a subset of the bitrates (Mbit/s) of the 4 s Big Buck Bunny DASH dataset (ITEC, Lederer et al. 2012)
DASH_LADDER = [0.331, 0.522, 0.791, 1.033, 1.547, 2.134, 2.484, 3.079, 3.527, 4.220]


class Dash(Workload):
    """Adaptive video streaming: mptlab's player against its own HTTP server."""

    type: ClassVar[str] = "dash"
    duration: Duration = Field(180_000.0, gt=0, description="content length (FEC chapter: 3 min)")
    segment: Duration = Field(4000.0, gt=0, description="segment length (FEC chapter: 4 s)")
    ladder: list[Rate] = Field(default_factory=lambda: list(DASH_LADDER), min_length=1)
    fps: int = Field(25, ge=1, le=60)
    play: Duration | None = Field(None, gt=0, description="play only this much of the content")
    adaptation: Literal["basic", "sara", "bba"] = "basic"
    max_buffer: Duration = Field(30_000.0, gt=0)
    startup: Duration = Field(4000.0, gt=0, description="buffer needed to start or resume playback")
    basic_window: int = Field(3, ge=1, description="segments in basic's moving average")
    sara: tuple[Duration, Duration, Duration] = Field(
        (8000.0, 16000.0, 24000.0), description="I, B_alpha, B_beta"
    )
    bba: tuple[Duration, Duration] = Field((8000.0, 16000.0), description="reservoir, cushion")

    @model_validator(mode="after")
    def _consistent(self):
        if self.segment > self.duration:
            raise ValueError("segment is longer than the content (duration)")
        if self.startup > self.max_buffer:
            raise ValueError("startup buffer exceeds max_buffer")
        if len(set(self.ladder)) != len(self.ladder):
            raise ValueError("ladder bitrates repeat")
        if not 0 < self.sara[0] < self.sara[1] < self.sara[2]:
            raise ValueError("sara thresholds must be increasing: [I, B_alpha, B_beta]")
        return self

    def quick(self) -> Dash:
        return self.model_copy(update={"play": _at_most(self.play or self.duration, 40_000.0)})


# ------------------------------------------------------------------ live
class Live(Workload):
    """Non-adaptive live H.264 video, paced in real time."""

    type: ClassVar[str] = "live"
    duration: Duration = Field(60_000.0, gt=0, description="stream length (FEC chapter: 1 min)")
    bitrate: Rate = Field(3.565, description="FEC chapter: 3.4 Mibit/s = 3.565 Mbit/s")
    fps: int = Field(25, ge=1, le=120, description="FEC chapter: 25")
    gop: int = Field(50, ge=1, description="frames per group of pictures (chosen: 2 s)")
    bframes: int = Field(2, ge=0, le=16, description="B-frames between references (chosen)")
    playout_delay: Duration = Field(
        1000.0, gt=0, description="receiver buffer: later frames miss playout"
    )

    def quick(self) -> Live:
        return self.model_copy(update={"duration": _at_most(self.duration, 15_000.0)})


# ------------------------------------------------------------------ idle
class Idle(Workload):
    """Nothing, for ``duration`` (e.g. to measure background traffic alone)."""

    type: ClassVar[str] = "idle"
    duration: Duration = Field(gt=0)

    def quick(self) -> Idle:
        return self.model_copy(update={"duration": min(self.duration, 10_000.0)})


# --------------------------------------------------------------- command
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MATCHES = ("last", "first", "mean", "sum", "min", "max", "count")


class CommandMetric(BaseModel):
    """One metric of a ``command`` workload: a regex over a command's output
    (its first group, as a float), or (no regex) the unit and direction of
    a value the ``parser`` returns."""

    model_config = ConfigDict(extra="forbid")
    regex: str | None = Field(None, description="Python regex; its first group is the value")
    output: Literal["client", "server"] = Field("client", description="whose output to search")
    match: Literal["last", "first", "mean", "sum", "min", "max", "count"] = Field(
        "last", description="which match(es): the last, the first, their mean, ..., how many"
    )
    scale: float = Field(1.0, description="multiply the value (e.g. 0.001: Kbit/s -> Mbit/s)")
    unit: str = Field("", description=f"one of {', '.join(repr(u) for u in UNITS)}")
    better: Literal["higher", "lower"] | None = None
    description: str = ""
    required: bool = Field(True, description="a regex that matches nothing fails the run")

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        return _regex(v)

    @field_validator("unit")
    @classmethod
    def _unit(cls, v: str) -> str:
        if v not in UNITS:
            raise ValueError(f"unit {v!r}; allowed: {', '.join(repr(u) for u in UNITS)}")
        return v

    @model_validator(mode="after")
    def _group(self):
        if self.regex is not None and self.match != "count" and re.compile(self.regex).groups < 1:
            raise ValueError(
                "the regex has no group: put the number in parentheses, e.g. 'avg = ([0-9.]+)'"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, v):
        return {"regex": v} if isinstance(v, str) else v


class Command(Workload):
    """A command pair of your own: ``server`` in the server's namespace, then
    ``client`` in the client's, each a shell command line (``sh -c``) with
    ``$SERVER_ADDR``, ``$CLIENT_ADDR``, ``$PORT`` and ``$TRACE_DIR`` set;
    metrics from their output by regex or by a ``parser`` function."""

    type: ClassVar[str] = "command"
    client: str = Field(min_length=1, description="the client's command line (sh -c)")
    server: str | None = Field(None, description="the server's command line (sh -c), if any")
    port: int | None = Field(
        None, ge=1, le=65535, description="the server listens here: the client starts once it does"
    )
    ready: str | None = Field(
        None, description="regex: the client starts once the server's output matches it"
    )
    ready_timeout: Duration = Field(10_000.0, gt=0, description="how long to wait for readiness")
    timeout: Duration | None = Field(
        None, gt=0, description="the client's limit (default: the run's timeout); then it fails"
    )
    mptcp: bool = Field(
        True, description="run both through mptcpize when the experiment uses MPTCP"
    )
    metrics: dict[str, CommandMetric] = Field(
        default_factory=dict, description="name -> regex or {regex, unit, better, ...}"
    )
    parser: str | None = Field(
        None, description="module:function taking the client's output (and the server's) -> dict"
    )
    headline: list[str] | None = Field(None, description="the report's key metrics (default: all)")

    @field_validator("metrics")
    @classmethod
    def _names(cls, v: dict) -> dict:
        for name in v:
            if not METRIC_NAME.match(name):
                raise ValueError(
                    f"metric name {name!r}: lower-case letters, digits and _, a letter first"
                )
        return v

    @field_validator("ready")
    @classmethod
    def _ready(cls, v: str | None) -> str | None:
        return _regex(v)

    @model_validator(mode="after")
    def _consistent(self):
        if not self.metrics and self.parser is None:
            raise ValueError("no metrics: give metrics (name: regex) or a parser (module:function)")
        if self.server is None and (self.port is not None or self.ready is not None):
            raise ValueError("port and ready are about the server: give server too")
        if self.port is not None and self.ready is not None:
            raise ValueError("give port or ready, not both")
        unparsed = [n for n, m in self.metrics.items() if m.regex is None]
        if unparsed and self.parser is None:
            raise ValueError(f"metrics {unparsed} have no regex and there is no parser")
        unknown = [n for n in self.headline or [] if n not in self.metrics]
        if unknown:
            raise ValueError(f"headline names metrics not in metrics: {unknown}")
        return self

    def declared(self) -> tuple[Metric, ...]:
        """Its metrics as the registry's records."""
        return tuple(
            Metric(
                name, m.unit, m.better, m.description or f"command workload: {m.regex or 'parser'}"
            )
            for name, m in self.metrics.items()
        )


WORKLOADS: dict[str, type[Workload]] = {
    cls.type: cls for cls in (Bulk, Cbr, Blocks, Web, Dash, Live, Idle, Command)
}


def workload_model(kind: str) -> type[Workload]:
    """The model of workload type ``kind`` (ValueError naming the allowed types;
    a workload class of the user's own, ``module:Class``: ``mptlab.spec.usercode``)."""
    if kind not in WORKLOADS:
        raise ValueError(
            f"unknown workload type {kind!r}; allowed: {', '.join(sorted(WORKLOADS))}, or "
            "module:Class for a workload class of your own"
        )
    return WORKLOADS[kind]


# ------------------------------------------------------------ background
@dataclass(frozen=True)
class Preset:
    source: str
    tcp_pps: float
    udp_rate: float | None  # Mbit/s per flow while ON, or
    udp_pps: tuple[float, float] | None  # per-flow packet rate drawn uniformly from this range
    packet_size: int
    rtt: tuple[float, float]  # ms
    on_off: tuple[float, float]  # ms, bounds of ON and OFF periods
    chosen: str


PRESETS: dict[str, Preset] = {
    "blest-3g-wlan": Preset(
        source="Ferlin et al., BLEST (IFIP Networking 2016), Sec. III-3: TCP flows at an exponentially "
        "distributed mean rate of 157 pps; UDP Pareto-on / exponential-off flows at 100 kbit/s per flow "
        "(heterogeneous scenario); mean packet size 1000 B; background RTTs 20-100 ms",
        tcp_pps=157.0,
        udp_rate=0.1,
        udp_pps=None,
        packet_size=1000,
        rtt=(20.0, 100.0),
        on_off=(1000.0, 5000.0),
        chosen="ON/OFF bounds 1-5 s (from the SBD chapter), Pareto shape 1.5, OFF mean 2 s above 1 s, "
        "uniform packet sizes 600-1400 B, RTT uniform; 100 kbit/s read as the rate while ON",
    ),
    "blest-wlan-wlan": Preset(
        source="Ferlin et al., BLEST, Sec. III-3: as blest-3g-wlan with 500 kbit/s per UDP flow "
        "(homogeneous scenario)",
        tcp_pps=157.0,
        udp_rate=0.5,
        udp_pps=None,
        packet_size=1000,
        rtt=(20.0, 100.0),
        on_off=(1000.0, 5000.0),
        chosen="as blest-3g-wlan",
    ),
    "sbd": Preset(
        source="Ferlin PhD thesis Ch. 5 (MPTCP-SBD emulation): TCP 150 pps (exponential); UDP "
        "50-150 pps, Pareto on / exponential off, on/off intervals 1-5 s; mean packet 1000 B; "
        "background RTTs 20-80 ms",
        tcp_pps=150.0,
        udp_rate=None,
        udp_pps=(50.0, 150.0),
        packet_size=1000,
        rtt=(20.0, 80.0),
        on_off=(1000.0, 5000.0),
        chosen="per-flow UDP rate uniform in the range, Pareto shape 1.5, OFF mean 2 s above 1 s, "
        "uniform packet sizes 600-1400 B",
    ),
    "fec": Preset(
        source="Ferlin PhD thesis Ch. 6 (dFEC emulation): TCP 150 pps (exponential); UDP 395-995 pps, "
        "Pareto on / exponential off, 1-5 s on/off; mean packet 1000 B; background RTTs 10-100 ms",
        tcp_pps=150.0,
        udp_rate=None,
        udp_pps=(395.0, 995.0),
        packet_size=1000,
        rtt=(10.0, 100.0),
        on_off=(1000.0, 5000.0),
        chosen="per-flow UDP rate uniform in the range, Pareto shape 1.5, OFF mean 2 s above 1 s, "
        "uniform packet sizes 600-1400 B; the chapter scales UDP load to each bottleneck and raises "
        "it for video runs by amounts it does not give: set udp_flows/udp_pps per pair",
    ),
}


# tcp_greedy_window's bounds: 4 full-size segments (MSS 1448 B with timestamps) at
# least; at most 64 MiB, because the replayer's receiver locks its receive buffer
# at 4 x the cap (docs/workloads.md) and the guest has 1 GiB
GREEDY_WINDOW_MIN = 4 * 1448
GREEDY_WINDOW_MAX = 64 * 2**20


class Background(BaseModel):
    """One ``background:`` entry: flows between the topology's background
    pairs, replayed from a seeded schedule by ``generator`` (mptlab's
    replayer, or D-ITG).  Unset rate fields take the preset's values
    (``resolved()``)."""

    model_config = ConfigDict(extra="forbid")
    preset: Literal["blest-3g-wlan", "blest-wlan-wlan", "sbd", "fec"]
    pairs: list[int] | None = Field(None, description="1-based background pairs (default: all)")
    tcp_flows: int = Field(ge=0, description="rate-limited TCP flows per pair")
    udp_flows: int = Field(ge=0, description="UDP on/off flows per pair")
    tcp_greedy: int = Field(0, ge=0, description="saturating TCP flows per pair")
    tcp_greedy_window: Size | None = Field(
        None,
        description="cap of each greedy flow's window (bytes in flight), set on its receiving "
        "socket; None: unbounded (the window grows until the bottleneck's queue drops)",
    )
    seed: int = Field(ge=0, description="seed of every random draw")
    seed_per_run: bool = Field(
        True, description="combine seed with the run's seed (repetitions differ)"
    )
    tcp_pps: float | None = Field(None, gt=0)
    udp_rate: Rate | None = Field(None, description="per UDP flow while ON")
    udp_pps: tuple[float, float] | None = None
    packet_size: Size | None = Field(
        None,
        ge=100,
        le=1000,
        description="mean payload; each packet's is drawn from 0.6-1.4 x this and must fit "
        "one 1500-byte packet (1400 B at most), so 1000 at most",
    )
    rtt: tuple[Duration, Duration] | None = None
    on_off: tuple[Duration, Duration] | None = None
    settle: Duration = Field(1000.0, description="wait after starting, before the workload")
    generator: Literal["mptlab", "d-itg"] = Field(
        "mptlab",
        description="what replays the schedule: mptlab's replayer (workloads/helpers/bgtraffic.c) "
        "or D-ITG (ITGSend/ITGRecv)",
    )

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, v):
        if v is not None and (not v or any(p < 1 for p in v)):
            raise ValueError(
                "pairs are 1-based indices of the topology's background pairs, e.g. [1, 2]"
            )
        return v

    @field_validator("tcp_greedy_window")
    @classmethod
    def _greedy_window(cls, v):
        if v is not None and not GREEDY_WINDOW_MIN <= v <= GREEDY_WINDOW_MAX:
            raise ValueError(
                f"must be between {GREEDY_WINDOW_MIN} B (4 full-size segments: with fewer in "
                "flight a loss cannot bring 3 duplicate ACKs and waits for a timeout) and "
                f"{GREEDY_WINDOW_MAX // 2**20} MiB (the receiver reserves 4 x the cap), got {v} B"
            )
        return v

    @model_validator(mode="after")
    def _ranges(self):
        for name in ("udp_pps", "rtt", "on_off"):
            value = getattr(self, name)
            if value is not None and not (0 < value[0] <= value[1]):
                raise ValueError(
                    f"{name} must be [low, high] with 0 < low <= high, got {list(value)}"
                )
        if self.udp_rate is not None and self.udp_pps is not None:
            raise ValueError("give udp_rate or udp_pps, not both")
        if self.tcp_flows + self.udp_flows + self.tcp_greedy == 0:
            raise ValueError("no flows: set tcp_flows, udp_flows or tcp_greedy")
        if self.tcp_greedy_window is not None:
            if self.tcp_greedy == 0:
                raise ValueError(
                    "tcp_greedy_window caps greedy flows, but tcp_greedy is 0: "
                    "set tcp_greedy to 1 or more, or drop tcp_greedy_window"
                )
            if self.generator != "mptlab":
                # ITGSend/ITGRecv 2.8.1 have no option for socket buffers or the window
                raise ValueError(
                    "tcp_greedy_window needs generator mptlab (D-ITG has no option "
                    f"that caps a TCP window), got generator {self.generator}"
                )
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict:
        """Without a cap, no ``tcp_greedy_window`` key: an uncapped entry's
        dump (the run's spec.json ``config.background``) stays what it was
        before the field existed, so runs keep their identity and a guest
        whose record lacks the field still reads them."""
        out = handler(self)
        if out.get("tcp_greedy_window", 0) is None:
            del out["tcp_greedy_window"]
        return out

    def resolved(self) -> Background:
        """The entry with its preset's values filled in (what the guest gets)."""
        p = PRESETS[self.preset]
        udp_rate, udp_pps = self.udp_rate, self.udp_pps
        if udp_rate is None and udp_pps is None:
            udp_rate, udp_pps = p.udp_rate, p.udp_pps
        return self.model_copy(
            update={
                "tcp_pps": self.tcp_pps or p.tcp_pps,
                "udp_rate": udp_rate,
                "udp_pps": udp_pps,
                "packet_size": self.packet_size or p.packet_size,
                "rtt": self.rtt or p.rtt,
                "on_off": self.on_off or p.on_off,
            }
        )
