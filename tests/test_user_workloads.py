"""Workloads of the user's own, without a kernel: a ``module:Class`` workload
type and the ``command`` workload are checked on the host with file, line and
field in the error; their metrics reach the registry and ``expect:``; the
guest imports the class from the file the host resolved; the pair's
lifecycle (readiness, timeout, failure with its output) runs real processes
(no namespaces: a stand-in for ``ctx.net`` that runs them here)."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
import textwrap
import types
import uuid
from pathlib import Path

import pytest

from mptlab.campaign.boot import command_line
from mptlab.campaign.execute import user_code_dirs
from mptlab.campaign.kernel import KernelBuild
from mptlab.guest.config import ConfigError, GuestRun
from mptlab.guest.workload import WorkloadError, import_ref, load
from mptlab.spec import metrics
from mptlab.spec.catalog import Catalog
from mptlab.spec.yamlsrc import SpecError
from mptlab.workloads import command
from mptlab.workloads.custom import Outputs, run_pair

MODULE = """\
from mptlab.workloads.custom import Metric, Workload

class Ping(Workload):
    \"\"\"ping the server.\"\"\"
    count: int = 5
    interval: float = 0.2
    METRICS = (Metric("{prefix}_rtt_ms", "ms", "lower", "mean RTT ping reports"),)
    HEADLINE = ("{prefix}_rtt_ms",)
    QUICK = {{"count": 2}}

    def client(self, ctx):
        return f"ping -c {{self.count}} -i {{self.interval}} $SERVER_ADDR"

    def metrics(self, ctx, out):
        return {{"{prefix}_rtt_ms": out.number(r"= [\\d.]+/([\\d.]+)/")}}

def parse(text):
    return {{"{prefix}_lines": float(len(text.splitlines()))}}

NOT_A_CLASS = 3
"""


@pytest.fixture
def user_module(tmp_path):
    """A module of the user's own next to a campaign file (a fresh name per
    test: Python caches modules by name)."""
    name = f"mywork_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE.format(prefix=name))
    yield name
    sys.modules.pop(name, None)


@functools.cache
def _shipped() -> Catalog:
    return Catalog.load()


def load_catalog(path: Path) -> Catalog:
    """``Catalog.load(path)`` with the shipped profiles, topologies and named
    experiments read once per session (1.3 s each time here)."""
    base = _shipped()
    cat = Catalog(
        profiles=dict(base.profiles),
        topologies=dict(base.topologies),
        experiments=dict(base.experiments),
        sources=dict(base.sources),
        search=list(base.search),
    )
    cat.load_campaign(path)
    return cat


def campaign(tmp_path: Path, workload: str, extra: str = "") -> Path:
    path = tmp_path / "campaign.yaml"
    path.write_text(
        "experiments:\n  mine:\n    topology: two-path\n    paths: [wlan, 3g]\n"
        f"    workload: {workload}\n" + textwrap.indent(textwrap.dedent(extra), "    ")
    )
    return path


def error(path: Path) -> str:
    with pytest.raises(SpecError) as exc:
        load_catalog(path).expand("mine")
    return str(exc.value)


# ---------------------------------------------------------------- the host
def test_a_workload_class_of_the_users_runs_with_its_module_path_and_metrics(tmp_path, user_module):
    cat = load_catalog(campaign(tmp_path, f'{{type: "{user_module}:Ping", count: 3}}'))
    (run,) = cat.expand("mine", repetitions=1)
    work = run.config["workload"]
    assert work == {
        "type": f"{user_module}:Ping",
        "module_path": str(tmp_path / f"{user_module}.py"),
        "count": 3,
        "interval": 0.2,
    }
    assert cat.expand("mine", quick=True)[0].config["workload"]["count"] == 2  # QUICK
    assert metrics.unit(f"{user_module}_rtt_ms") == "ms"
    assert metrics.better(f"{user_module}_rtt_ms") == "lower"
    assert metrics.headline(f"{user_module}:Ping") == (f"{user_module}_rtt_ms",)
    assert metrics.home(f"{user_module}_rtt_ms") == f"{user_module}:Ping"
    # the guest reads it and finds the class in that file
    guest = GuestRun.from_spec(run)
    assert guest.config.workload.module_path == work["module_path"]
    assert user_code_dirs(run) == [tmp_path]


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        ('{type: "nomod_x:X"}', r"campaign.yaml:5: experiments.mine.workload.type: cannot import "
         r"module 'nomod_x' .*looked in .*and Python's path"),
        ('{type: "MOD:Nope"}', r"campaign.yaml:5: experiments.mine.workload.type: module 'MOD' "
         r"\(.*\) has no 'Nope'; it has: Metric, Ping, Workload, parse"),
        ('{type: "MOD:NOT_A_CLASS"}', r"workload.type: MOD:NOT_A_CLASS is not a workload class"),
        ('{type: "MOD:Ping", cnt: 3}', r"campaign.yaml:5: experiments.mine.workload.cnt: unknown "
         r"field of workload 'MOD:Ping'; allowed: count, interval"),
        ('{type: "MOD:Ping", count: many}', r"campaign.yaml:5: experiments.mine.workload.count: "
         r"Input should be a valid integer"),
        ('{type: "not a ref:X"}', r"workload.type: 'not a ref:X': give module:Name"),
        ("{type: bulky}", r"workload.type: unknown workload type 'bulky'; allowed: blocks, bulk, cbr, "
         r"command, .* or module:Class"),
    ],
)  # fmt: skip
def test_a_bad_reference_names_file_line_field_and_what_is_allowed(
    tmp_path, user_module, workload, expected
):
    msg = error(campaign(tmp_path, workload.replace("MOD", user_module)))
    assert re.search(expected.replace("MOD", user_module), msg), msg


def test_a_module_that_fails_to_import_says_where(tmp_path):
    (tmp_path / "broken_wl.py").write_text("x = 1\ndef f(:\n")
    msg = error(campaign(tmp_path, '{type: "broken_wl:X"}'))
    assert "workload.type: module 'broken_wl': " in msg and "broken_wl.py:2:" in msg


def test_user_metrics_are_known_to_expect_claims(tmp_path, user_module):
    claim = "expect:\n  - {metric: METRIC, compare: [base], value: 1.0, claim: c, source: s}\n"
    ok = campaign(
        tmp_path,
        f'{{type: "{user_module}:Ping"}}',
        claim.replace("METRIC", f"{user_module}_rtt_ms"),
    )
    assert load_catalog(ok).claims("mine")[0].metric == f"{user_module}_rtt_ms"
    bad = campaign(
        tmp_path, f'{{type: "{user_module}:Ping"}}', claim.replace("METRIC", f"{user_module}_rt_ms")
    )
    with pytest.raises(SpecError, match=rf"did you mean {user_module}_rtt_ms"):
        load_catalog(bad).claims("mine")


def test_a_user_metric_may_not_redefine_one_of_mptlabs():
    with pytest.raises(ValueError, match="'goodput_mbps' is already declared by mptlab.workloads"):
        metrics.declare((metrics.Metric("goodput_mbps", "B", "higher"),), "mine:X")
    # the same meaning is no conflict; mptlab's declaration stays
    metrics.declare((metrics.Metric("goodput_mbps", "Mbit/s", "higher"),), "mine:Y")
    assert metrics.home("goodput_mbps") == "mptlab.workloads.helpers.common"


def test_redeclaring_from_the_same_home_replaces_its_metrics():
    metrics.declare(
        (metrics.Metric("zz_one_ms", "ms", "lower"),), "redecl:X", "redecl:X", ["zz_one_ms"]
    )
    metrics.declare(
        (metrics.Metric("zz_two_s", "s", "lower"),), "redecl:X", "redecl:X", ["zz_two_s"]
    )
    assert metrics.get("zz_one_ms") is None and metrics.unit("zz_two_s") == "s"
    assert metrics.headline("redecl:X") == ("zz_two_s",)
    assert "zz_two_s" not in metrics.markdown()  # docs/analysis.md lists mptlab's own
    with pytest.raises(ValueError, match="HEADLINE names undeclared metrics"):
        metrics.declare((), "redecl:Y", "redecl:Y", ["nothing_here"])


COMMAND = """\
      type: command
      server: sleep 30
      client: ping -c 3 $SERVER_ADDR
      parser: "MOD:parse"
      metrics:
        cmd_rtt_ms: {regex: '= [\\d.]+/([\\d.]+)/', unit: ms, better: lower}
        cmd_replies: {regex: 'bytes from', match: count}
        MOD_lines: {unit: ''}
"""


def command_campaign(tmp_path, user_module, replace: tuple[str, str] = ("", "")) -> Path:
    text = COMMAND.replace("MOD", user_module).replace(*replace)
    return campaign(tmp_path, "\n" + text)


def test_a_command_workload_declares_its_metrics_and_carries_its_parsers_module(
    tmp_path, user_module
):
    (run,) = load_catalog(command_campaign(tmp_path, user_module)).expand("mine", repetitions=1)
    work = run.config["workload"]
    assert work["type"] == "command" and work["module_path"] == str(tmp_path / f"{user_module}.py")
    assert work["metrics"]["cmd_rtt_ms"]["match"] == "last"
    assert metrics.unit("cmd_rtt_ms") == "ms" and metrics.better("cmd_replies") is None
    assert metrics.headline("command") == ("cmd_rtt_ms", "cmd_replies", f"{user_module}_lines")
    assert GuestRun.from_spec(run).config.workload.metrics.cmd_replies.match == "count"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("unit: ms", "unit: parsecs"), r"campaign.yaml:11: experiments.mine.workload.metrics."
         r"cmd_rtt_ms.unit: unit 'parsecs'; allowed: 'Mbit/s'"),
        ((r"([\d.]+)/'", r"[\d.]+/'"), r"workload.metrics.cmd_rtt_ms: the regex has no group"),
        (("'bytes from'", "'bytes (from'"), r"workload.metrics.cmd_replies.regex: .*not a regex"),
        (("parse\"", "parsr\""), r"campaign.yaml:9: experiments.mine.workload.parser: module .* "
         r"has no 'parsr'; it has: Metric, Ping, Workload, parse"),
        (("cmd_rtt_ms:", "Cmd-RTT:"), r"workload.metrics: .*metric name 'Cmd-RTT'"),
        (("cmd_rtt_ms: {", "goodput_mbps: {"), r"workload.metrics: .*'goodput_mbps' is already "
         r"declared by mptlab"),
        (("server: sleep 30", "server: sleep 30\n      port: 5201\n      ready: x"),
         r"give port or ready, not both"),
        (("      parser: \"MOD:parse\"\n", ""), r"metrics \['MOD_lines'\] have no regex and "
         r"there is no parser"),
    ],
)  # fmt: skip
def test_a_bad_command_workload_names_file_line_field_and_what_is_allowed(
    tmp_path, user_module, change, expected
):
    old, new = (c.replace("MOD", user_module) for c in change)
    text = COMMAND.replace("MOD", user_module)
    assert old in text
    msg = error(campaign(tmp_path, "\n" + text.replace(old, new)))
    assert re.search(expected.replace("MOD", user_module), msg), msg


def test_the_guest_needs_the_module_path_of_a_user_workload(tmp_path, user_module):
    (run,) = load_catalog(campaign(tmp_path, f'{{type: "{user_module}:Ping"}}')).expand(
        "mine", repetitions=1
    )
    data = run.to_json()
    del data["config"]["workload"]["module_path"]
    with pytest.raises(ConfigError, match=r"config.workload.module_path: .*absolute path"):
        GuestRun.from_json(data)
    data["config"]["workload"]["type"] = "a b:c"
    with pytest.raises(ConfigError, match="config.workload.type: expected a workload name"):
        GuestRun.from_json(data)


# --------------------------------------------------------------- the guest
def test_the_guest_imports_the_class_from_its_file_and_runs_it_with_the_fields(tmp_path):
    name = f"elsewhere_{uuid.uuid4().hex[:8]}"
    pkg = tmp_path / "outside" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("FACTOR = 3\n")
    (pkg / "wl.py").write_text(
        f"from {name}.helper import FACTOR\n"
        "class Count:\n"
        "    def __init__(self, n): self.n = n\n"
        "    def run(self, ctx): return {'counted': self.n * FACTOR}\n"
    )
    ctx = types.SimpleNamespace(
        workload=types.SimpleNamespace(
            fields=lambda: {"type": f"{name}.wl:Count", "module_path": "x", "n": 2}
        )
    )
    try:
        workload = load(f"{name}.wl:Count", str(pkg / "wl.py"))
        assert workload.run(ctx) == {"counted": 6}  # its sibling module imported too
    finally:
        for mod in [m for m in sys.modules if m.startswith(name)]:
            del sys.modules[mod]
        sys.path.remove(str(tmp_path / "outside"))


def test_a_scripts_class_is_imported_without_running_the_script(tmp_path):
    script = tmp_path / "experiment_script.py"
    out = tmp_path / "ran"
    script.write_text(
        "class W:\n    def run(self, ctx): return {}\n"
        f"if __name__ == '__main__':\n    open({str(out)!r}, 'w').write('ran')\n"
    )
    cls = import_ref("__main__:W", str(script))
    assert cls.__name__ == "W" and not out.exists()
    sys.modules.pop("mptlab_user_main", None)


class FakeNet:
    """``ctx.net`` without namespaces: the commands run here."""

    def __init__(self):
        self.spawned = []

    def popen(self, host, args, **kwargs):
        proc = subprocess.Popen(args, **kwargs)
        self.spawned.append((host, proc))
        return proc

    def ns(self, host):
        return host


def fake_ctx(tmp_path, workload: dict | None = None, timeout_ms: float = 60_000):
    from mptlab.guest.config import Workload as Fields

    marks = {}
    log = []
    plan = types.SimpleNamespace(
        addresses=lambda host: ["10.0.0.2"] if host == "s" else ["10.0.0.1"]
    )
    return types.SimpleNamespace(
        net=FakeNet(),
        client="c",
        server="s",
        plan=plan,
        trace_dir=tmp_path,
        config=types.SimpleNamespace(
            timeout=timeout_ms, kernel=types.SimpleNamespace(mptcp=False, tcp_path=1)
        ),
        workload=Fields.from_json(workload or {"type": "command"}),
        mark=lambda name: marks.setdefault(name, len(marks)),
        marks=marks,
        log=log.append,
    )


def test_the_pair_runs_server_then_client_with_the_addresses_in_its_environment(tmp_path):
    ctx = fake_ctx(tmp_path)
    out = run_pair(
        ctx,
        "cat $TRACE_DIR/ready; echo to $SERVER_ADDR from $CLIENT_ADDR; echo oops >&2",
        "echo up > $TRACE_DIR/ready; echo listening; exec sleep 30",
        ready="listening",
    )
    assert out.client == "up\nto 10.0.0.2 from 10.0.0.1\n" and out.client_err == "oops\n"
    assert out.server == "listening\n" and out.status == 0
    assert list(ctx.marks) == ["workload_start", "workload_end"]
    # the server that did not end by itself was stopped, its group too
    assert all(p.poll() is not None for _, p in ctx.net.spawned)
    assert (tmp_path / "command-client.out").read_text() == out.client


def test_a_client_that_fails_or_times_out_is_a_workload_error_with_its_output(tmp_path):
    ctx = fake_ctx(tmp_path)
    with pytest.raises(WorkloadError, match=r"exited with status 3; its output ends 'no route'"):
        run_pair(ctx, "echo partial 7; echo no route >&2; exit 3", partial=lambda o: {"x": 1})
    with pytest.raises(WorkloadError) as exc:
        run_pair(
            ctx,
            "echo value 7; sleep 30",
            timeout=0.5,
            partial=lambda o: {"v": o.number(r"value (\d+)")},
        )
    assert "did not finish within 0.5 s and was killed" in str(exc.value)
    assert exc.value.metrics == {"v": 7.0}  # what it measured before


def test_a_server_that_dies_or_never_gets_ready_fails_the_run_with_its_output(tmp_path):
    ctx = fake_ctx(tmp_path)
    with pytest.raises(WorkloadError, match=r"server exited \(2\) before it was ready: 'bad flag'"):
        run_pair(ctx, "true", "echo bad flag; exit 2", ready="listening")
    with pytest.raises(WorkloadError, match=r"not ready after 0.3 s \(no 'listening'\)"):
        run_pair(ctx, "true", "sleep 30", ready="listening", ready_timeout=0.3)
    assert all(p.poll() is not None for _, p in ctx.net.spawned)


PING = """\
PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=40.1 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=60.3 ms
rtt min/avg/max/mdev = 40.100/50.200/60.300/10.100 ms
"""


def command_ctx(tmp_path, metrics_spec: dict, parser=None, module_path=None):
    work = {"type": "command", "metrics": metrics_spec, "parser": parser}
    if module_path:
        work["module_path"] = module_path
    full = {
        name: {"output": "client", "match": "last", "scale": 1.0, "required": True, **m}
        for name, m in metrics_spec.items()
    }
    work["metrics"] = full
    return fake_ctx(tmp_path, work)


def test_command_metrics_from_regexes_and_a_parser(tmp_path, user_module):
    ctx = command_ctx(
        tmp_path,
        {
            "avg": {"regex": r"= [\d.]+/([\d.]+)/"},
            "n": {"regex": "bytes from", "match": "count"},
            "mean_s": {"regex": r"time=([\d.]+) ms", "match": "mean", "scale": 0.001},
            "first": {"regex": r"time=([\d.]+)", "match": "first"},
            "none": {"regex": "nothing (\\d)", "required": False},
        },
        parser=f"{user_module}:parse",
        module_path=str(tmp_path / f"{user_module}.py"),
    )
    got = command.parse(ctx, Outputs(PING, "", "", 0, 1.0))
    assert got == {
        "avg": 50.2,
        "n": 2.0,
        "mean_s": pytest.approx(0.0502),
        "first": 40.1,
        "none": None,
        f"{user_module}_lines": 4.0,
    }


def test_a_required_metric_that_matches_nothing_fails_the_run_keeping_the_others(tmp_path):
    ctx = command_ctx(tmp_path, {"avg": {"regex": r"= [\d.]+/([\d.]+)/"}, "x": {"regex": "X(\\d)"}})
    with pytest.raises(
        WorkloadError, match=r"no match for x \('X\(\\\\d\)' in the client's"
    ) as exc:
        command.parse(ctx, Outputs(PING, "", "", 0, 1.0))
    assert exc.value.metrics == {"avg": 50.2, "x": None}


# ----------------------------------------------------- the mount, the API
def test_a_user_module_under_tmp_is_mounted_back_read_only(tmp_path):
    kernel = KernelBuild(Path("/nonexistent/kernel"), Path("/nonexistent/modules"))
    args = command_line(
        kernel, tmp_path, "entry", umid="u", uml_dir=tmp_path, host_ro=[Path("/tmp/userdir-x")]
    )
    ro = next(a for a in args if a.startswith("MPTLAB_HOST_RO="))
    assert "/tmp/userdir-x" in ro.split("=", 1)[1].split(":")
    plain = command_line(kernel, tmp_path, "entry", umid="u", uml_dir=tmp_path)
    assert "/tmp/userdir-x" not in " ".join(plain)


def test_the_python_api_takes_a_workload_class_and_command(tmp_path, user_module):
    import mptlab

    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(user_module)
    finally:
        sys.path.remove(str(tmp_path))
    exp = mptlab.Experiment(
        "uw", topology="two-path", paths=["wlan", "3g"], workload=module.Ping(count=4)
    )
    work = exp.runs(repetitions=1)[0].config["workload"]
    assert work["type"] == f"{user_module}:Ping" and work["count"] == 4
    assert work["module_path"] == str(tmp_path / f"{user_module}.py")
    exp = mptlab.Experiment("uw", topology="two-path", paths=["wlan", "3g"], workload=module.Ping)
    assert exp.runs(repetitions=1)[0].config["workload"]["count"] == 5  # the class: its defaults
    cmd = mptlab.Command(
        client="ping -c 3 $SERVER_ADDR",
        metrics={"api_rtt_ms": {"regex": r"/([\d.]+)/", "unit": "ms"}},
    )
    work = exp.replace(workload=cmd).runs(repetitions=1)[0].config["workload"]
    assert work["type"] == "command" and work["metrics"]["api_rtt_ms"]["unit"] == "ms"
    with pytest.raises(SpecError, match="workload.metrics.x.unit: unit 'm'"):
        mptlab.Experiment(
            "c", topology="two-path", paths=["wlan", "3g"],
            workload={"type": "command", "client": "true", "metrics": {"x": {"regex": "(1)", "unit": "m"}}},
        )  # fmt: skip


def test_the_example_campaign_is_valid_and_its_parser_reads_iperf3_text():
    example = Path(__file__).resolve().parent.parent / "examples" / "user-workloads"
    cat = load_catalog(example / "campaign.yaml")
    runs = {name: cat.expand(name, quick=True) for name in cat.names(example / "campaign.yaml")}
    assert runs["ping-class"][0].config["workload"]["count"] == 3  # its QUICK
    assert runs["iperf3-command"][0].config["workload"]["module_path"] == str(
        example / "ping_workload.py"
    )
    assert cat.claims("ping-class")[0].metric == "ping_rtt_min_ms"
    try:
        parse = import_ref("ping_workload:iperf3_text", str(example / "ping_workload.py"))
    finally:
        sys.modules.pop("ping_workload", None)
        if str(example) in sys.path:
            sys.path.remove(str(example))
    text = (
        "[  5]   0.00-10.00  sec  11.8 MBytes  9.86 Mbits/sec   33             sender\n"
        "[  5]   0.00-10.05  sec  8.55 MBytes  7.14 Mbits/sec                  receiver\n"
    )
    assert parse(text) == {"iperf_receiver_mbps": 7.14}
    assert parse("iperf3: error - unable to connect") == {}


def test_the_report_declares_the_metrics_of_the_runs_user_workloads(tmp_path, user_module):
    """A fresh process (``mptlab report``) learns the units and headlines
    from the run dirs' spec.json, as the campaign file told the runner."""
    import json

    from mptlab.analysis.units import declare_user_workloads

    work = {
        "type": "command",
        "client": "true",
        "metrics": {"rep_cmd_ms": {"regex": "(1)", "unit": "ms", "better": "lower"}},
    }
    klass = {"type": f"{user_module}:Ping", "module_path": str(tmp_path / f"{user_module}.py")}
    gone = {"type": "gone_mod:X", "module_path": str(tmp_path / "elsewhere" / "gone_mod.py")}
    for variant, w in (("cmd", work), ("cls", klass), ("gone", gone)):
        d = tmp_path / "camp" / "runs" / variant / "rep-000"
        d.mkdir(parents=True)
        (d / "spec.json").write_text(json.dumps({"config": {"workload": w}}))
    with pytest.warns(RuntimeWarning, match="gone_mod:X: cannot import module 'gone_mod'"):
        problems = declare_user_workloads(tmp_path)
    assert len(problems) == 1
    assert metrics.unit("rep_cmd_ms") == "ms" and metrics.headline("command") == ("rep_cmd_ms",)
    assert metrics.unit(f"{user_module}_rtt_ms") == "ms"


def test_a_pair_stopped_as_the_stall_watchdog_stops_a_workload_comes_back(tmp_path):
    """The agent's ``stop_workload`` sends SIGTERM to the processes the
    workload started with ``ctx.net.popen``: ``run_pair`` returns at once
    (a failure in words), and no process of either group is left."""
    import signal
    import threading
    import time

    ctx = fake_ctx(tmp_path)

    def watchdog():
        time.sleep(0.5)
        for _, proc in ctx.net.spawned:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    threading.Thread(target=watchdog, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(WorkloadError, match="exited with status -15"):
        # the shell's child (sleep) is in the group: killed with it
        run_pair(ctx, "sleep 30; echo never", "echo ready; sleep 30", ready="ready")
    assert time.monotonic() - started < 5
    assert all(p.poll() is not None for _, p in ctx.net.spawned)
    assert "never" not in (tmp_path / "command-client.out").read_text()


def test_a_field_named_like_a_method_is_refused():
    from mptlab.spec import usercode
    from mptlab.workloads.custom import Workload

    class Clash(Workload):
        client: str = "ping"  # would hide Workload.client() in the guest

    with pytest.raises(ValueError, match="field 'client' is also a method of the class"):
        usercode.workload_model(usercode.ref_of(Clash), [], Clash)


def test_a_bug_in_the_users_workload_is_named_as_theirs_not_mptlabs(tmp_path):
    from mptlab.guest.agent import error_text

    (tmp_path / "buggy_wl.py").write_text(
        "class W:\n    def run(self, ctx):\n        return {}['missing']\n"
    )
    cls = import_ref("buggy_wl:W", str(tmp_path / "buggy_wl.py"))
    try:
        cls().run(None)
    except KeyError as exc:
        text = error_text(exc)
    finally:
        sys.modules.pop("buggy_wl", None)
        sys.path.remove(str(tmp_path))
    assert (
        text
        == "KeyError: 'missing' (in buggy_wl.py:3 run: a bug outside mptlab: the workload's own code?)"
    )
