"""The stall watchdog on the real kernel, through the production path
(catalog, Campaign, guest agent): an MPTCP bulk transfer whose two paths are
blackholed two seconds in (a link event: loss 100 % both ways) ends as
``stalled`` well before its timeout, with a snapshot, a reason in words and
the kernel's counters; the same transfer left alone ends ok, with the
counters and a watchdog that did not fire; and an application-paced sender
idle for twice the stall timeout between blocks is not stalled."""

from __future__ import annotations

import json
import textwrap

import pytest

from mptlab.campaign.runner import Campaign
from mptlab.spec.catalog import Catalog

pytestmark = pytest.mark.kernel

CAMPAIGN = """\
experiments:
  stall:
    topology: two-path
    paths: [wlan, wlan]
    kernel: {path_manager: {subflows: 2, add_addr_accepted: 2}}
    workload: {type: bulk, duration: 30s}
    timeout: 60s
    variants:
      - name: blackholed
        events:
          - {at: 2s, link: path1, set: {loss: 100%}}
          - {at: 2s, link: path2, set: {loss: 100%}}
      - name: fine
        workload: {type: bulk, duration: 4s}
      - name: idle    # a block every 4.1 s, twice the stall timeout: idle, not stalled
        workload: {type: blocks, block_size: 8KiB, rate: 16kbit, duration: 13s}
        stall_timeout: 2s
"""


def test_a_blackholed_transfer_ends_stalled_and_a_fine_one_ok(kernel, tmp_path):
    f = tmp_path / "campaign.yaml"
    f.write_text(textwrap.dedent(CAMPAIGN))
    out = tmp_path / "out"
    report = Campaign(
        out, Catalog.load(f).expand("stall"), kernel, jobs=2
    ).run()  # three guests, two at a time
    by = {o.run_id.split("/")[0]: o for o in report.outcomes}

    # -- the blackholed run
    o = by["blackholed"]
    run = out / "runs" / "blackholed" / "rep-000"
    info = json.loads((run / "run.json").read_text())
    result = json.loads((run / "result.json").read_text())
    assert o.status == info["status"] == "stalled", (info, result.get("error"))
    assert info["reason"] == result["reason"]
    assert "MPTCP data level frozen at" in info["reason"] and "outstanding" in info["reason"]
    assert "subflows: path" in info["reason"] and "unacked" in info["reason"]
    wd = result["watchdog"]
    assert wd["setting"] == "auto" and 6 < wd["stall_timeout_s"] < 8 and wd["fired"]
    stall = result["stall"]
    after_start = stall["t"] - result["marks"]["workload_start"]
    # blackholed at +2 s, frozen for the timeout (6.6 s), seen within a poll
    assert 2 + wd["stall_timeout_s"] <= after_start < 2 + wd["stall_timeout_s"] + 3, after_start
    assert stall["frozen_s"] >= wd["stall_timeout_s"] and stall["host"] == "server"
    assert info["seconds"] < 60  # the timeout is far away
    snap = json.loads((run / "traces" / "stall-snapshot.json").read_text())
    assert snap["reason"] == result["reason"]
    assert snap["hosts"]["server"]["mptcp"] and snap["hosts"]["client"]["subflows"]
    assert "MPTcpExt" in snap["nstat"]["counters"]["client"]
    assert "ESTAB" in snap["ss"]["server"]
    assert result["metrics"]["bytes_received"] > 0  # iperf3's partial report
    print(
        f"\nstalled: {info['reason']}\n  after {after_start:.1f} s; run {info['seconds']:.1f} s; "
        f"watchdog {wd['polls']} polls, {wd['cpu_s']:.3f} s CPU"
    )

    # -- counters in both runs
    fine = json.loads((out / "runs" / "fine" / "rep-000" / "result.json").read_text())
    assert by["fine"].status == "ok", fine.get("error")
    assert not fine["watchdog"]["fired"] and fine["watchdog"]["polls"] >= 3
    print(
        f"  fine: watchdog {fine['watchdog']['polls']} polls, {fine['watchdog']['cpu_s']:.3f} s CPU"
    )
    for res in (result, fine):
        for host in ("client", "server"):
            n = res["nstat"][host]
            assert {"TcpExt", "MPTcpExt", "Tcp"} <= set(n["start"]) and n["end"] and n["delta"]
        assert res["nstat"]["client"]["delta"]["Tcp"]["InSegs"] > 100
        assert res["memory"]["end"]["meminfo_kb"]["MemAvailable"] > 0
        assert res["memory"]["start"]["sockstat"]["client"]["TCP"]["inuse"] >= 0
    idle = json.loads((out / "runs" / "idle" / "rep-000" / "result.json").read_text())
    assert by["idle"].status == "ok", idle.get("error") or idle.get("reason")
    assert idle["watchdog"]["stall_timeout_s"] == 2.0 and not idle["watchdog"]["fired"]
    assert idle["metrics"]["blocks_received"] == 3  # at 0, 4.1 and 8.2 s
    # the blackhole shows in the kernel's counters: retransmission timeouts
    assert result["nstat"]["server"]["delta"]["TcpExt"].get("TCPTimeouts", 0) > 0
