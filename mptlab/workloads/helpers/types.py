"""Quantities in workload parameters: ``mptlab.spec.models``'s units, with a
clear message for negative values written with a unit (``-1mbit``), which
the unit parser would only call unreadable."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

from mptlab.spec import units


def _signed(parse, what: str, message: str):
    def check(value):
        if isinstance(value, str) and value.strip().startswith("-"):
            raise ValueError(f"{what} {message}, got {value!r}")
        return parse(value)

    return check


Rate = Annotated[float, BeforeValidator(_signed(units.rate_mbit, "rate", "must be positive"))]
Duration = Annotated[
    float, BeforeValidator(_signed(units.duration_ms, "duration", "must not be negative"))
]
Size = Annotated[int, BeforeValidator(_signed(units.size_bytes, "size", "must not be negative"))]
