"""``spin_sleep.so`` (``spin_sleep.c`` beside this file: why, with
measurements): built on the host for virtual-time guests, used in the guest
in front of programs that busy-loop on select() (iperf3).

The host (``mptlab.campaign.boot``) builds it once into the cache and hands
its path to every virtual-time guest as ``$MPTLAB_SPIN_SLEEP``; in the guest,
``prefix()`` is the command prefix that adds it to a program's preloads
(after ``mptcpize run``, which sets ``LD_PRELOAD`` to its own library), or
nothing when the guest runs on real time.  Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import native

SOURCE = Path(__file__).with_name("spin_sleep.c")
ENV = "MPTLAB_SPIN_SLEEP"


def build(cache: Path) -> Path:
    """The library for this source, built into ``cache/helpers/`` unless it is
    there (``native.build``); ``RuntimeError`` saying why it cannot be."""
    return native.build(SOURCE, cache, shared=True, libs=("-ldl",))


def prefix() -> list[str]:
    """In the guest: the command prefix that preloads the library (empty
    when ``$MPTLAB_SPIN_SLEEP`` is not set: real time, or no library)."""
    if not os.environ.get(ENV):
        return []
    return ["sh", "-c", f'LD_PRELOAD="${{LD_PRELOAD:+$LD_PRELOAD }}${ENV}" exec "$@"', "sh"]
