"""Open vSwitch switches in the guest: an ``ovsdb-server`` and an
``ovs-vswitchd`` (Debian's, seen through the host's read-only root) in a
switch's network namespace, driving the kernel datapath built into the UML
kernel (CONFIG_OPENVSWITCH=y), with one bridge whose ports are the switch's
interfaces.

One daemon pair per switch namespace.  The kernel datapath is per network
namespace (a datapath's ports must be devices of the namespace of the
ovs-vswitchd that made it), so one pair for all switches would need every
OVS switch's interfaces moved into one shared namespace, a network built
unlike the bridges' one namespace per switch.  What a pair saves would be
small: host CPU of a virtual-clock run with an idle workload of 30 s on
two-path-switched (python -m bench.ovs, one run each): bridges 0.43 s,
one OVS switch 1.30 s, two 1.36 s.  The first pair costs ~0.87 s, almost
all of it once per boot (loading Open vSwitch's binaries and libraries
through hostfs); the second pair, its own start and 30 s of wake-ups, 0.06 s.
Idle 90 s: bridges 1.39 s, two OVS switches 2.16 s: the extra does not grow
with the run, the daemons' wake-ups under the virtual clock cost too little
to see next to the one-time start.

The daemons' database, pid files, sockets and logs live in a directory of
their own on the guest's /run (tmpfs; the root is read-only): the OVS
tools find them through ``OVS_RUNDIR`` & co.  Daemons start only for a
topology that has OVS switches and stop at ``stop()`` (``Net.destroy`` and
the end of a run).

Port numbers: the switch's N-th interface (``<switch>-eth<N-1>``, link
order) is OpenFlow port N (``ofport_request``), so that static flows can
name ports by number and mean the same port at every run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
RUN_ROOT = Path("/run/mptlab-ovs")
FAIL_MODES = ("standalone", "secure")
OVS_CPU_COUNT_AFTER = 10.5  # s of CLOCK_MONOTONIC (start())


class OvsError(RuntimeError):
    """An OVS command failed; the message shows the command and its output."""


class OvsSwitch:
    """The daemons and the bridge of one OVS switch in namespace ``ns``."""

    def __init__(
        self,
        ns: str,
        bridge: str,
        ports: Sequence[str],
        fail_mode: str = "standalone",
        flows: Sequence[str] = (),
        log: Callable[[str], None] | None = None,
    ):
        if fail_mode not in FAIL_MODES:
            raise ValueError(f"fail mode {fail_mode!r}; allowed: {', '.join(FAIL_MODES)}")
        self.ns, self.bridge, self.ports = ns, bridge, list(ports)
        self.fail_mode, self.flows = fail_mode, list(flows)
        self.dir = RUN_ROOT / ns
        self.log = log
        self.env = {
            **os.environ,
            # everything the tools write or look up goes to our directory
            **{f"OVS_{d}DIR": str(self.dir) for d in ("RUN", "DB", "LOG", "SYSCONF")},
        }
        self.started = False

    def _run(self, *args: str, stdin: str | None = None, netns: bool = False) -> str:
        cmd = (["ip", "netns", "exec", self.ns] if netns else []) + list(args)
        if self.log:
            self.log(f"[{self.ns}] " + shlex.join(args))
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, env=self.env, check=False
        )
        if proc.returncode != 0:
            logs = "".join(
                f"\n--- {log.name} (tail)\n" + "\n".join(log.read_text().splitlines()[-5:])
                for log in sorted(self.dir.glob("*.log"))
            )
            raise OvsError(
                f"{self.ns}: command failed ({proc.returncode}): {shlex.join(args)}\n"
                f"{proc.stdout}{proc.stderr}".rstrip()
                + logs
            )
        return proc.stdout

    def start(self) -> None:
        """Start the daemons, make the bridge with its ports, add the flows."""
        if not SCHEMA.is_file():
            raise OvsError(
                f"Open vSwitch is not installed ({SCHEMA} missing): apt install "
                "openvswitch-switch (scripts/install-deps.sh)"
            )
        shutil.rmtree(self.dir, ignore_errors=True)  # a stopped namesake's files
        self.dir.mkdir(parents=True)
        db = self.dir / "conf.db"
        self._run("ovsdb-tool", "create", str(db), str(SCHEMA))
        self.started = True
        daemon = ["--pidfile", "--detach", "--no-chdir", "--log-file"]
        self._run("ovsdb-server", str(db), f"--remote=punix:{self.dir}/db.sock", *daemon)
        # ovs-vswitchd sizes its upcall handlers by count_cpu_cores(), which
        # counts the CPUs only once CLOCK_MONOTONIC is past 10 s (it compares the
        # time with a "last checked" of 0; OVS 3.1 lib/ovs-thread.c) and is 0
        # before: in a guest booted a few seconds ago the datapath then has no
        # handler, loses every upcall (ovs-dpctl show: lost = missed) and the
        # switch forwards nothing until it reconfigures.  So wait for 10 s of
        # uptime: idle time, free under the virtual clock (time jumps).
        wait = OVS_CPU_COUNT_AFTER - time.monotonic()
        if wait > 0:
            if self.log:
                self.log(f"[{self.ns}] waiting {wait:.1f} s for 10 s of uptime (OVS's CPU count)")
            time.sleep(wait)
        # ovs-vswitchd makes the kernel datapath in its own namespace: the switch's
        self._run("ovs-vswitchd", *daemon, netns=True)
        vsctl = ["ovs-vsctl", "--timeout=30", "--", "init"]
        vsctl += ["--", "add-br", self.bridge, "--", "set-fail-mode", self.bridge, self.fail_mode]
        # QoS linux-noop: ovs-vswitchd leaves the ports' qdiscs alone.  Without
        # it, a port without QoS has its root qdisc deleted when it is added
        # (the netem/tbf shapes of the link were gone: "no root netem qdisc")
        vsctl += ["--", "--id=@noop", "create", "QoS", "type=linux-noop"]
        for n, port in enumerate(self.ports, 1):
            vsctl += ["--", "add-port", self.bridge, port, "qos=@noop"]
            vsctl += ["--", "set", "Interface", port, f"ofport_request={n}"]
        # without --no-wait ovs-vsctl returns once ovs-vswitchd has applied it
        self._run(*vsctl)
        if self.flows:
            self._run(
                "ovs-ofctl", "add-flows", self.bridge, "-", stdin="\n".join(self.flows) + "\n"
            )

    def dump_flows(self) -> str:
        return self._run("ovs-ofctl", "dump-flows", self.bridge)

    def _pids(self) -> list[int]:
        pids = []
        for name in ("ovs-vswitchd", "ovsdb-server"):
            try:
                pids.append(int((self.dir / f"{name}.pid").read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                continue
        return pids

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the daemons (ovs-vswitchd first, removing its datapath) and
        wait until they are gone; SIGKILL what is left after ``timeout``."""
        if not self.started:
            return
        self.started = False
        pids = self._pids()
        for name, extra in (("ovs-vswitchd", ["--cleanup"]), ("ovsdb-server", [])):
            if (self.dir / f"{name}.pid").exists():
                subprocess.run(
                    ["ovs-appctl", "--timeout=10", "-t", name, "exit", *extra],
                    env=self.env,
                    capture_output=True,
                    check=False,
                )
        deadline = time.monotonic() + timeout
        for pid in pids:
            while _alive(pid):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    break
                time.sleep(0.02)
        shutil.rmtree(self.dir, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Is ``pid`` running (a zombie counts as gone)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
