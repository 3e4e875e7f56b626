"""Scheduling the nightly runs (issue 24): the systemd units as
`make nightly-timer` renders them, the hook's quoting through the settings
file, `make nightly`'s command line, and the compose profile's loop script.
Starting the timer needs systemd as the init system, which a test machine
may not have: the units are checked with `systemd-analyze verify`, the same
parser systemd uses."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HOOK = 'mail -s "mptlab \\"regressed\\"" me@example.org | tee -a /tmp/x$y'


def render(tmp_path: Path, **env: str) -> Path:
    out = tmp_path / "units"
    p = subprocess.run(
        [str(REPO / "scripts" / "install-nightly-timer.sh"), "--render", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert p.returncode == 0, p.stderr
    return out


def test_the_units_render_for_this_checkout_and_systemd_accepts_them(tmp_path):
    out = render(tmp_path, NIGHTLY="blest-3g-wlan ecf-video", NIGHTLY_AT="*-*-* 03:30:00")
    service = (out / "mptlab-nightly.service").read_text()
    timer = (out / "mptlab-nightly.timer").read_text()
    assert f"ExecStart=/usr/bin/make -C {REPO} nightly" in service
    assert f"EnvironmentFile={out}/mptlab-nightly.env" in service
    assert "KillMode=control-group" in service and "SuccessExitStatus=1" in service
    assert "OnCalendar=*-*-* 03:30:00" in timer and "Persistent=true" in timer
    assert "@" not in service.replace("@users", "")  # every placeholder filled
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing (Debian's systemd package)")
    p = subprocess.run(
        [analyze, "verify", str(out / "mptlab-nightly.service"), str(out / "mptlab-nightly.timer")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0 and "mptlab-nightly" not in p.stderr, p.stderr


def test_a_broken_unit_is_caught_by_the_same_check(tmp_path):
    """The verify step above can fail: a misspelt key is reported."""
    out = render(tmp_path)
    unit = out / "mptlab-nightly.service"
    unit.write_text(unit.read_text().replace("Type=oneshot", "Type=oneshoot"))
    p = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert "oneshoot" in p.stderr


def test_the_settings_file_carries_the_hook_as_written(tmp_path):
    """Quotes, pipes and dollars survive: systemd's double-quoted values
    unescape \\\\ and \\" as the shell does."""
    out = render(tmp_path, NIGHTLY_HOOK=HOOK, NIGHTLY_ARGS="--reps 3 --publish")
    env = out / "mptlab-nightly.env"
    p = subprocess.run(
        ["bash", "-c", f'set -a; . "{env}"; printf "%s\\n%s" "$NIGHTLY_HOOK" "$NIGHTLY_ARGS"'],
        capture_output=True,
        text=True,
        env={},
    )
    assert p.stdout.split("\n") == [HOOK, "--reps 3 --publish"], p.stdout


def test_make_nightly_passes_the_set_and_the_hook():
    p = subprocess.run(
        ["make", "-n", "-C", str(REPO), "nightly", "NIGHTLY=a b", f"NIGHTLY_HOOK={HOOK}"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if "mptlab nightly" in x)
    assert "mptlab nightly a b --reps 5 --quick --jobs 2 --publish" in line
    assert line.endswith('--on-regression "$NIGHTLY_HOOK"')  # the shell expands it, unquoted


@pytest.fixture
def fake_mptlab(tmp_path) -> Path:
    """A stand-in for the image's mptlab that records its arguments, one per
    line, and exits with $FAKE_STATUS: the loop script is what is tested."""
    fake = tmp_path / "mptlab"
    fake.write_text(
        '#!/bin/sh\nfor a in "$@"; do echo "$a"; done > "$FAKE_LOG"\nexit "${FAKE_STATUS:-0}"\n'
    )
    fake.chmod(0o755)
    return fake


def loop(fake: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "args"
    p = subprocess.run(
        ["sh", str(REPO / "scripts" / "nightly-loop.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.environ["PATH"], "MPTLAB_BIN": str(fake), "FAKE_LOG": str(log), **env},
    )
    return p, log.read_text().splitlines() if log.exists() else []


def test_the_compose_loop_runs_one_night_with_the_set_and_the_hook(fake_mptlab, tmp_path):
    p, args = loop(
        fake_mptlab,
        tmp_path,
        NIGHTLY_ONCE="1",
        NIGHTLY="x y",
        NIGHTLY_ARGS="--reps 2",
        NIGHTLY_HOOK=HOOK,
        FAKE_STATUS="1",
    )
    assert p.returncode == 1  # the night's status: a regression
    assert args == ["nightly", "x", "y", "--reps", "2", "--publish", "--on-regression", HOOK]


def test_the_compose_loop_refuses_a_bad_time(fake_mptlab, tmp_path):
    p, args = loop(fake_mptlab, tmp_path, NIGHTLY_AT="2am")
    assert p.returncode == 2 and "NIGHTLY_AT=2am" in p.stderr and args == []


def test_the_compose_file_has_the_nightly_profile():
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose is missing (scripts/install-deps.sh docker installs it)")
    p = subprocess.run(
        [compose, "-f", str(REPO / "docker-compose.yml"), "--profile", "nightly", "config"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 0, p.stderr
    assert "/mptlab/scripts/nightly-loop.sh" in p.stdout and "NIGHTLY_AT" in p.stdout
