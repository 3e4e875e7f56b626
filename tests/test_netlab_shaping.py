"""tc command generation for shaped links (pure; the real shaping is checked
by the link-fidelity tests that boot the kernel)."""

import pytest

from mptlab.guest.netlab import NETEM_LIMIT, shape_commands
from mptlab.spec.shapes import GilbertElliott, Queue, Shape


def joined(cmds):
    return [" ".join(c) for c in cmds]


def test_delay_only_link_is_a_single_netem_that_never_drops():
    cmds = joined(shape_commands("a-eth0", Shape(delay=12.5), rtt_ms=25))
    assert cmds == [
        f"tc qdisc replace dev a-eth0 root handle 1: netem limit {NETEM_LIMIT} delay 12.5ms"
    ]


def test_rate_limited_link_separates_delay_line_and_bottleneck_queue():
    cmds = joined(
        shape_commands("a-eth0", Shape(rate=25, delay=12.5, queue=Queue(packets=100)), 25)
    )
    assert len(cmds) == 3
    assert "netem" in cmds[0] and "delay 12.5ms" in cmds[0]
    assert "replace dev a-eth0 parent 1:1 handle 10: tbf rate 25mbit" in cmds[1]
    assert cmds[2].endswith("parent 10:1 handle 20: pfifo limit 100")


def test_queue_in_bytes_and_bdp():
    by_bytes = joined(shape_commands("d", Shape(rate=10, queue=Queue(bytes=64000)), 50))
    assert by_bytes[-1].endswith("bfifo limit 64000")
    # 1 BDP of 20 Mbit/s x 25 ms = 62500 bytes
    bdp = joined(shape_commands("d", Shape(rate=20, delay=12.5, queue=Queue(bdp=1)), 25))
    assert bdp[-1].endswith("bfifo limit 62500")
    assert Queue(bdp=2).limit_packets(20, 25) == 83  # ceil(125000 / 1514)


def test_loss_models_and_jitter():
    cmd = joined(shape_commands("d", Shape(delay=10, jitter=2, loss=1), 20))[0]
    assert "delay 10ms 2ms distribution normal" in cmd and "loss random 1%" in cmd
    ge = GilbertElliott(p=1, r=25, h=0, k=100)
    cmd = joined(shape_commands("d", Shape(gilbert_elliott=ge), 0))[0]
    assert "loss gemodel 1% 25% 100% 0%" in cmd


@pytest.mark.parametrize(
    "qdisc,leaf", [("codel", "codel limit"), ("fq_codel", "fq_codel limit"), ("red", "red limit")]
)
def test_aqm_disciplines(qdisc, leaf):
    cmds = joined(
        shape_commands("d", Shape(rate=10, delay=5, qdisc=qdisc, queue=Queue(packets=50)), 10)
    )
    assert leaf in cmds[-1]


def test_bad_values_are_rejected_with_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed: droptail, red, codel, fq_codel"):
        shape_commands("d", Shape(rate=1, qdisc="sfq"), 10)
    with pytest.raises(ValueError, match="allowed: uniform"):
        shape_commands("d", Shape(delay=5, jitter=1, jitter_distribution="cauchy"), 10)
