"""Runner bookkeeping that needs no guest (the runner itself is tested end
to end in test_campaign_e2e.py)."""

from orchestrator.runner import STARVED_WAIT_SHARE, CampaignReport, Outcome


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
