"""Nightly regression runs: run the nightly set, compare each experiment with
its accepted baseline and with the previous night, keep a history, publish it.

    mptlab nightly NAME [NAME ...] [--reps 5 --quick --jobs 2]   # one night
    mptlab nightly NAME ... --publish --on-regression CMD         # ... then the site, a hook
    mptlab nightly --publish                                      # the trend site only
    mptlab nightly --accept [STAMP]                               # a night becomes the baseline

Layout under ``--root`` (default ``results/nightly``)::

    <stamp>/<experiment>/...           each night's campaigns (stamp: UTC YYYYmmdd-HHMMSS)
    <stamp>/<experiment>.html          the night's report of that experiment
    <stamp>/<experiment>.compare.txt   its comparison with the baseline
    <stamp>/findings.txt               what moved this night, in words
    <stamp>/findings.json              ... as records (mptlab.nightly.detect.Finding)
    history/<stamp>.parquet            per-variant statistics of the night (mptlab.nightly.history)
    baseline                           the accepted baselines: a line "<stamp>/<experiment>" each
    history.jsonl                      one JSON line per night and experiment, and per accept
    site/                              the trend pages (``--publish``; mptlab.nightly.publish)

A night's values move in three ways (``mptlab.nightly.detect``): against the
accepted baseline by ``compare-rules.yaml`` (statistical, as ``mptlab
compare``); against the previous night exactly, when both ran on virtual time
with the same runs and seeds (any change is the code's); and as a step of a
fit over all nights (a slow drift).  The first night of an experiment becomes
its baseline; a later one only by ``--accept`` (a person decides that a change
of the numbers is intended), so a drift cannot creep into the baseline.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from .. import api, home
from ..analysis import compare as cmp
from ..analysis import report
from ..campaign.cluster import ClusterError
from ..campaign.kernel import KernelNotBuilt
from ..campaign.provenance import git_commit
from ..rundir import CampaignDir
from . import detect, history

FINDINGS_JSON = "findings.json"


def default_root() -> Path:
    return home.results_dir() / "nightly"


def default_rules() -> Path:
    return home.data("compare-rules.yaml")


def _nights(root: Path) -> list[Path]:
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name[:1].isdigit())


def _campaigns_of(night: Path) -> list[Path]:
    camps = sorted(p for p in night.iterdir() if p.is_dir() and CampaignDir(p).info() is not None)
    if not camps:
        raise FileNotFoundError(f"{night}: holds no campaign (no */campaign.json)")
    return camps


def _baselines(root: Path) -> dict[str, str]:
    """{experiment: "<stamp>/<campaign>"} from the baseline file (one line each;
    a file of one line, as written before nightly ran sets, reads the same)."""
    f = root / "baseline"
    if not f.exists():
        return {}
    out = {}
    for line in f.read_text().splitlines():
        rel = line.strip()
        if rel:
            out[Path(rel).name] = rel
    return out


def _write_baselines(root: Path, baselines: dict[str, str]) -> None:
    tmp = root / "baseline.tmp"
    tmp.write_text("".join(f"{rel}\n" for _name, rel in sorted(baselines.items())))
    os.replace(tmp, root / "baseline")


def read_baseline(root: Path, experiment: str | None = None) -> Path | None:
    """The accepted baseline campaign of ``experiment`` (default: the only one)."""
    baselines = _baselines(root)
    if experiment is None:
        if len(baselines) > 1:
            raise ValueError(
                f"{root / 'baseline'}: holds baselines of {', '.join(sorted(baselines))}; "
                "name the experiment"
            )
        rel = next(iter(baselines.values()), None)
    else:
        rel = baselines.get(experiment)
    if rel is None:
        return None
    path = root / rel
    if CampaignDir(path).info() is None:
        raise FileNotFoundError(
            f"{root / 'baseline'}: names {rel!r}, which holds no campaign.json; "
            "accept another run with `mptlab nightly --accept STAMP`"
        )
    return path


def accept(root: Path, stamp: str | None = None) -> list[Path]:
    """Make every campaign of night ``stamp`` (default: the latest) its
    experiment's baseline; returns them."""
    nights = _nights(root)
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
    camps = _campaigns_of(night)
    baselines = _baselines(root)
    for camp in camps:
        rel = str(camp.relative_to(root))
        baselines[camp.name] = rel
        _history(root, {"event": "accept", "experiment": camp.name, "baseline": rel})
    _write_baselines(root, baselines)
    return camps


def _history(root: Path, entry: dict) -> None:
    entry = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **entry}
    with open(root / "history.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


def _describe(f: detect.Finding) -> str:
    change = "" if f.change != f.change else f" ({f.change * 100:+.1f} %)"  # NaN: no ratio
    return (
        f"{f.experiment} {f.variant} {f.metric}: {f.kind} by {f.method}, "
        f"{f.before:.6g} -> {f.after:.6g}{change} since {f.since}"
        + (f"; {f.note}" if f.note else "")
    )


class Night:
    """One experiment of one night: its campaign, report, comparison and findings."""

    def __init__(self, root: Path, stamp: str, name: str):
        self.root, self.stamp, self.name = root, stamp, name
        self.dir = root / stamp
        self.campaign: Path | None = None
        self.findings: list[detect.Finding] = []
        self.entry: dict = {"stamp": stamp, "experiment": name}

    @property
    def regressed(self) -> bool:
        return self.entry.get("verdict") == "fail" or any(f.is_regression for f in self.findings)


def _run_one(
    night: Night, experiment: api.Experiment, rules: list, *, strict: bool, pcap: bool, **options
) -> int:
    """Run, report, compare and record one experiment of the night; returns
    its exit status (0, 1 regression, 2 could not run, 130 stopped)."""
    root, name = night.root, night.name
    night.entry["commit"] = git_commit()
    try:
        results = api.run(experiment, out=night.dir, **options)
        if results.report and results.report.stopped:
            print(f"nightly: stopped ({results.report.stopped}); no report", file=sys.stderr)
            return 130
        night.entry["run_exit"] = 1 if results.report and results.report.failed else 0
        camp = night.dir / name
        if CampaignDir(camp).info() is None:
            raise FileNotFoundError(f"{camp}: the campaign wrote no campaign.json")
    except (KernelNotBuilt, ClusterError, FileNotFoundError) as exc:
        night.entry.update(verdict="error", error=f"campaign did not run: {exc}")
        _history(root, night.entry)
        print(f"nightly: {name}: {exc}", file=sys.stderr)
        return 2
    night.campaign = camp
    html = report.build(camp, out=night.dir / f"{name}.html", pcap=pcap)
    print(f"nightly: report {html}")
    night.entry["campaign"] = str(camp.relative_to(root))
    table = history.night_table(
        camp, root=root, stamp=night.stamp, report=html, rules=rules, pcap=pcap
    )
    history.append(root, table)
    baseline = read_baseline(root, name)
    if baseline is None:
        baselines = _baselines(root)
        baselines[name] = str(camp.relative_to(root))
        _write_baselines(root, baselines)
        night.entry.update(verdict="baseline", baseline=str(camp.relative_to(root)))
        print(f"nightly: {name}: no baseline yet; {camp.relative_to(root)} is now the baseline")
    else:
        res = cmp.compare(baseline, camp, rules, strict=strict, pcap=pcap)
        text = cmp.render(res)
        (night.dir / f"{name}.compare.txt").write_text(
            f"baseline {baseline}\ncurrent  {camp}\n\n{text}\n"
        )
        print(f"baseline {baseline.relative_to(root)}, current {camp.relative_to(root)}\n{text}")
        night.findings += detect.from_compare(
            res, name, night.stamp, since=baseline.relative_to(root).parts[0]
        )
        night.entry.update(
            baseline=str(baseline.relative_to(root)),
            verdict="pass" if res.ok else "fail",
            failed=[
                f"{c.rule.metric}/{c.variant}: {c.verdict} ({c.change * 100:+.1f}%)"
                for c in res.failed
            ],
            checks=len(res.checks),
            comparison="exact" if res.exact else "statistical",
        )
    past = history.load(root, name)
    night.findings += detect.latest_findings(past, night.stamp)
    night.entry["findings"] = [_describe(f) for f in night.findings]
    if night.regressed and night.entry.get("verdict") == "pass":
        night.entry["verdict"] = "fail"  # the baseline passed; the history did not
    _history(root, night.entry)
    return 1 if night.regressed else 0


def _hook(cmd: str, night_dir: Path, text: str) -> None:
    """Run the user's ``--on-regression`` command: the findings on its stdin,
    ``MPTLAB_NIGHT`` the night's dir, ``MPTLAB_FINDINGS`` the findings file.
    Its failure is reported, never fatal: the night's results are kept."""
    env = {
        **os.environ,
        "MPTLAB_NIGHT": str(night_dir),
        "MPTLAB_FINDINGS": str(night_dir / "findings.txt"),
    }
    try:
        p = subprocess.run(
            cmd, shell=True, input=text, text=True, env=env, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        print(f"nightly: --on-regression {cmd!r} did not end within 600 s", file=sys.stderr)
        return
    if p.returncode != 0:
        print(f"nightly: --on-regression {cmd!r} exited {p.returncode}", file=sys.stderr)


def run(
    experiments: api.Experiment | list[api.Experiment],
    root: Path,
    *,
    rules: Path | None = None,
    strict: bool = False,
    pcap: bool = True,
    on_regression: str | None = None,
    publish: bool = False,
    **run_options,
) -> int:
    """One night: run every experiment (``run_options``: those of
    ``mptlab.run``), report, compare, record; then the hook on a regression
    and the site if asked.  Returns 0 (pass, or new baselines), 1 (a
    regression), 2 (an experiment could not run), 130 (stopped)."""
    exps = experiments if isinstance(experiments, list) else [experiments]
    root.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    rule_list = cmp.load_rules(rules or default_rules())
    status = 0
    nights = []
    for exp in exps:
        night = Night(root, stamp, exp.name)
        print(f"nightly: {exp.name} -> {night.dir}", flush=True)
        code = _run_one(night, exp, rule_list, strict=strict, pcap=pcap, **run_options)
        nights.append(night)
        if code == 130:
            return 130
        status = max(status, code)
    # regressions first: the lines a person (or the hook's mail) reads first
    findings = sorted(
        (f for n in nights for f in n.findings),
        key=lambda f: (not f.is_regression, f.experiment, f.kind, f.variant, f.metric),
    )
    if (root / stamp).is_dir():
        text = "".join(f"{_describe(f)}\n" for f in findings) or "nothing moved\n"
        (root / stamp / "findings.txt").write_text(text)
        (root / stamp / FINDINGS_JSON).write_text(
            json.dumps([f.as_dict() for f in findings], indent=1) + "\n"
        )
        print(f"nightly: {stamp}: {len(findings)} finding(s)\n{text}", end="")
    if publish:
        print(f"nightly: trend pages {publish_site(root)}")
    if on_regression and any(n.regressed for n in nights):
        _hook(on_regression, root / stamp, (root / stamp / "findings.txt").read_text())
    elif on_regression:
        print("nightly: no regression; --on-regression not run")
    return status


def publish_site(root: Path, out: Path | None = None) -> Path:
    """The trend site of everything in ``root`` (``mptlab nightly --publish``):
    the history, each night's findings as recorded that night, and the steps
    of a fit over all nights so far (a drift may show only later)."""
    from .publish import build_site

    past = history.load(root)
    found: dict[tuple, detect.Finding] = {}
    for night in _nights(root):
        f = night / FINDINGS_JSON
        if f.exists():
            for d in json.loads(f.read_text()):
                x = detect.Finding(**d)
                found[(x.experiment, x.variant, x.metric, x.stamp, x.method)] = x
    for x in detect.steps(past) if len(past) else []:
        found.setdefault((x.experiment, x.variant, x.metric, x.stamp, x.method), x)
    baselines = {Path(rel).parts[0] for rel in _baselines(root).values()}
    return build_site(
        past, list(found.values()), out or root / "site", baselines=baselines, root=root
    )
