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

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..guest.netlab import JITTER_DISTRIBUTIONS, GilbertElliott, Queue, Shape
from . import units

Rate = Annotated[float, BeforeValidator(units.rate_mbit)]
Duration = Annotated[float, BeforeValidator(units.duration_ms)]
Size = Annotated[int, BeforeValidator(units.size_bytes)]
Percent = Annotated[float, BeforeValidator(units.percent)]

QDISC = Literal["droptail", "red", "codel", "fq_codel"]
# built into the kernel (kernel/config/mptlab.config); Linux 6.1 has no MPTCP coupled CC (LIA/OLIA)
CongestionControl = Literal["reno", "cubic", "bbr", "vegas", "westwood", "htcp", "bic", "dctcp"]
JitterDistribution = Literal[JITTER_DISTRIBUTIONS]  # type: ignore[valid-type]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- links
def _queue_shorthand(value):
    """``100`` -> packets, ``"100 packets"``, ``"1.5 bdp"``, ``"64KiB"`` -> the mapping form."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {"packets": value}
    if isinstance(value, str):
        text = value.strip().lower()
        for word, key in (("packets", "packets"), ("packet", "packets"), ("bdp", "bdp")):
            if text.endswith(word):
                number = text[: -len(word)].strip()
                return {key: float(number) if key == "bdp" else int(number)}
        return {"bytes": value}
    return value


class QueueSpec(Strict):
    """Bottleneck queue limit: exactly one of ``packets``, ``bytes``, ``bdp``."""

    packets: int | None = Field(None, gt=0)
    bytes: Size | None = Field(None, gt=0)
    bdp: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _exactly_one(self):
        given = [k for k in ("packets", "bytes", "bdp") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of packets, bytes, bdp (e.g. 100, '64KiB', '1 bdp')")
        return self

    def to_queue(self) -> Queue:
        return Queue(packets=self.packets, bytes=self.bytes, bdp=self.bdp)


class GilbertElliottSpec(Strict):
    """Gilbert-Elliott loss (percent): p good->bad, r bad->good, h/k delivery in bad/good."""

    p: Percent
    r: Percent
    h: Percent = 0.0
    k: Percent = 100.0


class DirectionSpec(Strict):
    """One direction of a link.  ``delay`` is one-way."""

    rate: Rate | None = None
    delay: Duration = 0.0
    jitter: Duration = 0.0
    jitter_distribution: JitterDistribution = "normal"
    loss: Percent = 0.0
    gilbert_elliott: GilbertElliottSpec | None = None
    queue: Annotated[QueueSpec, BeforeValidator(_queue_shorthand)] = QueueSpec(packets=1000)
    qdisc: QDISC = "droptail"

    def to_shape(self) -> Shape:
        ge = self.gilbert_elliott
        return Shape(
            rate_mbit=self.rate,
            delay_ms=self.delay,
            jitter_ms=self.jitter,
            jitter_distribution=self.jitter_distribution,
            loss_pct=self.loss,
            gilbert_elliott=GilbertElliott(ge.p, ge.r, ge.h, ge.k) if ge else None,
            queue=self.queue.to_queue(),
            qdisc=self.qdisc,
        )


class ProfileSpec(DirectionSpec):
    """A named link profile; ``reverse`` overrides fields for the other direction."""

    description: str = ""
    source: str = Field("", description="the paper (and section) the numbers come from")
    paper_delay: str = Field(
        "", description="how the paper states the delay and how it was read (one-way or RTT)"
    )
    reverse: dict = Field(default_factory=dict)

    def directions(self) -> tuple[DirectionSpec, DirectionSpec]:
        fwd = DirectionSpec(**{k: getattr(self, k) for k in DirectionSpec.model_fields})
        rev = DirectionSpec(**{**fwd.model_dump(), **self.reverse}) if self.reverse else fwd
        return fwd, rev


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
    shape: str | None = Field(
        None, description="a profile name, or pathN: the profile the experiment gives path N"
    )


class BackgroundPairSpec(Strict):
    sender: str
    receiver: str
    path: int = Field(ge=1)


class RolesSpec(Strict):
    client: str
    server: str
    background: list[BackgroundPairSpec] = []


class TopologySpec(Strict):
    description: str = ""
    source: str = ""
    paths: int = Field(ge=1, description="number of path slots (path1..pathN) experiments fill")
    hosts: list[str]
    routers: list[str] = []
    links: list[Annotated[LinkSpec, BeforeValidator(_link_shorthand)]]
    roles: RolesSpec

    @model_validator(mode="after")
    def _consistent(self):
        nodes = self.hosts + self.routers
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
        return self


# ----------------------------------------------------------- experiment
class PathManagerSpec(Strict):
    subflows: int = Field(8, ge=0, le=8)
    add_addr_accepted: int = Field(8, ge=0, le=8)


class KernelSpec(Strict):
    scheduler: str = "default"
    scheduler_params: dict[str, int | float | str] = {}
    congestion_control: CongestionControl = "cubic"
    mptcp: bool = Field(True, description="false: single-path TCP baseline on tcp_path")
    tcp_path: int = Field(1, ge=1)
    rmem: Size | None = Field(None, description="max receive buffer (tcp_rmem[2], rmem_max)")
    wmem: Size | None = Field(None, description="max send buffer (tcp_wmem[2], wmem_max)")
    path_manager: PathManagerSpec = PathManagerSpec()
    checksum: bool = False
    memory: Size = Field(
        1 << 30,
        ge=256 << 20,
        description="the guest's RAM; every host of the experiment shares this one kernel, "
        "its TCP memory limit (tcp_mem) is set from it (docs/stalls.md)",
    )
    sysctls: dict[str, int | float | str] = {}


class WorkloadSpec(BaseModel):
    """``type`` names a module in ``traffic/``; its other fields are that
    module's ``Params`` (checked by the catalog, see ``traffic/__init__.py``)."""

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
    notes: str = ""
    extends: str | None = None
    topology: str
    paths: list[str] = Field(min_length=1, description="a link profile per path slot")
    kernel: KernelSpec = KernelSpec()
    workload: WorkloadSpec
    background: list[dict] = Field(
        default_factory=list, description="background flows, checked by mptlab.workloads.background"
    )
    repetitions: int = Field(1, ge=1)
    warmup: Duration = Field(0.0, description="start of the run left out of the analysis")
    timeout: Duration = Field(300_000.0, gt=0, description="a run still going is killed")
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
