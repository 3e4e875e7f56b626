"""The guest's SBD unit without a kernel: trace lines in, observations and
decisions out (mptlab/guest/sbdu.py); the ground truth from topologies and
the scoring of decisions against it.  The kernel side is test_kernel_sbd's."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest

from mptlab.guest import sbdu
from mptlab.guest.config import Sbd, read
from mptlab.guest.sbd import SbdParams
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import plan


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load()


def owd_line(t: float, sport: int, seq: int, owd: int, length: int = 1448) -> str:
    return (
        f"          <idle>-0       [000] ..s1.  {t:.6f}: mptcp_subflow_owd: token=0a0b0c0d "
        f"saddr=10.0.1.1 sport={sport} daddr=10.0.9.2 dport=5201 seq={seq} len={length} "
        f"tsval=1 owd_us={owd}"
    )


class Unit:
    def __init__(self, params: SbdParams | None = None):
        self.obs, self.dec, self.applied = io.StringIO(), io.StringIO(), []
        self.unit = sbdu.SbdUnit(
            params or SbdParams(),
            self.obs,
            self.dec,
            lambda addr: 1 if addr == "10.0.1.1" else None,
            apply=self.applied.append,
        )

    def rows(self, which: str) -> list[dict]:
        text = (self.obs if which == "obs" else self.dec).getvalue()
        return list(csv.DictReader(text.splitlines()))


def test_feed_takes_the_delay_events_and_leaves_the_rest():
    u = Unit()
    other = "  bash-1 [000] ..... 1.0: mptcp_conn_stats: token=0a0b0c0d bytes=5"
    left = u.unit.feed(
        [owd_line(1.0, 40000, 1000, 5_000), other, owd_line(1.001, 40000, 2448, 5_100)]
    )
    assert left == [other]
    assert u.unit.samples == 2


def test_delays_are_relative_to_the_first_across_the_32_bit_wrap():
    sf = sbdu._Subflow(0xFFFF_FF00, 0, 1448)
    assert sf.relative(0xFFFF_FF00) == 0
    assert sf.relative(0x0000_0100) == 0x200  # wrapped forward
    assert sf.relative(0xFFFF_FE00) == -0x100


def test_losses_are_the_segments_a_hole_skipped():
    sf = sbdu._Subflow(0, 1000, 1000)  # highest byte 2000
    assert sf.lost(2000, 1000) == 0  # in order
    assert sf.lost(6000, 1000) == 3  # 3000..6000 skipped: three segments
    assert sf.lost(3000, 1000) == 0  # a re-send fills the hole: not a loss again
    assert sf.lost(7000, 1000) == 0
    # across the sequence-number wrap
    sf = sbdu._Subflow(0, 0xFFFF_F000, 1000)
    assert sf.lost((0xFFFF_F000 + 3000) & 0xFFFF_FFFF, 1000) == 2


def test_a_queue_that_builds_slowly_and_drains_fast_is_decided_and_sent_to_the_sender():
    """One subflow behind a sawtooth queue (negative skew): after enough
    history a decision puts it in a bottleneck group of its own (id > 0),
    and the receiver's view of it is handed to the kernel, numbered."""
    u = Unit()
    t, seq = 0.0, 0
    for k in range(40_000):  # 40 s at 1000 packets/s
        t = k / 1000
        phase = t % 2.0  # 1.8 s of growth, 0.2 s of drain
        queue = phase / 1.8 * 20_000 if phase < 1.8 else (2.0 - phase) / 0.2 * 20_000
        u.unit.feed([owd_line(t, 40000, seq, 10_000 + int(queue))])
        seq += 1448
        if k % 100 == 0:
            u.unit.advance(t, 1000.0)
    decisions = u.rows("dec")
    assert decisions and u.unit.decisions == len(decisions)
    assert decisions[-1]["group"] != "0" and decisions[-1]["path"] == "1"
    assert float(decisions[-1]["t"]) > 1000.0  # the offset applies
    # the receiver's own address and port first, flow 1, the decision's wire id
    wire_id = int(decisions[-1]["decision"]) % 0xFFFF + 1
    assert u.applied[-1] == f"10.0.1.1 40000 10.0.9.2 5201 {decisions[-1]['group']} 1 {wire_id}"
    assert all(line.split()[-1] != "0" for line in u.applied)  # 0 would mean "no decision"
    obs = u.rows("obs")
    assert obs and float(obs[-1]["skew_est"]) < -0.01 and obs[-1]["bottlenecked"] == "1"


def write_decisions(path: Path, rows: list[tuple[float, int, int, int]]) -> Path:
    """rows: (t, decision, path, group), all of token aaaa0001."""
    lines = [sbdu.DECISION_COLUMNS]
    for t, d, p, g in rows:
        lines.append(f"{t},aaaa0001,{d},10.0.{p}.1,4000{p},10.0.9.2,5201,{p},{g}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_score_counts_a_decision_right_only_when_every_pair_is_right(tmp_path):
    csv_path = write_decisions(
        tmp_path / "d.csv",
        [
            (103.5, 1, 1, 1),
            (103.5, 1, 2, 2),  # apart: wrong while shared
            (107.0, 2, 1, 1),
            (107.0, 2, 2, 1),  # together: right
            (110.5, 3, 1, 1),
            (110.5, 3, 2, 1),  # together, but now not shared: wrong
            (114.0, 4, 1, 0),
            (114.0, 4, 2, 0),  # neither bottlenecked: apart, right
            (114.5, 5, 1, 2),
            (114.5, 5, 2, 1),  # apart: right
        ],
    )
    truth = [(0.0, [{1, 2}]), (9.0, [])]
    judged = sbdu.judge(csv_path, truth, start=100.0)
    assert [j.right for j in judged] == [False, True, False, True, True]
    assert [j.shared for j in judged] == [True, True, False, False, False]
    s = sbdu.score(judged, truth)
    assert s["sbd_decisions"] == 5
    assert s["sbd_accuracy"] == pytest.approx(3 / 5)
    assert s["sbd_accuracy_shared"] == pytest.approx(1 / 2)
    assert s["sbd_accuracy_nonshared"] == pytest.approx(2 / 3)
    assert s["sbd_first_correct_s"] == pytest.approx(7.0)
    assert s["sbd_bottlenecked"] == pytest.approx(8 / 10)
    # the warm-up's decisions count for the first right one, not for accuracy
    later = sbdu.score(judged, truth, warmup=8.0)
    assert later["sbd_decisions"] == 3 and later["sbd_accuracy"] == pytest.approx(2 / 3)
    assert later["sbd_first_correct_s"] == pytest.approx(7.0)
    # the one transition (at 9 s) was first met by the decision at 14.5 s
    # (the one at 14 s is right but found nothing bottlenecked: no detection)
    assert s["sbd_transition_delay_s"] == pytest.approx(5.5)
    assert s["sbd_transitions_missed"] == 0


def test_score_without_a_right_decision_has_no_first_time(tmp_path):
    csv_path = write_decisions(tmp_path / "d.csv", [(1.0, 1, 1, 1), (1.0, 1, 2, 2)])
    truth = [(0.0, [{1, 2}])]
    s = sbdu.score(sbdu.judge(csv_path, truth, start=0.0), truth)
    assert s["sbd_accuracy"] == 0 and "sbd_first_correct_s" not in s
    empty = write_decisions(tmp_path / "e.csv", [])
    assert sbdu.judge(empty, truth, start=0.0) == []
    assert sbdu.score([], truth) == {"sbd_decisions": 0}


def test_scores_are_written_one_row_per_decision(tmp_path):
    csv_path = write_decisions(tmp_path / "d.csv", [(1.0, 1, 1, 1), (1.0, 1, 2, 1)])
    judged = sbdu.judge(csv_path, [(0.0, [{1, 2}])], start=0.0)
    sbdu.write_scores(tmp_path / "s.csv", judged)
    rows = list(csv.DictReader((tmp_path / "s.csv").read_text().splitlines()))
    assert rows == [
        {
            "t": "1.000",
            "decision": "1",
            "shared": "1",
            "right": "1",
            "bottlenecked": "2",
            "subflows": "2",
        }
    ]


@pytest.mark.parametrize(
    ("topology", "paths", "shared"),
    [
        ("two-path", ["cc-20m-20ms", "cc-20m-20ms"], []),
        ("two-path-shared", ["cc-20m-20ms"], [{1, 2}]),
        ("nsb-5", ["cc-20m-20ms"] * 5, []),
        ("sb-4", ["cc-20m-20ms"], [{1, 2, 3, 4}]),
        # every path crosses the shared B3 at the same rate: a tie, so shared
        ("shifting", ["cc-20m-20ms"] * 3, [{1, 2}]),
    ],
)
def test_the_topology_says_which_paths_share_a_bottleneck(catalog, topology, paths, shared):
    p = plan(catalog.topologies[topology], dict(catalog.profiles), paths)
    assert sbdu.topology_truth(p, "client", "server") == shared


def test_the_slowest_link_is_the_bottleneck(catalog):
    """On the shifting topology both paths cross B3: they share their
    bottleneck when B3 is the slowest link, not when B1 and B2 are."""
    profiles = dict(catalog.profiles)
    fast, slow = "sbd-100m-10ms", "sbd-20m-10ms"
    b3 = plan(catalog.topologies["shifting"], profiles, [fast, fast, slow])
    assert sbdu.topology_truth(b3, "client", "server") == [{1, 2}]
    b12 = plan(catalog.topologies["shifting"], profiles, [slow, slow, fast])
    assert sbdu.topology_truth(b12, "client", "server") == []


def test_explicit_truth_phases_replace_the_topology():
    data = {"truth": [{"at": 0.0, "shared": [[1, 2]]}, {"at": 30_000.0, "shared": []}]}
    config = read(Sbd, data, "config.kernel.sbd")
    phases = sbdu.truth_phases(config, None, "client", "server")  # type: ignore[arg-type]
    assert phases == [(0.0, [{1, 2}]), (30.0, [])]
    assert sbdu._truth_at(phases, 29.9) == [{1, 2}] and sbdu._truth_at(phases, 30.0) == []
    assert not math.isnan(phases[1][0])
