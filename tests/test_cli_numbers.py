"""Numbers on the command line that cannot mean what was typed are refused
before anything runs (issue 25: ``--reps 0`` started a full campaign)."""

import pytest

from mptlab import cli
from mptlab.spec.catalog import Catalog
from mptlab.spec.yamlsrc import SpecError


@pytest.mark.parametrize(
    "argv, says",
    [
        (["run", "blest-3g-wlan", "--reps", "0"], "--reps: 0 is too small (allowed: 1 or more"),
        (["run", "blest-3g-wlan", "--reps", "-3"], "--reps: -3 is too small"),
        (["run", "blest-3g-wlan", "--reps", "2.5"], "--reps: '2.5' is not a whole number"),
        (["run", "blest-3g-wlan", "--jobs", "0"], "--jobs: 0 is too small"),
        (["run", "blest-3g-wlan", "--seed", "-1"], "--seed: -1 is too small (allowed: 0 or more)"),
        (["show", "blest-3g-wlan", "--reps", "0"], "--reps: 0 is too small"),
        (["reproduce", "--all", "--run", "--reps", "0"], "--reps: 0 is too small"),
        (["stats", "x", "--alpha", "0.7"], "--alpha: 0.7 is outside (0, 0.5]"),
        (["stats", "x", "--power", "1"], "--power: 1 is outside (0, 0.999]"),
    ],
)
def test_a_count_that_cannot_mean_what_was_typed_is_refused(argv, says, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_good_numbers_still_parse():
    args = cli.parser().parse_args(
        ["run", "blest-3g-wlan", "--reps", "3", "--jobs", "1", "--seed", "0"]
    )
    assert (args.reps, args.jobs, args.seed) == (3, 1, 0)


@pytest.mark.parametrize("reps", [0, -3])
def test_the_python_api_refuses_them_too(reps):
    with pytest.raises(SpecError, match="repetitions"):
        Catalog.load().expand("blest-3g-wlan", reps)


def test_main_leaves_the_callers_sigpipe_handling_alone(capsys):
    """main() lets `mptlab show X | head` end quietly (SIGPIPE: default) but
    gives the caller its own handling back: in-process callers such as these
    tests would otherwise be killed by a write to a closed socket."""
    import signal

    before = signal.getsignal(signal.SIGPIPE)
    with pytest.raises(SystemExit):
        cli.main(["run", "blest-3g-wlan", "--reps", "0"])
    assert signal.getsignal(signal.SIGPIPE) == before
