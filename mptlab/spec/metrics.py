"""Every metric mptlab produces, with its unit and its better direction: one
registry, filled from the code that produces the values.

    from mptlab.spec import metrics
    metrics.get("k_ofo_bytes_p95")      # Metric("k_ofo_bytes_p{q}", "B", "lower", ...)
    metrics.unit("goodput_mbps")        # "Mbit/s"
    metrics.better("duration_s")        # "lower"
    metrics.headline("bulk")            # ("goodput_mbps", "goodput_cov", ...)
    metrics.close_matches("goodput_mbsp")  # ["goodput_mbps", ...]

A metric is declared once, next to the code that makes its value:

- a workload module (``mptlab.workloads.<type>``) declares ``METRICS`` (what
  its ``run()`` returns; nested dicts flattened with ``_``) and ``HEADLINE``
  (the names the papers report, the report's key metrics);
  ``mptlab.workloads.helpers.common`` declares the ones several workloads
  produce (``goodput_mbps``, the ``delay_*_ms`` family, ...);
- an analysis reader (``mptlab.analysis.readers.<instrument>``) declares the
  columns it derives from the run dir (``k_*``, ``pcap_*``, ``fec_*``,
  ``sbd_*``, ``host_cpu_s``, ...) and the table columns the figures plot
  (``srtt_ms``, ``cwnd``; ``Metric.table``);
- ``mptlab.analysis.compare`` declares ``ok_rate``, which it computes.

This module is the experiment language's layer and may not import those
(they are above it: the architecture's layers), so it collects them by
name, once, on first use: every module of ``PACKAGES`` (found with
``pkgutil``, so a new workload or reader needs no entry here) and the
modules of ``MODULES``.  Adding a per-run scalar metric therefore touches
the workload (or reader) that produces it and nothing else; the registry,
figures' labels, the report's units, ``expect:`` and compare-rule checks
and docs/analysis.md's table (``python -m mptlab.spec.metrics --docs
docs/analysis.md`` regenerates it; a test says when it is stale) follow.  Standard library only, like ``shapes``: the workloads import
``Metric`` in the guest.

A name may be a *family* with one placeholder, ``k_ofo_bytes_p{q}``: it
matches ``k_ofo_bytes_p50``, ``k_ofo_bytes_p95``, ... (the placeholder
stands for letters and digits, no ``_``).  An exact name wins over a family.

Units are short strings a formatter can scale: ``Mbit/s``, ``s``, ``ms``,
``B`` (bytes), ``segments``, ``pkt``, ``1/s``, ``%`` and ``""`` (counts,
ratios, shares in 0..1).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

UNITS = ("Mbit/s", "s", "ms", "B", "segments", "pkt", "1/s", "%", "")
BETTER = ("higher", "lower", None)
# where the declarations live (the module docstring says why by name)
PACKAGES = ("mptlab.workloads", "mptlab.analysis.readers")
MODULES = ("mptlab.workloads.helpers.common", "mptlab.analysis.compare")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_]+)\}")


@dataclass(frozen=True)
class Metric:
    """One metric: ``name`` (or a family pattern with one ``{placeholder}``),
    its ``unit`` (``UNITS``), which direction is ``better`` (``"higher"``,
    ``"lower"`` or None: neither, e.g. a count of objects), what it is, and
    the ``table`` whose column it is (``runs``: a per-run scalar; lists go to
    ``series`` under their name; ``ss``, ``mptcp``, ... a sampled column)."""

    name: str
    unit: str = ""
    better: str | None = None
    description: str = ""
    table: str = "runs"

    def __post_init__(self) -> None:
        holes = _PLACEHOLDER.findall(self.name)
        if len(holes) > 1:
            raise ValueError(f"metric {self.name!r}: a family has one placeholder")
        if self.unit not in UNITS:
            raise ValueError(f"metric {self.name!r}: unit {self.unit!r}; allowed: {UNITS}")
        if self.better not in BETTER:
            raise ValueError(f"metric {self.name!r}: better {self.better!r}; allowed: {BETTER}")

    @property
    def is_family(self) -> bool:
        return "{" in self.name

    def matches(self, name: str) -> bool:
        return name == self.name or (
            self.is_family and _pattern(self.name).fullmatch(name) is not None
        )


@cache
def _pattern(family: str) -> re.Pattern:
    head, _, rest = family.partition("{")
    tail = rest.partition("}")[2]
    return re.compile(re.escape(head) + "[A-Za-z0-9]+" + re.escape(tail))


@dataclass
class _Registry:
    exact: dict[str, Metric]
    families: list[Metric]
    home: dict[str, str]  # metric name -> the module that declares it
    headline: dict[str, tuple[str, ...]]  # workload type -> its headline metrics
    ordered: list[Metric]  # declaration order, for the docs' table
    users: set[str] = field(default_factory=set)  # names declared by the user's code (declare())


def _producers() -> list[str]:
    names = []
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        names += [
            f"{package}.{m.name}"
            for m in pkgutil.iter_modules(pkg.__path__)
            if not m.ispkg and not m.name.startswith("_")
        ]
    return names + list(MODULES)


@cache
def _registry() -> _Registry:
    reg = _Registry({}, [], {}, {}, [])
    for module_name in _producers():
        module = importlib.import_module(module_name)
        for m in getattr(module, "METRICS", ()):
            if m.name in reg.home:
                raise RuntimeError(
                    f"metric {m.name!r} is declared twice: in {reg.home[m.name]} and "
                    f"{module_name} (one home each)"
                )
            reg.home[m.name] = module_name
            reg.ordered.append(m)
            if m.is_family:
                reg.families.append(m)
            else:
                reg.exact[m.name] = m
        if hasattr(module, "HEADLINE"):
            reg.headline[module_name.rsplit(".", 1)[-1]] = tuple(module.HEADLINE)
    for workload, names in reg.headline.items():
        unknown = [n for n in names if _lookup(reg, n) is None]
        if unknown:
            raise RuntimeError(f"{workload}: HEADLINE names undeclared metrics {unknown}")
    return reg


def declare(
    declared: tuple[Metric, ...] | list[Metric],
    home: str,
    workload: str | None = None,
    headline: tuple[str, ...] | list[str] = (),
) -> None:
    """Metrics of code outside mptlab: a workload of the user's own
    (``mptlab.spec.usercode``), so that the registry, the report's units and
    ``expect:`` claims know them as they know mptlab's.  ``home`` names the
    declaring code (``mymod:Ping``, ``command workload of exp``); declaring
    again from the same home replaces its metrics (a campaign file read
    twice).  A name mptlab (or another home) already declares with another
    unit or direction is an error: one name, one meaning.  ``workload``: the
    workload type whose ``headline`` these names are (declared here)."""
    reg = _registry()
    for m in declared:
        if not isinstance(m, Metric):
            raise ValueError(f"{home}: METRICS holds {m!r}, not a Metric(name, unit, better, ...)")
    for m in declared:
        theirs = _lookup(reg, m.name)
        if theirs is None or reg.home[theirs.name] == home:
            continue
        if (theirs.unit, theirs.better, theirs.table) != (m.unit, m.better, m.table):
            raise ValueError(
                f"{home}: metric {m.name!r} is already declared by {reg.home[theirs.name]} "
                f"(unit {theirs.unit!r}, better {theirs.better}): give yours another name"
            )
    mine = {m.name for m in declared}
    # the home's earlier declarations go (re-declared just below)
    for name in [n for n, h in reg.home.items() if h == home and n not in mine]:
        del reg.home[name]
        reg.users.discard(name)
        reg.exact.pop(name, None)
        reg.families[:] = [f for f in reg.families if f.name != name]
        reg.ordered[:] = [o for o in reg.ordered if o.name != name]
    for m in declared:
        if m.name in reg.home and reg.home[m.name] != home:
            continue  # the same metric as mptlab's (same unit and direction): theirs stays
        if m.name in reg.home:
            reg.ordered[:] = [o for o in reg.ordered if o.name != m.name]
            reg.families[:] = [f for f in reg.families if f.name != m.name]
        reg.home[m.name] = home
        reg.users.add(m.name)
        reg.ordered.append(m)
        if m.is_family:
            reg.families.append(m)
        else:
            reg.exact[m.name] = m
    if workload is not None:
        unknown = [n for n in headline if _lookup(reg, n) is None]
        if unknown:
            raise ValueError(f"{home}: HEADLINE names undeclared metrics {unknown}")
        reg.headline[workload] = tuple(headline)


def _lookup(reg: _Registry, name: str) -> Metric | None:
    if name in reg.exact:
        return reg.exact[name]
    return next((m for m in reg.families if m.matches(name)), None)


# ------------------------------------------------------------------ the API
def get(name: str) -> Metric | None:
    """The metric ``name`` (an exact name or a family's member), or None."""
    return _lookup(_registry(), name)


def unit(name: str) -> str:
    """The metric's unit; "" when unknown or unitless."""
    m = get(name)
    return m.unit if m else ""


def better(name: str) -> str | None:
    """``"higher"``, ``"lower"`` or None (unknown, or neither)."""
    m = get(name)
    return m.better if m else None


def headline(workload_type: str) -> tuple[str, ...]:
    """The workload's primary metrics, as the papers report them (() for a
    type mptlab does not know)."""
    return _registry().headline.get(workload_type, ())


def all_metrics() -> list[Metric]:
    """Every declared metric and family, in declaration order."""
    return list(_registry().ordered)


def home(name: str) -> str | None:
    """The module that declares the metric ``name`` (a family's pattern for its members)."""
    m = get(name)
    return _registry().home[m.name] if m else None


def close_matches(name: str, n: int = 3) -> list[str]:
    """Declared names (families as their pattern) that look like ``name``."""
    return difflib.get_close_matches(name, [m.name for m in all_metrics()], n=n, cutoff=0.6)


def unknown(name: str) -> str | None:
    """Why ``name`` is not a metric ("... did you mean ...?"), or None if it is one."""
    if get(name) is not None:
        return None
    near = close_matches(name)
    hint = " (docs/analysis.md lists them)"
    if near:
        hint = f"; did you mean {near[0]}?" + (f" (or {', '.join(near[1:])})" if near[1:] else "")
    return f"{name!r} is not a known metric{hint}"


# ------------------------------------------------------------------ docs
def markdown() -> str:
    """docs/analysis.md's metric table (between its ``metrics`` markers):
    mptlab's own metrics, not those the user's code declared."""
    reg = _registry()
    lines = [
        "| metric | unit | better | table | declared in | what |",
        "|---|---|---|---|---|---|",
    ]
    for m in all_metrics():
        if m.name in reg.users:
            continue
        where = reg.home[m.name].removeprefix("mptlab.")
        desc = " ".join(m.description.split()).replace("|", "\\|")
        lines.append(
            f"| `{m.name}` | {m.unit or '-'} | {m.better or '-'} | {m.table} | `{where}` | {desc} |"
        )
    return "\n".join(lines) + "\n"


DOCS_BEGIN = "<!-- metrics: generated by python -m mptlab.spec.metrics --markdown -->\n"
DOCS_END = "<!-- end of metrics -->"


def update_docs(path: Path) -> bool:
    """Put ``markdown()`` between the markers of ``path`` (docs/analysis.md);
    True if that changed it."""
    text = path.read_text()
    if DOCS_BEGIN not in text or DOCS_END not in text:
        raise ValueError(f"{path}: no metric table markers ({DOCS_BEGIN.strip()} ... {DOCS_END})")
    head, rest = text.split(DOCS_BEGIN, 1)
    new = head + DOCS_BEGIN + markdown() + DOCS_END + rest.split(DOCS_END, 1)[1]
    if new != text:
        path.write_text(new)
    return new != text


def main(argv: list[str]) -> int:
    """``--markdown``: print the table; ``--docs FILE``: update FILE's table."""
    if argv == ["--markdown"]:
        sys.stdout.write(markdown())
        return 0
    if len(argv) == 2 and argv[0] == "--docs":
        changed = update_docs(Path(argv[1]))
        print(f"{argv[1]}: metric table {'updated' if changed else 'up to date'}")
        return 0
    print(
        "usage: python -m mptlab.spec.metrics --markdown | --docs docs/analysis.md", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


__all__ = [
    "Metric",
    "all_metrics",
    "better",
    "close_matches",
    "declare",
    "get",
    "headline",
    "home",
    "markdown",
    "unit",
    "unknown",
]
