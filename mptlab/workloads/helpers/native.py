"""Building the C helpers beside this file on the host, once per source.

The guest's root is the host's ``/``, so a helper built on the host into
the cache runs in every guest; the host hands its path to the guests in an
environment variable (``mptlab.campaign.boot``).  Users: ``spin``
(``spin_sleep.so``, a preload library) and ``bgtraffic`` (the
background-traffic replayer, a program).  Standard library only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path


def build(source: Path, cache: Path, *, shared: bool = False, libs: tuple[str, ...] = ()) -> Path:
    """``source`` compiled into ``cache/helpers/<stem>-<hash>[.so]`` unless it
    is there (keyed by the source's and the flags' hash): a shared library if
    ``shared``, else a program.  ``RuntimeError`` saying why it cannot be."""
    flags = [*(["-shared", "-fPIC"] if shared else []), "-O2", "-Wall"]
    key = hashlib.sha256(source.read_bytes())
    key.update(" ".join([*flags, *libs]).encode())
    name = f"{source.stem}-{key.hexdigest()[:16]}{'.so' if shared else ''}"
    target = cache / "helpers" / name
    if target.exists():
        return target
    what = source.stem + (".so" if shared else "")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError(f"no C compiler (cc) on the host to build {what}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # per process and thread: a campaign boots guests from several threads at once
    tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    proc = subprocess.run(
        [cc, *flags, "-o", str(tmp), str(source), *libs], capture_output=True, text=True
    )
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building {what} failed: {proc.stderr.strip()[-300:]}")
    tmp.replace(target)
    return target
