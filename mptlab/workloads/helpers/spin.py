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

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("spin_sleep.c")
ENV = "MPTLAB_SPIN_SLEEP"


def build(cache: Path) -> Path:
    """The library for this source, built into ``cache/helpers/`` unless it is
    there (keyed by the source's hash); ``RuntimeError`` saying why it cannot be."""
    source = SOURCE.read_bytes()
    target = cache / "helpers" / f"spin_sleep-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if target.exists():
        return target
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc) on the host to build spin_sleep.so")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
    proc = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(tmp), str(SOURCE), "-ldl"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building spin_sleep.so failed: {proc.stderr.strip()[-300:]}")
    tmp.replace(target)
    return target


def prefix() -> list[str]:
    """In the guest: the command prefix that preloads the library (empty
    when ``$MPTLAB_SPIN_SLEEP`` is not set: real time, or no library)."""
    if not os.environ.get(ENV):
        return []
    return ["sh", "-c", f'LD_PRELOAD="${{LD_PRELOAD:+$LD_PRELOAD }}${ENV}" exec "$@"', "sh"]
