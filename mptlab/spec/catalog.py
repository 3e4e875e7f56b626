"""Load and check profiles, topologies and experiments; expand experiments into runs.

    cat = Catalog.load()                     # experiments.yaml + topologies/
    runs = cat.expand("blest-3g-wlan")       # one RunSpec per variant and repetition

Errors are SpecError with ``file:line: field: problem``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from .. import workloads as traffic
from ..campaign.kernel import REPO_ROOT
from ..rundir import RunSpec
from .models import DirectionSpec, ExperimentSpec, ProfileSpec, TopologySpec
from .plan import plan, plan_events
from .yamlsrc import Source, SpecError, load

TOPOLOGY_DIR = REPO_ROOT / "topologies"
PROFILES_FILE = TOPOLOGY_DIR / "profiles.yaml"
EXPERIMENTS_FILE = REPO_ROOT / "experiments.yaml"
MODULES_DIR = REPO_ROOT / "kernel" / "modules"


def known_schedulers() -> list[str]:
    """``default`` plus every scheduler module in kernel/modules (mptcp_<name>.c)."""
    names = sorted(p.stem.removeprefix("mptcp_") for p in MODULES_DIR.glob("mptcp_*.c"))
    return ["default", *names]


def _errors(exc: ValidationError, src: Source, prefix: tuple) -> SpecError:
    lines = []
    for err in exc.errors():
        loc = prefix + tuple(err["loc"])
        field_name = ".".join(str(p) for p in loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "literal_error":
            msg = "value not allowed: " + msg
        lines.append(f"{src.where(loc)}: {field_name}: {msg}")
    return SpecError("\n".join(lines))


def _validate(model, data, src: Source, prefix: tuple):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _errors(exc, src, prefix) from None


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _set_dotted(data: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise KeyError(dotted)
    node[parts[-1]] = copy.deepcopy(value)


def _names_a_field(model, parts: list[str]) -> bool:
    """Does the dotted path ``parts`` name a field of the pydantic ``model``?"""
    import typing

    from pydantic import BaseModel

    for i, part in enumerate(parts):
        if model.model_config.get("extra") == "allow":
            return True  # e.g. workload: its module checks the fields
        field_info = model.model_fields.get(part)
        if field_info is None:
            return False
        ann = field_info.annotation
        candidates = [ann, *typing.get_args(ann)]
        sub = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        if sub is None:
            is_map = any(typing.get_origin(c) is dict or c is dict for c in candidates)
            return i == len(parts) - 1 or (is_map and i == len(parts) - 2)
        model = sub
    return True


def _short(value) -> str:
    if isinstance(value, list):
        return "+".join(_short(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


@dataclass
class Catalog:
    profiles: dict[str, ProfileSpec] = field(default_factory=dict)
    topologies: dict[str, TopologySpec] = field(default_factory=dict)
    experiments: dict[str, dict] = field(default_factory=dict)  # raw, before extends
    sources: dict[str, tuple[Source, tuple]] = field(default_factory=dict)

    # ------------------------------------------------------------ load
    @classmethod
    def load(
        cls, experiments_file: Path | None = None, topology_dir: Path | None = None
    ) -> Catalog:
        cat = cls()
        topology_dir = Path(topology_dir or TOPOLOGY_DIR)
        cat._load_profiles(topology_dir / "profiles.yaml")
        for path in sorted(topology_dir.glob("*.yaml")):
            if path.name != "profiles.yaml":
                cat._load_topology(path)
        files = [Path(experiments_file or EXPERIMENTS_FILE)]
        if experiments_file and Path(experiments_file).resolve() != EXPERIMENTS_FILE.resolve():
            # a campaign file may extend the named experiments
            files.insert(0, EXPERIMENTS_FILE)
        for path in files:
            if path.exists() or path == files[-1]:
                cat._load_experiments(path)
        return cat

    def _load_profiles(self, path: Path) -> None:
        src = load(path)
        if not isinstance(src.data, dict) or not isinstance(src.data.get("profiles"), dict):
            raise SpecError(f"{src.where(())}: expected a mapping 'profiles: {{name: ...}}'")
        for name, data in src.data["profiles"].items():
            self.profiles[name] = _validate(ProfileSpec, data, src, ("profiles", name))

    def _load_topology(self, path: Path) -> None:
        src = load(path)
        if not isinstance(src.data, dict):
            raise SpecError(f"{src.where(())}: a topology file is a mapping")
        topo = _validate(TopologySpec, src.data, src, ())
        for i, link in enumerate(topo.links):
            shape = link.shape
            if shape is None or shape in self.profiles:
                continue
            if (
                shape.startswith("path")
                and shape[4:].isdigit()
                and 1 <= int(shape[4:]) <= topo.paths
            ):
                continue
            raise SpecError(
                f"{src.where(('links', i))}: links.{i}.shape: unknown profile {shape!r}; "
                f"allowed: path1..path{topo.paths} or one of {sorted(self.profiles)}"
            )
        self.topologies[path.stem] = topo

    def _load_experiments(self, path: Path) -> None:
        src = load(path)
        data = src.data
        if not isinstance(data, dict) or not isinstance(data.get("experiments"), dict):
            raise SpecError(f"{src.where(())}: expected a mapping 'experiments: {{name: ...}}'")
        unknown = set(data) - {"experiments", "defaults", "profiles"}
        if unknown:
            key = sorted(unknown)[0]
            raise SpecError(
                f"{src.where((key,))}: {key}: unknown top-level key; "
                "allowed: experiments, defaults, profiles"
            )
        for name, prof in (data.get("profiles") or {}).items():
            # a campaign file may add its own link profiles
            self.profiles[name] = _validate(ProfileSpec, prof, src, ("profiles", name))
        defaults = data.get("defaults") or {}
        for name, exp in data["experiments"].items():
            if not isinstance(exp, dict):
                raise SpecError(
                    f"{src.where(('experiments', name))}: experiments.{name}: must be a mapping"
                )
            self.experiments[name] = _deep_merge(defaults, exp) if "extends" not in exp else exp
            self.sources[name] = (src, ("experiments", name))

    # --------------------------------------------------------- resolve
    def names(self) -> list[str]:
        return list(self.experiments)

    def raw(self, name: str, _seen: tuple = ()) -> dict:
        """The experiment's mapping with ``extends`` applied (matrix not expanded)."""
        if name not in self.experiments:
            raise SpecError(
                f"no experiment named {name!r}; known: {', '.join(self.names()) or 'none'}"
            )
        if name in _seen:
            raise SpecError(
                f"experiments extend each other in a cycle: {' -> '.join(_seen + (name,))}"
            )
        data = self.experiments[name]
        parent = data.get("extends")
        if parent is None:
            return copy.deepcopy(data)
        if parent not in self.experiments:
            src, prefix = self.sources[name]
            raise SpecError(
                f"{src.where(prefix + ('extends',))}: {'.'.join(prefix)}.extends: "
                f"unknown experiment {parent!r}"
            )
        own = {k: v for k, v in data.items() if k != "extends"}
        merged = _deep_merge(self.raw(parent, _seen + (name,)), own)
        if "matrix" in own:  # a matrix is replaced as a whole, not merged key by key
            merged["matrix"] = copy.deepcopy(own["matrix"])
        return merged

    def spec(self, name: str) -> ExperimentSpec:
        """The experiment before matrix expansion, validated."""
        src, prefix = self.sources.get(name, (None, ()))
        if src is None:
            self.raw(name)  # raises the "no experiment" error
        exp = _validate(ExperimentSpec, self.raw(name), src, prefix)
        self._check_references(exp, src, prefix)
        return exp

    def _check_references(
        self, exp: ExperimentSpec, src: Source, prefix: tuple, variant: str = ""
    ) -> None:
        def fail(loc: tuple, msg: str):
            where = src.where(prefix + loc)
            field_name = ".".join(str(p) for p in prefix + loc)
            suffix = f" (in variant {variant})" if variant else ""
            raise SpecError(f"{where}: {field_name}: {msg}{suffix}")

        if exp.topology not in self.topologies:
            fail(
                ("topology",),
                f"unknown topology {exp.topology!r}; allowed: {', '.join(sorted(self.topologies))}",
            )
        topo = self.topologies[exp.topology]
        if len(exp.paths) != topo.paths:
            fail(
                ("paths",),
                f"topology {exp.topology!r} has {topo.paths} path(s), {len(exp.paths)} profile(s) given",
            )
        for i, profile in enumerate(exp.paths):
            if profile not in self.profiles:
                fail(
                    ("paths", i),
                    f"unknown link profile {profile!r}; allowed: {', '.join(sorted(self.profiles))}",
                )
        schedulers = known_schedulers()
        if exp.kernel.scheduler not in schedulers:
            fail(
                ("kernel", "scheduler"),
                f"unknown scheduler {exp.kernel.scheduler!r}; allowed: {', '.join(schedulers)}",
            )
        for i, event in enumerate(exp.events):
            if event.profile and event.profile not in self.profiles:
                allowed = ", ".join(sorted(self.profiles))
                fail(
                    ("events", i, "profile"),
                    f"unknown link profile {event.profile!r}; allowed: {allowed}",
                )
            try:
                DirectionSpec.model_validate({**DirectionSpec().model_dump(), **event.set})
            except ValidationError as exc:
                raise _errors(exc, src, prefix + ("events", i, "set")) from None
            slot = event.link
            if (
                slot.startswith("path")
                and slot[4:].isdigit()
                and not 1 <= int(slot[4:]) <= topo.paths
            ):
                fail(
                    ("events", i, "link"), f"topology {exp.topology!r} has path1..path{topo.paths}"
                )
        if exp.kernel.tcp_path > topo.paths:
            fail(("kernel", "tcp_path"), f"must be between 1 and {topo.paths}")
        try:
            workload = traffic.load(exp.workload.type)
        except ValueError as exc:
            fail(("workload", "type"), str(exc))
        params = {k: v for k, v in exp.workload.model_dump().items() if k != "type"}
        try:
            workload.Params.model_validate(params)
        except ValidationError as exc:
            raise _errors(exc, src, prefix + ("workload",)) from None
        if exp.background:
            from ..workloads import background

            for i, flow in enumerate(exp.background):
                try:
                    background.Params.model_validate(flow)
                except ValidationError as exc:
                    raise _errors(exc, src, prefix + ("background", i)) from None

    def variants(self, name: str) -> list[tuple[str, dict]]:
        """(variant name, {dotted key: value}) for the matrix cross product, then ``variants``."""
        exp = self.spec(name)
        out = []
        keys = list(exp.matrix)
        for combo in itertools.product(*(exp.matrix[k] for k in keys)):
            assignment = dict(zip(keys, combo, strict=True))
            label = ",".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in assignment.items())
            out.append((label or "base", assignment))
        for _i, extra in enumerate(exp.variants):
            extra = dict(extra)
            label = extra.pop("name", None) or ",".join(
                f"{k.split('.')[-1]}={_short(v)}" for k, v in extra.items()
            )
            out.append((label, extra))
        names = [n for n, _ in out]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            src, prefix = self.sources[name]
            raise SpecError(
                f"{src.where(prefix + ('variants',))}: variant names repeat: {sorted(dup)}"
            )
        return out

    def expand(
        self,
        name: str,
        repetitions: int | None = None,
        campaign_seed: int = 1,
        quick: bool = False,
    ) -> list[RunSpec]:
        """Every run of the experiment: variants x repetitions, each fully resolved."""
        base = self.raw(name)
        src, prefix = self.sources[name]
        runs = []
        for label, assignment in self.variants(name):
            data = copy.deepcopy(base)
            for key in ("matrix", "variants", "extends"):
                data.pop(key, None)
            for dotted, value in assignment.items():
                try:
                    if not _names_a_field(ExperimentSpec, dotted.split(".")):
                        raise KeyError(dotted)
                    _set_dotted(data, dotted, value)
                except KeyError:
                    raise SpecError(
                        f"{src.where(prefix + ('matrix',))}: matrix key {dotted!r} does not name a field"
                    ) from None
            exp = _validate(ExperimentSpec, data, src, prefix)
            self._check_references(exp, src, prefix, variant=label)
            if quick:
                exp = quicken(exp)
            config = exp.model_dump(mode="json", exclude={"matrix", "variants", "extends"})
            # the workload's fields, normalised by its own model (units -> numbers)
            params = traffic.load(exp.workload.type).Params.model_validate(
                {k: v for k, v in config["workload"].items() if k != "type"}
            )
            config["workload"] = {"type": exp.workload.type, **params.model_dump(mode="json")}
            topo = self.topologies[exp.topology]
            used = set(exp.paths) | {ln.shape for ln in topo.links if ln.shape in self.profiles}
            profiles = {p: self.profiles[p].model_dump(mode="json") for p in sorted(used)}
            net_plan = plan(topo, self.profiles, exp.paths, background=bool(exp.background))
            try:
                plan_events(net_plan, exp.events, self.profiles, exp.paths)
            except (KeyError, ValueError) as exc:
                msg = exc.args[0] if isinstance(exc, KeyError) else str(exc).splitlines()[0]
                where = src.where(prefix + ("events",))
                raise SpecError(f"{where}: {'.'.join(prefix)}.events: {msg}") from None
            net_plan = net_plan.to_json()
            reps = repetitions or exp.repetitions
            for rep in range(reps):
                runs.append(
                    RunSpec(
                        experiment=name,
                        variant=label,
                        variant_keys=assignment,
                        repetition=rep,
                        seed=run_seed(campaign_seed, name, label, rep),
                        config=config,
                        topology=topo.model_dump(mode="json"),
                        profiles=profiles,
                        plan=net_plan,
                    )
                )
        return runs


def run_seed(campaign_seed: int, experiment: str, variant: str, rep: int) -> int:
    """A stable per-run seed (for background traffic, jitter, workload content)."""
    digest = hashlib.sha256(json.dumps([campaign_seed, experiment, variant, rep]).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def quicken(exp: ExperimentSpec) -> ExperimentSpec:
    """A short version of an experiment for a first look: the workload's own
    ``quick()`` (bulk: 1/8 of the bytes or duration), no warm-up, a tighter
    timeout."""
    module = traffic.load(exp.workload.type)
    data = exp.workload.model_dump()
    params = module.Params.model_validate({k: v for k, v in data.items() if k != "type"})
    if hasattr(module, "quick"):
        params = module.Params.model_validate(module.quick(params.model_dump()))
    work = type(exp.workload).model_validate({"type": exp.workload.type, **params.model_dump()})
    return exp.model_copy(
        update={"workload": work, "warmup": 0.0, "timeout": min(exp.timeout, 180_000.0)}
    )
