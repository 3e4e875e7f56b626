"""Workloads of the user's own in the booted kernel: a ``command`` pair
(iperf3 through mptcpize, a regex metric), a ``command`` client alone
(ping), a workload class from a module in a temp dir outside the repo (under
/tmp, which the guest covers with its own tmpfs: mounted back read-only),
and a command that times out, which is a failed run that stays counted.
The metrics land in the runs table; each is checked against the link
(``lab-20m-40ms``: 20 Mbit/s, 20 ms each way)."""

from __future__ import annotations

import json
import textwrap
import uuid

import pytest

from mptlab.analysis import ingest
from mptlab.campaign.runner import Campaign
from mptlab.spec import metrics
from mptlab.spec.catalog import Catalog

pytestmark = pytest.mark.kernel

MODULE = """\
from mptlab.workloads.custom import Metric, Workload

class Ping(Workload):
    \"\"\"ping from the client to the server.\"\"\"
    count: int = 5
    METRICS = (
        Metric("uk_rtt_ms", "ms", "lower", "the least RTT ping reports"),
        Metric("uk_replies", "", "higher", "replies ping got"),
    )
    HEADLINE = ("uk_rtt_ms",)

    def client(self, ctx):
        # a list runs as is (a string: sh -c); the server's first address
        return ["ping", "-n", "-c", str(self.count), "-i", "0.2", ctx.plan.addresses(ctx.server)[0]]

    def metrics(self, ctx, out):
        return {
            "uk_rtt_ms": out.number(r"= ([\\d.]+)/"),  # the minimum: the first ping waits for ARP
            "uk_replies": float(out.client.count("bytes from")),
        }
"""

CAMPAIGN = """\
experiments:
  user:
    topology: two-path
    paths: [lab-20m-40ms, lab-20m-40ms]
    kernel: {path_manager: {subflows: 2, add_addr_accepted: 2}}
    timeout: 40s
    traces: {ss_interval: null, ofo_interval: null, ofo_events: false}
    workload: {type: command, client: "true", metrics: {x: "(1)"}}
    variants:
      - name: iperf
        workload:
          type: command
          server: iperf3 -s -1 -p $PORT
          port: 5201
          client: iperf3 -c $SERVER_ADDR -p $PORT -t 3 -f m
          metrics:
            uk_iperf_mbps: {regex: '([\\d.]+) Mbits/sec.*receiver', unit: Mbit/s, better: higher}
      - name: ping
        workload:
          type: command
          client: ping -n -c 5 -i 0.2 $SERVER_ADDR
          metrics:
            uk_ping_ms: {regex: 'time=([\\d.]+) ms', match: min, unit: ms, better: lower}
            uk_ping_replies: {regex: 'bytes from', match: count}
      - name: class
        workload: {type: "MOD:Ping", count: 4}
      - name: slow
        workload:
          type: command
          client: echo started; sleep 30
          timeout: 2s
          metrics: {uk_never: 'never (\\d)'}
"""


def test_command_and_class_workloads_run_and_their_metrics_reach_the_runs_table(
    kernel, tmp_path_factory
):
    # outside the repo, under /tmp: the guest sees it only through the mount back
    where = tmp_path_factory.mktemp("usercode")
    name = f"userwl_{uuid.uuid4().hex[:8]}"
    (where / f"{name}.py").write_text(MODULE)
    camp = where / "campaign.yaml"
    camp.write_text(textwrap.dedent(CAMPAIGN).replace("MOD", name))
    cat = Catalog.load(camp)
    out = tmp_path_factory.mktemp("out") / "user"
    report = Campaign(out, cat.expand("user", repetitions=1), kernel, jobs=2).run()
    status = {o.run_id.split("/")[0]: (o.status, o.reason) for o in report.outcomes}

    def result(variant: str) -> dict:
        return json.loads((out / "runs" / variant / "rep-000" / "result.json").read_text())

    for ok in ("iperf", "ping", "class"):
        assert status[ok][0] == "ok", f"{ok}: {status[ok]}: {result(ok).get('traceback', '')}"
    # the command that ran past its timeout: a failed run, with the evidence
    assert status["slow"][0] == "failed", status["slow"]
    assert "did not finish within 2 s and was killed" in status["slow"][1]
    assert "'started'" in status["slow"][1]  # its output, quoted
    assert (out / "runs" / "slow" / "rep-000" / "traces" / "command-client.out").read_text() == (
        "started\n"
    )

    ingest.ingest(out, pcap=False)
    runs = ingest.load_runs(out)
    row = {r["variant"]: r for r in runs.to_dict("records")}
    # iperf3 through mptcpize over two 20 Mbit/s paths: more than one path's worth
    assert 20 < row["iperf"]["uk_iperf_mbps"] <= 40, row["iperf"]["uk_iperf_mbps"]
    # ping: RTT 40 ms (20 ms each way; the first ping also waits for ARP on
    # each hop: 80 ms measured), every reply counted
    assert 40 <= row["ping"]["uk_ping_ms"] < 42
    assert row["ping"]["uk_ping_replies"] == 5
    assert 40 <= row["class"]["uk_rtt_ms"] < 42 and row["class"]["uk_replies"] == 4
    assert row["slow"]["status"] == "failed"
    assert metrics.unit("uk_iperf_mbps") == "Mbit/s" and metrics.headline(f"{name}:Ping") == (
        "uk_rtt_ms",
    )
