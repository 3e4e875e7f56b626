"""Load and check profiles, topologies and experiments; expand experiments into runs.

    cat = Catalog.load()                     # experiments.yaml + topologies/
    runs = cat.expand("blest-3g-wlan")       # one RunSpec per variant and repetition

Experiments come from YAML files (``experiments.yaml``, a campaign file) or
from Python (``Catalog.add``, what ``mptlab.Experiment`` uses); topologies
from ``topologies/*.yaml``, a Mininet ``Topo`` (``mptlab.spec.mininet``) or
Python.  Errors are SpecError with ``file:line: field: problem``.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import subprocess
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from .. import home
from ..rundir import RunSpec, content_key
from . import metrics, mininet, usercode
from .expect import Claim, alternatives, pairs, resolve, short, unknown_columns
from .models import ExperimentSpec, Profile, TopologySpec, adapter
from .plan import path_slot, plan, plan_events
from .seeds import derive_seed
from .shapes import Shape, shape_with
from .workloads import Background, Command, Workload, workload_model
from .yamlsrc import Source, SpecError, load

# A variant's name becomes a run dir's name, which the guest gets on its
# kernel command line (mptlab.campaign.boot checks the whole path).
VARIANT_NAME = re.compile(r"^[A-Za-z0-9_.:,=+@%-]+$")
PYTHON = Path("<python>")  # the "file" of experiments and profiles given from Python
FileKind = Literal["campaign", "topology", "profiles"]
# an experiment that extends another and changes one of these is another
# scenario: it does not inherit the parent's ``expect`` (the paper's claims)
SCENARIO_KEYS = ("topology", "paths", "workload", "background")


def shipped_topologies() -> Path:
    return home.data("topologies")


def shipped_experiments() -> Path:
    return home.data("experiments.yaml")


def known_schedulers() -> list[str]:
    """``default`` plus every scheduler module in kernel/modules: an
    ``mptcp_<name>.c`` that registers a scheduler (the others, e.g. the
    coupled congestion controls, register something else)."""
    modules = home.data("kernel/modules").glob("mptcp_*.c")
    names = [
        p.stem.removeprefix("mptcp_")
        for p in modules
        if "mptcp_register_scheduler(" in p.read_text()
    ]
    return ["default", *sorted(names)]


# Scheduler module parameters that take one of a few words (the modules'
# module_param_cb()s reject anything else at load time, with EINVAL): checked
# here too, so that a typo fails at validation, with file and line, rather
# than when a guest loads the module.
WORD_PARAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "cp": {"mode": ("rad", "cons"), "probing": ("auto", "static", "dynamic")},
    "redundant": {"pace": ("slowest", "fastest")},
    "blest": {"rules": ("paper", "v095")},
}
# the congestion controls that are mptlab's modules (kernel/modules/mptcp_<cc>.c),
# the only ones kernel.congestion_params can reach
MODULE_CCS = ("lia", "olia", "olia_sbd", "balia", "wvegas")


def file_kind(src: Source) -> FileKind:
    """What a YAML file is, from its content: a campaign (``experiments:``),
    a topology (``hosts:`` and ``links:``) or link profiles (``profiles:``)."""
    data = src.data
    if isinstance(data, dict):
        if "experiments" in data:
            return "campaign"
        if "hosts" in data or "links" in data:
            return "topology"
        if "profiles" in data:
            return "profiles"
    raise SpecError(
        f"{src.where(())}: neither a campaign (experiments: ...), a topology (hosts: ..., "
        "links: ...) nor link profiles (profiles: ...)"
    )


def _errors(exc: ValidationError, src: Source, prefix: tuple) -> SpecError:
    lines = []
    for err in exc.errors():
        loc = prefix + tuple(err["loc"])
        field_name = ".".join(str(p) for p in loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            msg = "unknown field"
        elif err["type"] == "literal_error":
            msg = "value not allowed: " + msg
        lines.append(f"{src.where(loc)}: {field_name}: {msg}")
    return SpecError("\n".join(lines))


def _validate(model, data, src: Source, prefix: tuple):
    try:
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return adapter(model).validate_python(data)
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
        if node.get(part) is None:  # an optional mapping left null (kernel.fec): start one
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise KeyError(dotted)
    node[parts[-1]] = copy.deepcopy(value)


def _names_a_field(model, parts: list[str]) -> bool:
    """Does the dotted path ``parts`` name a field of the pydantic ``model``?"""
    for i, part in enumerate(parts):
        if model.model_config.get("extra") == "allow":
            return True  # e.g. workload: its model checks the fields
        field_info = model.model_fields.get(part) or next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )  # YAML names are aliases where Python's differ (kernel.mptbm.lambda)
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


_short = short  # a variant key's value as the variant's name writes it


def merge_experiment(base: dict, own: dict) -> dict:
    """``extends``'s rule (also ``mptlab.Experiment.replace``'s): mappings
    merge key by key, anything else is replaced; a ``matrix`` is replaced
    as a whole, and so is a workload of another type (the parent's
    ``bytes`` or ``direction`` are not an idle workload's fields)."""
    merged = _deep_merge(base, own)
    if "matrix" in own:
        merged["matrix"] = copy.deepcopy(own["matrix"])
    own_workload, base_workload = own.get("workload"), base.get("workload")
    if (
        isinstance(own_workload, dict)
        and isinstance(base_workload, dict)
        and own_workload.get("type", base_workload.get("type")) != base_workload.get("type")
    ):
        merged["workload"] = copy.deepcopy(own_workload)
    return merged


def flow_problem(flow: str) -> str | None:
    """What is wrong with an OpenFlow flow (ovs-ofctl syntax), as ``ovs-ofctl
    parse-flow`` says (the tool the guest adds it with, from the same root);
    None if nothing, or if this host has no Open vSwitch (a machine that only
    submits runs: the guest's ``ovs-ofctl add-flows`` reports a bad flow)."""
    try:
        proc = subprocess.run(
            ["ovs-ofctl", "parse-flow", flow], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return None
    if proc.returncode == 0:
        return None
    err = proc.stderr.strip().splitlines()
    return (err[-1] if err else f"ovs-ofctl exit {proc.returncode}").removeprefix("ovs-ofctl: ")


def _check_rate_limited(net_plan, paths: list[str], where: str, prefix: tuple) -> None:
    """Under virtual time computing takes no guest time, so a path without a
    rate runs as fast as the host's CPU and its numbers mean nothing (an
    unshaped link gave 22 Gbit/s): every path slot needs a rate both ways."""
    for link in net_plan.links:
        slot = path_slot(link.label)
        if slot is None:
            continue
        for direction, shape in (("a_to_b", link.a_to_b), ("b_to_a", link.b_to_a)):
            if shape is None or shape.rate is None:
                profile = paths[slot - 1] if slot <= len(paths) else link.label
                raise SpecError(
                    f"{where}: {'.'.join(prefix)}.paths: path {slot} (profile {profile!r}) has no "
                    f"rate ({direction}): under clock: virtual computing takes no guest time, so "
                    "an unshaped path runs as fast as the host's CPU (22 Gbit/s measured) and its "
                    "numbers mean nothing; give the profile a rate, or set clock: real"
                )


@dataclass
class Catalog:
    profiles: dict[str, Profile] = field(default_factory=dict)
    topologies: dict[str, TopologySpec] = field(default_factory=dict)
    experiments: dict[str, dict] = field(default_factory=dict)  # raw, before extends
    sources: dict[str, tuple[Source, tuple]] = field(default_factory=dict)
    search: list[Path] = field(default_factory=list)  # where Mininet topology modules are found
    # workload classes given from Python (mptlab.Experiment(workload=MyClass)), by reference
    classes: dict[str, type] = field(default_factory=dict)

    # ------------------------------------------------------------ load
    @classmethod
    def load(cls, experiments_file: Path | None = None, topologies: Path | None = None) -> Catalog:
        """The shipped profiles and topologies (or those of ``topologies``), the
        named experiments, and those of ``experiments_file`` (a campaign file,
        whose experiments may extend the named ones)."""
        cat = cls()
        tdir = Path(topologies or shipped_topologies())
        cat.search = [tdir]
        cat.load_profiles(tdir / "profiles.yaml")
        for path in sorted(tdir.glob("*.yaml")):
            if path.name != "profiles.yaml":
                cat.load_topology(path)
        named = shipped_experiments()
        files = [Path(experiments_file or named)]
        if experiments_file and Path(experiments_file).resolve() != named.resolve():
            files.insert(0, named)
        for path in files:
            if path.exists() or path == files[-1]:
                cat.load_campaign(path)
        return cat

    def load_profiles(self, path: Path) -> None:
        src = load(path)
        if not isinstance(src.data, dict) or not isinstance(src.data.get("profiles"), dict):
            raise SpecError(f"{src.where(())}: expected a mapping 'profiles: {{name: ...}}'")
        self.add_profiles(src.data["profiles"], src)

    def add_profiles(self, profiles: dict, src: Source | None = None) -> None:
        """Link profiles by name (``{wlan: {rate: 25mbit, ...}}``)."""
        src = src or Source(PYTHON, profiles, {})
        prefix = ("profiles",) if src.path != PYTHON else ()
        for name, data in profiles.items():
            profile = _validate(Profile, data, src, (*prefix, name))
            try:
                profile.directions()
            except ValidationError as exc:
                raise _errors(exc, src, (*prefix, name, "reverse")) from None
            self.profiles[name] = profile

    def load_topology(self, path: Path) -> TopologySpec:
        src = load(path)
        if not isinstance(src.data, dict):
            raise SpecError(f"{src.where(())}: a topology file is a mapping")
        topo = _validate(TopologySpec, src.data, src, ())
        self._check_topology(topo, src, ())
        self.topologies[path.stem] = topo
        return topo

    def add_topology(self, name: str, topo: TopologySpec) -> None:
        """A topology built in Python (e.g. from a Mininet ``Topo``)."""
        self._check_topology(topo, Source(PYTHON, {}, {}), ("topology",))
        self.topologies[name] = topo

    def _check_topology(self, topo: TopologySpec, src: Source, prefix: tuple) -> None:
        for i, sw in enumerate(topo.switches):
            if (sw.switch or topo.switch) != "ovs" and (sw.flows or sw.fail_mode):
                loc = (*prefix, "switches", i, "flows" if sw.flows else "fail_mode")
                raise SpecError(
                    f"{src.where(loc)}: {'.'.join(map(str, loc))}: only an Open vSwitch switch "
                    f"has flows and a fail mode, {sw.name} is a bridge; allowed: switch: ovs "
                    "(on the topology or the switch)"
                )
            for k, flow in enumerate(sw.flows):
                problem = flow_problem(flow)
                if problem:
                    loc = (*prefix, "switches", i, "flows", k)
                    raise SpecError(
                        f"{src.where(loc)}: {'.'.join(map(str, loc))}: {problem}; allowed: a "
                        "flow in ovs-ofctl add-flow syntax with numbered ports, e.g. "
                        "'in_port=1,actions=output:2' (port N: the switch's N-th link)"
                    )
        for i, link in enumerate(topo.links):
            shape = link.shape
            if not isinstance(shape, str) or shape in self.profiles:
                continue
            slot = path_slot(shape)
            if slot is not None and 1 <= slot <= topo.paths:
                continue
            loc = (*prefix, "links", i)
            raise SpecError(
                f"{src.where(loc)}: {'.'.join(map(str, (*loc, 'shape')))}: unknown profile "
                f"{shape!r}; allowed: path1..path{topo.paths} or one of {sorted(self.profiles)}"
            )

    def load_campaign(self, path: Path) -> list[str]:
        """The experiments (and profiles) of a campaign file; their names."""
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
        self.add_profiles(data.get("profiles") or {}, src)  # a campaign file's own link profiles
        if path.parent.resolve() not in self.search:
            self.search.insert(0, path.parent.resolve())
        defaults = data.get("defaults") or {}
        for name, exp in data["experiments"].items():
            if not isinstance(exp, dict):
                raise SpecError(
                    f"{src.where(('experiments', name))}: experiments.{name}: must be a mapping"
                )
            self.experiments[name] = _deep_merge(defaults, exp) if "extends" not in exp else exp
            self.sources[name] = (src, ("experiments", name))
        return list(data["experiments"])

    def add(self, name: str, experiment: dict, source: Source | None = None) -> None:
        """An experiment given as a mapping (the YAML's form), e.g. from Python;
        ``source``: the file it came from, whose lines errors then name."""
        self.experiments[name] = copy.deepcopy(experiment)
        self.sources[name] = (source or Source(PYTHON, experiment, {}), ("experiments", name))

    # --------------------------------------------------------- resolve
    def names(self, file: Path | None = None) -> list[str]:
        """Every experiment's name, or those of one file."""
        if file is None:
            return list(self.experiments)
        path = Path(file).resolve()
        return [n for n in self.experiments if self.sources[n][0].path.resolve() == path]

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
        base = self.raw(parent, _seen + (name,))
        merged = merge_experiment(base, own)
        if "expect" not in own and any(
            merged.get(k) != base.get(k) for k in SCENARIO_KEYS
        ):  # the paper's numbers belong to the parent's scenario, not this one's
            merged.pop("expect", None)
        return merged

    def spec(self, name: str) -> ExperimentSpec:
        """The experiment before matrix expansion, validated."""
        if name not in self.sources:
            self.raw(name)  # raises the "no experiment" error
        src, prefix = self.sources[name]
        exp = _validate(ExperimentSpec, self.raw(name), src, prefix)
        self._check_references(exp, src, prefix)
        return exp

    def topology(self, exp: ExperimentSpec, src: Source, prefix: tuple) -> TopologySpec:
        """The experiment's topology: a named one, or a Mininet ``Topo``'s."""
        ref = exp.topology
        if isinstance(ref, str):
            if ref not in self.topologies:
                allowed = ", ".join(sorted(self.topologies))
                raise SpecError(
                    f"{src.where((*prefix, 'topology'))}: {'.'.join(prefix)}.topology: "
                    f"unknown topology {ref!r}; allowed: {allowed}"
                )
            return self.topologies[ref]
        key = "mininet:" + json.dumps(ref.model_dump(mode="json"), sort_keys=True)
        if key not in self.topologies:
            try:
                topo = mininet.load(ref, self.search)
            except (ValueError, ImportError) as exc:
                where = src.where((*prefix, "topology"))
                raise SpecError(f"{where}: {'.'.join(prefix)}.topology: {exc}") from None
            self._check_topology(topo, src, (*prefix, "topology"))
            self.topologies[key] = topo
        return self.topologies[key]

    def _check_references(
        self, exp: ExperimentSpec, src: Source, prefix: tuple, variant: str = ""
    ) -> None:
        def fail(loc: tuple, msg: str):
            where = src.where(prefix + loc)
            field_name = ".".join(str(p) for p in prefix + loc)
            suffix = f" (in variant {variant})" if variant else ""
            raise SpecError(f"{where}: {field_name}: {msg}{suffix}")

        topo = self.topology(exp, src, prefix)
        name = exp.topology if isinstance(exp.topology, str) else exp.topology.mininet
        if len(exp.paths) != topo.paths:
            fail(
                ("paths",),
                f"topology {name!r} has {topo.paths} path(s), {len(exp.paths)} profile(s) given",
            )
        for i, profile in enumerate(exp.paths):
            if profile not in self.profiles:
                allowed = ", ".join(sorted(self.profiles))
                fail(("paths", i), f"unknown link profile {profile!r}; allowed: {allowed}")
        schedulers = known_schedulers()
        if exp.kernel.scheduler not in schedulers:
            fail(
                ("kernel", "scheduler"),
                f"unknown scheduler {exp.kernel.scheduler!r}; allowed: {', '.join(schedulers)}",
            )
        words = WORD_PARAMS.get(exp.kernel.scheduler, {})
        for key, value in exp.kernel.scheduler_params.items():
            if key in words and value not in words[key]:
                fail(
                    ("kernel", "scheduler_params", key),
                    f"{value!r} is not a value of {exp.kernel.scheduler}'s {key}; "
                    f"allowed: {', '.join(words[key])}",
                )
        cc = exp.kernel.congestion_control
        if exp.kernel.congestion_params and cc not in MODULE_CCS:
            fail(
                ("kernel", "congestion_params"),
                f"{cc} is built into the kernel and takes no parameters here; "
                f"parameters are for the controls mptlab loads as modules: {', '.join(MODULE_CCS)}",
            )
        for i, event in enumerate(exp.events):
            if event.profile and event.profile not in self.profiles:
                allowed = ", ".join(sorted(self.profiles))
                fail(
                    ("events", i, "profile"),
                    f"unknown link profile {event.profile!r}; allowed: {allowed}",
                )
            try:
                shape_with(Shape(), event.set)
            except ValidationError as exc:
                raise _errors(exc, src, prefix + ("events", i, "set")) from None
            slot = path_slot(event.link)
            if slot is not None and not 1 <= slot <= topo.paths:
                fail(("events", i, "link"), f"topology {name!r} has path1..path{topo.paths}")
        # the TCP baseline's path: a slot, or (no slots) one of the client's interfaces
        paths = topo.paths or sum(topo.roles.client in (ln.a, ln.b) for ln in topo.links)
        if exp.kernel.tcp_path > paths:
            fail(("kernel", "tcp_path"), f"must be between 1 and {paths}")
        self.workload(exp, src, prefix, variant)
        for i, flow in enumerate(exp.background):
            _validate(Background, flow, src, prefix + ("background", i))

    def workload(
        self, exp: ExperimentSpec, src: Source, prefix: tuple, variant: str = ""
    ) -> Workload:
        """The experiment's workload, validated against its type's model: a
        built-in's (``mptlab.spec.workloads``) or a class of the user's own
        (``module:Class``, ``mptlab.spec.usercode``); a ``command`` workload's
        parser resolved and its metrics declared (``mptlab.spec.metrics``)."""
        kind = exp.workload.type
        suffix = f" (in variant {variant})" if variant else ""

        def fail(loc: tuple, msg: str):
            where = src.where(prefix + loc)
            field_name = ".".join(str(p) for p in prefix + loc)
            raise SpecError(f"{where}: {field_name}: {msg}{suffix}")

        try:
            if usercode.is_ref(kind):
                model = usercode.workload_model(kind, self.search, self.classes.get(kind))
            else:
                model = workload_model(kind)
        except ValueError as exc:
            fail(("workload", "type"), str(exc))
        params = {k: v for k, v in exp.workload.model_dump().items() if k != "type"}
        for key in params:
            if key not in model.model_fields:
                allowed = ", ".join(model.model_fields) or "none"
                fail(("workload", key), f"unknown field of workload {kind!r}; allowed: {allowed}")
        workload = _validate(model, params, src, prefix + ("workload",))
        if isinstance(workload, Command):
            home = f"command workload of {'.'.join(map(str, prefix[1:])) or 'an experiment'}"
            home += f" (variant {variant})" if variant else ""
            if workload.parser is not None:
                try:
                    usercode.function(workload.parser, self.search)
                except ValueError as exc:
                    fail(("workload", "parser"), str(exc))
            try:
                names = workload.headline or list(workload.metrics)
                metrics.declare(workload.declared(), home, "command", names)
            except ValueError as exc:
                fail(("workload", "metrics"), str(exc))
        return workload

    def workload_config(self, workload: Workload) -> dict:
        """The run's ``config.workload``: the fields in base units, and the file
        of the user's module it needs (``module_path``), if any."""
        config = workload.to_config()
        if isinstance(workload, Command) and workload.parser is not None:
            config["module_path"] = str(usercode.function(workload.parser, self.search)[1])
        return config

    def claims(self, name: str) -> list[Claim]:
        """The experiment's ``expect`` list, checked against its variants: every
        key of a ``key=value`` entry is a variant key, every plain name a
        variant's name, no entry matches several variants.  A value no variant
        has (a scheduler still to come) is allowed: the claim is "not run".
        Claims inherited through ``extends`` were checked in the parent; where
        this experiment lacks their variants they are "not run".  The metric
        must be a declared one (``mptlab.spec.metrics``): a misspelled metric
        would make a claim no run can ever check."""
        exp = self.spec(name)
        if not exp.expect or "expect" not in self.experiments[name]:
            # none, or inherited: checked where written; a variant this one lacks is "not run"
            return exp.expect
        src, prefix = self.sources[name]
        variants = self.variants(name)
        if any(k.split(".")[0] == "workload" for _, a in variants for k in a):
            # a variant's own command workload or class declares metrics the claims may name
            base = self.raw(name)
            for variant, assignment in variants:
                self._variant(name, base, variant, assignment)
        labels = [label for label, _ in variants]
        keys = sorted({k for _, assignment in variants for k in assignment})
        short_keys = {k.split(".")[-1] for k in keys}
        for i, claim in enumerate(exp.expect):
            for why in unknown_columns(claim.metric):
                loc = (*prefix, "expect", i, "metric")
                raise SpecError(f"{src.where(loc)}: {'.'.join(map(str, loc))}: {why}")
            for j, entry in enumerate(claim.compare):
                loc = (*prefix, "expect", i, "compare", j)
                where = f"{src.where(loc)}: {'.'.join(map(str, loc))}"
                for alt in alternatives(entry):
                    want = pairs(alt)
                    if want is None and alt not in labels:
                        raise SpecError(
                            f"{where}: {alt!r} is not a variant of {name}; variants: "
                            f"{', '.join(labels)} (or key=value of their keys)"
                        )
                    for key, _ in want or []:
                        if key not in keys and key not in short_keys:
                            raise SpecError(
                                f"{where}: {key!r} is not a variant key of {name}; "
                                f"allowed: {', '.join(keys) or '(none)'}"
                            )
                    label, why = resolve(alt, variants)
                    if label is None and "ambiguous" in why:
                        raise SpecError(f"{where}: {why}; name one variant")
        return exp.expect

    def variants(self, name: str) -> list[tuple[str, dict]]:
        """(variant name, {dotted key: value}) for the matrix cross product, then ``variants``."""
        exp = self.spec(name)
        out = []
        keys = list(exp.matrix)
        for combo in itertools.product(*(exp.matrix[k] for k in keys)):
            assignment = dict(zip(keys, combo, strict=True))
            label = ",".join(f"{k.split('.')[-1]}={_short(v)}" for k, v in assignment.items())
            out.append((label or "base", assignment))
        from_matrix = len(out)
        for extra in exp.variants:
            extra = dict(extra)
            label = extra.pop("name", None) or ",".join(
                f"{k.split('.')[-1]}={_short(v)}" for k, v in extra.items()
            )
            out.append((label, extra))
        for i, (label, _) in enumerate(out):
            if not VARIANT_NAME.match(label):
                src, prefix = self.sources[name]
                field = "matrix" if i < from_matrix else "variants"
                raise SpecError(
                    f"{src.where(prefix + (field,))}: variant name {label!r} cannot name a run "
                    "dir: use letters, digits and _ . : , = + @ % - only (a matrix over "
                    "mappings or lists of mappings gives such names: list those as variants "
                    "with a name:, e.g. variants: [{name: w32, kernel.sysctls: {...}}])"
                )
        names = [n for n, _ in out]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            src, prefix = self.sources[name]
            raise SpecError(
                f"{src.where(prefix + ('variants',))}: variant names repeat: {sorted(dup)}"
            )
        return out

    def _variant(self, name: str, base: dict, label: str, assignment: dict) -> ExperimentSpec:
        """The experiment ``base`` (``raw(name)``) with a variant's assignment, checked."""
        src, prefix = self.sources[name]
        data = copy.deepcopy(base)
        for key in ("matrix", "variants", "extends", "expect"):
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
        return exp

    def expand(
        self,
        name: str,
        repetitions: int | None = None,
        campaign_seed: int = 1,
        quick: bool = False,
    ) -> list[RunSpec]:
        """Every run of the experiment: variants x repetitions, each fully resolved.

        ``quick``: a short version for a first look: the workload's own
        ``quick()`` (bulk: 1/8 of the bytes or duration), no warm-up, a
        timeout of at most 180 s."""
        if repetitions is not None and (not isinstance(repetitions, int) or repetitions < 1):
            # 0 once meant "not given" and ran the experiment's full campaign
            raise SpecError(f"{name}: repetitions: {repetitions!r} is not allowed (1 or more)")
        base = self.raw(name)
        src, prefix = self.sources[name]
        self.claims(name)  # checked like every other field, not part of a run
        runs = []
        for label, assignment in self.variants(name):
            exp = self._variant(name, base, label, assignment)
            # by_alias: the YAML's names (kernel.mptbm.lambda, not lambda_)
            config = exp.model_dump(
                mode="json", by_alias=True, exclude={"matrix", "variants", "extends", "expect"}
            )
            # the workload's and the background's fields, normalised (units -> numbers)
            workload = self.workload(exp, src, prefix, label)
            if quick:
                workload = workload.quick()
                config.update(warmup=0.0, timeout=min(exp.timeout, 180_000.0))
            config["workload"] = self.workload_config(workload)
            config["background"] = [
                Background.model_validate(b).resolved().model_dump(mode="json")
                for b in exp.background
            ]
            topo = self.topology(exp, src, prefix)
            used = set(exp.paths) | {
                ln.shape
                for ln in topo.links
                if isinstance(ln.shape, str) and ln.shape in self.profiles
            }
            profiles = {p: self.profiles[p].to_json() for p in sorted(used)}
            net_plan = plan(topo, self.profiles, exp.paths, background=bool(exp.background))
            if exp.clock == "virtual":
                _check_rate_limited(net_plan, exp.paths, src.where(prefix + ("paths",)), prefix)
            try:
                plan_events(net_plan, exp.events, self.profiles, exp.paths)
            except (KeyError, ValueError) as exc:
                msg = exc.args[0] if isinstance(exc, KeyError) else str(exc).splitlines()[0]
                where = src.where(prefix + ("events",))
                raise SpecError(f"{where}: {'.'.join(prefix)}.events: {msg}") from None
            plan_json = net_plan.to_json()
            topo_json = topo.model_dump(mode="json")
            for rep in range(repetitions or exp.repetitions):
                runs.append(
                    RunSpec(
                        experiment=name,
                        variant=label,
                        variant_keys=assignment,
                        repetition=rep,
                        seed=derive_seed(campaign_seed, name, label, rep),
                        config=config,
                        topology=topo_json,
                        profiles=profiles,
                        plan=plan_json,
                        content_key=content_key(config["workload"]),
                    )
                )
        return runs
