"""Shared-bottleneck detection (mptlab.guest.sbd) on synthetic one-way delays:
shared and separate bottlenecks, queue-free paths, the skew hysteresis, loss,
the observation filter, clock offsets, the formulas on a hand-computed case,
and the parameters."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from mptlab.guest.sbd import (
    Decision,
    Detector,
    FlowEstimates,
    Observation,
    SbdParams,
    decide,
    group,
    is_bottlenecked,
)

Owd = Callable[[float, random.Random], float]  # (t, rng) -> OWD in microseconds


def reno_queue(t: float, period: float, depth_us: float, phase: float = 0.0) -> float:
    """A Reno-like bottleneck queue: after each loss it drains quickly (the
    last 10% of the period) and refills slowly, spending most of its time near
    full (cube-root rise).  Most samples lie above the mean: negative skew."""
    u = ((t + phase) % period) / period
    if u < 0.9:
        return depth_us * (u / 0.9) ** (1 / 3)
    return depth_us * (1 - (u - 0.9) / 0.1)


def run(
    flows: dict[str, tuple[float, Owd]],
    seconds: float = 21.0,
    seed: int = 1,
    params: SbdParams | None = None,
    loss_every: dict[str, int] | None = None,
) -> list[Observation | Decision]:
    """Feed ``flows`` (name -> (packets per second, OWD process)) to a detector
    for ``seconds``, a packet of a flow lost every ``loss_every[name]``-th."""
    rng = random.Random(seed)
    events = []
    for name, (pps, _) in flows.items():
        k = 0
        while k / pps < seconds:
            events.append((k / pps + rng.random() * 0.3 / pps, k, name))
            k += 1
    events.sort()
    det = Detector(params or SbdParams())
    out: list[Observation | Decision] = []
    for t, k, name in events:
        every = (loss_every or {}).get(name)
        if every and k % every == every - 1:
            det.lost(name, t)
        else:
            det.packet(name, t, flows[name][1](t, rng))
        if k % 20 == 0:
            out += det.advance(t)
    out += det.advance(seconds)
    return out


def decisions(out: list[Observation | Decision]) -> list[Decision]:
    return [o for o in out if isinstance(o, Decision)]


def observations(out: list[Observation | Decision]) -> list[Observation]:
    return [o for o in out if isinstance(o, Observation)]


def last_estimates(out: list[Observation | Decision]) -> dict[object, FlowEstimates]:
    return {e.flow: e for e in observations(out)[-1].estimates}


def shared(t: float) -> float:
    return reno_queue(t, period=2.1, depth_us=20_000)


# -- 1-3: shared, separate and no bottlenecks ------------------------------------


def test_two_flows_through_one_bottleneck_share_a_group():
    out = run(
        {
            # different path delays, rates and noise, the same queue
            "a": (100, lambda t, r: 10_000 + shared(t) + r.gauss(0, 300)),
            "b": (70, lambda t, r: 55_000 + shared(t) + r.gauss(0, 300)),
        }
    )
    est = last_estimates(out)
    assert est["a"].skew_est < -0.01 and est["b"].skew_est < -0.01
    assert est["a"].freq_est == pytest.approx(est["b"].freq_est, abs=0.1)
    dec = decisions(out)
    assert [d.decision_id for d in dec] == [1, 2, 3, 4, 5]  # 59 intervals of 0.35 s
    assert dec[0].groups == {"a": 0, "b": 0}  # 10 intervals: not enough history yet
    for d in dec[2:]:
        assert d.groups["a"] == d.groups["b"] == 1


def test_flows_through_different_bottlenecks_are_bottlenecked_apart():
    out = run(
        {
            "a": (100, lambda t, r: 10_000 + shared(t) + r.gauss(0, 300)),
            # slower oscillation: split by freq_est
            "slow": (100, lambda t, r: 20_000 + reno_queue(t, 7.0, 40_000) + r.gauss(0, 300)),
            # same period, three times the depth: split by var_est
            "deep": (100, lambda t, r: 20_000 + reno_queue(t, 2.1, 60_000, 0.7) + r.gauss(0, 300)),
        }
    )
    est = last_estimates(out)
    assert all(e.bottlenecked for e in est.values())
    assert est["a"].freq_est - est["slow"].freq_est > 0.1  # p_f
    assert abs(est["a"].freq_est - est["deep"].freq_est) <= 0.1
    assert est["deep"].var_est > 2 * est["a"].var_est
    obs = observations(out)[-1]
    assert sorted(obs.groups) == [("a",), ("deep",), ("slow",)]
    for d in decisions(out)[2:]:
        g = d.groups
        assert 0 not in (g["a"], g["slow"], g["deep"])
        assert len({g["a"], g["slow"], g["deep"]}) == 3


def test_paths_without_a_queue_are_not_bottlenecked():
    out = run(
        {
            "a": (100, lambda t, r: 10_000 + shared(t) + r.gauss(0, 300)),
            "b": (100, lambda t, r: 30_000 + shared(t) + r.gauss(0, 300)),
            "flat": (100, lambda t, r: 7_000.0),
            # an idle path: base delay plus rare, short positive excursions
            "idle": (100, lambda t, r: 5_000 + r.expovariate(1 / 200)),
        }
    )
    est = last_estimates(out)
    assert est["flat"].skew_est == 0 and est["flat"].var_est == 0
    assert est["idle"].skew_est > 0.1
    for d in decisions(out):
        assert d.groups["flat"] == 0 and d.groups["idle"] == 0
    assert decisions(out)[-1].groups["a"] == decisions(out)[-1].groups["b"] == 1


# -- 4: hysteresis ---------------------------------------------------------------


def two_level(det: Detector, flow: str, k: int, low_fraction: float, per: int = 20) -> None:
    """Interval k (T = 1 s): ``per`` samples, ``low_fraction`` of them at 0 and
    the rest at 1000 us, interleaved: skew_est = 2 * low_fraction - 1 whatever
    the long-term mean (it always lies between the two levels)."""
    lows = round(low_fraction * per)
    for j in range(per):
        owd = 0.0 if (j * lows) % per < lows else 1000.0
        det.packet(flow, k + (j + 0.5) / per, owd)


def test_skew_between_c_s_and_c_h_keeps_a_bottleneck_but_does_not_make_one():
    assert is_bottlenecked(-0.02, 0.0, False, SbdParams())
    assert not is_bottlenecked(0.1, 0.0, False, SbdParams())
    assert is_bottlenecked(0.1, 0.0, True, SbdParams())
    assert not is_bottlenecked(0.31, 0.0, True, SbdParams())
    assert is_bottlenecked(0.9, 0.11, False, SbdParams())

    det = Detector(SbdParams(interval_s=1.0, n=10, m=10, min_intervals=3))
    flags: dict[str, list[bool]] = {"held": [], "never": [], "released": []}
    skews: dict[str, list[float]] = {"held": [], "never": [], "released": []}
    for k in range(40):
        two_level(det, "held", k, 0.4 if k < 12 else 0.55)  # skew -0.2, then +0.1
        two_level(det, "never", k, 0.55)  # +0.1 throughout
        two_level(det, "released", k, 0.4 if k < 12 else 0.75)  # -0.2, then +0.5
        for o in det.advance(k + 1):
            if isinstance(o, Observation):
                for e in o.estimates:
                    flags[e.flow].append(e.bottlenecked)  # type: ignore[index]
                    skews[e.flow].append(e.skew_est)  # type: ignore[index]
    assert skews["held"][11] == pytest.approx(-0.2) and skews["held"][-1] == pytest.approx(0.1)
    assert skews["never"][-1] == pytest.approx(0.1)
    assert flags["held"][:3] == [False] * 3  # min_intervals: 3 compared intervals
    assert all(flags["held"][3:])  # through the whole climb from -0.2 to +0.1
    assert not any(flags["never"])
    assert all(flags["released"][3:15]) and not any(flags["released"][25:])
    first_off = flags["released"].index(False, 3)
    assert skews["released"][first_off] >= 0.3 > skews["released"][first_off - 1]


# -- 5: loss ---------------------------------------------------------------------


def test_loss_above_p_l_makes_a_flat_path_bottlenecked():
    out = run(
        {
            "lossy": (100, lambda t, r: 9_000.0),
            "lossy2": (100, lambda t, r: 4_000.0),
            "clean": (100, lambda t, r: 9_000.0),
            "light": (100, lambda t, r: 9_000.0),
        },
        loss_every={"lossy": 5, "lossy2": 5, "light": 20},
    )
    est = last_estimates(out)
    assert est["lossy"].skew_est == 0 and est["lossy"].pkt_loss == pytest.approx(0.2, abs=0.01)
    assert est["light"].pkt_loss == pytest.approx(0.05, abs=0.01)
    g = decisions(out)[-1].groups
    assert g["lossy"] == g["lossy2"] != 0  # same loss rate, same flat delay
    assert g["clean"] == g["light"] == 0


def test_the_last_grouping_step_uses_loss_when_a_group_is_lossy_and_skew_otherwise():
    def est(flow: str, skew: float, loss: float) -> FlowEstimates:
        return FlowEstimates(flow, skew, 100.0, 0.2, loss, True)

    p = SbdParams()
    # loss-driven: 0.20 and 0.21 are within p_d (relative), 0.4 is not; skews are ignored
    lossy = [est("a", -0.5, 0.20), est("b", 0.2, 0.21), est("c", -0.5, 0.4)]
    assert group(lossy, p) == (("a", "b"), ("c",))
    # not lossy: skew within p_s (absolute, chained between neighbours)
    calm = [est("a", -0.50, 0.0), est("b", -0.42, 0.0), est("c", -0.34, 0.0), est("d", -0.2, 0)]
    assert group(calm, p) == (("a", "b", "c"), ("d",))
    # var_est: relative to the larger, p_mad = 0.1
    var = [FlowEstimates(f, -0.5, v, 0.2, 0.0, True) for f, v in [("x", 100), ("y", 91), ("z", 80)]]
    assert group(var, p) == (("x", "y"), ("z",))
    # freq_est: absolute, p_f = 0.1; and only bottlenecked flows are grouped
    freq = [
        FlowEstimates(f, -0.5, 100, q, 0.0, b)
        for f, q, b in [("x", 0.1, True), ("y", 0.3, True), ("n", 0.1, False)]
    ]
    assert group(freq, p) == (("x",), ("y",))


# -- 6: the observation filter ---------------------------------------------------


def block(together: int, extra: list[tuple[str, ...]] | None = None) -> list[Observation]:
    """10 observations: a and b bottlenecked in all, grouped together in
    ``together`` of them; c bottlenecked alone in all."""
    obs = []
    for i in range(10):
        groups: list[tuple[str, ...]] = [("a", "b")] if i < together else [("a",), ("b",)]
        groups.append(("c",))
        obs.append(Observation(float(i), i, (), tuple(groups)))
    return obs


def test_five_of_ten_observations_group_flows_four_do_not():
    p = SbdParams()
    assert decide(block(5), p) == {"a": 1, "b": 1, "c": 2}  # the tie groups
    assert decide(block(4), p) == {"a": 1, "b": 2, "c": 3}  # apart, each bottlenecked
    assert decide(block(10), p, flows=["z", "c", "a", "b"]) == {"z": 0, "c": 1, "a": 2, "b": 2}


def test_decision_groups_are_the_transitive_closure_and_rare_flows_get_group_0():
    p = SbdParams()
    obs = [
        Observation(float(i), i, (), (("a", "b"),) if i < 5 else (("b", "c"), ("d",)))
        for i in range(10)
    ]
    # a~b 5 times, b~c 5 times, a~c never: one group; d seen only 5 times: alone
    assert decide(obs, p) == {"a": 1, "b": 1, "c": 1, "d": 2}
    rare = [Observation(float(i), i, (), (("a", "b"),) if i < 4 else ()) for i in range(10)]
    assert decide(rare, p) == {"a": 0, "b": 0}


def test_a_decision_follows_every_ten_observations_in_time_order():
    det = Detector()
    det.packet("f", 5.0, 100.0)
    assert det.advance(5.0 + 0.35 - 1e-9) == []
    first = det.advance(5.0 + 0.35)
    assert [(type(o).__name__, o.t) for o in first] == [("Observation", 5.0 + 0.35)]
    det.packet("f", 9.0, 100.0)  # closes intervals 1..10 itself; advance returns them
    det.packet("g", 9.0, 100.0)
    later = det.advance(9.0)
    kinds = [type(o).__name__ for o in later]
    assert kinds == ["Observation"] * 9 + ["Decision"] + ["Observation"]
    assert [o.index for o in later if isinstance(o, Observation)] == list(range(1, 11))
    dec = later[9]
    assert isinstance(dec, Decision) and dec.decision_id == 1 and dec.t == later[8].t
    assert dec.groups == {"f": 0}  # g appeared after the block's last interval closed
    assert [o.t for o in later] == sorted(o.t for o in later)


# -- 7: clock offsets ----------------------------------------------------------------


def test_a_constant_owd_offset_changes_no_estimate():
    def flows(offset: float) -> dict[str, tuple[float, Owd]]:
        return {
            "a": (100, lambda t, r: 10_000 + shared(t) + r.gauss(0, 300)),
            "b": (80, lambda t, r: offset + 40_000 + shared(t) + r.gauss(0, 300)),
            "c": (60, lambda t, r: offset + 20_000 + reno_queue(t, 7.0, 40_000) + r.gauss(0, 300)),
        }

    plain, shifted = run(flows(0.0), seed=3), run(flows(1e6), seed=3)
    assert len(plain) == len(shifted)
    for x, y in zip(observations(plain), observations(shifted), strict=True):
        assert x.groups == y.groups
        for ex, ey in zip(x.estimates, y.estimates, strict=True):
            assert ex.skew_est == pytest.approx(ey.skew_est, abs=1e-12)
            assert ex.var_est == pytest.approx(ey.var_est, rel=1e-9)
            assert ex.freq_est == ey.freq_est and ex.bottlenecked == ey.bottlenecked
    assert [d.groups for d in decisions(plain)] == [d.groups for d in decisions(shifted)]


# -- 8: the formulas on a hand-computed case -----------------------------------------


def test_skew_var_freq_and_loss_by_hand():
    """T = 1 s, N = M = 4.  Interval means m_k; mean_OWD = mean of the closed
    intervals' means (the last M); var about the previous interval's mean."""
    series = {0: [10, 20], 1: [12, 30, 14], 2: [16, 17, 40, 11], 3: [], 4: [5, 6], 5: [17, 17]}

    def feed(p_v: float) -> list[FlowEstimates]:
        det = Detector(SbdParams(interval_s=1.0, n=4, m=4, p_v=p_v, min_intervals=1))
        out: list[FlowEstimates] = []
        for k, samples in series.items():
            for j, owd in enumerate(samples):
                det.packet("x", k + 0.1 * j, owd)  # t0 = 0
            if k == 4:
                det.lost("x", 4.5, 2)
            out += [o.estimates[0] for o in det.advance(k + 1) if isinstance(o, Observation)]
        return out

    est = feed(p_v=0.5)
    # interval 0: mean 15, nothing to compare against yet
    assert (est[0].skew_est, est[0].var_est, est[0].freq_est) == (0, 0, 0)
    # interval 1 vs mean_OWD = 15 and previous mean 15: 12, 14 below, 30 above
    assert est[1].skew_est == pytest.approx(1 / 3)
    assert est[1].var_est == pytest.approx((3 + 15 + 1) / 3)
    # interval 2: mean_OWD = (15 + 56/3) / 2 = 101/6 -> 16, 11 below, 17, 40 above;
    # previous mean 56/3 -> |dev| = 8/3 + 5/3 + 64/3 + 23/3 = 100/3
    assert est[2].skew_est == pytest.approx((1 + 0) / (3 + 4))
    assert est[2].var_est == pytest.approx((19 + 100 / 3) / 7)
    # interval 3 is empty: nothing changes but the loss window
    assert est[3].skew_est == est[2].skew_est and est[3].var_est == est[2].var_est
    # interval 4: mean_OWD = (15 + 56/3 + 21) / 3 = 164/9 -> 5, 6 below; prev mean 21.
    # Interval 0 has left the N = M = 4 window.
    assert est[4].skew_est == pytest.approx((1 + 0 + 2) / (3 + 4 + 2))
    var4 = (19 + 100 / 3 + (16 + 15)) / 9
    assert est[4].var_est == pytest.approx(var4)
    assert est[4].pkt_loss == pytest.approx(2 / (2 + 9))
    # means 56/3, 21, 5.5 around (56/3 + 21 + 5.5) / 3 = 15.06, band 0.5 * var4 = 4.63:
    # 18.67 in the band, 21 above, 5.5 below -> one crossing in N = 4
    assert est[4].freq_est == pytest.approx(1 / 4)
    # interval 5: mean_OWD = (56/3 + 21 + 5.5) / 3 = 15.06 -> both 17s above; prev mean 5.5
    assert est[5].skew_est == pytest.approx((0 + 2 - 2) / (4 + 2 + 2))
    var5 = (100 / 3 + 31 + 2 * 11.5) / 8
    assert est[5].var_est == pytest.approx(var5)
    assert est[5].pkt_loss == pytest.approx(2 / (2 + 8))
    # means 21, 5.5, 17 around 14.5, band 0.5 * var5 = 5.46: above, below, in band
    assert est[5].freq_est == pytest.approx(1 / 4)
    # without the band 17 counts as above: two crossings
    assert feed(p_v=0.0)[5].freq_est == pytest.approx(2 / 4)


# -- robustness -------------------------------------------------------------------------


def test_silent_flows_late_flows_and_empty_intervals_do_not_break_anything():
    det = Detector()
    assert det.advance(100.0) == []  # nothing seen yet
    out: list[Observation | Decision] = []
    for i in range(2000):  # 20 s
        t = i / 100
        det.packet("a", t, 10_000 + shared(t))
        if t < 5:
            det.packet("quiet", t, 5_000 + shared(t))
        elif t < 8:
            det.lost("quiet", t)  # only losses, no samples
        if t >= 12:
            det.packet("late", t, 3_000 + shared(t))
        out += det.advance(t)
    out += det.advance(30.0)  # ten empty intervals for everyone
    obs = observations(out)
    quiet = [e for o in obs for e in o.estimates if e.flow == "quiet"]
    assert max(e.pkt_loss for e in quiet) == pytest.approx(1.0)
    assert not quiet[-1].bottlenecked
    late = [(o.t, e.bottlenecked) for o in obs for e in o.estimates if e.flow == "late"]
    assert late[0][0] == pytest.approx(12.25) and not any(b for t, b in late if t < 12 + 3.4)
    assert any(b for _, b in late)
    assert all(d.groups.keys() <= {"a", "quiet", "late"} for d in decisions(out))


# -- 9: parameters -------------------------------------------------------------------------


def test_params_from_a_mapping_and_their_errors():
    p = SbdParams.from_mapping({"n": 20, "m": 20.0, "c_s": 0, "interval_s": 1})
    assert (p.n, p.m, p.c_s, p.interval_s, p.p_v) == (20, 20, 0.0, 1.0, 0.7)
    assert isinstance(p.m, int) and isinstance(p.c_s, float)
    assert SbdParams() == SbdParams.from_mapping({})
    assert (SbdParams().c_s, SbdParams().observations, SbdParams().min_seen) == (-0.01, 10, 5)
    with pytest.raises(ValueError, match=r"unknown SBD parameter 'N'; allowed: interval_s, n, m, "):
        SbdParams.from_mapping({"N": 50})
    bad = {
        "n": (1, "n must be >= 2"),
        "interval_s": (-0.35, "interval_s must be > 0"),
        "min_seen": (11, "min_seen must be between 1 and observations=10"),
        "m": (60, "m must be between 1 and n=50"),
        "c_h": (-0.5, "c_s <= c_h"),
        "p_l": (1.5, "p_l must be in"),
        "p_mad": (-0.1, "p_mad must be >= 0"),
    }
    for key, (value, message) in bad.items():
        with pytest.raises(ValueError, match=message):
            SbdParams.from_mapping({key: value})
    for key, value in [("n", 2.5), ("observations", True), ("c_s", float("nan"))]:
        with pytest.raises(ValueError, match=key):
            SbdParams.from_mapping({key: value})
    with pytest.raises(ValueError, match="lost count"):
        Detector().lost("a", 0.0, -1)
