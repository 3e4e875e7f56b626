"""The experiment language: link profiles, topologies and experiments.

Files (all YAML):

- ``topologies/profiles.yaml``: named link profiles (``wlan``, ``3g``, ...);
- ``topologies/<name>.yaml``: one topology each;
- ``experiments.yaml`` (or any campaign file): named experiments, which may
  ``extends:`` others and expand a ``matrix`` into variants.

Every model forbids unknown fields; errors are reported as
``file:line: field: problem (allowed: ...)`` by ``mptlab.spec.catalog``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    field_serializer,
    model_validator,
)

from ..rundir import Clock
from . import units
from .expect import Claim
from .knobs import fec_sysctls, mptbm_sysctls
from .plan import l2_segments
from .shapes import Shape, shape_with
from .units import Duration, Fraction, Rate, Size  # noqa: F401 - the language's unit types

# built into the kernel (kernel/config/mptlab.config), plus the coupled
# controls mptlab's modules add (kernel/modules/mptcp_{lia,olia,balia,wvegas}.c;
# olia_sbd is mptcp_olia.c's second control, docs/congestion-control.md):
# on an MPTCP subflow they couple with its siblings, on plain TCP they are Reno.
CongestionControl = Literal[
    "reno",
    "cubic",
    "bbr",
    "vegas",
    "westwood",
    "htcp",
    "bic",
    "dctcp",
    "lia",
    "olia",
    "olia_sbd",
    "balia",
    "wvegas",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_ADAPTERS: dict[Any, TypeAdapter] = {}


def adapter(cls: Any) -> TypeAdapter:
    """pydantic's validator for a dataclass of the language (Shape, Profile)."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


# ---------------------------------------------------------------- links
@dataclass(frozen=True)
class Profile(Shape):
    """A link profile: a ``Shape`` for both directions, unless ``reverse``
    overrides fields for the other one (b to a)."""

    description: str = ""
    source: str = ""  # the paper (and section) the numbers come from
    paper_delay: str = ""  # how the paper states the delay and how it was read (one-way or RTT)
    reverse: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, fields: dict) -> Profile:
        """A profile from the YAML's fields (``{"rate": "25mbit", "queue": 100}``), validated."""
        return adapter(cls).validate_python(fields)

    def directions(self) -> tuple[Shape, Shape]:
        fwd = Shape(**{f.name: getattr(self, f.name) for f in fields(Shape)})
        return fwd, shape_with(fwd, self.reverse) if self.reverse else fwd

    def to_json(self) -> dict:
        return adapter(Profile).dump_python(self, mode="json")


# ------------------------------------------------------------- topology
def _link_shorthand(value):
    """``[a, b]`` or ``[a, b, shape]`` -> the mapping form."""
    if isinstance(value, list):
        if len(value) not in (2, 3):
            raise ValueError("a link is [a, b] or [a, b, shape]")
        return {"a": value[0], "b": value[1], **({"shape": value[2]} if len(value) == 3 else {})}
    return value


class LinkSpec(Strict):
    a: str
    b: str
    shape: str | Profile | None = Field(
        None,
        description="a profile name, pathN (the profile the experiment gives path N) or a "
        "profile's fields",
    )

    @property
    def label(self) -> str:
        """How the plan calls the link: its slot or profile name ("" if unshaped or inline)."""
        return self.shape if isinstance(self.shape, str) else ""


class BackgroundPairSpec(Strict):
    sender: str
    receiver: str
    path: int = Field(ge=1)


class RolesSpec(Strict):
    client: str
    server: str
    background: list[BackgroundPairSpec] = []


SwitchType = Literal["bridge", "ovs"]
FailMode = Literal["standalone", "secure"]


def _switch_shorthand(value):
    """A switch's name alone -> the mapping form."""
    return {"name": value} if isinstance(value, str) else value


def _flow_has_actions(flow: str) -> str:
    """A first check of a flow, without Open vSwitch (the catalog has ``ovs-ofctl`` parse it)."""
    if "actions=" not in flow.replace(" ", ""):
        raise ValueError(
            f"{flow!r} has no actions=; a flow is in ovs-ofctl add-flow syntax, e.g. "
            "'in_port=1,actions=output:2'"
        )
    return flow


class SwitchSpec(Strict):
    """One switch: a name, or a mapping that overrides the topology's
    ``switch`` and ``fail_mode`` for it and gives it static OpenFlow flows."""

    name: str
    switch: SwitchType | None = Field(None, description="bridge or ovs; null: the topology's")
    fail_mode: FailMode | None = Field(
        None, description="(ovs) standalone or secure; null: the topology's"
    )
    flows: list[Annotated[str, AfterValidator(_flow_has_actions)]] = Field(
        default_factory=list,
        description="(ovs) static OpenFlow flows in ovs-ofctl add-flow syntax; port N is the "
        "switch's N-th link in link order (interface <switch>-eth<N-1>)",
    )

    def plain(self) -> bool:
        """Nothing but the name: written back as the name alone."""
        return self.switch is None and self.fail_mode is None and not self.flows


class TopologySpec(Strict):
    description: str = ""
    source: str = ""
    paths: int = Field(ge=0, description="number of path slots (path1..pathN) experiments fill")
    hosts: list[str]
    routers: list[str] = Field(default_factory=list, description="hosts that forward (IP)")
    switch: SwitchType = Field(
        "bridge",
        description="what a switch is: bridge (a Linux bridge) or ovs (an Open vSwitch bridge, "
        "kernel datapath); a switch's own `switch:` overrides it",
    )
    fail_mode: FailMode = Field(
        "standalone",
        description="(ovs) standalone: a MAC-learning switch (Mininet's OVSBridge); secure: "
        "only the switch's `flows:` forward (Mininet's OVSSwitch without a controller)",
    )
    switches: list[Annotated[SwitchSpec, BeforeValidator(_switch_shorthand)]] = Field(
        default_factory=list,
        description="the switches (Ethernet): names, or {name, switch, fail_mode, flows}",
    )
    links: list[Annotated[LinkSpec, BeforeValidator(_link_shorthand)]]
    roles: RolesSpec

    @field_serializer("switches")
    def _switches_out(self, switches: list[SwitchSpec]) -> list:
        # a switch with a name only is written as the name, as before switch types
        return [
            s.name if s.plain() else s.model_dump(mode="json", exclude_defaults=True)
            for s in switches
        ]

    @property
    def switch_names(self) -> list[str]:
        return [s.name for s in self.switches]

    def ovs_switches(self) -> dict[str, dict]:
        """The Open vSwitch switches: name -> {fail_mode, flows} (the plan's ``ovs``)."""
        out = {}
        for s in self.switches:
            if (s.switch or self.switch) == "ovs":
                out[s.name] = {"fail_mode": s.fail_mode or self.fail_mode, "flows": list(s.flows)}
        return out

    @model_validator(mode="after")
    def _consistent(self):
        names = self.switch_names
        nodes = self.hosts + self.routers + names
        dup = {n for n in nodes if nodes.count(n) > 1}
        if dup:
            raise ValueError(f"node names used twice: {sorted(dup)}")
        known = set(nodes)
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end not in known:
                    raise ValueError(
                        f"links[{i}] uses unknown node {end!r}; nodes: {sorted(known)}"
                    )
        for role in (self.roles.client, self.roles.server):
            if role not in self.hosts:
                raise ValueError(f"role host {role!r} is not in hosts {self.hosts}")
        for pair in self.roles.background:
            for end in (pair.sender, pair.receiver):
                if end not in self.hosts:
                    raise ValueError(f"background host {end!r} is not in hosts {self.hosts}")
            if pair.path > self.paths:
                raise ValueError(f"background pair on path {pair.path}, but paths: {self.paths}")
        l2_segments([(ln.a, ln.b) for ln in self.links], set(names))  # no loops
        return self


class MininetTopology(Strict):
    """``topology: {mininet: "mymodule:MyTopo", args: {...}}``: a Mininet
    ``Topo`` subclass as the topology (``mptlab.spec.mininet``)."""

    mininet: str = Field(description="module:Class of a mininet.topo.Topo subclass")
    args: dict[str, Any] = Field(default_factory=dict, description="the class's keyword arguments")
    client: str | None = Field(None, description="the client host (default: see docs)")
    server: str | None = Field(None, description="the server host")


# ----------------------------------------------------------- experiment
class PathManagerSpec(Strict):
    subflows: int = Field(8, ge=0, le=8)
    add_addr_accepted: int = Field(8, ge=0, le=8)


class MptbmSpec(Strict):
    """MPT-BM (Ferlin-Oliveira et al., IWQoS 2014, Algorithm 1): a subflow may
    have at most ``lambda * sRTT_min / sRTT * cwnd`` segments in flight once
    its windowed minimum sRTT reaches ``theta`` (kernel patch 0004; it sits
    in the scheduler's "may this subflow send" test, so it composes with
    every scheduler)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    lambda_: float = Field(
        alias="lambda",
        ge=0,
        le=1000,
        description="tolerance over the minimum RTT (the paper: 1.5, 3.0); 0: off",
    )
    theta: Duration = Field(
        100.0,
        ge=1,
        description="MPT-BM acts on a subflow only when its minimum sRTT is at least this "
        "(the paper: 100 ms)",
    )
    window: Duration = Field(
        60_000.0,
        ge=1000,
        description="sRTT_min is the minimum over this window (the paper leaves it open; "
        "60 s chosen, kernel/README.md)",
    )

    def sysctls(self) -> dict[str, int]:
        """The kernel's per-namespace knobs (net.mptcp.mptbm_*, patch 0004)."""
        return mptbm_sysctls(self.model_dump(mode="json", by_alias=True))


def _fec_mode(value):
    """YAML 1.1 reads an unquoted ``off`` as false: take it (and null) as off."""
    return "off" if value is False or value is None else value


class FecSpec(Strict):
    """TCP-dFEC and MPTCP-dFEC (Ferlin thesis Ch. 6): systematic XOR parity,
    one FEC packet after every ``ratio`` data segments; ``dynamic`` adapts the
    ratio every 3 RTTs towards a residual loss of ``target`` (ratio x (1 -
    delta) above it, x (1 + delta) below), within [``min``, ``max``]; ``fixed``
    keeps ``ratio``.  Per-namespace sysctls ``net.ipv4.tcp_fec*`` of the
    kernel (docs/fec.md); a connection uses FEC only when both ends ask."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    mode: Annotated[Literal["off", "dynamic", "fixed"], BeforeValidator(_fec_mode)] = Field(
        "dynamic",
        description="dynamic: dFEC; fixed: ratio never changes; off: as if kernel.fec were null",
    )
    ratio: int = Field(
        9, ge=1, le=256, description="data segments per FEC packet: the start (dynamic) or fixed"
    )
    delta: Fraction = Field(
        0.33, ge=0.001, le=0.999, description="correction rate of the dynamic ratio (0.33, '33%')"
    )
    target: Fraction = Field(
        0.01, ge=0, le=1, description="target residual loss of the dynamic ratio ('1%', 0.01)"
    )
    min_: int = Field(4, alias="min", ge=1, le=256, description="smallest ratio (4: 20 % overhead)")
    max_: int = Field(256, alias="max", ge=1, le=256, description="largest ratio")
    hosts: Literal["both", "client", "server"] = Field(
        "both",
        description="the ends that ask for FEC; one only: the other end is plain TCP "
        "(interoperability), so no connection uses FEC",
    )

    @model_validator(mode="after")
    def _bounds(self):
        if self.min_ > self.max_:
            raise ValueError(f"min ({self.min_}) must not be above max ({self.max_})")
        if not self.min_ <= self.ratio <= self.max_:
            raise ValueError(
                f"ratio {self.ratio} must lie within [min, max] = [{self.min_}, {self.max_}]"
            )
        return self

    def sysctls(self) -> dict[str, int]:
        """The kernel's per-namespace knobs (net.ipv4.tcp_fec*); {} when off."""
        return fec_sysctls(self.model_dump(mode="json", by_alias=True))


class SbdPhase(Strict):
    """From ``at`` on, which paths share a bottleneck: the ground truth SBD's
    decisions are scored against (docs/congestion-control.md)."""

    at: Duration = Field(0.0, ge=0, description="start of the phase, from the workload's start")
    shared: list[list[int]] = Field(
        description="groups of paths (1-based) that share a bottleneck, e.g. [[1, 2]]; "
        "a path in no group has its own bottleneck (or none)"
    )


class SbdSpec(Strict):
    """Shared-bottleneck detection at the receiver (RFC 8382 with the thesis's
    Table 5.1 values; mptlab/guest/sbd.py): its parameters, and the truth its
    decisions are scored against.  On with ``congestion_control: olia_sbd``
    (whose coupling follows the decisions), or with this block for any control
    (decisions recorded, nothing coupled by them)."""

    interval: Duration = Field(350.0, gt=0, description="T, the base interval")
    n: int = Field(50, ge=2, le=1000, description="N, intervals kept")
    c_s: float = Field(-0.01, description="skewness below which a flow is bottlenecked")
    c_h: float = Field(0.3, description="... below which it stays bottlenecked (hysteresis)")
    p_f: float = Field(0.1, ge=0, description="key-frequency difference that splits groups")
    p_s: float = Field(0.1, ge=0, description="skewness difference that splits groups")
    p_v: float = Field(0.7, ge=0, description="crossing threshold of the key frequency, x var")
    p_mad: float = Field(0.1, ge=0, description="relative variability difference that splits")
    p_d: float = Field(0.1, ge=0, description="relative loss difference that splits")
    p_l: float = Field(0.1, ge=0, le=1, description="loss above which a flow is bottlenecked")
    observations: int = Field(10, ge=1, description="observations per decision (10 x T = 3.5 s)")
    min_seen: int = Field(
        5, ge=1, description="a grouping stands when seen in at least this many observations"
    )
    truth: list[SbdPhase] | None = Field(
        None,
        description="which paths share a bottleneck when; null: from the topology (paths whose "
        "slowest shaped links meet share it)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> SbdSpec:
        if self.min_seen > self.observations:
            raise ValueError(
                f"min_seen ({self.min_seen}) must be at most observations ({self.observations})"
            )
        if self.truth is not None:
            ats = [phase.at for phase in self.truth]
            if ats != sorted(ats) or len(set(ats)) != len(ats):
                raise ValueError("truth phases must be in increasing order of 'at'")
        return self


class KernelSpec(Strict):
    scheduler: str = "default"
    scheduler_params: dict[str, int | float | str] = {}
    congestion_control: CongestionControl = "cubic"
    congestion_params: dict[str, int | float | str] = Field(
        {},
        description="module parameters of a coupled control (lia, olia, balia, wvegas), "
        "e.g. {min_ssthresh: 1} (docs/congestion-control.md)",
    )
    mptbm: MptbmSpec | None = Field(
        None, description="MPT-BM bufferbloat mitigation {lambda, theta, window}; null: off"
    )
    fec: FecSpec | None = Field(
        None,
        description="TCP-dFEC / MPTCP-dFEC {mode, ratio, delta, target, min, max, hosts}; "
        "null: off (docs/fec.md)",
    )
    sbd: SbdSpec | None = Field(
        None,
        description="shared-bottleneck detection at the receiver (RFC 8382, the thesis's "
        "MPTCP-SBD): parameters and ground truth; on by default with olia_sbd",
    )
    opportunistic_retransmission: bool = Field(
        True,
        description="re-send the segment that blocks the connection-level window on another "
        "subflow (Raiciu et al., NSDI 2012; kernel patch 0001); false: off, as the papers' "
        "'OR&P off' baselines (net.mptcp.opportunistic_retrans, patch 0009)",
    )
    mptcp: bool = Field(True, description="false: single-path TCP baseline on tcp_path")
    tcp_path: int = Field(1, ge=1)
    rmem: Size | None = Field(None, description="max receive buffer (tcp_rmem[2], rmem_max)")
    wmem: Size | None = Field(None, description="max send buffer (tcp_wmem[2], wmem_max)")
    buffers: Literal["autotune", "socket"] = Field(
        "autotune",
        description="how rmem/wmem apply: autotune: the ceiling of TCP's autotuning; socket: "
        "as setsockopt(SO_RCVBUF/SO_SNDBUF) by the application (Linux doubles the value, no "
        "autotuning)",
    )
    path_manager: PathManagerSpec = PathManagerSpec()
    checksum: bool = False
    memory: Size = Field(
        1 << 30,
        ge=256 << 20,
        description="the guest's RAM; every host of the experiment shares this one kernel, "
        "its TCP memory limit (tcp_mem) is set from it (docs/stalls.md)",
    )
    sysctls: dict[str, int | float | str] = {}

    @model_validator(mode="after")
    def _sbd_with_olia_sbd(self) -> KernelSpec:
        # olia_sbd couples by SBD's decisions: without a block, the defaults
        if self.congestion_control == "olia_sbd" and self.sbd is None:
            self.sbd = SbdSpec()
        return self


class WorkloadSpec(BaseModel):
    """``type`` names a workload; its other fields are checked by the catalog
    against that workload's model (``mptlab.spec.workloads``)."""

    model_config = ConfigDict(extra="allow")
    type: str


class TracesSpec(Strict):
    ss_interval: Duration | None = Field(100.0, description="subflow sampling period; null: off")
    ofo_interval: Duration | None = Field(
        100.0, description="MPTCP connection sampling (OFO queue now/max, bytes); null: off"
    )
    ofo_events: bool = Field(
        True, description="every change of the MPTCP OFO queue, from the kernel tracepoint"
    )
    tcpdump: bool = False
    snaplen: int = Field(128, ge=64)


class LinkEventSpec(Strict):
    """A change of a link at a given time of the run (e.g. a rate drop)."""

    at: Duration = Field(ge=0, description="time after the workload starts")
    link: str = Field(
        description="pathN (a topology path slot) or 'a-b' (the link between nodes a and b)"
    )
    direction: Literal["both", "a_to_b", "b_to_a"] = "both"
    profile: str | None = Field(None, description="switch to this profile (then apply `set`)")
    set: dict = Field(default_factory=dict, description="link fields to change, e.g. {rate: 2mbit}")


def _stall_timeout(value):
    """``auto`` | ``off`` | a duration (``8s``; a bare number is ms).  YAML 1.1
    reads an unquoted ``off`` as false (and ``on`` as true): both are taken."""
    if value is False or value is None:
        return "off"
    if value is True:
        return "auto"
    if isinstance(value, str) and value.strip().lower() in ("auto", "off"):
        return value.strip().lower()
    try:
        ms = units.duration_ms(value)
    except ValueError as exc:
        raise ValueError(f"{exc}; or auto, off") from None
    if ms <= 0:
        raise ValueError(f"stall_timeout must be positive (or auto, off), got {value!r}")
    return ms


StallTimeout = Annotated[Literal["auto", "off"] | float, BeforeValidator(_stall_timeout)]


class ExperimentSpec(Strict):
    description: str = ""
    source: str = ""
    paper: str = Field(
        "",
        description="the publication this experiment reproduces, as a short name "
        "('BLEST (IFIP Networking 2016)'): the reproduction page groups claims by it",
    )
    notes: str = ""
    extends: str | None = None
    topology: str | MininetTopology
    paths: list[str] = Field(default_factory=list, description="a link profile per path slot")
    kernel: KernelSpec = KernelSpec()
    workload: WorkloadSpec
    background: list[dict] = Field(
        default_factory=list,
        description="background flows, checked by mptlab.spec.workloads.Background",
    )
    repetitions: int = Field(1, ge=1)
    warmup: Duration = Field(0.0, description="start of the run left out of the analysis")
    timeout: Duration = Field(
        300_000.0,
        gt=0,
        description="a run still going is killed (virtual clock: this much guest time)",
    )
    clock: Clock = Field(
        "virtual",
        description="virtual (default): UML time-travel, guest time advances only while the "
        "guest is idle: load-immune, deterministic; real: the host's clock "
        "(docs/experiments.md)",
    )
    stall_timeout: StallTimeout = Field(
        "auto",
        description="end the run as stalled when the workload's data level stands still this "
        "long with data outstanding; auto: from the planned links (docs/experiments.md); off",
    )
    traces: TracesSpec = TracesSpec()
    events: list[LinkEventSpec] = Field(
        default_factory=list, description="link changes during the run"
    )
    matrix: dict[str, list] = {}
    variants: list[dict] = []
    expect: list[Claim] = Field(
        default_factory=list,
        description="the paper's claims about the variants (mptlab.spec.expect); "
        "not part of a run's config",
    )
