"""Mininet topologies: a ``mininet.topo.Topo`` subclass as an mptlab topology.

    from mininet.topo import Topo

    class TwoSwitches(Topo):
        def build(self, bw=10):
            client, server = self.addHost("client"), self.addHost("server")
            for i in (1, 2):
                switch = self.addSwitch(f"s{i}")
                self.addLink(client, switch)
                self.addLink(switch, server, bw=bw, delay="10ms", loss=1, max_queue_size=100)

is used from Python (``Experiment(topology=TwoSwitches(), ...)``) or YAML
(``topology: {mininet: "mymodule:TwoSwitches", args: {bw: 20}}``).  Hosts
become network namespaces, switches Linux bridges, links veth pairs, and
``addLink``'s ``bw``, ``delay``, ``jitter``, ``loss``, ``max_queue_size``
(and ``params1``/``params2``, per direction) the link's shape.  mptlab's own
options: ``addLink(..., shape="path1")`` (a path slot the experiment's
``paths`` fill) or ``shape="wlan"`` (a profile); ``addHost(name,
router=True)`` (or ``cls=`` a class named ``...Router``, like Mininet's
``LinuxRouter`` example) for a host that forwards IP; ``addSwitch(name,
cls=OVSBridge)`` (Open vSwitch, MAC learning), ``cls=OVSSwitch`` or
``OVSKernelSwitch`` (Open vSwitch, Mininet's fail mode secure: it forwards
only what ``flows=[...]``, mptlab's option, says), ``failMode=``,
``cls=LinuxBridge`` (``switch_spec``); and optional attributes on the
``Topo``: ``roles`` (as in a YAML topology: ``client``, ``server``,
``background``), ``description``, ``source``, ``switch`` (``"ovs"``: every
switch without a ``cls`` is Open vSwitch) and ``fail_mode``.

Where the semantics differ from Mininet's ``TCLink`` (docs/experiments.md):

- every link is shaped as if it were a ``TCLink`` (Mininet ignores ``bw``
  etc. on a plain ``Link``);
- ``max_queue_size`` is the bottleneck queue (packets waiting for the rate
  limit), not netem's ``limit``, which in Mininet also counts the packets
  in the delay line, so that its queue shrinks as the delay grows;
- ``delay``, ``jitter`` and ``loss`` are per direction, as in Mininet (both
  interfaces get them: RTT = 2 x delay); ``bw`` without ``max_queue_size``
  gets a 1000-packet queue (netem's default, as in Mininet);
- ``use_htb``, ``use_tbf``, ``use_hfsc``, ``speedup`` are ignored (the rate
  is always a tbf); ``enable_red`` makes the queue RED; ``enable_ecn`` is
  refused;
- addresses are mptlab's (a /24 per L2 segment, docs/experiments.md), not
  the ``ip=`` given to ``addHost``; Mininet's controller and ``cpu``
  limits have no counterpart (switches are learning bridges, or Open
  vSwitch with static flows, without STP: loops are refused); a switch
  without ``cls`` is a Linux bridge (Mininet's default is ``OVSKernelSwitch``
  with a controller), unless the Topo says ``switch = "ovs"``;
- links are numbered in Mininet's own order (``Topo.links(sort=True)``), so
  addresses can differ from a YAML topology written link by link; routes
  and shapes are the same (``tests/test_mininet.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from .models import MininetTopology, Profile, TopologySpec, adapter
from .plan import path_slot
from .usercode import search_path

# addLink option -> the shape field it sets (and how the value converts)
SHAPE_OPTIONS = {
    "bw": "rate",
    "delay": "delay",
    "jitter": "jitter",
    "loss": "loss",
    "max_queue_size": "queue",
}
# options that say nothing about the shape here
IGNORED = {
    "node1",
    "node2",
    "port1",
    "port2",
    "key",
    "cls",
    "intfName1",
    "intfName2",
    "addr1",
    "addr2",
    "use_htb",
    "use_tbf",
    "use_hfsc",
    "speedup",
    "r2q",
}
DEBIAN_PACKAGES = (
    Path("/usr/lib/python3/dist-packages"),
    Path("/usr/local/lib/python3/dist-packages"),
)


def import_mininet() -> None:
    """Make ``import mininet`` work: installed in this Python, or Debian's
    ``mininet`` package (only that package is loaded from Debian's path)."""
    with contextlib.suppress(ImportError):
        importlib.import_module("mininet.topo")
        return
    for base in DEBIAN_PACKAGES:
        init = base / "mininet" / "__init__.py"
        if init.is_file():
            spec = importlib.util.spec_from_file_location(
                "mininet", init, submodule_search_locations=[str(init.parent)]
            )
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules["mininet"] = module
            spec.loader.exec_module(module)
            return
    raise ImportError("Mininet is not installed: apt install mininet (or pip install mininet)")


def _shape_fields(options: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in SHAPE_OPTIONS:
            field = SHAPE_OPTIONS[key]
            out[field] = {"packets": int(value)} if field == "queue" else value
        elif key == "enable_red":
            if value:
                out["qdisc"] = "red"
        elif key == "enable_ecn":
            if value:
                raise ValueError(f"{where}: enable_ecn is not supported")
        elif key not in IGNORED:
            allowed = ", ".join([*SHAPE_OPTIONS, "enable_red", "params1", "params2", "shape"])
            raise ValueError(f"{where}: link option {key!r} is not supported; allowed: {allowed}")
    return out


def link_shape(info: dict[str, Any], where: str) -> str | Profile | None:
    """An ``addLink``'s options as a link's ``shape``: a slot or profile name
    (``shape=``), a profile of its own, or None (unshaped)."""
    options = {k: v for k, v in info.items() if k not in ("params1", "params2", "shape")}
    base = _shape_fields(options, where)
    fwd = {**base, **_shape_fields(info.get("params1") or {}, where + " params1")}
    rev = {**base, **_shape_fields(info.get("params2") or {}, where + " params2")}
    if info.get("shape") is not None:
        if fwd or rev:
            raise ValueError(f"{where}: give shape= or bw/delay/loss/..., not both")
        return str(info["shape"])
    if not fwd and not rev:
        return None
    data = dict(fwd)
    if rev != fwd:
        data["reverse"] = rev
    try:
        return adapter(Profile).validate_python(data)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _is_router(options: dict[str, Any]) -> bool:
    cls = options.get("cls")
    return bool(options.get("router")) or getattr(cls, "__name__", "").endswith("Router")


# addSwitch options that say nothing here (Mininet's controller, datapath
# and OpenFlow-version plumbing; STP: loops are refused anyway)
SWITCH_IGNORED = {"dpid", "protocols", "inband", "datapath", "listenPort", "stp", "batch"}


def _class_names(cls: Any) -> list[str]:
    """The names of a class and its bases; ``functools.partial(OVSSwitch, ...)``
    (Mininet's way of giving a class options) is its function's."""
    cls = getattr(cls, "func", cls)
    return [c.__name__ for c in getattr(cls, "__mro__", [type(cls)])]


def switch_spec(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """An ``addSwitch``'s class and options as a switch of the topology
    (``mptlab.spec.models.SwitchSpec``'s fields): ``cls=OVSBridge``: Open
    vSwitch, standalone (MAC learning); ``cls=OVSSwitch``/``OVSKernelSwitch``:
    Open vSwitch with Mininet's default fail mode, secure (it forwards only
    the ``flows=`` given, mptlab runs no controller); ``cls=LinuxBridge``: a
    Linux bridge; no ``cls``: the topology's ``switch``.  ``failMode=`` sets
    the fail mode, ``flows=`` (mptlab's) the static OpenFlow flows."""
    cls = options.get("cls")
    keywords = dict(getattr(cls, "keywords", None) or {})
    opts = {**keywords, **{k: v for k, v in options.items() if k not in ("cls", "isSwitch")}}
    out: dict[str, Any] = {"name": name}
    if cls is not None:
        names = _class_names(cls)
        if "OVSBridge" in names:
            out.update(switch="ovs", fail_mode="standalone")
        elif "OVSSwitch" in names:
            out.update(switch="ovs", fail_mode="secure")
        elif "LinuxBridge" in names:
            out["switch"] = "bridge"
        else:
            raise ValueError(
                f"switch {name}: cls={names[0]} is not supported; allowed: OVSBridge, "
                "OVSSwitch (OVSKernelSwitch), LinuxBridge"
            )
    for key, value in opts.items():
        if key == "failMode":
            out["fail_mode"] = value
        elif key == "flows":
            out["flows"] = list(value)
        elif key not in SWITCH_IGNORED:
            allowed = ", ".join(["cls", "failMode", "flows", *sorted(SWITCH_IGNORED)])
            raise ValueError(f"switch {name}: option {key!r} is not supported; allowed: {allowed}")
    return out


def from_topo(topo: Any, client: str | None = None, server: str | None = None) -> TopologySpec:
    """The topology a Mininet ``Topo`` (an instance) describes."""
    switches = [switch_spec(s, topo.nodeInfo(s)) for s in topo.switches(sort=True)]
    nodes = list(topo.hosts(sort=True))
    routers = [n for n in nodes if _is_router(topo.nodeInfo(n))]
    hosts = [n for n in nodes if n not in routers]
    roles = dict(getattr(topo, "roles", None) or {})
    roles["client"] = client or roles.get("client") or ("client" if "client" in hosts else hosts[0])
    roles["server"] = (
        server or roles.get("server") or ("server" if "server" in hosts else hosts[-1])
    )
    links = []
    slots = 0
    for a, b, key, info in topo.links(sort=True, withKeys=True, withInfo=True):
        shape = link_shape(info, f"link {a}-{b}" + (f" (key {key})" if key != 1 else ""))
        if isinstance(shape, str):
            slots = max(slots, path_slot(shape) or 0)
        links.append({"a": a, "b": b, "shape": shape})
    doc = (type(topo).__doc__ or "").strip().splitlines()
    return TopologySpec.model_validate(
        {
            "description": getattr(topo, "description", None) or (doc[0] if doc else ""),
            "source": getattr(topo, "source", ""),
            "paths": slots,
            "hosts": hosts,
            "routers": routers,
            "switch": getattr(topo, "switch", "bridge"),
            "fail_mode": getattr(topo, "fail_mode", "standalone"),
            "switches": switches,
            "links": links,
            "roles": roles,
        }
    )


def name_of(topo: Any) -> str:
    """How a run names a topology given as a ``Topo`` instance."""
    cls = type(topo)
    return f"mininet:{cls.__module__}:{cls.__qualname__}"


def load(ref: MininetTopology, search: list[Path]) -> TopologySpec:
    """The topology of ``{mininet: "module:Class", args: {...}}``: the class
    imported (``search`` dirs first: the YAML file's, then ``topologies/``)
    and built with ``args``."""
    module_name, sep, class_name = ref.mininet.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError(f"mininet: {ref.mininet!r}: give module:Class, e.g. mytopo:TwoPaths")
    import_mininet()
    with search_path(search):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ValueError(f"mininet: cannot import {module_name!r}: {exc}") from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ValueError(f"mininet: module {module_name!r} has no {class_name!r}")
    try:
        topo = cls(**ref.args)
    except TypeError as exc:
        raise ValueError(f"mininet: {ref.mininet}(**args): {exc}") from None
    return from_topo(topo, ref.client, ref.server)
