"""Nightly regression runs: run a campaign, compare it with the accepted baseline,
keep a history.

    mptlab nightly NAME [--reps 5 --quick --jobs 2]   # run (in this process), compare, record
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
import sys
from pathlib import Path

from . import api, home
from .analysis import compare as cmp
from .analysis import report
from .campaign.cluster import ClusterError
from .campaign.kernel import KernelNotBuilt
from .campaign.provenance import git_commit
from .rundir import CampaignDir


def default_root() -> Path:
    return home.results_dir() / "nightly"


def default_rules() -> Path:
    return home.data("compare-rules.yaml")


def _campaign_of(night: Path) -> Path:
    camps = sorted(p for p in night.iterdir() if p.is_dir() and CampaignDir(p).info() is not None)
    if not camps:
        raise FileNotFoundError(f"{night}: holds no campaign (no */campaign.json)")
    return camps[0]


def read_baseline(root: Path) -> Path | None:
    f = root / "baseline"
    if not f.exists():
        return None
    rel = f.read_text().strip()
    path = root / rel
    if CampaignDir(path).info() is None:
        raise FileNotFoundError(
            f"{f}: names {rel!r}, which holds no campaign.json; "
            "accept another run with `mptlab nightly --accept STAMP`"
        )
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


def run(
    experiment: api.Experiment,
    root: Path,
    *,
    rules: Path | None = None,
    strict: bool = False,
    pcap: bool = True,
    **run_options,
) -> int:
    """One night: run ``experiment`` (``run_options``: those of ``mptlab.run``),
    report, compare with the baseline; returns 0 (pass or new baseline), 1
    (regression), 2 (could not run)."""
    root.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    night = root / stamp
    name = experiment.name
    commit = git_commit()
    print(f"nightly: {name} -> {night}", flush=True)
    try:
        results = api.run(experiment, out=night, **run_options)
        run_exit = 1 if results.report and results.report.failed else 0
        if results.report and results.report.stopped:
            print(f"nightly: stopped ({results.report.stopped}); no report", file=sys.stderr)
            return 130
        camp = _campaign_of(night)
    except (KernelNotBuilt, ClusterError, FileNotFoundError) as exc:
        _history(
            root,
            {
                "stamp": stamp,
                "experiment": name,
                "commit": commit,
                "verdict": "error",
                "error": f"campaign did not run: {exc}",
            },
        )
        print(f"nightly: {exc}", file=sys.stderr)
        return 2
    html = report.build(camp, out=night / "report.html", pcap=pcap)
    print(f"nightly: report {html}")
    baseline = read_baseline(root)
    entry = {
        "stamp": stamp,
        "experiment": name,
        "campaign": str(camp.relative_to(root)),
        "commit": commit,
        "run_exit": run_exit,
    }
    if baseline is None:
        (root / "baseline").write_text(str(camp.relative_to(root)) + "\n")
        entry.update(verdict="baseline", baseline=str(camp.relative_to(root)))
        _history(root, entry)
        print(f"nightly: no baseline yet; {camp.relative_to(root)} is now the baseline")
        return 0
    rule_list = cmp.load_rules(rules or default_rules())
    res = cmp.compare(baseline, camp, rule_list, strict=strict, pcap=pcap)
    text = cmp.render(res)
    (night / "compare.txt").write_text(f"baseline {baseline}\ncurrent  {camp}\n\n{text}\n")
    print(f"baseline {baseline.relative_to(root)}, current {camp.relative_to(root)}\n{text}")
    entry.update(
        baseline=str(baseline.relative_to(root)),
        verdict="pass" if res.ok else "fail",
        failed=[
            f"{c.rule.metric}/{c.variant}: {c.verdict} ({c.change * 100:+.1f}%)" for c in res.failed
        ],
        checks=len(res.checks),
        comparison="exact" if res.exact else "statistical",
    )
    _history(root, entry)
    return 0 if res.ok else 1
