"""Campaigns end to end on the real kernel: complete run dirs, a hung run
killed at its timeout while the others finish, and resume after a kill."""

import json
import os
import signal
import subprocess
import textwrap
import time

import pytest

pytestmark = pytest.mark.kernel


CAMPAIGN = """\
experiments:
  e2e:
    topology: two-path
    paths: [wlan, 3g]
    kernel: {{scheduler: blest, path_manager: {{subflows: 2, add_addr_accepted: 2}}}}
    workload: {{type: bulk, {workload}}}
    repetitions: {reps}
    timeout: {timeout}
{extra}"""


def write_campaign(tmp_path, workload="bytes: 4MiB", reps=2, timeout="120s", extra=""):
    path = tmp_path / "campaign.yaml"
    path.write_text(
        CAMPAIGN.format(
            workload=workload, reps=reps, timeout=timeout, extra=textwrap.indent(extra, "    ")
        )
    )
    return path


def kernel_release(kernel) -> str:
    return json.loads(kernel.build_info.read_text())["kernel_release"]


def test_two_repetitions_write_complete_self_describing_run_dirs(tmp_path, kernel, mptlab):
    camp = write_campaign(tmp_path)
    out = tmp_path / "out"
    p = mptlab("run", str(camp), "--jobs", "2", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    runs = sorted((out / "e2e" / "runs" / "base").glob("rep-*"))
    assert [r.name for r in runs] == ["rep-000", "rep-001"]
    campaign = json.loads((out / "e2e" / "campaign.json").read_text())
    assert campaign["runs"] == 2 and campaign["kernel"]["kernel_release"] == kernel_release(kernel)
    for run in runs:
        spec = json.loads((run / "spec.json").read_text())
        info = json.loads((run / "run.json").read_text())
        result = json.loads((run / "result.json").read_text())
        prov = json.loads((run / "guest-provenance.json").read_text())
        assert info["status"] == "ok" and spec["config"]["kernel"]["scheduler"] == "blest"
        # a run of ~1 s of wall time has its host CPU counted (it measured 0
        # while the CPU was only sampled, once a second: boot.TreeCPU)
        assert 0.2 < info["host_cpu_s"] < 10 * info["seconds"]
        assert result["metrics"]["bytes_received"] > 3 * 2**20
        assert 0 < result["metrics"]["goodput_mbps"] < 35  # 25 + 5 Mbit/s of bottlenecks
        data_subflows = [s for s in result["kernel"]["subflows"] if s["bytes_sent"] > 100_000]
        assert {s["path"] for s in data_subflows} <= {1, 2} and data_subflows
        assert [c for c in result["kernel"]["connections"] if c["scheduler"] == "blest"]
        assert set(prov["modules_sha256"]) >= {"mptcp_blest.ko", "mptcp_minrtt.ko"}
        assert prov["kernel"] == kernel_release(kernel) and "iperf" in info["tools"]["iperf3"]
        for host in ("client", "server"):
            assert len((run / "traces" / f"{host}-subflows.csv").read_text().splitlines()) > 5
            assert len((run / "traces" / f"{host}-mptcp.csv").read_text().splitlines()) > 5
        # every OFO change, from the kernel tracepoint, drained while the run went on
        ofo = (run / "traces" / "ofo-events.csv").read_text().splitlines()
        assert (
            ofo[0] == "t,token,ofo_bytes,ofo_segs"
            and len(ofo) - 1 == result["fidelity"]["ofo_events"]
        )
        times = [float(line.split(",")[0]) for line in ofo[1:]]
        assert result["marks"]["workload_start"] - 1 < times[0] <= times[-1] < result["finished"]
        assert max(int(line.split(",")[2]) for line in ofo[1:]) == max(
            c["ofo_bytes_max"] for c in result["kernel"]["connections"]
        )  # the events' peak is the kernel's own maximum
        assert result["fidelity"]["ktrace_lost_events"] == 0
        assert result["fidelity"]["sampler_lateness"]["n"] > 10
        assert (
            result["fidelity"]["sampler"] == "uring" and result["fidelity"]["sampler_error"] is None
        )
    assert spec["seed"] != json.loads((runs[0] / "spec.json").read_text())["seed"]
    # the figure of merit: printed, and kept in the invocation's entry
    cost = campaign["invocations"][-1]["cost"]
    guest = sum(
        json.loads((r / "result.json").read_text())["finished"]
        - json.loads((r / "result.json").read_text())["started"]
        for r in runs
    )
    assert cost["runs"] == 2 and cost["guest_s"] == pytest.approx(guest, abs=0.01)
    assert cost["host_cpu_s"] > 0 and cost["wall_s"] > 0
    assert cost["guest_per_wall_s"] == pytest.approx(cost["guest_s"] / cost["wall_s"], rel=0.01)
    assert f"e2e: cost: {cost['guest_s']:.0f} s of experiment (guest time)" in p.stdout


@pytest.mark.parametrize("clock", ["real", "virtual"])
def test_a_hung_run_is_killed_and_reported_while_the_others_finish(tmp_path, mptlab, clock):
    # the "hung" variant would run 10 minutes but may take 2 s (+ the boot
    # margin): killed by the host in real time, ended by the guest's own
    # limit in guest time under virtual time
    camp = write_campaign(
        tmp_path,
        workload="duration: 600s",
        reps=1,
        extra=textwrap.dedent(f"""\
        clock: {clock}
        variants:
          - {{name: hung, timeout: 2s}}
          - {{name: fine, workload: {{type: bulk, bytes: 2MiB}}}}
        """),
    )
    out = tmp_path / "out"
    p = mptlab("run", str(camp), "--jobs", "2", "--out", str(out))
    assert p.returncode == 1  # a failed run makes the command fail
    assert "timeout: hung/rep-000" in p.stdout
    runs = out / "e2e" / "runs"
    hung = json.loads((runs / "hung" / "rep-000" / "run.json").read_text())
    fine = json.loads((runs / "fine" / "rep-000" / "run.json").read_text())
    reason = "killed after" if clock == "real" else "s of guest time"
    assert hung["status"] == "timeout" and reason in hung["reason"], hung["reason"]
    assert fine["status"] == "ok"
    assert not subprocess.run(["pgrep", "-f", str(runs / "hung")], capture_output=True).stdout


def test_a_killed_campaign_resumes_without_redoing_finished_runs(tmp_path, mptlab):
    camp = write_campaign(tmp_path, workload="bytes: 2MiB", reps=4)
    out = tmp_path / "out"
    runs = out / "e2e" / "runs" / "base"
    proc = subprocess.Popen(
        [*mptlab.argv, "run", str(camp), "--jobs", "1", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(runs.glob("rep-*/run.json"))) < 1:
        time.sleep(0.5)
    while time.monotonic() < deadline and len(list(runs.glob("rep-*"))) < 2:
        time.sleep(0.2)  # the next run has started
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    subprocess.run(["pkill", "-9", "-f", str(out)], check=False)  # its guests
    finished = {p.parent.name: p.read_text() for p in runs.glob("rep-*/run.json")}
    assert 1 <= len(finished) < 4
    p = mptlab("run", str(camp), "--jobs", "2", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"{len(finished)} from earlier invocations" in p.stdout
    for name, text in finished.items():
        assert (runs / name / "run.json").read_text() == text  # not redone, not overwritten
    assert len(list(runs.glob("rep-*/run.json"))) == 4
    assert list(runs.glob("rep-*.interrupted-1"))  # the half-done run was kept aside
    campaign = json.loads((out / "e2e" / "campaign.json").read_text())
    assert len(campaign["invocations"]) == 2


def test_a_restricted_builtin_control_and_a_coupled_ones_parameters_reach_the_guest(
    tmp_path, mptlab
):
    # vegas is built in but "restricted": a namespace may default to it only
    # once the initial namespace allows it (modules.allow_congestion_control;
    # before, every run with congestion_control vegas, htcp, westwood, ... failed
    # with EPERM).  olia's min_ssthresh: read back from /sys/module.
    camp = tmp_path / "campaign.yaml"
    camp.write_text(
        "experiments:\n"
        "  cc:\n"
        "    topology: two-path\n"
        "    paths: [wlan, 3g]\n"
        "    kernel: {congestion_control: vegas}\n"
        "    workload: {type: bulk, bytes: 1MiB}\n"
        "    repetitions: 1\n"
        "    clock: virtual\n"
        "    variants:\n"
        "      - {name: olia1, kernel.congestion_control: olia,\n"
        "         kernel.congestion_params: {min_ssthresh: 1}}\n"
    )
    out = tmp_path / "out"
    p = mptlab("run", str(camp), "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    runs = out / "cc" / "runs"
    for variant, cc in (("base", "vegas"), ("olia1", "olia")):
        run = runs / variant / "rep-000"
        assert json.loads((run / "run.json").read_text())["status"] == "ok", variant
        prov = json.loads((run / "guest-provenance.json").read_text())
        assert prov["settings"]["net.ipv4.tcp_congestion_control"] == cc, prov["settings"]
    prov = json.loads((runs / "olia1" / "rep-000" / "guest-provenance.json").read_text())
    assert prov["module_params"] == {"mptcp_olia": {"min_ssthresh": "1"}}, prov
