"""Numbers given on the command line, checked where they are parsed.

``mptlab run X --reps 0`` once started the experiment's full campaign (0 read
as "not given") and ``--reps -3`` ran nothing and exited 0: a count that
cannot mean what the user typed is refused by argparse with the option's
name and what is allowed (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole(minimum: int, what: str = "") -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a whole number (allowed: {minimum} or more{what})"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"{value} is too small (allowed: {minimum} or more{what})"
            )
        return value

    parse.__name__ = "whole number"  # argparse's fallback message names the type
    return parse


def fraction(low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type``: a number in (low, high]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low < value <= high:  # also false for NaN
            raise argparse.ArgumentTypeError(f"{value:g} is outside ({low:g}, {high:g}]")
        return value

    parse.__name__ = "number"
    return parse


REPS = whole(1, ", the repetitions of every variant")
JOBS = whole(1, ", guests at once")
SEED = whole(0)
