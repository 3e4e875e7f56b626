"""Quantities in the YAML: rates, durations, sizes, percentages.

Every parser accepts a plain number in the base unit (Mbit/s, ms, bytes,
percent) or a string with a unit, and raises ValueError naming what is
allowed.  ``Rate``, ``Duration``, ``Size`` and ``Percent`` are the types
the language's fields use: numbers in the base unit that pydantic parses
from text when the host validates a file.  pydantic is not imported here
(the guest imports these types with the link shapes and never validates).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

_NUM = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    **dict.fromkeys(("bit", "bps"), 1e-6),
    **dict.fromkeys(("kbit", "kbps", "kbit/s"), 1e-3),
    **dict.fromkeys(("mbit", "mbps", "mbit/s"), 1.0),
    **dict.fromkeys(("gbit", "gbps", "gbit/s"), 1e3),
}
_TIME_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "min": 60e3}
_SIZE_UNITS = {
    **dict.fromkeys(("b", ""), 1),
    **{"kb": 1000, "mb": 1000**2, "gb": 1000**3},
    **{"kib": 1024, "mib": 1024**2, "gib": 1024**3},
    **{"k": 1024, "m": 1024**2, "g": 1024**3},
}


def _split(value, what: str, units: dict, example: str) -> tuple[float, str | None]:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number or a string like {example!r}, not a boolean")
    if isinstance(value, int | float):
        return float(value), None
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a number or a string like {example!r}")
    m = re.fullmatch(_NUM + r"\s*([A-Za-z/]*)", value.strip())
    if not m or m.group(2).lower() not in units:
        allowed = ", ".join(u for u in units if u)
        raise ValueError(
            f"cannot read {what} {value!r}: use a number with one of: {allowed} (e.g. {example!r})"
        )
    return float(m.group(1)), m.group(2).lower()


def rate_mbit(value) -> float:
    """``"25mbit"``, ``"500 kbit/s"``, ``25`` (Mbit/s) -> Mbit/s."""
    number, unit = _split(value, "rate", _RATE_UNITS, "25mbit")
    result = number if unit is None else number * _RATE_UNITS[unit]
    if result <= 0:
        raise ValueError(f"rate must be positive, got {value!r}")
    return result


def duration_ms(value) -> float:
    """``"12.5ms"``, ``"90s"``, ``12.5`` (ms) -> milliseconds."""
    number, unit = _split(value, "duration", _TIME_UNITS, "12.5ms")
    result = number if unit is None else number * _TIME_UNITS[unit]
    if result < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    return result


def size_bytes(value) -> int:
    """``"64MiB"``, ``"1024KiB"``, ``65536`` (bytes) -> bytes."""
    number, unit = _split(value, "size", _SIZE_UNITS, "64MiB")
    result = int(number if unit is None else number * _SIZE_UNITS[unit])
    if result < 0:
        raise ValueError(f"size must not be negative, got {value!r}")
    return result


def percent(value) -> float:
    """``"1%"``, ``1`` -> 1.0 (percent)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        value = value.strip()[:-1]
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"cannot read percentage {value!r}: use a number like 1 or '1%'") from None
    if not 0 <= result <= 100:
        raise ValueError(f"percentage must be between 0 and 100, got {value!r}")
    return result


def fraction(value) -> float:
    """``"1%"``, ``"0.5 %"``, ``0.01`` -> 0.01 (a share between 0 and 1).

    Unlike a link's ``loss`` (where a bare number is percent), a bare number
    here is the share itself, so a bare number of 1 or more is refused: it
    is almost surely a percentage written without its ``%``."""
    if isinstance(value, bool):
        raise ValueError("expected a fraction (0.01) or a percentage ('1%'), not a boolean")
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        try:
            result = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            raise ValueError(
                f"cannot read {value!r}: use a fraction (0.01) or a percentage ('1%')"
            ) from None
        if not text.endswith("%") and result >= 1:
            raise ValueError(
                f"{value!r} as a fraction is {result:g} x 100 %: did you mean '{text}%'?"
            )
    elif isinstance(value, int | float):
        result = float(value)
        if result >= 1:
            raise ValueError(
                f"{value!r} as a fraction is {result:g} x 100 %: write a percentage ('{value}%') "
                "or a fraction below 1 (0.01)"
            )
    else:
        raise ValueError("expected a fraction (0.01) or a percentage ('1%')")
    if not 0 <= result <= 1:
        raise ValueError(f"must be between 0 and 100 %, got {value!r}")
    return result


class Parsed:
    """Annotation metadata: parse the raw value with ``parse`` before
    pydantic checks its type.  pydantic finds ``__get_pydantic_core_schema__``
    when the host validates; nothing is imported until then."""

    def __init__(self, parse):
        self.parse = parse

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(self.parse, handler(source))


Rate = Annotated[float, Parsed(rate_mbit)]
Duration = Annotated[float, Parsed(duration_ms)]
Size = Annotated[int, Parsed(size_bytes)]
Percent = Annotated[float, Parsed(percent)]
Fraction = Annotated[float, Parsed(fraction)]
