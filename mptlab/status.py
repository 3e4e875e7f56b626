"""Status names of runs, in one place (plain constants: the guest imports this).

``result.json`` (written by the guest agent) says what the guest saw:

- ``ok``: the workload finished and its metrics are there;
- ``error``: the workload or the agent failed (``error`` and ``traceback``);
- ``stalled``: the stall watchdog saw the workload's data level frozen with
  data outstanding for ``stall_timeout`` and stopped the run (``reason``,
  ``stall``, ``traces/stall-snapshot.json``).

``run.json`` (written by the host) holds the run's outcome, one of
``RUN_STATUSES``; everything but ``ok`` is a run that did not give a result
and is counted and listed as such (the CLI, ``mptlab stats``, the report).
"""

from __future__ import annotations

# result.json
RESULT_OK = "ok"
RESULT_ERROR = "error"
RESULT_STALLED = "stalled"

# run.json
OK = "ok"
FAILED = "failed"  # the guest program failed or reported an error
STALLED = "stalled"  # the stall watchdog ended the run (result.json status stalled)
TIMEOUT = "timeout"  # killed after timeout_s
PANIC = "panic"  # kernel panic
CRASHED = "crashed"  # the guest died without a status, or a host-side error
RUN_STATUSES = (OK, FAILED, STALLED, TIMEOUT, PANIC, CRASHED)
NOT_OK = tuple(s for s in RUN_STATUSES if s != OK)


def outcome(boot_status: str, boot_reason: str, result: dict | None) -> tuple[str, str]:
    """The run's (status, reason) from how the guest ended (``BootResult``)
    and what it wrote to ``result.json`` (None: nothing).  A guest that ran
    to its end (``ok`` or ``failed``) is judged by its result; a timeout,
    panic or crash stays what it was."""
    if boot_status not in (OK, FAILED):
        return boot_status, boot_reason
    if result is None:
        return FAILED, boot_reason or "the guest wrote no result.json"
    status = result.get("status")
    if status == RESULT_STALLED:
        return STALLED, result.get("reason") or "stalled (no reason recorded)"
    if status != RESULT_OK:
        return FAILED, result.get("error") or boot_reason or f"result.json status {status!r}"
    if boot_status != OK:
        return FAILED, boot_reason
    return OK, ""


def breakdown(statuses) -> str:
    """``"2 failed, 1 stalled"``: the not-ok statuses with their counts, in
    ``RUN_STATUSES`` order (then any other name), or ``""``."""
    counts: dict[str, int] = {}
    for s in statuses:
        if s != OK:
            counts[s] = counts.get(s, 0) + 1
    order = [s for s in RUN_STATUSES if s in counts] + sorted(set(counts) - set(RUN_STATUSES))
    return ", ".join(f"{counts[s]} {s}" for s in order)
