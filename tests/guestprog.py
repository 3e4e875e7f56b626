"""Run a Python program inside a fresh guest: the ``guest`` fixture's
engine (tests/conftest.py), shared with the benchmarks that run the tests'
guest programs (bench/swap_matrix.py)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from mptlab.campaign.boot import run_script

REPO = Path(__file__).resolve().parent.parent


class GuestFailed(AssertionError):
    pass


def run_guest(
    kernel,
    run_dir: Path,
    code: str,
    *,
    timeout: float = 120,
    mem_mb: int = 256,
    clock: str = "real",
    rng_seed: int = 1,
):
    """Run ``code`` as root in a guest with the venv's interpreter and return
    ``(RESULT, run result)``.  The code sees ``RUN_DIR`` (writable),
    ``MODULES_DIR`` (the built modules) and a ``RESULT`` dict, returned as
    JSON.  A guest that fails raises GuestFailed with its logs' tails."""
    run_dir.mkdir(parents=True)
    program = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "RUN_DIR = Path(os.environ['MPTLAB_RUN_DIR'])\n"
        "MODULES_DIR = Path(os.environ['MPTLAB_MODULES_DIR'])\n"
        "RESULT = {}\n"
        "try:\n" + textwrap.indent(textwrap.dedent(code), "    ") + "\n"
        "finally:\n"
        "    (RUN_DIR / 'result.json').write_text(json.dumps(RESULT, default=str))\n"
    )
    (run_dir / "guest_main.py").write_text(program)
    result = run_script(
        kernel,
        run_dir,
        f"exec {sys.executable} $MPTLAB_RUN_DIR/guest_main.py\n",
        timeout=timeout,
        mem_mb=mem_mb,
        env={"MPTLAB_MODULES_DIR": str(kernel.modules_dir)},
        clock=clock,  # type: ignore[arg-type]
        rng_seed=rng_seed,
    )
    if not result.ok:
        log = result.guest_log.read_text() if result.guest_log.exists() else ""
        console = result.console_log.read_text()[-3000:]
        raise GuestFailed(
            f"guest {result.status}: {result.reason}\n--- guest.log\n{log[-6000:]}"
            f"\n--- console (tail)\n{console}"
        )
    return json.loads((run_dir / "result.json").read_text()), result
