"""``spin_sleep.so`` (``spin_sleep.c`` beside this file: why, with
measurements): built on the host, used in the guest in front of iperf3.
Under virtual time it keeps select() spins from freezing guest time and
serves repeated clock reads between waits from memory; under either clock it
can set a receive low-water mark on the data sockets (``rcvlowat``).

The host (``mptlab.campaign.boot``) builds it once into the cache and hands
its path to every guest as ``$MPTLAB_SPIN_SLEEP``, and ``$MPTLAB_SPIN_VIRTUAL=1``
to virtual-time guests; in the guest, ``prefix()`` is the command prefix that
adds it to a program's preloads (after ``mptcpize run``, which sets
``LD_PRELOAD`` to its own library).  Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import native

SOURCE = Path(__file__).with_name("spin_sleep.c")
ENV = "MPTLAB_SPIN_SLEEP"  # the library's path
VIRTUAL_ENV = "MPTLAB_SPIN_VIRTUAL"  # "1": the guest runs on virtual time
LOWAT_ENV = "MPTLAB_RCVLOWAT"  # bytes; read by the library


def build(cache: Path) -> Path:
    """The library for this source, built into ``cache/helpers/`` unless it is
    there (``native.build``); ``RuntimeError`` saying why it cannot be."""
    return native.build(SOURCE, cache, shared=True, libs=("-ldl",))


def virtual() -> bool:
    """In the guest: does it run on virtual time (as the host said)?"""
    return os.environ.get(VIRTUAL_ENV) == "1"


def prefix(rcvlowat: int = 0) -> list[str]:
    """In the guest: the command prefix that preloads the library, with a
    receive low-water mark of ``rcvlowat`` bytes on the program's data
    sockets if > 0.  Empty when there is nothing for it to do (real time and
    no low-water mark) or no library (the host could not build it)."""
    if not os.environ.get(ENV) or not (virtual() or rcvlowat > 0):
        return []
    lowat = f"{LOWAT_ENV}={int(rcvlowat)} " if rcvlowat > 0 else ""
    return [
        "sh",
        "-c",
        f'{lowat}LD_PRELOAD="${{LD_PRELOAD:+$LD_PRELOAD }}${ENV}" exec "$@"',
        "sh",
    ]
