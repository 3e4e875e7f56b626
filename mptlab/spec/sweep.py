"""A sweep: an experiment's claims re-run while open parameters move.

``mptlab sweep NAME --vary KEY=V1,V2,... [--vary ...] [--grid] --reps N``
runs the variants an experiment's claims compare at every *point* of the
sweep: by default one parameter at a time around the experiment's own
setting (the centre, as shipped, plus each value of each axis with the other
axes at the experiment's setting), with ``--grid`` every combination.  This
module is the language part (pure): the axes, the points, and what a point
changes in the experiment's mapping.  Running them is ``mptlab.sweep``; the
forest plots and the baseline error are ``mptlab.analysis.sweep``.

A KEY is a dotted path into the experiment, as a ``matrix`` key is, with
three additions a sweep needs:

- ``profiles.NAME.FIELD``: a field of a link profile the experiment's paths
  or topology use (``profiles.wlan.loss``, ``profiles.3g.queue``);
- a list index: ``background.0.tcp_greedy``;
- a mapping as the value merges into the mapping the key names, as
  ``extends:`` does, so one point can move several fields together
  (``background.0={tcp_greedy: 1, tcp_greedy_window: 256KiB}``);
- below a mapping of free keys (``kernel.sysctls``, ``kernel.scheduler_params``,
  ``kernel.congestion_params``) the rest is one key, dots and all
  (``kernel.sysctls.net.ipv4.tcp_recovery``).

``kernel.scheduler_params.P`` is a parameter of one scheduler's module: at a
point it is given only to the variants whose scheduler declares ``P``
(``module_param`` in ``kernel/modules/mptcp_<name>.c``), so that BLEST's
rule set can move while the minRTT arm it is compared with stays as it is.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from .. import home
from .yamlsrc import SpecError

# mappings whose keys are free (a sysctl's name has dots of its own)
FREE_MAPS = ("kernel.sysctls", "kernel.scheduler_params", "kernel.congestion_params")
SCOPED = "kernel.scheduler_params"
CENTRE = "centre"
SLUG_BAD = re.compile(r"[^A-Za-z0-9_.:,=+@%-]")


def _value(text: str) -> Any:
    """One value as YAML reads it (``1`` an int, ``0.5%`` a string, ``[a, b]`` a list)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"--vary value {text!r} is not YAML: {exc}") from None


def _split(values: str) -> list[str]:
    """Split at commas outside brackets and braces."""
    out, depth, cur = [], 0, ""
    for ch in values:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def words(value: Any) -> str:
    """A value as a point's label writes it (YAML flow style, one line)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().strip(".").strip()


@dataclass(frozen=True)
class Axis:
    """One ``--vary KEY=V1,V2,...``."""

    key: str
    values: tuple[Any, ...]

    @classmethod
    def parse(cls, text: str) -> Axis:
        key, sep, rest = text.partition("=")
        key = key.strip()
        if not sep or not key or not rest.strip():
            raise SpecError(
                f"--vary {text!r}: write KEY=V1,V2,... (e.g. kernel.buffers=autotune,socket "
                "or profiles.wlan.loss=0.5%,1%,2%)"
            )
        values = tuple(_value(v) for v in _split(rest))
        if any(v is None for v in values):
            raise SpecError(f"--vary {text!r}: an empty value")
        if len({words(v) for v in values}) != len(values):
            raise SpecError(f"--vary {text!r}: a value repeats")
        return cls(key, values)


@dataclass(frozen=True)
class Point:
    """One setting of the sweep: {key: value} on top of the experiment."""

    assign: tuple[tuple[str, Any], ...] = ()

    @property
    def is_centre(self) -> bool:
        return not self.assign

    @property
    def label(self) -> str:
        if not self.assign:
            return "as shipped"
        return ", ".join(f"{k}={words(v)}" for k, v in self.assign)

    @property
    def slug(self) -> str:
        """The point's directory name (stable: the same point, the same dir)."""
        if not self.assign:
            return CENTRE
        text = ",".join(f"{k}={words(v)}" for k, v in self.assign)
        return SLUG_BAD.sub("_", text.replace(" ", ""))[:180]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.assign)


@dataclass
class SweepSpec:
    """What ``mptlab sweep`` was asked (written to ``sweep.json``)."""

    experiment: str
    axes: list[Axis]
    grid: bool = False
    repetitions: int = 10
    variants: list[str] = field(default_factory=list)  # extra variants to run at each point
    claims: list[int] = field(default_factory=list)  # 1-based claim numbers; [] all
    targets: list[str] = field(default_factory=list)  # extra baseline targets VARIANT:METRIC=V
    show: list[str] = field(default_factory=list)  # levels shown per point, VARIANT:METRIC
    seed: int = 1
    quick: bool = False
    file: str | None = None  # the campaign file NAME comes from, if not experiments.yaml

    def __post_init__(self) -> None:
        if not self.axes:
            raise SpecError("a sweep needs at least one --vary KEY=V1,V2,...")
        keys = [a.key for a in self.axes]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise SpecError(f"--vary names {', '.join(dup)} twice: give its values in one --vary")
        if self.repetitions < 2:
            raise SpecError(f"--reps {self.repetitions}: a CI needs at least 2 runs per variant")

    def points(self, is_current: Callable[[str, Any], bool] | None = None) -> list[Point]:
        """The centre first, then one axis at a time (its values other than the
        experiment's own, which ``is_current(key, value)`` recognises), or with
        ``grid`` every combination (a value equal to the experiment's is left
        out of the point's name, so such combinations meet the centre)."""
        same = is_current or (lambda key, value: False)
        out = [Point()]
        if self.grid:
            for combo in itertools.product(*(a.values for a in self.axes)):
                assign = tuple(
                    (a.key, v) for a, v in zip(self.axes, combo, strict=True) if not same(a.key, v)
                )
                if Point(assign) not in out:
                    out.append(Point(assign))
            return out
        for axis in self.axes:
            out += [Point(((axis.key, v),)) for v in axis.values if not same(axis.key, v)]
        return out

    def to_json(self) -> dict:
        return {
            "experiment": self.experiment,
            "vary": {a.key: list(a.values) for a in self.axes},
            "grid": self.grid,
            "repetitions": self.repetitions,
            "variants": self.variants,
            "claims": self.claims,
            "targets": self.targets,
            "show": self.show,
            "seed": self.seed,
            "quick": self.quick,
            "file": self.file,
        }

    @classmethod
    def from_json(cls, data: dict) -> SweepSpec:
        return cls(
            experiment=data["experiment"],
            axes=[Axis(k, tuple(v)) for k, v in data["vary"].items()],
            grid=data.get("grid", False),
            repetitions=data.get("repetitions", 10),
            variants=list(data.get("variants", [])),
            claims=list(data.get("claims", [])),
            targets=list(data.get("targets", [])),
            show=list(data.get("show", [])),
            seed=data.get("seed", 1),
            quick=data.get("quick", False),
            file=data.get("file"),
        )


# --------------------------------------------------------------- the keys
def split_key(key: str) -> list[str | int]:
    """``kernel.sysctls.net.ipv4.tcp_recovery`` -> [kernel, sysctls, net.ipv4.tcp_recovery];
    ``background.0.tcp_greedy`` -> [background, 0, tcp_greedy]."""
    for free in FREE_MAPS:
        if key.startswith(free + "."):
            return [*free.split("."), key[len(free) + 1 :]]
    return [int(p) if p.isdigit() else p for p in key.split(".")]


def get_key(data: dict, key: str) -> Any:
    """The value ``key`` names in an experiment's mapping (KeyError if unset)."""
    node: Any = data
    for part in split_key(key):
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise KeyError(key)
        elif not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def set_key(data: dict, key: str, value: Any) -> None:
    """Set ``key`` in an experiment's mapping, making the mappings on the way."""
    parts = split_key(key)
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                raise SpecError(
                    f"--vary {key}: {'.'.join(map(str, parts[:i]))} has no entry {part} "
                    f"(it has {len(node) if isinstance(node, list) else 0})"
                )
        elif node.get(part) is None:
            node[part] = [] if isinstance(nxt, int) else {}
        node = node[part]
    last = parts[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise SpecError(f"--vary {key}: no entry {last}")
        if isinstance(value, dict) and isinstance(node[last], dict):
            node[last] = {**node[last], **copy.deepcopy(value)}
        else:
            node[last] = copy.deepcopy(value)
    elif not isinstance(node, dict):
        raise SpecError(f"--vary {key}: {'.'.join(map(str, parts[:-1]))} is not a mapping")
    elif isinstance(value, dict) and isinstance(node.get(last), dict):
        # a mapping merges into the mapping there, as extends: does (several fields at once)
        node[last] = {**node[last], **copy.deepcopy(value)}
    else:
        node[last] = copy.deepcopy(value)


def scheduler_params(scheduler: str) -> set[str]:
    """The module parameters a scheduler's source declares (``default``: none)."""
    path = home.data("kernel/modules") / f"mptcp_{scheduler}.c"
    if not path.exists():
        return set()
    text = path.read_text()
    found = re.findall(r"module_param(?:_cb|_named)?\(\s*(\w+)", text)
    return set(found)


def scoped_param(key: str) -> str | None:
    """The parameter name of a ``kernel.scheduler_params.P`` key, else None."""
    return key[len(SCOPED) + 1 :] if key.startswith(SCOPED + ".") else None


def apply_point(
    raw: dict, point: Point, variants: list[tuple[str, dict]], keep: list[str]
) -> tuple[dict, dict[str, dict[str, Any]]]:
    """The experiment's mapping ``raw`` with ``point`` applied, and the profile
    fields it changes ({profile: {field: value}}).  Scheduler parameters go to
    the variants (of ``keep``, their names) whose scheduler declares them:
    the matrix and variants are then written out as explicit variants with
    the same names, so the claims resolve as before."""
    data = copy.deepcopy(raw)
    profiles: dict[str, dict[str, Any]] = {}
    scoped: dict[str, Any] = {}
    for key, value in point.assign:
        if key.startswith("profiles."):
            parts = key.split(".")
            if len(parts) != 3:
                raise SpecError(
                    f"--vary {key}: write profiles.NAME.FIELD (e.g. profiles.wlan.loss)"
                )
            profiles.setdefault(parts[1], {})[parts[2]] = value
        elif scoped_param(key):
            scoped[scoped_param(key) or ""] = value
        elif key == SCOPED and isinstance(value, dict):
            scoped.update(value)  # several parameters at once, each to its takers
        else:
            set_key(data, key, value)
    if scoped:
        base_sched = (data.get("kernel") or {}).get("scheduler", "default")
        explicit = []
        for label, assignment in variants:
            if label not in keep:
                continue
            entry = {"name": label, **copy.deepcopy(assignment)}
            sched = assignment.get("kernel.scheduler", base_sched)
            own = scheduler_params(str(sched))
            given = {p: v for p, v in scoped.items() if p in own}
            if given:
                params = dict(entry.pop("kernel.scheduler_params", None) or {})
                params.update(
                    {
                        k.removeprefix(SCOPED + "."): v
                        for k, v in list(entry.items())
                        if k.startswith(SCOPED + ".")
                    }
                )
                for k in [k for k in entry if k.startswith(SCOPED + ".")]:
                    del entry[k]
                params.update(given)
                entry["kernel.scheduler_params"] = params
            explicit.append(entry)
        if not any(scheduler_params(str(s)) & set(scoped) for s in _schedulers(explicit, data)):
            raise SpecError(
                f"--vary {', '.join(SCOPED + '.' + p for p in scoped)}: no scheduler of the "
                f"variants run ({', '.join(keep)}) declares it"
            )
        data["matrix"] = {}
        data["variants"] = explicit
    return data, profiles


def _schedulers(explicit: list[dict], data: dict) -> set[str]:
    base = (data.get("kernel") or {}).get("scheduler", "default")
    return {str(e.get("kernel.scheduler", base)) for e in explicit}


__all__ = [
    "CENTRE",
    "Axis",
    "Point",
    "SweepSpec",
    "apply_point",
    "get_key",
    "scheduler_params",
    "set_key",
    "split_key",
    "words",
]
