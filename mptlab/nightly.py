"""Nightly regression runs: run a campaign, compare it with the accepted baseline,
keep a history.

    mptlab nightly NAME [--reps 5 --quick --jobs 2]   # run, compare, record
    mptlab nightly --accept [STAMP]                   # make a run (default: the latest) the baseline

Layout under ``--root`` (default ``results/nightly``)::

    <stamp>/<campaign>/...        each night's campaign (stamp: UTC YYYYmmdd-HHMMSS)
    <stamp>/compare.txt           the comparison table against the baseline of that night
    <stamp>/report.html           the night's HTML report
    baseline                      the accepted baseline: a line "<stamp>/<campaign>"
    history.jsonl                 one JSON line per night: stamp, commit, baseline, verdict, failures

The first night has no baseline and becomes it.  A later run becomes the
baseline only by ``--accept`` (a person decides that a change of the numbers
is intended), so a slow drift cannot creep in unnoticed.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

from mptlab.campaign.kernel import REPO_ROOT

from .analysis import compare as cmp
from .analysis import report


def default_root() -> Path:
    return REPO_ROOT / "results" / "nightly"


def _campaign_of(night: Path) -> Path:
    camps = sorted(p for p in night.iterdir() if p.is_dir() and (p / "campaign.json").exists())
    if not camps:
        raise FileNotFoundError(f"{night}: holds no campaign (no */campaign.json)")
    return camps[0]


def _git_commit() -> str:
    p = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return p.stdout.strip() if p.returncode == 0 else "unknown"


def read_baseline(root: Path) -> Path | None:
    f = root / "baseline"
    if not f.exists():
        return None
    rel = f.read_text().strip()
    path = root / rel
    if not (path / "campaign.json").exists():
        raise FileNotFoundError(f"{f}: names {rel!r}, which holds no campaign.json; "
                                "accept another run with `mptlab nightly --accept STAMP`")  # fmt: skip
    return path


def accept(root: Path, stamp: str | None = None) -> Path:
    nights = (
        sorted(p for p in root.iterdir() if p.is_dir() and p.name[:1].isdigit())
        if root.exists()
        else []
    )
    if not nights:
        raise FileNotFoundError(f"{root}: no nightly runs to accept")
    if stamp:
        match = [p for p in nights if p.name == stamp]
        if not match:
            raise FileNotFoundError(
                f"{root}: no nightly run {stamp!r}; runs: {', '.join(p.name for p in nights)}"
            )
        night = match[0]
    else:
        night = nights[-1]
    camp = _campaign_of(night)
    (root / "baseline").write_text(str(camp.relative_to(root)) + "\n")
    _history(root, {"event": "accept", "baseline": str(camp.relative_to(root))})
    return camp


def _history(root: Path, entry: dict) -> None:
    entry = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **entry}
    with open(root / "history.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


def run(name: str, root: Path, run_args: list[str], rules: Path | None, strict: bool = False,
        pcap: bool = True) -> int:  # fmt: skip
    """One night: returns 0 (pass or new baseline), 1 (regression), 2 (could not run)."""
    root.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    night = root / stamp
    cmd = [sys.executable, "-m", "mptlab.cli", "run", name, "--out", str(night), *run_args]
    print("nightly: " + " ".join(cmd[2:]), flush=True)
    proc = subprocess.run(cmd, cwd=REPO_ROOT)
    try:
        camp = _campaign_of(night)
    except FileNotFoundError as exc:
        _history(root, {"stamp": stamp, "experiment": name, "commit": _git_commit(), "verdict": "error",
                        "error": f"campaign did not run (exit {proc.returncode})"})  # fmt: skip
        print(f"nightly: {exc}", file=sys.stderr)
        return 2
    html = report.build(camp, out=night / "report.html", pcap=pcap)
    print(f"nightly: report {html}")
    baseline = read_baseline(root)
    entry = {"stamp": stamp, "experiment": name, "campaign": str(camp.relative_to(root)),
             "commit": _git_commit(), "run_exit": proc.returncode}  # fmt: skip
    if baseline is None:
        (root / "baseline").write_text(str(camp.relative_to(root)) + "\n")
        entry.update(verdict="baseline", baseline=str(camp.relative_to(root)))
        _history(root, entry)
        print(f"nightly: no baseline yet; {camp.relative_to(root)} is now the baseline")
        return 0
    rule_list = cmp.load_rules(rules or REPO_ROOT / "compare-rules.yaml")
    res = cmp.compare(baseline, camp, rule_list, strict=strict, pcap=pcap)
    text = cmp.render(res)
    (night / "compare.txt").write_text(f"baseline {baseline}\ncurrent  {camp}\n\n{text}\n")
    print(f"baseline {baseline.relative_to(root)}, current {camp.relative_to(root)}\n{text}")
    entry.update(baseline=str(baseline.relative_to(root)), verdict="pass" if res.ok else "fail",
                 failed=[f"{c.rule.metric}/{c.variant}: {c.verdict} ({c.change * 100:+.1f}%)"
                         for c in res.failed],
                 checks=len(res.checks))  # fmt: skip
    _history(root, entry)
    return 0 if res.ok else 1
