"""Code of the user's own in an experiment: ``"module:Name"`` references.

A workload type may name a class of the user's module instead of one of
mptlab's (``workload: {type: "mywork:Ping", count: 5}``), and the
``command`` workload's ``parser`` a function (``parser: "mywork:parse"``),
as a topology may name a Mininet ``Topo`` (``mptlab.spec.mininet``).  The
module is imported on the host, from the campaign file's directory, then
``topologies/``, then Python's path (``search``), to check the reference and
the workload's fields there, with the file and line of the YAML in the
error; the run carries the module's file (``config.workload.module_path``)
so that the guest, whose root is the host's ``/`` read-only, imports the same
file (``mptlab.guest.workload.load``).

A workload class (docs/workloads.md, "Your own workloads"):

- its fields are its class annotations (``count: int = 5``; without a
  default, required), checked here as a built-in workload's are (pydantic:
  ``mptlab.spec.units.Duration`` etc. parse units);
- ``METRICS`` (``mptlab.spec.metrics.Metric`` records) and ``HEADLINE``
  declare its metrics (``metrics.declare``), so that the registry, the
  report's units and ``expect:`` claims know them; ``QUICK``: the fields
  ``--quick`` changes;
- the guest makes it with its fields as keyword arguments and calls
  ``run(ctx)`` (``mptlab.workloads.custom.Workload`` gives the lifecycle:
  server, readiness, client, timeout, errors with evidence).
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import create_model

from . import metrics
from .workloads import Workload

REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
# names a workload class may not use for fields: the run's own keys
RESERVED = ("type", "module_path")


def is_ref(value: str) -> bool:
    """Is ``value`` a ``module:Name`` reference (else a built-in's name)?"""
    return ":" in value


@contextlib.contextmanager
def search_path(dirs: list[Path]) -> Iterator[None]:
    """``dirs`` first on ``sys.path`` for the block (a user's module next to
    the YAML that names it); taken off again after it."""
    added = [str(d) for d in dirs if str(d) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for d in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(d)


def resolve(ref: str, search: list[Path]) -> tuple[Any, Path]:
    """The object ``ref`` (``module:Name``) names and its module's file;
    ValueError saying what is wrong and what is allowed."""
    if not REF.match(ref):
        raise ValueError(f"{ref!r}: give module:Name (e.g. mywork:Ping), the module on the path")
    module_name, name = ref.split(":")
    dirs = [Path(d) for d in search]
    with search_path(dirs):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            looked = ", ".join(str(d) for d in dirs) or "(no dirs)"
            raise ValueError(
                f"cannot import module {module_name!r} ({exc}); looked in {looked} and "
                "Python's path: put the .py file next to the campaign file"
            ) from None
        except SyntaxError as exc:
            raise ValueError(
                f"module {module_name!r}: {exc.filename}:{exc.lineno}: {exc.msg}"
            ) from None
        except Exception as exc:  # noqa: BLE001 - the user's module failed to import
            raise ValueError(
                f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}"
            ) from None
    file = getattr(module, "__file__", None)
    if not file:
        raise ValueError(f"module {module_name!r} has no file the guest could import")
    obj = getattr(module, name, None)
    if obj is None:
        has = sorted(n for n, v in vars(module).items() if not n.startswith("_") and callable(v))
        raise ValueError(
            f"module {module_name!r} ({file}) has no {name!r}; it has: {', '.join(has) or 'nothing'}"
        )
    return obj, Path(file).resolve()


def module_file(cls: type) -> Path:
    """The file of the module that defines ``cls`` (a class given from Python)."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        raise ValueError(
            f"{cls.__qualname__} is defined in {cls.__module__!r}, which has no file (a "
            "notebook?): define the workload in a .py file the guest can import"
        )
    return Path(file).resolve()


def ref_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _fields(cls: type) -> dict[str, tuple[Any, Any]]:
    """The class's fields: annotated names, not ClassVars, not ``_private``."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - a bad annotation in the user's class
        raise ValueError(f"{cls.__qualname__}: cannot read its field annotations: {exc}") from None
    out: dict[str, tuple[Any, Any]] = {}
    for name, hint in hints.items():
        if name.startswith("_") or name.isupper() or typing.get_origin(hint) is ClassVar:
            continue
        if name in RESERVED:
            raise ValueError(
                f"{cls.__qualname__}: field {name!r} is reserved ({', '.join(RESERVED)})"
            )
        default = getattr(cls, name, ...)
        inherited = [vars(base).get(name) for base in cls.__mro__[1:]]
        if callable(default) or any(callable(a) or isinstance(a, property) for a in inherited):
            raise ValueError(
                f"{cls.__qualname__}: field {name!r} is also a method of the class: rename the field"
            )
        out[name] = (hint, default)
    return out


def workload_model(ref: str, search: list[Path], cls: type | None = None) -> type[Workload]:
    """The fields model of the workload class ``ref`` (imported from
    ``search``, or ``cls`` itself when given from Python), its metrics
    declared; ValueError naming what is wrong."""
    file = module_file(cls) if cls is not None else None
    if cls is None:
        cls, file = resolve(ref, search)
    if not isinstance(cls, type) or not callable(getattr(cls, "run", None)):
        raise ValueError(
            f"{ref} is not a workload class: a class with run(self, ctx) (subclass "
            "mptlab.workloads.custom.Workload)"
        )
    assert file is not None
    try:
        metrics.declare(
            tuple(getattr(cls, "METRICS", ())),
            home=ref,
            workload=ref,
            headline=tuple(getattr(cls, "HEADLINE", ())),
        )
    except ValueError as exc:
        raise ValueError(f"{ref}: {exc}") from None
    return _model(ref, cls, file)


def _model(ref: str, cls: type, file: Path) -> type[Workload]:
    quick = dict(getattr(cls, "QUICK", {}) or {})
    path = str(file)

    def to_config(self) -> dict:
        return {"type": ref, "module_path": path, **self.model_dump(mode="json")}

    def quick_version(self) -> Workload:
        return self.model_copy(update=quick) if quick else self

    base = type(
        f"{cls.__name__}Base",
        (Workload,),
        {
            "__module__": __name__,
            "__annotations__": {"type": ClassVar[str]},
            "type": ref,
            "to_config": to_config,
            "quick": quick_version,
        },
    )
    model = create_model(  # type: ignore[call-overload]
        f"{cls.__name__}Fields", __base__=base, __doc__=cls.__doc__, **_fields(cls)
    )
    unknown = [k for k in quick if k not in model.model_fields]
    if unknown:
        raise ValueError(f"{ref}: QUICK names no field of it: {unknown}")
    return typing.cast(type[Workload], model)


def function(ref: str, search: list[Path]) -> tuple[Any, Path]:
    """A function ``module:func`` (a ``command`` workload's parser) and its file."""
    func, file = resolve(ref, search)
    if not callable(func) or isinstance(func, type):
        raise ValueError(f"{ref} is not a function (it is {type(func).__name__})")
    return func, file


def declare_from_config(work: dict, where: str = "spec.json") -> str | None:
    """Declare the metrics of a run's workload of the user's own from its
    ``config.workload`` (a fresh process reading run dirs, e.g. the report:
    the units and headline of ``command`` metrics and of a class's
    ``METRICS``).  A class is imported from its ``module_path`` (not a
    script's ``__main__``, which would run it again).  What went wrong, in
    words, or None."""
    from .workloads import Command

    kind = str(work.get("type", ""))
    try:
        if kind == "command":
            fields = {k: v for k, v in work.items() if k not in ("type", "module_path")}
            command = Command.model_validate(fields)
            metrics.declare(
                command.declared(),
                f"command workload of {where}",
                "command",
                command.headline or list(command.metrics),
            )
        elif is_ref(kind) and work.get("module_path") and not kind.startswith("__main__:"):
            path = Path(str(work["module_path"]))
            depth = kind.partition(":")[0].count(".") + (path.name == "__init__.py")
            workload_model(kind, [path.parents[depth]])
    except (ValueError, ImportError) as exc:
        return f"{where}: {kind}: {exc}"
    return None
