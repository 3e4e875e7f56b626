"""The booted kernel's scheduler API: registration, sysctls, refcounting."""

import json

import pytest

from mptlab.spec.catalog import known_schedulers

pytestmark = pytest.mark.kernel

# The schedulers shipped: each must register under its name once loaded.
SCHEDULERS = {
    "default",
    "minrtt",
    "roundrobin",
    "redundant",
    "blest",
    "ecf",
    "minrtt_pr",
    "otias",
    "daps",
    "cp",
}
# the kernel's own interface, read and written as such (mptlab sets it through sysctls)
SYSCTL = """
        import subprocess
        from mptlab.guest import modules

        def current_scheduler():
            return (modules.SYSCTL_DIR / "scheduler").read_text().strip()

        def set_scheduler(name):
            (modules.SYSCTL_DIR / "scheduler").write_text(name)

        def rmmod(name):
            return subprocess.run(["rmmod", name], capture_output=True, text=True, check=False)
"""


def test_version_and_scheduler_registry(guest, kernel):
    info = json.loads(kernel.build_info.read_text())
    r = guest(
        SYSCTL
        + """
        import errno, os
        RESULT["release"] = os.uname().release
        RESULT["before"] = modules.available_schedulers()
        RESULT["loaded"] = sorted(modules.load_schedulers(MODULES_DIR))
        RESULT["after"] = modules.available_schedulers()
        RESULT["initial"] = current_scheduler()
        RESULT["switched"] = {}
        for name in RESULT["after"]:
            set_scheduler(name)
            RESULT["switched"][name] = current_scheduler()
        set_scheduler("blest")
        try:
            set_scheduler("no-such-scheduler")
            RESULT["unknown_errno"] = 0
        except OSError as exc:
            RESULT["unknown_errno"] = exc.errno
        RESULT["after_unknown"] = current_scheduler()
        # a new network namespace starts with the default scheduler
        import subprocess
        subprocess.run(["ip", "netns", "add", "fresh"], check=True)
        RESULT["fresh_netns"] = subprocess.run(
            ["ip", "netns", "exec", "fresh", "cat", "/proc/sys/net/mptcp/scheduler"],
            capture_output=True, text=True, check=True).stdout.strip()
        """
    )
    assert r["release"] == info["kernel_release"]
    assert r["before"] == ["default"]
    assert set(r["after"]) >= SCHEDULERS
    # what an experiment may name (validation) is exactly what the kernel offers
    assert set(r["after"]) == set(known_schedulers())
    assert r["initial"] == "default"
    assert r["switched"] == {name: name for name in r["after"]}
    assert r["unknown_errno"] == 2  # ENOENT
    assert r["after_unknown"] == "blest"
    assert r["fresh_netns"] == "default"


def test_rmmod_of_scheduler_in_use_is_refused(guest):
    r = guest(
        SYSCTL
        + """
        import socket, threading, time
        modules.load_schedulers(MODULES_DIR)
        set_scheduler("blest")

        def connection():
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
            srv.bind(("127.0.0.1", 0)); srv.listen()
            cli = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_MPTCP)
            cli.connect(srv.getsockname())
            peer, _ = srv.accept()
            return srv, cli, peer

        srv, cli, peer = connection()
        set_scheduler("default")       # the sysctl no longer holds blest ...
        busy = rmmod("mptcp_blest")    # ... but the open sockets do
        RESULT["busy_rc"] = busy.returncode
        RESULT["busy_err"] = busy.stderr
        cli.sendall(b"x" * 100000)          # the connection still works
        got = 0
        while got < 100000:
            got += len(peer.recv(65536))
        RESULT["still_transfers"] = got
        for s in (cli, peer, srv):
            s.close()
        time.sleep(0.5)
        free = rmmod("mptcp_blest")
        RESULT["free_rc"] = free.returncode
        RESULT["after"] = modules.available_schedulers()
        srv, cli, peer = connection()       # and the system stays up
        cli.sendall(b"ok"); RESULT["echo"] = peer.recv(2).decode()
        """
    )
    assert r["busy_rc"] != 0 and "in use" in r["busy_err"]
    assert r["still_transfers"] == 100000
    assert r["free_rc"] == 0
    assert "blest" not in r["after"]
    assert r["echo"] == "ok"
