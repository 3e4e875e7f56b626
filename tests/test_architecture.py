"""The package's shape, read from its imports: the layers follow the data,
nothing imports upward, no module imports itself through others, and the
guest stays cheap.

    rundir, home                 the contract and where mptlab's files are
    spec                         the experiment language, plans (pure, host)
    guest                        the agent and its services (in UML)
    workloads                    run by the guest
    campaign                     the host runs guests
    analysis                     run dirs -> tables, statistics, reports
    api, nightly, cli, mptlab    composing all of them

An import may go to its own layer or below.  Besides, ``guest`` imports of
``spec`` only the plain data (shapes, plans, units, knobs) and ``analysis`` only
``rundir`` and ``spec``.  Imports under ``if TYPE_CHECKING:`` are types
only and left out; imports inside functions count.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mptlab"
LAYERS = [
    ("mptlab.rundir", "mptlab.home"),
    ("mptlab.spec",),
    ("mptlab.guest",),
    ("mptlab.workloads",),
    ("mptlab.campaign",),
    ("mptlab.analysis",),
    ("mptlab.api", "mptlab.sweeps", "mptlab.nightly", "mptlab.cli", "mptlab"),
]
ONLY = {  # a part: the modules (and packages) of mptlab it may import, besides its own
    "mptlab.guest": (
        "mptlab.rundir",
        "mptlab.spec.shapes",
        "mptlab.spec.plan",
        "mptlab.spec.units",
        "mptlab.spec.knobs",
    ),
    "mptlab.analysis": ("mptlab.rundir", "mptlab.spec"),
}
# the imports by name: the agent's workloads (plugins; the user's own workload classes and
# parsers: spec.usercode), a YAML file's Mininet Topo, the
# package's face (the API's names, imported on first use; it is the top layer), and the
# metric registry, which collects the metrics each workload and analysis reader declares
# next to the code that produces them (they are layers above the language: by name, on
# first use, so that a new metric touches its producer only)
DYNAMIC = {
    "mptlab/guest/workload.py",
    "mptlab/spec/mininet.py",
    "mptlab/spec/usercode.py",
    "mptlab/__init__.py",
    "mptlab/spec/metrics.py",
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The mptlab modules ``path`` imports (resolved to modules that exist)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in modules:  # a name imported from a module
            target = target.rsplit(".", 1)[0] if "." in target else ""
        if target and target != name:
            found.add(target)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mptlab":
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            if prefix.split(".")[0] == "mptlab":
                for alias in node.names:
                    full = f"{prefix}.{alias.name}"
                    add(full if full in modules else prefix)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {name: imports_of(path, modules) for name, path in files.items()}


def layer(module: str) -> int:
    best = None
    for i, parts in enumerate(LAYERS):
        for part in parts:
            if (module == part or module.startswith(part + ".")) and (
                best is None or len(part) > len(best[1])
            ):
                best = (i, part)
    assert best is not None, f"{module} is in no layer"
    return best[0]


def part_of(module: str, parts) -> str | None:
    return next((p for p in parts if module == p or module.startswith(p + ".")), None)


def violations(g: dict[str, set[str]]) -> list[str]:
    """Every upward import and every import a part may not make."""
    out = []
    for src, targets in sorted(g.items()):
        for dst in sorted(targets):
            if layer(dst) > layer(src):
                out.append(f"upward: {src} -> {dst}")
            part = part_of(src, ONLY)
            if part and not part_of(dst, (part, *ONLY[part])):
                out.append(f"{part} may not import {dst}: {src} -> {dst}")
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def test_nothing_imports_upward_and_parts_import_only_what_they_may():
    g = graph()
    assert len(g) > 40 and g["mptlab.guest.agent"]  # the graph was read
    assert violations(g) == []


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_checks_catch_an_upward_import_and_a_cycle():
    g = graph()
    g["mptlab.rundir"] = {"mptlab.spec.catalog"}  # the contract importing the language
    g["mptlab.guest.netlab"] = g["mptlab.guest.netlab"] | {"mptlab.guest.agent"}
    g["mptlab.analysis.stats"] = {"mptlab.campaign.runner"}
    found = violations(g)
    assert "upward: mptlab.rundir -> mptlab.spec.catalog" in found
    assert any("mptlab.analysis may not import mptlab.campaign.runner" in v for v in found)
    assert any({"mptlab.guest.agent", "mptlab.guest.netlab"} <= set(c) for c in cycles(g))


def test_the_only_imports_by_name_are_the_plugin_seams():
    named = sorted(
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*.py")
        if "import_module(" in p.read_text() or "__import__(" in p.read_text()
    )
    assert set(named) <= DYNAMIC, named


@pytest.mark.parametrize(
    "guest_module", ["mptlab.guest.agent", "mptlab.guest.control", "mptlab.workloads.helpers.httpd"]
)
def test_the_guest_imports_no_pydantic_pandas_or_numpy(guest_module):
    # pydantic alone costs ~1 s of host CPU to import in a UML guest
    workloads = ["bulk", "cbr", "blocks", "web", "dash", "live", "idle", "background", "command"]
    workloads += ["custom"]  # what a workload class of the user's own imports
    code = (
        f"import sys, {guest_module}\n"
        + "".join(f"import mptlab.workloads.{w}\n" for w in workloads)
        + "print(sorted(m for m in ('pydantic', 'pandas', 'numpy', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
