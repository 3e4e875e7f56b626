"""Runner bookkeeping that needs no guest (the runner itself is tested end
to end in test_campaign_e2e.py)."""

from orchestrator.runner import STARVED_LATENESS_MS, CampaignReport, Outcome


def test_runs_whose_guest_waited_for_cpu_are_flagged_but_not_failed():
    report = CampaignReport(
        [
            Outcome("a/rep-000", "ok", lateness_ms=0.4),
            Outcome("a/rep-001", "ok", lateness_ms=STARVED_LATENESS_MS + 0.1),
            Outcome("a/rep-002", "ok"),  # no samples (tracing off): not judged
            Outcome("a/rep-003", "timeout", lateness_ms=50.0),  # failed, reported as such
        ]
    )
    assert [o.run_id for o in report.starved] == ["a/rep-001"]
    assert [o.run_id for o in report.failed] == ["a/rep-003"]
