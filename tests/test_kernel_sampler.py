"""The sock_diag sampler reads real subflows and MPTCP connections in the guest."""

import csv
import io

import pytest

pytestmark = pytest.mark.kernel


def test_sampler_sees_subflows_and_the_ofo_queue(guest):
    r = guest(
        """
        import subprocess, sys, time
        from mptlab.guest import modules
        from mptlab.guest.netlab import Net, Queue, Shape
        modules.load_schedulers(MODULES_DIR)
        net = Net()
        cli, srv = net.add_host("cli"), net.add_host("srv")
        net.add_link(cli, srv, "10.0.0.1/24", "10.0.0.2/24", Shape(rate_mbit=20, delay_ms=5, queue=Queue(packets=100)))
        net.add_link(cli, srv, "10.1.0.1/24", "10.1.0.2/24", Shape(rate_mbit=5, delay_ms=40, queue=Queue(packets=200)))
        net.build()
        net.mptcp_client_paths(cli)
        net.mptcp_limits(cli); net.mptcp_limits(srv)
        net.run(srv, "sysctl", "-qw", "net.mptcp.scheduler=minrtt")
        server = net.popen(srv, ["mptcpize", "run", "iperf3", "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        prefix = str(RUN_DIR / "cli")
        sampler = net.popen(cli, [sys.executable, "-m", "mptlab.guest.sampler", prefix,
                                  "--ss", "0.1", "--mptcp", "0.01"])
        net.run(cli, "mptcpize", "run", "iperf3", "-c", "10.0.0.2", "-R", "-t", "3")
        sampler.terminate(); sampler.wait(timeout=10); server.wait(timeout=10)
        RESULT["subflows"] = (RUN_DIR / "cli-subflows.csv").read_text()
        RESULT["mptcp"] = (RUN_DIR / "cli-mptcp.csv").read_text()
        """,
        timeout=120,
    )
    subflows = list(csv.DictReader(io.StringIO(r["subflows"])))
    conns = list(csv.DictReader(io.StringIO(r["mptcp"])))
    data_subflows = {
        (s["saddr"], s["sport"]) for s in subflows if int(s["bytes_received"] or 0) > 10_000
    }
    assert len(data_subflows) == 2, data_subflows  # one subflow per path carried the download
    mptcp_rows = [s for s in subflows if (s["saddr"], s["sport"]) in data_subflows]
    assert all(s["token_loc"] and s["id_loc"] != "" for s in mptcp_rows)  # MPTCP subflow attributes
    assert {s["id_loc"] for s in mptcp_rows} == {"0", "1"}
    assert all(int(s["srtt_us"]) > 0 and int(s["cwnd"]) > 0 for s in subflows if s["state"] == "1")
    receiving = [c for c in conns if int(c["bytes_received"]) > 1_000_000]
    assert receiving and receiving[-1]["scheduler"] == "default"  # the receiver's own msk
    assert max(int(c["ofo_bytes_max"]) for c in receiving) > 0  # 5 vs 40 ms paths reorder
    ts = sorted({float(c["t"]) for c in conns})
    assert len(ts) > 100  # about every 10 ms over ~3 s
