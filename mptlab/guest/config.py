"""The run as the guest sees it: one frozen, typed object built from ``spec.json``.

The host validates an experiment with pydantic (``mptlab.spec.models``) and
writes the resolved run as plain JSON (``mptlab.rundir.RunSpec``).  The
guest does not import pydantic (~1 s of host CPU per run in a UML guest,
tests/test_architecture.py), so it used to read that JSON twice over: as
attribute namespaces and as raw dicts, 50 places between them, each with
its own idea of a default.  ``GuestRun.from_json`` reads it once, as
``mptlab.spec.shapes.Shape`` reads a link: every field typed, every default
in one place, and a malformed spec.json fails at once with the field's path
(``config.kernel.path_manager.subflows: expected int, got 'x'``) instead of
as a ``KeyError`` halfway through building the network.

The records mirror the host's models (``KernelSpec``, ``TracesSpec``,
``Background``, ...) field for field, with their defaults, so that spec.json
files written before a field existed still read
(tests/test_guest_config.py checks the two agree).  A workload's own fields
are the host's to check (``mptlab.spec.workloads``): the guest keeps them as
read-only attributes (``Workload``), the names the workload modules use.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from ..rundir import Clock, RunSpec, rep_name
from ..spec.plan import NetPlan


class ConfigError(ValueError):
    """spec.json does not describe a run this guest can execute (which field, why)."""


Scalar = int | float | str
T = typing.TypeVar("T")


# ------------------------------------------------------------------ kernel
@dataclass(frozen=True)
class PathManager:
    subflows: int = 8
    add_addr_accepted: int = 8


@dataclass(frozen=True)
class Mptbm:
    """MPT-BM's knobs (``kernel.mptbm``; durations in ms)."""

    lambda_: float = field(metadata={"json": "lambda"})
    theta: float = 100.0
    window: float = 60_000.0

    def to_json(self) -> dict:
        """The catalog's form, which ``mptlab.spec.knobs`` maps to sysctls."""
        return {"lambda": self.lambda_, "theta": self.theta, "window": self.window}


@dataclass(frozen=True)
class Fec:
    """TCP-dFEC's settings (``kernel.fec``; delta and target as fractions)."""

    mode: Literal["off", "dynamic", "fixed"] = "dynamic"
    ratio: int = 9
    delta: float = 0.33
    target: float = 0.01
    min: int = 4
    max: int = 256
    hosts: Literal["both", "client", "server"] = "both"

    def to_json(self) -> dict:
        """The catalog's form, which ``mptlab.spec.knobs`` maps to sysctls."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class SbdPhase:
    at: float = 0.0  # ms from the workload's start
    shared: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Sbd:
    """Shared-bottleneck detection (``kernel.sbd``): the detector's
    parameters (``mptlab.guest.sbd.SbdParams``, interval in ms) and the truth."""

    interval: float = 350.0
    n: int = 50
    c_s: float = -0.01
    c_h: float = 0.3
    p_f: float = 0.1
    p_s: float = 0.1
    p_v: float = 0.7
    p_mad: float = 0.1
    p_d: float = 0.1
    p_l: float = 0.1
    observations: int = 10
    min_seen: int = 5
    truth: tuple[SbdPhase, ...] | None = None


@dataclass(frozen=True)
class Kernel:
    scheduler: str = "default"
    scheduler_params: Mapping[str, Scalar] = field(default_factory=dict)
    congestion_control: str = "cubic"
    congestion_params: Mapping[str, Scalar] = field(default_factory=dict)  # since 2026-11-26
    mptbm: Mptbm | None = None
    fec: Fec | None = None
    sbd: Sbd | None = None
    opportunistic_retransmission: bool = True
    mptcp: bool = True
    tcp_path: int = 1
    rmem: int | None = None
    wmem: int | None = None
    buffers: Literal["autotune", "socket"] = "autotune"
    path_manager: PathManager = field(default_factory=PathManager)
    checksum: bool = False
    memory: int = 1 << 30
    sysctls: Mapping[str, Scalar] = field(default_factory=dict)

    @property
    def fec_on(self) -> bool:
        """FEC asked for (``mode: off`` is as if ``kernel.fec`` were null)."""
        return self.fec is not None and self.fec.mode != "off"


# ------------------------------------------------------------ the rest
@dataclass(frozen=True)
class Traces:
    ss_interval: float | None = 100.0  # ms; None: off
    ofo_interval: float | None = 100.0
    ofo_events: bool = True
    tcpdump: bool = False
    snaplen: int = 128


@dataclass(frozen=True)
class BackgroundEntry:
    """One ``background:`` entry, its preset's values filled in by the host
    (``mptlab.spec.workloads.Background.resolved``)."""

    preset: str
    tcp_flows: int
    udp_flows: int
    seed: int
    pairs: tuple[int, ...] | None = None
    tcp_greedy: int = 0
    tcp_greedy_window: int | None = None
    seed_per_run: bool = True
    tcp_pps: float | None = None
    udp_rate: float | None = None
    udp_pps: tuple[float, float] | None = None
    packet_size: int | None = None
    rtt: tuple[float, float] | None = None
    on_off: tuple[float, float] | None = None
    settle: float = 1000.0
    generator: Literal["mptlab", "d-itg"] = "mptlab"


@dataclass(frozen=True)
class BackgroundPair:
    sender: str
    receiver: str
    path: int


@dataclass(frozen=True)
class Roles:
    client: str
    server: str
    background: tuple[BackgroundPair, ...] = ()


@dataclass(frozen=True)
class Topology:
    """What the guest takes from the topology spec: its roles (the plan is the network)."""

    HOST_ONLY: ClassVar[frozenset[str]] = frozenset(
        {
            "description",
            "source",
            "paths",
            "hosts",
            "routers",
            "switch",
            "fail_mode",
            "switches",
            "links",
        }
    )
    roles: Roles


# a built-in's name, or module:Class of the user's own (mptlab.spec.usercode)
WORKLOAD_TYPE = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_]\w*)?$"
)


class Workload:
    """A workload's fields as read-only attributes (``ctx.workload.bytes``),
    in base units; lists become tuples and mappings ``Workload``s, so
    nothing in it can change.  ``type`` names the workload module (or
    ``module:Class`` of the user's own, whose file is ``module_path``)."""

    __slots__ = ("_fields", "_where")

    def __init__(self, values: Mapping[str, Any], where: str = "config.workload"):
        object.__setattr__(self, "_fields", MappingProxyType(dict(values)))
        object.__setattr__(self, "_where", where)

    @classmethod
    def from_json(cls, data: Any, where: str = "config.workload") -> Workload:
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping, got {_shown(data)}")
        if where == "config.workload" and not (
            isinstance(data.get("type"), str) and WORKLOAD_TYPE.match(data["type"])
        ):
            raise ConfigError(
                f"{where}.type: expected a workload name or module:Class, got {data.get('type')!r}"
            )
        if where == "config.workload" and ":" in data["type"]:
            path = data.get("module_path")
            if not isinstance(path, str) or not path.startswith("/"):
                raise ConfigError(
                    f"{where}.module_path: a workload of the user's own ({data['type']}) "
                    f"needs its module's absolute path, got {path!r}"
                )
        return cls({k: _frozen(v, f"{where}.{k}") for k, v in data.items()}, where)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(
                f"{self._where} has no field {name!r}; it has: {', '.join(sorted(self._fields))}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._where} is read-only")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and self._fields == other._fields

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._fields)))

    def __repr__(self) -> str:
        return f"Workload({dict(self._fields)!r})"

    def fields(self) -> Mapping[str, Any]:
        """Every field, read-only."""
        return self._fields


def _frozen(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        return Workload({k: _frozen(v, f"{where}.{k}") for k, v in value.items()}, where)
    if isinstance(value, list | tuple):
        return tuple(_frozen(v, f"{where}[{i}]") for i, v in enumerate(value))
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ConfigError(f"{where}: not JSON data: {_shown(value)}")


@dataclass(frozen=True)
class RunConfig:
    """The resolved experiment (spec.json ``config``), the fields the guest uses."""

    # the host's (the analysis reads them from spec.json): read past, not kept
    HOST_ONLY: ClassVar[frozenset[str]] = frozenset(
        {"description", "source", "paper", "notes", "topology", "repetitions", "events"}
    )
    kernel: Kernel
    workload: Workload
    paths: tuple[str, ...] = ()
    background: tuple[BackgroundEntry, ...] = ()
    warmup: float = 0.0  # ms
    timeout: float = 300_000.0  # ms
    clock: Clock = "real"  # spec.json files before clocks existed ran on the host's
    stall_timeout: Literal["auto", "off"] | float = "auto"
    traces: Traces = field(default_factory=Traces)


@dataclass(frozen=True)
class GuestRun:
    """One run, as the agent executes it: spec.json read once.

    ``content_key``: where the content its workload's ``prepare()`` made on
    the host is filed (``mptlab.rundir.content_manifest``); None in
    spec.json files written before content keys (they carried the content
    in ``config.workload.prepared``, which this guest no longer reads)."""

    HOST_ONLY: ClassVar[frozenset[str]] = frozenset({"variant_keys", "profiles"})
    experiment: str
    variant: str
    repetition: int
    seed: int
    config: RunConfig
    topology: Topology
    plan: NetPlan = field(metadata={"json": "plan", "build": "plan"})
    content_key: str | None = None

    @property
    def run_id(self) -> str:
        return f"{self.variant}/{rep_name(self.repetition)}"

    @property
    def client(self) -> str:
        return self.topology.roles.client

    @property
    def server(self) -> str:
        return self.topology.roles.server

    def path_of(self, addr: str) -> int | None:
        """The path of one of the client's or the server's addresses (``NetPlan.path_of``)."""
        return self.plan.path_of(addr, (self.client, self.server))

    @classmethod
    def from_json(cls, data: Any) -> GuestRun:
        """The run from spec.json's data; ``ConfigError`` naming the field that is wrong."""
        run = _build(cls, data, "spec.json")
        for host in (run.client, run.server):
            if host not in run.plan.hosts:
                raise ConfigError(
                    f"spec.json: topology.roles: {host!r} is not a host of the plan "
                    f"({', '.join(run.plan.hosts)})"
                )
        return run

    @classmethod
    def from_spec(cls, spec: RunSpec) -> GuestRun:
        return cls.from_json(spec.to_json())


# ---------------------------------------------------------------- building
def _shown(value: Any) -> str:
    text = repr(value)
    return (text[:60] + "...") if len(text) > 63 else text


def read(cls: type[T], data: Any, where: str) -> T:
    """One record of this module (``Kernel``, ``Sbd``, ...) from its JSON
    mapping at ``where`` (e.g. ``config.kernel``); ``ConfigError`` if malformed."""
    return _build(cls, data, where)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(cls: type, data: Any, where: str) -> Any:
    """A dataclass ``cls`` from its JSON mapping: unknown keys refused
    (but a class's ``HOST_ONLY`` keys read past), missing ones defaulted or
    named, every value checked against its field's type."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_shown(data)}")
    hints = _hints(cls)
    own = {f.metadata.get("json", f.name): f for f in fields(cls)}
    unknown = set(data) - set(own) - getattr(cls, "HOST_ONLY", frozenset())
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {', '.join(sorted(unknown))} "
            f"(allowed: {', '.join(sorted(own))}); spec.json written by another mptlab?"
        )
    kwargs = {}
    for key, f in own.items():
        at = f"{where}.{key}" if where != "spec.json" else key
        if key not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError(f"{at}: missing")
            continue
        if f.metadata.get("build") == "plan":
            kwargs[f.name] = _plan(data[key], at)
        else:
            kwargs[f.name] = _value(hints[f.name], data[key], at)
    return cls(**kwargs)


def _plan(data: Any, where: str) -> NetPlan:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {_shown(data)}")
    try:
        return NetPlan.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{where}: not a network plan ({type(exc).__name__}: {exc})") from None


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if isinstance(tp, type):
        return "null" if tp is type(None) else tp.__name__
    return str(tp).replace("typing.", "").replace("collections.abc.", "")


def _value(tp: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        choices = [a for a in args if a is not type(None)]
        if len(choices) == 1:  # X | None: X's own words
            return _value(choices[0], value, where)
        for arg in choices:
            try:
                return _value(arg, value, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {_shown(value)}")
    if origin is Literal:
        if isinstance(value, str | int | float) and not isinstance(value, bool) and value in args:
            return value
        allowed = ", ".join(repr(a) for a in args)
        raise ConfigError(f"{where}: {_shown(value)} is not one of {allowed}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {_shown(value)}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{where}: expected {len(args)} values, got {_shown(value)}")
        return tuple(
            _value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True))
        )
    if origin is Mapping:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {_shown(value)}")
        return MappingProxyType(
            {str(k): _value(args[1], v, f"{where}.{k}") for k, v in value.items()}
        )
    if tp is Workload:
        return Workload.from_json(value, where)
    if is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value, where)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:  # pragma: no cover - a field type this module does not read yet
        raise TypeError(f"{where}: no reader for {tp!r}")
    raise ConfigError(f"{where}: expected {_type_name(tp)}, got {_shown(value)}")
