"""The determinism guard, second half (issue 44): the reference run of
tests/test_aaa_determinism_guard.py again, after everything else in the
suite (this file sorts last), asserting the same numbers and traces.

If the early run did not happen in this session (``pytest -k``, a single
file, the early one failed), this test makes both runs itself, one after
the other: it then checks only that the run repeats on this machine now.
"""

from __future__ import annotations

import json

import pytest
from test_aaa_determinism_guard import EARLY, record, reference_run

from mptlab.campaign import provenance

pytestmark = pytest.mark.kernel


def test_the_reference_run_repeats_after_the_suite(kernel, request, tmp_path_factory):
    early = request.config.stash.get(EARLY, None)
    if early is None:
        early = reference_run(tmp_path_factory.mktemp("determinism-early"))
    late = reference_run(tmp_path_factory.mktemp("determinism-late"))
    first, first_prov, first_traces = record(early)
    second, second_prov, second_traces = record(late)
    # said with the failure: whether the machine's inputs of the guest moved
    # meanwhile (a package the suite installed, ...), which would explain it
    before, after = (
        json.loads((d / "run.json").read_text())["guest_inputs"] for d in (early, late)
    )
    why = provenance.guest_inputs_changes(before, after) or ["no recorded guest input changed"]
    assert first["status"] == "ok", first
    assert first == second, why
    assert first_prov == second_prov, why
    assert first_traces.keys() == second_traces.keys()
    for name, data in first_traces.items():
        assert data == second_traces[name], (f"traces/{name} differs", why)
