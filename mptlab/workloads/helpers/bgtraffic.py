"""``bgtraffic`` (``bgtraffic.c`` beside this file: what and why, with
measurements): the background-traffic replayer, mptlab's default background
generator (``mptlab.workloads.background``).

The host (``mptlab.campaign.boot``) builds it once into the cache and hands
its path to every guest, under both clocks, as ``$MPTLAB_BGTRAFFIC``; in the
guest, ``program()`` is that path.  Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import native

SOURCE = Path(__file__).with_name("bgtraffic.c")
ENV = "MPTLAB_BGTRAFFIC"


def build(cache: Path) -> Path:
    """The program for this source, built into ``cache/helpers/`` unless it is
    there (``native.build``); ``RuntimeError`` saying why it cannot be."""
    return native.build(SOURCE, cache)


def program() -> str:
    """In the guest: the replayer's path (``RuntimeError`` if the host did not
    hand one over)."""
    path = os.environ.get(ENV)
    if not path:
        raise RuntimeError(
            f"no background replayer (${ENV} is not set: the host could not build "
            "mptlab/workloads/helpers/bgtraffic.c, a C compiler missing?); "
            "install cc, or give the background entries generator: d-itg"
        )
    return path
