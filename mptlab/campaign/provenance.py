"""What a campaign records about the machine that ran it: the tool versions
the guests run (the guest's root is the host's /), mptlab's commit, and the
guest's inputs outside its spec as hashes (``guest_inputs``)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from .. import home
from .kernel import KernelBuild


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


# ------------------------------------------------------------- guest inputs
# What a virtual-time guest reads besides its spec (issue 44).  Its root is
# the host's live root through hostfs, so besides the checkout's code and the
# kernel, the machine's packages and a few of its files are inputs: a run is
# a deterministic but chaotic function of all of them (one failed lookup is
# 1 us of guest time under inf-cpu; the host's /run/mount moved a seeded CBR
# run's first sample by 6 us and its goodput by 0.2 %, docs/notebook.md).

# The Debian packages whose programs and libraries the guest runs: the
# workloads' tools, init.sh's shell, mount and coreutils (libmount probed the
# host's /run/mount), the C library and loader, OVS for the ovs switch type.
# The venv's interpreter need not be Debian's (pyenv here): it is hashed
# itself (``_python``).
GUEST_PACKAGES = (
    "bash",
    "coreutils",
    "d-itg",
    "ffmpeg",
    "iperf3",
    "iproute2",
    "kmod",
    "libc6",
    "libmount1",
    "mount",
    "mptcpize",
    "nghttp2-client",
    "openvswitch-switch",
    "procps",
    "python3",
    "socat",
    "tcpdump",
    "util-linux",
)
# Host paths the guest looks up (strace of UML, docs/notebook.md 2026-11-28):
# the loader's files, libselinux's config, iproute2's netns dir, the first
# dirs of the guest's PATH (init.sh: /usr/local/sbin:/usr/local/bin first, so
# a new program there answers a lookup that failed before), and the locales
# (LANG=C.UTF-8).  A file counts by its content, a dir by its names.
GUEST_PATHS = (
    "/etc/ld.so.preload",
    "/etc/ld.so.cache",
    "/etc/selinux/config",
    "/etc/netns",
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/lib/locale",
    "/usr/lib/locale/locale-archive",
)
# The package's files the guest runs or that shape what it sees: the agent,
# workloads and their helpers, the spec types they import, the run dir
# contract, and the host side that writes the guest's command line and view
# of the host (boot.py, launch.py: the /run fix of issue 44 is one).
GUEST_CODE = (
    "__init__.py",
    "home.py",
    "rundir.py",
    "guest",
    "workloads",
    "spec",
    "campaign/boot.py",
    "campaign/launch.py",
)
GUEST_CODE_SUFFIXES = (".py", ".c", ".sh")
DIGEST_CHARS = 16


def _digest(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


@functools.lru_cache(maxsize=32)
def _file_sha(path: str, size: int, mtime_ns: int) -> str:
    """A file's sha256 (prefix), once per process and version of the file:
    the kernel binary is 121 MB, 0.5 s to hash, and a test process starts
    many campaigns."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:DIGEST_CHARS]


def file_sha(path: Path) -> str:
    """``path``'s content hash, ``absent`` if there is no such file."""
    try:
        st = path.stat()
        return _file_sha(str(path), st.st_size, st.st_mtime_ns)
    except OSError:
        return "absent"


def _path_state(path: Path) -> str:
    """A host path as the guest finds it: absent, a dir's names, a file's content."""
    if path.is_dir():
        try:
            return "dir " + _digest(sorted(os.listdir(path)))
        except OSError as exc:
            return f"unreadable ({exc.strerror})"
    return file_sha(path)


def _packages() -> dict[str, str]:
    """{package: version}, ``not installed`` for those dpkg does not know."""
    out = dict.fromkeys(GUEST_PACKAGES, "not installed")
    try:
        p = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"]
            + list(GUEST_PACKAGES),
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return dict.fromkeys(GUEST_PACKAGES, "unavailable")  # not a Debian host
    for line in p.stdout.splitlines():
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        if name in out and status.startswith("ii"):
            out[name] = version
    return out


def _python() -> str:
    """The interpreter the guest runs (``sys.executable``): its version and binary."""
    real = Path(os.path.realpath(sys.executable))
    return f"{sys.version.split()[0]} {file_sha(real)}"


def _guest_code() -> str:
    """One hash of the package's files the guest runs (``GUEST_CODE``)."""
    package = Path(__file__).resolve().parent.parent
    files: dict[str, str] = {}
    for entry in GUEST_CODE:
        root = package / entry
        paths = sorted(root.rglob("*")) if root.is_dir() else [root]
        for p in paths:
            if p.suffix in GUEST_CODE_SUFFIXES and "__pycache__" not in p.parts and p.is_file():
                files[str(p.relative_to(package))] = file_sha(p)
    return _digest(files)


def _helpers() -> dict[str, str]:
    """The C helpers the host builds for the guest, by their binaries' hash
    (the cache keys them by source; the binary is also the compiler's).
    Built here if they are not yet: the first boot would build them anyway."""
    from ..guest import sampler
    from ..workloads.helpers import bgtraffic, native, spin

    cache = home.cache_dir()
    builds = {
        "bgtraffic": lambda: bgtraffic.build(cache),
        "spin_sleep": lambda: spin.build(cache),
        "sampler": lambda: native.build(sampler.SOURCE, cache),
    }
    out = {}
    for name, build in builds.items():
        try:
            out[name] = file_sha(build())
        except (RuntimeError, OSError):
            out[name] = "unavailable"  # no C compiler: the guest falls back (boot.py)
    return out


def _modules(modules_dir: Path) -> str:
    sums = modules_dir / "SHA256SUMS"
    if sums.exists():
        return file_sha(sums)
    return _digest({p.name: file_sha(p) for p in sorted(modules_dir.glob("*.ko"))})


def host_inputs() -> dict:
    """The machine's part of ``guest_inputs``: ``packages``, ``python``,
    ``paths`` and their digest ``host``."""
    host = {
        "packages": _packages(),
        "python": _python(),
        "paths": {p: _path_state(Path(p)) for p in GUEST_PATHS},
    }
    return {**host, "host": _digest(host)}


def guest_inputs(kernel: KernelBuild) -> dict:
    """What a guest reads that is not in its spec.json, as hashes (campaign.json
    and run.json ``guest_inputs``, docs/run-dirs.md).  ``digest`` changes
    whenever any of it does; ``host`` is the machine's part alone (packages,
    interpreter, paths), ``code`` the checkout's (kernel, modules, guest code,
    helper binaries): a comparison of two commits expects ``code`` to differ,
    not ``host`` (``mptlab.nightly``, ``mptlab bisect``)."""
    code = {
        "kernel": {"key": kernel.dir.name, "sha256": file_sha(kernel.linux)},
        "modules": _modules(kernel.modules_dir),
        "guest_code": _guest_code(),
        # no kernel (a unit test's stand-in): no guest will boot, build nothing
        "helpers": _helpers() if kernel.linux.exists() else {},
    }
    host = host_inputs()
    host.pop("host")
    return {
        "digest": _digest({"code": code, "host": host}),
        "host": _digest(host),
        "code": _digest(code),
        **code,
        **host,
    }


def guest_inputs_changes(before: dict | None, after: dict | None) -> list[str]:
    """The host items that differ between two ``guest_inputs`` records, in
    words (``libc6 2.36-9 -> 2.36-10``); empty when either is missing."""
    if not before or not after:
        return []
    out = []
    for group in ("packages", "paths"):
        a, b = before.get(group) or {}, after.get(group) or {}
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{key} {a.get(key, '-')} -> {b.get(key, '-')}")
    if before.get("python") != after.get("python"):
        out.append(f"python {before.get('python')} -> {after.get('python')}")
    return out


def guest_inputs_note(before: str, after: str) -> str:
    """What a comparison across a change of the host's guest inputs says
    (``before``/``after``: the ``host`` digests)."""
    return (
        f"guest inputs changed ({before} -> {after}): "
        "differences may come from the machine, not the code"
    )
