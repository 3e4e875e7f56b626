"""Runner bookkeeping that needs no guest (the runner itself is tested end
to end in test_campaign_e2e.py)."""

from pathlib import Path

from mptlab.campaign.runner import CampaignReport, Outcome
from mptlab.rundir import STARVED_WAIT_SHARE


def test_runs_whose_guest_waited_for_cpu_are_flagged_but_not_failed():
    report = CampaignReport(
        [
            Outcome("a/rep-000", "ok", cpu_wait_share=0.01),
            Outcome("a/rep-001", "ok", cpu_wait_share=STARVED_WAIT_SHARE + 0.01),
            Outcome("a/rep-002", "ok"),  # not measured: not judged
            Outcome("a/rep-003", "timeout", cpu_wait_share=0.5),  # failed, reported as such
        ]
    )
    assert [o.run_id for o in report.starved] == ["a/rep-001"]
    assert [o.run_id for o in report.failed] == ["a/rep-003"]


def test_slots_shrink_for_the_holders_to_come_once_per_overlap_never_below_one():
    import threading

    from mptlab.campaign.runner import Slots

    slots = Slots(3)
    assert slots.__enter__() == 3 and slots.__enter__() == 3  # two runs started at limit 3
    assert slots.shrink(seen=3) == 2
    assert slots.shrink(seen=3) is None  # the other run overlapped the first: no second step
    assert slots.shrink(seen=2) == 1 and slots.shrink(seen=1) is None  # never below one
    got_in = threading.Event()

    def third():
        with slots:
            got_in.set()

    t = threading.Thread(target=third)
    t.start()
    slots.__exit__(None, None, None)
    assert not got_in.wait(0.3)  # one still running, and the limit is now 1
    slots.__exit__(None, None, None)
    assert got_in.wait(5)
    t.join()


def test_retry_starved_sets_the_starved_run_aside_and_keeps_the_others(tmp_path):
    import json

    from mptlab.campaign.kernel import KernelBuild
    from mptlab.campaign.runner import Campaign
    from mptlab.spec.catalog import Catalog

    camp = tmp_path / "c.yaml"
    camp.write_text(
        "experiments:\n  e:\n    topology: two-path\n    paths: [wlan, 3g]\n"
        "    workload: {type: bulk, duration: 3s}\n    repetitions: 2\n"
    )
    runs = Catalog.load(camp).expand("e")
    kernel = KernelBuild(tmp_path, tmp_path)
    out = tmp_path / "out"
    for run, wait in zip(runs, (1.0, 8.0), strict=True):  # of 20 s: 5 % and 40 %
        d = out / "runs" / run.variant / f"rep-{run.repetition:03d}"
        d.mkdir(parents=True)
        (d / "run.json").write_text(
            json.dumps({"status": "ok", "seconds": 20.0, "host_cpu_wait_s": wait})
        )
    keep = Campaign(out, runs, kernel)
    assert [o.starved for o in (keep._previous(r) for r in runs)] == [False, True]
    retry = Campaign(out, runs, kernel, retry_starved=True)
    assert retry._previous(runs[0]).previous and retry._previous(runs[1]) is None
    assert (out / "runs" / "base" / "rep-001.starved-1" / "run.json").exists()
    assert not (out / "runs" / "base" / "rep-001").exists()


def test_a_relative_results_dir_becomes_absolute(tmp_path, monkeypatch):
    """The guest starts elsewhere: run dirs and entries must be absolute paths."""
    from mptlab.campaign.kernel import KernelBuild
    from mptlab.campaign.runner import Campaign

    monkeypatch.chdir(tmp_path)
    campaign = Campaign(Path("results") / "x", [], KernelBuild(tmp_path, tmp_path))
    assert campaign.out_dir == tmp_path / "results" / "x"


def test_host_dirs_under_tmp_are_mounted_back_once_each():
    """A checkout, venv or kernel cache under /tmp is hidden by the guest's own
    /tmp tmpfs: the guest gets each such dir back (parents only, no nesting)."""
    from mptlab.campaign.boot import hidden_host_dirs

    dirs = hidden_host_dirs(
        [Path("/tmp/x/cache"), Path("/tmp/x/cache/modules"), Path("/tmp/y"), Path("/var/tmp/z")]
    )
    assert "/tmp/x/cache" in dirs and "/tmp/y" in dirs
    assert "/tmp/x/cache/modules" not in dirs and "/var/tmp/z" not in dirs
    assert all(d.startswith("/tmp/") for d in dirs)


def test_a_campaign_of_some_variants_keeps_the_others_it_recorded(tmp_path):
    # `mptlab run --variant` (and `reproduce --all --run`, which runs the
    # variants the claims compare) may run part of an experiment into a dir
    from mptlab.campaign.kernel import KernelBuild
    from mptlab.campaign.runner import Campaign
    from mptlab.spec.catalog import Catalog

    camp = tmp_path / "c.yaml"
    camp.write_text(
        "experiments:\n  e:\n    topology: two-path\n    paths: [wlan, 3g]\n"
        "    workload: {type: bulk, duration: 3s}\n"
        "    matrix: {kernel.scheduler: [minrtt, blest, otias]}\n"
    )
    runs = Catalog.load(camp).expand("e")
    names = [r.variant for r in runs]
    kernel = KernelBuild(tmp_path, tmp_path)

    def recorded(subset):
        c = Campaign(tmp_path / "out", [r for r in runs if r.variant in subset], kernel)
        c.write_campaign(c.order())
        return [v["variant"] for v in c.dir.info()["variants"]]

    assert recorded(names[2:]) == names[2:]
    assert recorded(names) == names  # the whole experiment: its order
    assert recorded(names[1:2]) == names  # a part later: the others stay, in place
    assert recorded(names[:1]) == names


def test_the_figure_of_merit_counts_this_invocations_runs_failed_ones_too():
    import io

    from mptlab.campaign.execute import guest_seconds
    from mptlab.campaign.progress import summary

    report = CampaignReport(
        outcomes=[
            Outcome("a/rep-000", "ok", seconds=20, guest_s=90.0, host_cpu_s=15.0),
            Outcome("a/rep-001", "failed", "x", seconds=10, guest_s=30.0, host_cpu_s=5.0),
            Outcome("a/rep-002", "ok", seconds=20, previous=True, guest_s=90.0, host_cpu_s=15.0),
        ],
        wall_s=25.0,
    )
    cost = report.cost()
    assert cost == {
        "runs": 2,
        "guest_s": 120.0,
        "wall_s": 25.0,
        "host_cpu_s": 20.0,
        "guest_per_wall_s": 4.8,
        "guest_per_cpu_s": 6.0,
    }
    out = io.StringIO()
    summary("a", "/x", report, out=out)
    assert "a: cost: 120 s of experiment (guest time) in 25 s wall (4.8 per wall-s)" in (
        out.getvalue()
    )
    # the guest's own clock, boot excluded; nothing when the agent wrote no times
    assert guest_seconds({"started": 100.0, "finished": 190.5}) == 90.5
    assert guest_seconds({"started": 100.0}) is None and guest_seconds(None) is None
