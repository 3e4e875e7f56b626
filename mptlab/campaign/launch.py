"""Become a UML guest that cannot outlive its campaign nor write the host.

    python -I launch.py --parent PID --run-dir DIR --scratch DIR [--no-confine] -- LINUX ARGS...

The boot harness (``mptlab.campaign.boot``) starts this file as a script,
as the leader of a new session, and it turns into the UML kernel (exec, same
process: UML's own ``setsid()`` then fails harmlessly and its helper
processes stay in this process group, which the harness kills as a whole).

Before the exec:

1. **Parent death**: ``PR_SET_PDEATHSIG(SIGKILL)``: when the campaign's
   thread that started the guest dies (``kill -9`` of ``mptlab run``), the
   kernel kills UML; UML's own helpers (one process per guest address
   space, the SIGIO thread) set the same on themselves, so the whole guest
   goes.  ``--parent`` closes the race of a parent that died before the
   ``prctl``.
2. **Confinement** (unless ``--no-confine``): a mount namespace of its own
   in which every mount is read-only, no device node can be opened
   (``nodev``; but ``/dev/null``, which UML's console opens) and setuid
   bits do nothing (``nosuid``), except two
   writable places: the run dir (a bind mount of the run dir's inode, so a
   run dir renamed away by a later invocation stays this guest's and the
   path's new owner is out of reach) and ``--scratch``, a fresh tmpfs for
   UML's memory file and umid dir.  Then a user namespace (uid and gid
   mapped to themselves) and a second mount namespace owned by it: copied
   into a less privileged namespace, the read-only flags become locked, so
   even code running as UML itself cannot make them writable again (but
   ``/proc``, made read-only only after that step, which writes
   ``/proc/self/uid_map``).  The
   guest's hostfs reaches the host through this process, hence sees this
   view: ``mount -o remount,rw /`` or a fresh ``mount -t hostfs`` inside the
   guest give a read-only host.

Only the standard library is used (this file runs before anything else and
must not import mptlab: ``-I``, no site).  Linux >= 5.12 (``mount_setattr``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (asm-generic since 5.12)

EXIT_SETUP = 121  # the harness reads the reason from the console log

libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class SetupError(Exception):
    pass


def _check(ret: int, what: str) -> None:
    if ret < 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None):
    def b(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    _check(
        libc.mount(b(source), b(target), b(fstype), ctypes.c_ulong(flags), b(data)),
        f"mount {source or ''} {target}",
    )


def _setattr(path: str, flags: int, attr_set: int = 0, attr_clr: int = 0) -> None:
    attr = MountAttr(attr_set, attr_clr, 0, 0)
    ret = libc.syscall(
        ctypes.c_long(SYS_MOUNT_SETATTR),
        ctypes.c_int(AT_FDCWD),
        path.encode(),
        ctypes.c_uint(flags),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(ret, f"mount_setattr {path}")


def _unshare(flags: int, what: str) -> None:
    _check(libc.unshare(ctypes.c_int(flags)), f"unshare({what})")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _own_user_namespace(uid: int, gid: int) -> None:
    """A user namespace with a mount namespace of its own; uid and gid map to
    themselves, so the files the guest writes belong to the campaign's user."""
    _unshare(CLONE_NEWUSER | CLONE_NEWNS, "user+mount namespace")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


RUN = "/run"


def _cover_run(run_dir: str, scratch: str) -> None:
    """An empty read-only tmpfs over the host's /run, in this view only.

    The guest sees the host's live /run from its first command until
    init.sh mounts a tmpfs of its own there, and that /run changes over a
    machine's life.  libmount (mountpoint and mount in init.sh) looks for
    /run/mount (its utab dir, created on the host by the first `mount` any
    root process runs, and kept until reboot) and /run/systemd; a different
    answer is a different number of failed system calls in the guest, and
    under inf-cpu each one costs 1 us of guest time.  Measured
    (docs/experiments.md, "The guest's clock"): an empty /run/mount on the
    host moved the same seeded CBR run by 6 us at its first sample, gave its
    first subflow another MPTCP token and another goodput (1.00364 vs
    1.00162 Mbit/s).  Nothing of mptlab's lives in /run (the guest's
    memory and umid dir are in --scratch); where the run dir or the scratch
    dir does, /run stays as it is."""
    real = os.path.realpath(RUN)
    if not os.path.isdir(real):
        return
    for path in (run_dir, scratch):
        p = os.path.realpath(path)
        if p == real or p.startswith(real.rstrip("/") + "/"):
            return
    _mount("mptlab-run", real, "tmpfs", MS_RDONLY | MS_NODEV | MS_NOSUID, "mode=0755,size=4k")


def confine(run_dir: str, scratch: str) -> None:
    uid, gid = os.geteuid(), os.getegid()
    # As root a mount namespace is enough; unprivileged, or root without
    # CAP_SYS_ADMIN (some containers), a user namespace grants the right to mount.
    if uid != 0 or libc.unshare(ctypes.c_int(CLONE_NEWNS)) < 0:
        _own_user_namespace(uid, gid)
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing leaks back to the host
    _setattr(
        "/",
        AT_RECURSIVE,
        attr_set=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
    )
    # One device node stays usable: UML's `null` console channel
    # (`con=null`, `con0=null,fd:1`) opens /dev/null; where it could not, the
    # guest's console stayed silent, so a kernel panic was reported as a
    # crash without its message (measured on a fresh Debian 12 machine whose
    # /dev/null is a plain node of the devtmpfs).  A bind mount of that one
    # node, read-only, nosuid, with devices allowed: nothing else of /dev.
    # Best effort: where a parent namespace locked nodev (a user namespace
    # in a container) this fails and the console stays silent, as before.
    try:
        _mount("/dev/null", "/dev/null", None, MS_BIND, None)
        _setattr(
            "/dev/null",
            0,
            attr_set=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
            attr_clr=MOUNT_ATTR_NODEV,
        )
    except SetupError:
        pass
    _cover_run(run_dir, scratch)
    _setattr("/proc", 0, attr_clr=MOUNT_ATTR_RDONLY)  # for the uid_map below; read-only again after
    _mount("mptlab-scratch", scratch, "tmpfs", MS_NODEV | MS_NOSUID, "mode=0700")
    _mount(run_dir, run_dir, None, MS_BIND, None)
    _setattr(run_dir, 0, attr_clr=MOUNT_ATTR_RDONLY)
    # Lock it: in a mount namespace owned by a less privileged user
    # namespace, the flags copied from the more privileged one cannot be
    # cleared and the mounts cannot be taken apart (mount_namespaces(7)).
    _own_user_namespace(uid, gid)
    # /proc too: through a writable /proc/PID/mem the guest's hostfs could
    # write into any process of the same uid (the campaign's, for one).
    _setattr("/proc", 0, attr_set=MOUNT_ATTR_RDONLY)


def main(argv: list[str]) -> int:
    # Before anything else: die with the campaign thread that started us.
    # Measured: kill -9 of `mptlab run` with two guests (10 UML processes)
    # running: none left 0.09 s later (issue 11: before, they ran on with
    # parent 1 and wrote into the resumed campaign's run dirs).
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    args = iter(argv)
    parent = run_dir = scratch = None
    do_confine = True
    command: list[str] = []
    for arg in args:
        if arg == "--parent":
            parent = int(next(args))
        elif arg == "--run-dir":
            run_dir = next(args)
        elif arg == "--scratch":
            scratch = next(args)
        elif arg == "--no-confine":
            do_confine = False
        elif arg == "--":
            command = list(args)
    if not command or parent is None or run_dir is None or scratch is None:
        print(
            "usage: launch.py --parent PID --run-dir DIR --scratch DIR -- CMD...", file=sys.stderr
        )
        return 2
    if os.getppid() != parent:  # the campaign died before the prctl took effect
        return EXIT_SETUP
    env = dict(os.environ)
    if do_confine:
        try:
            confine(run_dir, scratch)
        except (SetupError, OSError) as exc:
            print(f"mptlab-launch: cannot confine the guest: {exc}", file=sys.stderr, flush=True)
            return EXIT_SETUP
        env["TMPDIR"] = scratch  # UML's memory file: on the private tmpfs
    os.execve(command[0], command, env)
    return EXIT_SETUP  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
