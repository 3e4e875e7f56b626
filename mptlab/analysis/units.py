"""A metric's unit, a workload's headline metrics, and a value written for a reader.

``unit_of`` and ``headline_metrics`` are the report's only ways to units and
headline lists: the report's tables, its figures' captions and its headline
figure ask them, and they ask the metric registry (``mptlab.spec.metrics``),
where each metric is declared next to the code that produces it.

``human`` writes a value in its unit at a human scale: ``8.8 MB``, not
``8.785e+06`` (what the key-metrics table printed for ``k_ofo_bytes_max``
before).  Sizes are decimal (1 kB = 1000 B): the kernel's and iperf3's byte
counts are plain byte counts, and the papers the experiments reproduce give
their buffer and queue sizes in decimal kB/MB as often as not, so a reader
never has to ask "KiB or kB?".
"""

from __future__ import annotations

import json
import math
import warnings
from numbers import Real
from pathlib import Path

from ..spec import metrics, usercode

DASH = "\u2013"  # en dash: no value (None, NaN, not a number)
GROUP = "\u202f"  # narrow no-break space: digit groups (SI style, never broken over lines)


def headline_metrics(workload: str) -> tuple[str, ...]:
    """The workload's headline metrics, the first one leading (the report's
    headline figure): ``metrics.headline``."""
    return metrics.headline(str(workload))


def declare_user_workloads(root: Path) -> list[str]:
    """Declare the metrics of the workloads of the user's own that the runs
    below ``root`` ran (``command``, ``module:Class``: their units and
    headlines, which a campaign file declares when it is read, not the run
    dirs), from one ``spec.json`` per variant; what could not be declared
    (a module moved away since), also as a warning."""
    seen: set[str] = set()
    problems = []
    root = Path(root)
    # a campaign dir, or a results root holding campaign dirs
    variants = [v for runs in (root / "runs", *root.glob("*/runs")) for v in runs.glob("*/")]
    for variant in sorted(variants):
        spec = next(iter(sorted(variant.glob("*/spec.json"))), None)
        if spec is None:
            continue
        try:
            work = json.loads(spec.read_text())["config"]["workload"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        key = json.dumps(work, sort_keys=True)
        if key in seen or not isinstance(work, dict):
            continue
        seen.add(key)
        if work.get("type") == "command" or ":" in str(work.get("type", "")):
            problem = usercode.declare_from_config(work, str(spec))
            if problem:
                problems.append(problem)
                warnings.warn(problem, RuntimeWarning, stacklevel=2)
    return problems


def unit_of(metric: str) -> str:
    """The unit of ``metric`` as ``human`` takes it ("B", "s", "ms", "Mbit/s",
    "%", "segments", ...; "" for counts and ratios, and for a metric the
    registry does not know): ``metrics.unit``."""
    return metrics.unit(metric)


def _number(value) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    if isinstance(value, Real):
        f = float(value)
    else:
        try:
            f = float(value)
        except (TypeError, ValueError):
            return None
    return f if math.isfinite(f) else None


def _grouped(text: str) -> str:
    """``1234567.5`` -> ``1 234 567.5`` (narrow no-break spaces)."""
    sign = "-" if text.startswith("-") else ""
    whole, dot, frac = text.lstrip("-").partition(".")
    groups: list[str] = []
    while len(whole) > 3:
        whole, groups = whole[:-3], [whole[-3:], *groups]
    return sign + GROUP.join([whole, *groups]) + dot + frac


def _sig(x: float, digits: int = 3) -> str:
    """``digits`` significant digits, never in e-notation and never rounding the
    integer part (1234.5 -> ``1 235``, 0.012345 -> ``0.0123``)."""
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return _grouped(text)


def _count(x: float) -> str:
    return _grouped(f"{x:.0f}") if x == int(x) else _sig(x)


def _bytes(x: float) -> str:
    size = abs(x)
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if size >= scale * 0.9995:  # 999 999 B is 1.0 MB, not 1000 kB
            scaled = x / scale
            text = f"{scaled:.0f}" if abs(scaled) >= 99.95 else f"{scaled:.1f}"
            return f"{_grouped(text)} {prefix}B"
    return f"{_count(x)} B"


def human(value, unit: str = "") -> str:
    """``value`` in ``unit`` at a human scale, for a table cell.

    B: decimal kB/MB/GB with one decimal below 100 (``8.8 MB``, ``512 B``);
    s: seconds, or ms below one second (``0.25`` -> ``250 ms``); ms, Mbit/s and
    other units: three significant digits and the unit; counts ("count",
    "segments", "packets" or no unit) as integers with narrow-space groups
    (``12 345``), three significant digits when not whole (a mean); ratios
    three significant digits, no unit; %: three significant digits and ``%``.
    None, NaN and non-numbers: an en dash."""
    x = _number(value)
    if x is None:
        return DASH
    if unit == "B":
        return _bytes(x)
    if unit == "s":
        if 0 < abs(x) < 1:
            return f"{_sig(x * 1e3)} ms"
        return f"{_sig(x)} s"
    if unit in ("ratio", ""):
        return _count(x) if unit == "" else _sig(x)
    if unit in ("count", "segments", "packets"):
        return _count(x) if unit == "count" else f"{_count(x)} {unit}"
    if unit == "%":
        return f"{_sig(x)} %"
    return f"{_sig(x)} {unit}"
