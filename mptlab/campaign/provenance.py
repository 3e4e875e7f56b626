"""What a campaign records about the machine that ran it: the tool versions
the guests run (the guest's root is the host's /) and mptlab's commit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .. import home


def host_tools() -> dict[str, str]:
    """Versions of the tools the guests run."""

    def version(*cmd: str) -> str:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unavailable"

    return {
        "iperf3": version("iperf3", "--version"),
        "iproute2": version("ip", "-V"),
        "tcpdump": version("tcpdump", "--version"),
        "mptcpize": version("dpkg-query", "-W", "-f", "${Version}", "mptcpize"),
        "d-itg": version("dpkg-query", "-W", "-f", "${Version}", "d-itg"),
        "nghttp2": version("dpkg-query", "-W", "-f", "${Version}", "nghttp2-client"),
        "ffmpeg": version("dpkg-query", "-W", "-f", "${Version}", "ffmpeg"),
        "python": sys.version.split()[0],
    }


def git_commit() -> str:
    """The checkout's commit, ``-dirty`` if the tree has changes: the
    checkout ``$MPTLAB_HOME`` names if it is one (its modules, patches and
    experiments are what the runs used: ``mptlab bisect`` and nightly runs
    of another checkout set it), else the one this package runs from.
    Outside a checkout (an installed package, the Docker image, which has no
    .git) ``$MPTLAB_GIT_COMMIT`` if set (the image sets it at build time),
    else ``unknown``."""
    env = os.environ.get("MPTLAB_HOME")
    root = Path(env) if env and (Path(env) / ".git").exists() else home.checkout()
    if root is None or not (root / ".git").exists():
        return os.environ.get("MPTLAB_GIT_COMMIT") or "unknown"
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
