"""mptlab bisect: the search over a small git history with a fake probe, and
probe_revision's worktree handling with a fake build and run (no kernel)."""

from __future__ import annotations

import argparse
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from mptlab.nightly import bisect as bs

FIXTURE = Path(__file__).parent / "data" / "analysis" / "results" / "fixture"


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def init_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.name", "Bisect Test")
    git(path, "config", "user.email", "bisect@example.org")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit(repo: Path, message: str, **files: str) -> str:
    for name, text in files.items():
        path = repo / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def history(tmp_path: Path, values: list[str]) -> tuple[Path, list[str]]:
    """Commits "commit 1".."commit N"; commit i has value.txt = values[i-1],
    and every commit changes notes.txt so that none is empty."""
    repo = init_repo(tmp_path / "repo")
    shas = []
    for i, value in enumerate(values, 1):
        shas.append(
            commit(repo, f"commit {i}", **{"value.txt": f"{value}\n", "notes.txt": f"{i}\n"})
        )
    return repo, shas


def value_probe(repo: Path, calls: list[str]):
    """A probe whose numbers are value.txt at the revision."""

    def probe(rev: str) -> bs.Probe:
        calls.append(rev)
        text = git(repo, "show", f"{rev}:value.txt")
        return bs.Probe(rev, text, repo, {"all": {"value": float(text)}})

    return probe


SEVEN = ["10", "10", "10", "11", "11", "11", "11"]  # commit 4 changes the number
MAX_PROBES = math.ceil(math.log2(7)) + 2


def test_names_the_commit_that_changed_the_number(tmp_path):
    repo, shas = history(tmp_path, SEVEN)
    calls: list[str] = []
    logged: list[str] = []
    res = bs.bisect(repo, shas[0], shas[-1], probe=value_probe(repo, calls), log=logged.append)
    assert res.first == shas[3]
    assert res.subject == "commit 4"
    assert res.date and res.date[:4].isdigit()
    assert "value.txt | 2 +-" in res.stat and "notes.txt" in res.stat
    assert res.before == shas[2]
    assert res.steps == len(calls) <= MAX_PROBES
    assert len(set(calls)) == len(calls)  # each revision probed once
    assert res.candidates == 6
    text = res.render()
    assert f"first commit that changed the result: {shas[3]}" in text
    assert "commit 4" in text and "value.txt | 2 +-" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("all"))
    assert row.split()[1:] == ["value", "10", "11", "+10.0%"]
    assert logged  # progress went to log


@pytest.mark.parametrize("at", [2, 3, 6, 7])  # the ends and both sides of the middle
def test_finds_the_change_wherever_it_is(tmp_path, at):
    values = ["1" if i < at else "2" for i in range(1, 8)]
    repo, shas = history(tmp_path, values)
    calls: list[str] = []
    res = bs.bisect(repo, shas[0], shas[-1], probe=value_probe(repo, calls), log=lambda _: None)
    assert res.first == shas[at - 1]
    assert len(calls) <= MAX_PROBES


def test_same_numbers_at_good_and_bad_is_no_change(tmp_path):
    repo, shas = history(tmp_path, SEVEN)
    calls: list[str] = []
    res = bs.bisect(repo, shas[0], shas[2], probe=value_probe(repo, calls), log=lambda _: None)
    assert res.first is None
    assert calls == [shas[0], shas[2]]  # good and bad only
    assert res.message.startswith("no change")
    assert "no change" in res.render() and "first commit" not in res.render()


def test_unknown_revision_is_a_clear_error(tmp_path):
    repo, shas = history(tmp_path, SEVEN)
    probe = value_probe(repo, [])
    with pytest.raises(bs.BisectError, match=r"unknown revision 'v9\.9'"):
        bs.bisect(repo, "v9.9", shas[-1], probe=probe)
    with pytest.raises(bs.BisectError, match="not a git repository"):
        bs.bisect(tmp_path, shas[0], shas[-1], probe=probe)


def test_good_must_be_an_ancestor_of_bad(tmp_path):
    repo, shas = history(tmp_path, SEVEN)
    probe = value_probe(repo, [])
    with pytest.raises(bs.BisectError, match="is not an ancestor of bad"):
        bs.bisect(repo, shas[5], shas[1], probe=probe)
    with pytest.raises(bs.BisectError, match="same commit"):
        bs.bisect(repo, shas[2], "HEAD~4", probe=probe)
    with pytest.raises(bs.BisectError, match="mode 'fuzzy' is not allowed"):
        bs.bisect(repo, shas[0], shas[-1], probe=probe, mode="fuzzy")  # type: ignore[arg-type]


def test_statistical_mode_asks_moved(tmp_path):
    # commit 3: +2 % (a re-draw of the runs), commit 6: +20 % (a real move)
    repo, shas = history(tmp_path, ["100", "100", "102", "102", "102", "120", "120"])
    quiet = {"log": lambda _: None}
    exact = bs.bisect(repo, shas[0], shas[-1], probe=value_probe(repo, []), **quiet)
    assert exact.first == shas[2]
    default = bs.bisect(
        repo, shas[0], shas[-1], probe=value_probe(repo, []), mode="statistical", **quiet
    )
    assert default.first == shas[5]
    seen: list[tuple[str, str]] = []

    def moved(good: bs.Probe, cur: bs.Probe) -> bool:
        seen.append((good.rev, cur.rev))
        return cur.summary["all"]["value"] > 101

    res = bs.bisect(
        repo,
        shas[0],
        shas[-1],
        probe=value_probe(repo, []),
        mode="statistical",
        moved=moved,
        **quiet,
    )
    assert res.first == shas[2]
    assert seen and all(g == shas[0] for g, _ in seen)  # always against good
    none = bs.bisect(
        repo,
        shas[0],
        shas[-1],
        probe=value_probe(repo, []),
        mode="statistical",
        moved=lambda g, c: False,
        **quiet,
    )
    assert none.first is None and "moved() test" in none.message


def test_moved_by_default_threshold():
    def probe(**medians: float) -> bs.Probe:
        return bs.Probe("x", "", Path("."), {"v": medians})

    moved = bs.moved_by(0.05)
    assert not moved(probe(a=100.0), probe(a=104.9))
    assert moved(probe(a=100.0), probe(a=94.0))
    assert moved(probe(a=0.0), probe(a=0.001))  # from zero: any change
    assert not moved(probe(a=math.nan), probe(a=math.nan))
    assert moved(probe(a=math.nan), probe(a=1.0))
    assert moved(probe(a=1.0), probe(b=1.0))  # good's metric went missing
    assert not moved(probe(a=1.0), probe(a=1.0, b=5.0))  # a new one is not compared


def test_a_change_from_a_merged_branch_names_the_merge(tmp_path):
    repo = init_repo(tmp_path / "repo")
    good = commit(repo, "base", **{"value.txt": "1\n"})
    main = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side: change", **{"value.txt": "2\n"})
    git(repo, "checkout", "-q", main)
    commit(repo, "main: notes", **{"notes.txt": "a\n"})
    git(repo, "merge", "-q", "--no-edit", "side")
    merge = git(repo, "rev-parse", "HEAD")
    bad = commit(repo, "main: more notes", **{"notes.txt": "b\n"})
    res = bs.bisect(repo, good, bad, probe=value_probe(repo, []), log=lambda _: None)
    assert res.first == merge and res.merge
    assert "value.txt" in res.stat  # against the first parent: what the merge brought
    assert "merge-base" in res.render()
    # good on the merged branch: the merge descends from it and is a candidate
    assert bs.candidates(repo, git(repo, "rev-parse", "side"), bad) == [merge, bad]


def runs_table(values: dict[tuple[str, int], float]) -> pd.DataFrame:
    rows = [
        {
            "variant": v,
            "repetition": r,
            "seed": 100 + r,
            "status": "ok",
            "attempt": "current",
            "x": x,
        }
        for (v, r), x in values.items()
    ]
    return pd.DataFrame(rows)


def test_fingerprint_is_the_numbers_run_for_run():
    base = runs_table({("a", 0): 1.0, ("a", 1): 2.0, ("b", 0): 3.0})
    shuffled = base.iloc[[2, 0, 1]]
    assert bs.fingerprint(base, ["x"]) == bs.fingerprint(shuffled, ["x"])
    swapped = runs_table({("a", 0): 2.0, ("a", 1): 1.0, ("b", 0): 3.0})  # same medians
    assert bs.fingerprint(base, ["x"]) != bs.fingerprint(swapped, ["x"])
    failed = base.assign(status=["ok", "ok", "failed"])
    assert bs.fingerprint(base, ["x"]) != bs.fingerprint(failed, ["x"])
    assert bs.summarize(base, ["x"]) == {"a": {"x": 1.5}, "b": {"x": 3.0}}
    assert math.isnan(bs.summarize(failed, ["x"])["b"]["x"])  # no ok run


# ------------------------------------------------------------------ probe_revision
BUILD_SH = """\
#!/usr/bin/env bash
echo "compiler noise"
echo "kernel: building (fake)" >&2
{extra}
echo "/cache/kernel/fake"
"""


def fake_checkout(tmp_path: Path, build_extra: str = "") -> tuple[Path, str, str]:
    repo = init_repo(tmp_path / "repo")
    first = commit(repo, "one", **{"kernel__build.sh": BUILD_SH.format(extra=""), "v.txt": "1"})
    second = commit(
        repo, "two", **{"kernel__build.sh": BUILD_SH.format(extra=build_extra), "v.txt": "2"}
    )
    return repo, first, second


def recording_run(record: Path, fail: bool = False):
    """A run command that records where and at which commit it ran, then
    leaves a copy of the test fixture campaign (or fails)."""

    def run_cmd(tree: Path, out: Path) -> list[str]:
        end = (
            'echo "guest exploded"; exit 3'
            if fail
            else f'rm -rf "{out}/exp" && cp -r "{FIXTURE}" "{out}/exp"'
        )
        script = (
            f'{{ git rev-parse HEAD; pwd; echo "$MPTLAB_HOME"; echo "$PYTHONPATH"; '
            f'echo "kdir=$MPTLAB_KERNEL_DIR"; }} > "{record}"; echo "run 1/1 ok"; {end}'
        )
        return ["sh", "-c", script]

    return run_cmd


def worktrees(repo: Path) -> list[str]:
    return [
        ln
        for ln in git(repo, "worktree", "list", "--porcelain").splitlines()
        if ln.startswith("worktree ")
    ]


def probe_options(tmp_path: Path, logged: list[str], **kw):
    return {
        "work": tmp_path / "work",
        "reps": 1,
        "jobs": 1,
        "file": None,
        "metrics": None,
        "log": logged.append,
        **kw,
    }


def test_probe_revision_runs_in_a_worktree_of_the_revision_and_removes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MPTLAB_KERNEL_DIR", "/somewhere/else")
    repo, first, _second = fake_checkout(tmp_path)
    record = tmp_path / "record"
    logged: list[str] = []
    opts = probe_options(tmp_path, logged, metrics=["goodput_mbps"])
    probe = bs.probe_revision(repo, "HEAD~1", "exp", run_cmd=recording_run(record), **opts)
    head, cwd, mptlab_home, pythonpath, kdir = record.read_text().splitlines()
    tree = (tmp_path / "work" / first[:12]).resolve()
    assert head == first and probe.rev == first
    assert Path(cwd).resolve() == tree
    assert mptlab_home == pythonpath == str(tree)
    assert kdir == "kdir="  # one kernel for every revision would hide what changed
    assert not tree.exists() and len(worktrees(repo)) == 1
    assert probe.campaign == (tmp_path / "work" / "results" / first[:12] / "exp").resolve()
    assert len(probe.fingerprint) == 16
    assert set(probe.summary) == {"scheduler=blest", "scheduler=minrtt", "tcp-wlan"}
    assert list(probe.summary["tcp-wlan"]) == ["goodput_mbps"]
    shown = "\n".join(logged)
    assert "kernel: building (fake)" in shown and "/cache/kernel/fake" in shown
    assert "compiler noise" not in shown  # progress, not the build's whole output
    # the same campaign again: the same fingerprint
    again = bs.probe_revision(repo, first, "exp", run_cmd=recording_run(record), **opts)
    assert again.fingerprint == probe.fingerprint


def test_probe_revision_unknown_metric_names_the_metrics(tmp_path):
    repo, first, _ = fake_checkout(tmp_path)
    opts = probe_options(tmp_path, [], metrics=["goodput"])
    with pytest.raises(bs.BisectError, match=r"no metric 'goodput'.*goodput_mbps"):
        bs.probe_revision(repo, first, "exp", run_cmd=recording_run(tmp_path / "r"), **opts)


@pytest.mark.parametrize("broken", ["run", "build"])
def test_probe_revision_failure_is_an_error_and_leaves_no_worktree(tmp_path, broken):
    extra = 'echo "kernel: patch 0099 does not apply" >&2; exit 1' if broken == "build" else ""
    repo, _first, second = fake_checkout(tmp_path, build_extra=extra)
    opts = probe_options(tmp_path, [])
    with pytest.raises(bs.BisectError) as err:
        bs.probe_revision(
            repo, "HEAD", "exp", run_cmd=recording_run(tmp_path / "r", fail=True), **opts
        )
    msg = str(err.value)
    if broken == "build":
        assert "build.sh` failed with exit status 1" in msg
        assert "patch 0099 does not apply" in msg
    else:
        assert "`sh -c" in msg and "exit status 3" in msg
        assert "guest exploded" in msg
    assert not (tmp_path / "work" / second[:12]).exists()
    assert len(worktrees(repo)) == 1


def test_probe_revision_reuses_a_leftover_worktree(tmp_path):
    repo, first, _ = fake_checkout(tmp_path)
    tree = tmp_path / "work" / first[:12]
    git(repo, "worktree", "add", "-q", "--detach", str(tree), first)  # an interrupted bisection
    probe = bs.probe_revision(
        repo, first, "exp", run_cmd=recording_run(tmp_path / "r"), **probe_options(tmp_path, [])
    )
    assert probe.rev == first and not tree.exists() and len(worktrees(repo)) == 1


def test_run_command_uses_the_worktree_code_on_virtual_time(tmp_path):
    tree = tmp_path / "tree"
    (tree / "exps").mkdir(parents=True)
    (tree / "exps" / "e.yaml").write_text("")
    cmd = bs.run_command(tree, tmp_path / "out", "exp", reps=2, jobs=3, file="exps/e.yaml")
    i = cmd.index("run")
    assert cmd[i - 1] == str(tree) and cmd[i + 1] == "exp"
    args = cmd[i + 2 :]
    assert args[args.index("--clock") + 1] == "virtual"
    assert args[args.index("--reps") + 1] == "2" and args[args.index("--jobs") + 1] == "3"
    assert args[args.index("--file") + 1] == str(tree / "exps" / "e.yaml")
    with pytest.raises(bs.BisectError, match="campaign file other.yaml is not in the revision"):
        bs.run_command(tree, tmp_path / "out", "exp", reps=2, file="other.yaml")


def test_cli_bad_input_exits_2(tmp_path, capsys):
    repo, shas = history(tmp_path, SEVEN)
    parser = argparse.ArgumentParser(prog="mptlab")
    bs.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["bisect", "exp", "--good", "nope", "--bad", shas[-1], "--repo", str(repo)]
    )
    assert args.reps == 2 and args.mode == "exact"
    assert args.func(args) == 2
    assert "unknown revision 'nope'" in capsys.readouterr().err
