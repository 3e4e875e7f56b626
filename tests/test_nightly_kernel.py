"""Nightly regression runs end to end, on the real kernel (issue 24): a
temporary git repository with three commits, the middle one changing a
scheduler module's behaviour (roundrobin's ``cwnd_limited`` default: the
turn then waits for a subflow whose window is full).  Two nights are run,
at the first commit and at the last; the second is flagged, by the exact
comparison of virtual time; the trend page shows it; ``mptlab bisect``
names the middle commit.

The nights run the repository's own modules and experiment (``MPTLAB_HOME``);
the kernel's cache key is that of this checkout, so only the modules are
built (once for the changed source)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel

REPO = Path(__file__).resolve().parent.parent
# a checkout's code and data: the nights run this checkout's code on the
# repository's data (MPTLAB_HOME), bisect runs each revision's own code
DATA = (
    ".gitignore",
    "mptlab",
    "kernel",
    "scripts",
    "topologies",
    "experiments.yaml",
    "compare-rules.yaml",
    "pyproject.toml",
)
EXPERIMENT = """\
experiments:
  nightly-rr:
    description: "roundrobin over WLAN + 3G, a short download"
    topology: two-path
    paths: [wlan, 3g]
    kernel:
      scheduler: roundrobin
      path_manager: {subflows: 2, add_addr_accepted: 2}
    workload: {type: bulk, duration: 4s, direction: download}
    warmup: 0s
    repetitions: 2
    timeout: 90s
    clock: virtual
"""


def git(repo: Path, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert p.returncode == 0, f"git {' '.join(args)}: {p.stderr}"
    return p.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """The repository and its three commits (oldest first)."""
    repo = tmp_path_factory.mktemp("nightly") / "repo"
    repo.mkdir()
    for name in DATA:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, repo / name)
    (repo / "nightly-rr.yaml").write_text(EXPERIMENT)
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "mptlab test")
    git(repo, "config", "user.email", "test@mptlab.invalid")
    revs = [commit(repo, "the nightly experiment")]
    rr = repo / "kernel" / "modules" / "mptcp_roundrobin.c"
    text = rr.read_text()
    assert "static bool cwnd_limited __read_mostly = true;" in text
    rr.write_text(
        text.replace("cwnd_limited __read_mostly = true;", "cwnd_limited __read_mostly = false;")
    )
    revs.append(commit(repo, "roundrobin: wait for a full subflow's turn by default"))
    (repo / "NOTES.md").write_text("Nothing that changes behaviour.\n")
    revs.append(commit(repo, "notes"))
    return repo, revs


def at(repo: Path, rev: str) -> dict:
    """Check ``rev`` out and build what it needs; the environment of a run there."""
    git(repo, "checkout", "-q", "--detach", rev)
    p = subprocess.run([str(repo / "kernel" / "build.sh")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return {**os.environ, "MPTLAB_HOME": str(repo)}


def cli(env: dict, *args, timeout: float = 900) -> subprocess.CompletedProcess:
    """``mptlab ARGS`` as a process, this checkout's code, in ``env``."""
    cmd = [sys.executable, "-m", "mptlab.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def nights(repo, tmp_path_factory):
    """Night 1 at the first commit (the baseline), night 2 at the last."""
    path, revs = repo
    root = tmp_path_factory.mktemp("nightly-root")
    night = ("nightly", "nightly-rr", "--file", path / "nightly-rr.yaml", "--root", root)
    # the hook keeps what it was given: the findings on stdin, the night's dir
    hook = f'cat > "$MPTLAB_NIGHT/hook-stdin.txt"; echo "$MPTLAB_FINDINGS" > {root}/hook-env.txt'
    night += ("--jobs", 2, "--no-pcap", "--publish", "--on-regression", hook)
    first = cli(at(path, revs[0]), *night)
    second = cli(at(path, revs[2]), *night)
    return root, first, second


def test_the_first_night_is_the_baseline_and_the_second_is_flagged(nights, repo):
    root, first, second = nights
    assert first.returncode == 0, first.stdout + first.stderr
    assert "is now the baseline" in first.stdout
    assert second.returncode == 1, second.stdout + second.stderr
    stamps = sorted(p.name for p in root.iterdir() if p.name[:1].isdigit())
    assert len(stamps) == 2
    findings = (root / stamps[1] / "findings.txt").read_text()
    # the exact comparison saw the change; goodput fell: a regression
    assert "goodput_mbps: regressed by exact" in findings, findings
    # the history holds both nights with the repository's commits
    _path, revs = repo
    sql = "SELECT DISTINCT stamp, commit FROM history ORDER BY stamp"
    hist = cli(dict(os.environ), "query", "--history", root, sql, "--format", "csv")
    assert hist.returncode == 0, hist.stderr
    assert revs[0] in hist.stdout and revs[2] in hist.stdout, hist.stdout
    assert "-dirty" not in hist.stdout  # the runs left the checkout as it was
    # regressions come first in the night's findings
    assert findings.splitlines()[0].split(": ")[1].startswith("regressed"), findings
    # the hook ran after the second night only (the first was the baseline), with them
    assert not (root / stamps[0] / "hook-stdin.txt").exists()
    assert (root / stamps[1] / "hook-stdin.txt").read_text() == findings
    assert (root / "hook-env.txt").read_text().strip() == str(root / stamps[1] / "findings.txt")


def test_the_trend_page_shows_the_regression(nights, chromium):
    root, _first, _second = nights
    index = root / "site" / "index.html"
    assert index.exists()
    dom = chromium.dom(index)
    assert "nightly-rr" in dom and "goodput_mbps" in dom, dom[:2000]
    assert "regress" in dom.lower()


def test_bisect_names_the_middle_commit(nights, repo, tmp_path):
    path, revs = repo
    env = at(path, revs[2])
    p = cli(
        env,
        "bisect", "nightly-rr", "--file", path / "nightly-rr.yaml", "--repo", path,
        "--good", revs[0], "--bad", revs[2], "--reps", 1, "--jobs", 2,
        "--work", tmp_path / "bisect",
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert revs[1] in p.stdout and "roundrobin: wait for a full subflow" in p.stdout, p.stdout
    assert "mptcp_roundrobin.c" in p.stdout  # the commit's diff stat
    # no worktree left behind
    assert git(path, "worktree", "list").count("\n") == 0
