"""The shape of one direction of a link: the one definition every layer uses.

A link profile in YAML (``topologies/profiles.yaml``), a link in the plan
(``spec.json``), a link event and a Mininet ``addLink(bw=, delay=, ...)``
all become a ``Shape``; the guest turns it into tc commands
(``mptlab.guest.netlab.shape_commands``).  Units are the language's base
units: Mbit/s, ms (one-way), bytes, percent.

These are plain dataclasses: the guest builds them from JSON without
pydantic (``shape_from_json``); the host validates YAML into them with
pydantic (``mptlab.spec.models``), which the field annotations make parse
units (``"25mbit"``) and the queue shorthand (``100``, ``"1.5 bdp"``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Annotated, Literal

from .units import Duration, Parsed, Percent, Rate, Size

MTU = 1500
ETH_FRAME = MTU + 14
QDISCS = ("droptail", "red", "codel", "fq_codel")
JITTER_DISTRIBUTIONS = ("uniform", "normal", "pareto", "paretonormal")
Qdisc = Literal["droptail", "red", "codel", "fq_codel"]
JitterDistribution = Literal["uniform", "normal", "pareto", "paretonormal"]
_STRICT = {"extra": "forbid"}  # pydantic's config for these dataclasses (a plain dict here)


@dataclass(frozen=True)
class Queue:
    """Bottleneck queue limit: exactly one of packets, bytes or bdp (multiples
    of the link's rate x round-trip delay)."""

    __pydantic_config__ = _STRICT

    packets: int | None = None
    bytes: Size | None = None
    bdp: float | None = None

    def __post_init__(self):
        given = [k for k in ("packets", "bytes", "bdp") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of packets, bytes, bdp (e.g. 100, '64KiB', '1 bdp')")
        if getattr(self, given[0]) <= 0:
            raise ValueError(f"the queue's {given[0]} must be positive")

    def limit_bytes(self, rate_mbit: float, rtt_ms: float) -> int | None:
        if self.bytes is not None:
            return self.bytes
        if self.bdp is not None:
            return max(ETH_FRAME, int(self.bdp * rate_mbit * 1e6 / 8 * rtt_ms / 1e3))
        return None

    def limit_packets(self, rate_mbit: float, rtt_ms: float) -> int:
        """The limit in packets (full-size frames) for disciplines counted in packets."""
        if self.packets is not None:
            return self.packets
        return max(1, math.ceil((self.limit_bytes(rate_mbit, rtt_ms) or 0) / ETH_FRAME))


def queue_shorthand(value):
    """``100`` -> packets, ``"100 packets"``, ``"1.5 bdp"``, ``"64KiB"`` -> the mapping form."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {"packets": value}
    if isinstance(value, str):
        text = value.strip().lower()
        for word, key in (("packets", "packets"), ("packet", "packets"), ("bdp", "bdp")):
            if text.endswith(word):
                number = text[: -len(word)].strip()
                return {key: float(number) if key == "bdp" else int(number)}
        return {"bytes": value}
    return value


@dataclass(frozen=True)
class GilbertElliott:
    """netem's Gilbert-Elliott loss model (percentages): p good->bad, r
    bad->good, h delivery in the bad state, k delivery in the good state.
    netem takes ``gemodel p r 1-h 1-k``."""

    __pydantic_config__ = _STRICT

    p: Percent
    r: Percent
    h: Percent = 0.0
    k: Percent = 100.0


@dataclass(frozen=True)
class Shape:
    """One direction of a link.  ``delay`` is one-way; no ``rate``: no rate
    limit (and no bottleneck queue)."""

    __pydantic_config__ = _STRICT

    rate: Rate | None = None  # Mbit/s
    delay: Duration = 0.0  # ms
    jitter: Duration = 0.0  # ms
    jitter_distribution: JitterDistribution = "normal"
    loss: Percent = 0.0
    gilbert_elliott: GilbertElliott | None = None
    queue: Annotated[Queue, Parsed(queue_shorthand)] = field(
        default_factory=lambda: Queue(packets=1000)
    )
    qdisc: Qdisc = "droptail"


def shape_to_json(shape: Shape | None) -> dict | None:
    return asdict(shape) if shape is not None else None


def shape_from_json(data: dict | None) -> Shape | None:
    """A ``Shape`` from its JSON form (``spec.json``), without validation: the
    host validated it."""
    if data is None:
        return None
    ge = data.get("gilbert_elliott")
    return Shape(
        **{
            **data,
            "queue": Queue(**data["queue"]),
            "gilbert_elliott": GilbertElliott(**ge) if ge else None,
        }
    )


@cache
def _validator():
    from pydantic import TypeAdapter  # the host's: the guest never validates

    return TypeAdapter(Shape)


def shape_with(base: Shape, changes: dict) -> Shape:
    """``base`` with some fields changed (``{rate: 2mbit}``), validated: a
    link event's ``set``, a profile's ``reverse``, Mininet's link options."""
    return _validator().validate_python({**(shape_to_json(base) or {}), **changes})
