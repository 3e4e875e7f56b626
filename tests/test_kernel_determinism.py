"""Same seed, same numbers, whatever the host's /run holds (issue 44).

A virtual-time guest reads the host's live root through hostfs, and until
init.sh covers /run with a tmpfs of its own, the host's /run too: libmount
(init.sh's mountpoint and mount) looks for /run/mount, a dir the host gets
from the first `mount` any root process runs and keeps until reboot.  A
different answer is a different number of failed system calls, each 1 us
of guest time under inf-cpu, and the run becomes another realisation: an
empty /run/mount moved the CBR run below by 6 us at its first sample, gave
its first subflow another MPTCP token and another goodput (docs/experiments.md,
"The guest's clock").  launch.py now puts an empty read-only tmpfs over
/run in the guest's view of the host.

The runs need root: the host's /run is changed in a mount namespace of the
run's own (``unshare -m``), never on the machine itself (``mount -n``: a
plain ``mount`` would create the host's /run/mount, the very input).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mptlab.campaign.boot import run_script

pytestmark = pytest.mark.kernel

# CBR with background flows over a lossy and a clean path: a few seconds of
# guest time (1.3-2.4 s of wall time each here).  A 2 MiB bulk download over
# the same paths did not move with /run/mount; this run did (the background
# replayer's schedule, D-ITG's frames, every subflow sample).
CAMPAIGN = """\
profiles:
  det-a: {rate: 10mbit, delay: 10ms, loss: 0.5%, queue: 100 packets}
  det-b: {rate: 5mbit, delay: 20ms, queue: 100 packets}
experiments:
  det-run:
    topology: two-path
    paths: [det-a, det-b]
    kernel:
      path_manager: {subflows: 2, add_addr_accepted: 2}
    workload: {type: cbr, rate: 1mbit, frame_size: 5KiB, duration: 6s}
    background:
      - {preset: blest-3g-wlan, tcp_flows: 1, udp_flows: 3, seed: 1}
    clock: virtual
    repetitions: 1
    timeout: 60s
"""


def _needs_root() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("changes /run in a mount namespace of its own: needs root and unshare(1)")


def _run(out: Path, camp: Path, run_setup: str | None) -> Path:
    """``mptlab run`` of CAMPAIGN into ``out``; ``run_setup``: shell commands
    run first in a private mount namespace (the host's /run as the guest
    would see it)."""
    cmd = [sys.executable, "-m", "mptlab.cli", "run", str(camp), "--out", str(out), "--quiet"]
    if run_setup is not None:
        script = f'{run_setup} && exec "$@"'
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return out / "det-run" / "runs" / "base" / "rep-000"


def _record(run_dir: Path) -> tuple[dict, dict[str, bytes]]:
    result = json.loads((run_dir / "result.json").read_text())
    result.pop("attempt", None)  # the boot's id: differs by design
    traces = {p.name: p.read_bytes() for p in sorted((run_dir / "traces").iterdir())}
    return result, traces


def test_a_run_repeats_whatever_the_hosts_run_dir_holds(tmp_path):
    _needs_root()
    camp = tmp_path / "det.yaml"
    camp.write_text(CAMPAIGN)
    plain = _run(tmp_path / "plain", camp, None)
    # the other state of libmount's utab dir than this host's: a machine
    # before and after its first `mount`
    flip = "" if os.path.isdir("/run/mount") else "mkdir /run/mount && touch /run/mount/utab && "
    other = _run(
        tmp_path / "other",
        camp,
        f"mount -n -t tmpfs mptlab-test /run && {flip}mkdir -p /run/systemd",
    )
    first, first_traces = _record(plain)
    second, second_traces = _record(other)
    assert first["status"] == "ok" and first["metrics"]["frames_received"] > 0, first
    assert first_traces["client-subflows.csv"].count(b"\n") > 10
    assert first == second
    assert first_traces.keys() == second_traces.keys()
    for name, data in first_traces.items():
        assert data == second_traces[name], f"traces/{name} differs"


def test_the_guest_sees_an_empty_run_dir_of_the_host(kernel, tmp_path):
    """What the guest's hostfs finds at the host's /run: nothing, though the
    host's /run holds files (this host's: lock/, log/, netns/, ...)."""
    if not os.listdir("/run"):
        pytest.skip("this host's /run is empty: nothing to hide")
    script = (
        "mkdir -p /tmp/hostrun && mount -t hostfs -o /run hostfs /tmp/hostrun\n"
        'echo "entries:$(ls -A /tmp/hostrun | tr "\\n" " ")"\n'
    )
    r = run_script(kernel, tmp_path, script, timeout=30, clock="virtual")
    assert r.ok, r
    assert (tmp_path / "guest.log").read_text().strip() == "entries:"
