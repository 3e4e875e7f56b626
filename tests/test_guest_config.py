"""The run spec is final and the guest reads it once, typed (issue 25, item 3):
``mptlab.guest.config.GuestRun`` from spec.json, ``NetPlan.path_of``, and
content made on the host referred to by ``content_key``."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from mptlab import rundir
from mptlab.campaign import content, execute
from mptlab.campaign.boot import BootResult
from mptlab.campaign.kernel import KernelBuild
from mptlab.campaign.runner import Campaign
from mptlab.guest import agent
from mptlab.guest.config import (
    ConfigError,
    Fec,
    GuestRun,
    Kernel,
    Mptbm,
    PathManager,
    RunConfig,
    Sbd,
    Traces,
    read,
)
from mptlab.rundir import RunDir, RunSpec
from mptlab.spec import models
from mptlab.spec.catalog import Catalog
from mptlab.spec.plan import plan

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load()


@pytest.fixture(scope="module")
def every_run(catalog) -> list[RunSpec]:
    return [r for name in catalog.names() for r in catalog.expand(name, repetitions=1)]


@pytest.fixture
def bulk_spec(catalog) -> dict:
    return catalog.expand("blest-3g-wlan", repetitions=1)[0].to_json()


# ------------------------------------------------------------- good specs
def test_every_experiment_builds_a_guest_config(every_run):
    assert len(every_run) > 100
    for run in every_run:
        g = GuestRun.from_spec(run)
        assert (g.experiment, g.run_id, g.seed) == (run.experiment, run.run_id, run.seed)
        assert g.config.workload.type == run.config["workload"]["type"]
        assert g.config.clock == rundir.clock_of(run.config)
        assert g.content_key == rundir.content_key(run.config["workload"])
        assert g.client in g.plan.hosts and g.server in g.plan.hosts


def test_configs_of_earlier_formats_read_and_their_plans_are_refused_in_words():
    """The fixtures are format 0 (rundir.py): their config lacks fields added
    since, which read as the host's defaults; their plan names link fields
    the way no guest of format 1 reads (``rate_mbit``): a clear error."""
    files = sorted(DATA.rglob("spec.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        config = read(RunConfig, data["config"], "config")
        assert config.kernel.congestion_params == {}  # absent before 2026-11-26: default
        assert config.clock == "real" and config.stall_timeout == "auto"
        with pytest.raises(ConfigError, match="plan: not a network plan .*rate_mbit"):
            GuestRun.from_json(data)


def test_the_config_is_frozen_and_typed(bulk_spec):
    g = GuestRun.from_json(bulk_spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.config.kernel.scheduler = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        g.config.kernel.sysctls["net.x"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError, match="read-only"):
        g.config.workload.bytes = 1
    with pytest.raises(AttributeError, match="has no field 'bites'.*bytes"):
        _ = g.config.workload.bites
    assert isinstance(g.config.warmup, float) and isinstance(g.config.kernel.tcp_path, int)
    ladder = GuestRun.from_json(
        {**bulk_spec, "config": {**bulk_spec["config"], "workload": {"type": "x", "l": [1, 2]}}}
    )
    assert ladder.config.workload.l == (1, 2)


@pytest.mark.parametrize(
    ("record", "model"),
    [
        (Kernel, models.KernelSpec()),
        (Traces, models.TracesSpec()),
        (PathManager, models.PathManagerSpec()),
        (Sbd, models.SbdSpec()),
        (Fec, models.FecSpec()),
        (Mptbm, models.MptbmSpec(**{"lambda": 1.5})),
    ],
)
def test_the_records_have_the_host_models_fields_and_defaults(record, model):
    """A spec.json missing a field (an older one) reads as the host would have written it."""
    dumped = model.model_dump(mode="json", by_alias=True)
    names = {f.metadata.get("json", f.name) for f in dataclasses.fields(record)}
    assert names == set(dumped)
    required = {"lambda"} if record is Mptbm else set()
    typed = read(record, {k: v for k, v in dumped.items() if k in required}, "x")
    assert typed == read(record, dumped, "x")


def test_the_run_config_knows_every_field_of_an_experiment():
    known = {f.name for f in dataclasses.fields(RunConfig)} | RunConfig.HOST_ONLY
    not_in_a_run = {"matrix", "variants", "extends", "expect"}  # the catalog drops them
    assert known == set(models.ExperimentSpec.model_fields) - not_in_a_run


# -------------------------------------------------------- malformed specs
def _broken(spec: dict, dotted: str, value) -> dict:
    data = copy.deepcopy(spec)
    *parents, last = dotted.split(".")
    target = data
    for part in parents:
        target = target[part]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return data


@pytest.mark.parametrize(
    ("dotted", "value", "words"),
    [
        ("config.kernel.path_manager.subflows", "two", "config.kernel.path_manager.subflows: "),
        ("config.kernel.mptcp", 1, "config.kernel.mptcp: expected bool, got 1"),
        ("config.clock", "wall", "config.clock: 'wall' is not one of 'real', 'virtual'"),
        ("config.kernel", KeyError, "config.kernel: missing"),
        ("config.kernel.shceduler", "blest", "unknown field(s) shceduler"),
        ("config.workload.type", None, "config.workload.type: expected a workload name"),
        ("config.traces", [], "config.traces: expected a mapping"),
        ("config.kernel.fec", {"mode": "always"}, "config.kernel.fec.mode: 'always'"),
        ("config.stall_timeout", "never", "config.stall_timeout: expected"),
        ("topology.roles.client", "nobody", "topology.roles: 'nobody' is not a host"),
        ("plan.links", KeyError, "plan: not a network plan"),
        ("seed", "1", "seed: expected int"),
    ],
)
def test_a_malformed_spec_names_the_field(bulk_spec, dotted, value, words):
    with pytest.raises(ConfigError) as err:
        GuestRun.from_json(_broken(bulk_spec, dotted, value))
    assert words in str(err.value)


def test_the_agent_records_a_malformed_spec_as_an_error_result(tmp_path, bulk_spec):
    run_dir = RunDir(tmp_path / "rep-000")
    run_dir.create()
    (run_dir.path / rundir.SPEC).write_text(json.dumps(_broken(bulk_spec, "config.clock", "x")))
    assert agent.run(run_dir) == 1
    result = run_dir.result()
    assert result is not None and result["status"] == rundir.RESULT_ERROR
    assert "config.clock" in result["error"]
    (run_dir.path / rundir.SPEC).write_text(json.dumps({**bulk_spec, "extra": 1}))
    assert agent.run(run_dir) == 1
    assert "not a run spec" in (run_dir.result() or {})["error"]


# ----------------------------------------------------------------- paths
def test_path_of_numbers_the_client_then_the_server_interfaces(catalog):
    p = plan(catalog.topologies["two-path"], dict(catalog.profiles), ["wlan", "3g"])
    client, server = p.addresses("client"), p.addresses("server")
    assert len(client) == 2
    assert [p.path_of(a, ("client", "server")) for a in client] == [1, 2]
    assert [p.path_of(a, ("client", "server")) for a in server] == list(range(1, len(server) + 1))
    assert p.path_of("192.0.2.1", ("client", "server")) is None
    assert p.path_of(client[1], ("server",)) is None  # only the hosts asked about
    router = next(h for h in p.routers) if p.routers else None
    if router:
        assert p.path_of(p.addresses(router)[0], ("client", "server")) is None


def test_the_guest_labels_paths_by_the_plans_rule(every_run):
    for run in every_run[::25]:
        g = GuestRun.from_spec(run)
        for host in (g.client, g.server):
            for i, addr in enumerate(g.plan.addresses(host)):
                expected = g.plan.path_of(addr, (g.client, g.server))
                assert g.path_of(addr) == expected
                if host == g.client:
                    assert expected == i + 1


# -------------------------------------------------------- a final spec
CAMPAIGN = """\
experiments:
  pages:
    topology: two-path
    paths: [wlan, 3g]
    workload: {type: web, page: google}
    matrix: {kernel.scheduler: [default, blest]}
    repetitions: 2
  bulk:
    topology: two-path
    paths: [wlan, 3g]
    workload: {type: bulk, duration: 3s}
"""


def _fake_boot(seen: list):
    def boot(kernel, run_dir, entry, **kw):
        assert not any("CONTENT" in k for k in kw["env"])  # not on the kernel's command line
        script = Path(entry).read_text()
        seen.append(dict(line.split("=", 1) for line in script.splitlines() if "=" in line))
        return BootResult(rundir.OK, 0, 0.1, "", Path(run_dir), attempt="a")

    return boot


def test_expanding_preparing_and_running_leaves_every_spec_as_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("MPTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MPTLAB_CONFINE", "off")
    envs: list[dict] = []
    monkeypatch.setattr(execute, "boot", _fake_boot(envs))
    (tmp_path / "c.yaml").write_text(CAMPAIGN)
    cat = Catalog.load(tmp_path / "c.yaml")
    runs = cat.expand("pages") + cat.expand("bulk")
    expanded = [r.to_json() for r in runs]
    out = tmp_path / "out"
    Campaign(out, runs, KernelBuild(tmp_path, tmp_path)).run()
    assert [r.to_json() for r in runs] == expanded  # nothing rewrote a RunSpec
    again = cat.expand("pages") + cat.expand("bulk")
    for run in again:  # what a resumed campaign finds in the run dirs
        written = RunDir(out / "runs" / run.variant / rundir.rep_name(run.repetition)).spec()
        assert written == json.loads(json.dumps(run.to_json()))
    # one key per workload, the web one filed in the cache the guest is told of
    keys = {r.content_key for r in runs}
    assert len(keys) == 2
    where = {e[rundir.CONTENT_ENV] for e in envs}
    assert where == {str(tmp_path / "cache" / "content")}
    web_key = runs[0].content_key
    assert web_key is not None and web_key.startswith("web-")
    manifest = json.loads(rundir.content_manifest(Path(where.pop()), web_key).read_text())
    assert manifest["key"] == web_key and Path(manifest["prepared"]["root"]).is_dir()
    bulk_key = runs[-1].content_key
    assert bulk_key is not None
    assert not rundir.content_manifest(tmp_path / "cache" / "content", bulk_key).exists()


def test_the_runspec_cannot_be_rewritten(bulk_spec):
    run = RunSpec.from_json(bulk_spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.config = {}  # type: ignore[misc]


def test_the_guest_resolves_the_content_key(tmp_path, monkeypatch, bulk_spec):
    spec = copy.deepcopy(bulk_spec)
    spec["config"]["workload"] = {"type": "web", "page": "google", "http": "2"}
    spec["content_key"] = rundir.content_key(spec["config"]["workload"])
    monkeypatch.setenv("MPTLAB_CACHE", str(tmp_path / "cache"))
    run_spec = RunSpec.from_json(spec)
    content.prepare(run_spec)
    run_dir = RunDir(tmp_path / "rep-000")
    run_dir.create()
    ctx = agent.Context(run_dir, run_spec, GuestRun.from_spec(run_spec))
    monkeypatch.delenv(rundir.CONTENT_ENV, raising=False)
    with pytest.raises(RuntimeError, match=f"no \\${rundir.CONTENT_ENV}"):
        ctx.prepared()
    monkeypatch.setenv(rundir.CONTENT_ENV, str(content.content_dir()))
    assert Path(ctx.prepared()["root"]).is_dir()
    other = agent.Context(
        run_dir, run_spec, GuestRun.from_json({**spec, "content_key": "web-0000000000000000"})
    )
    with pytest.raises(RuntimeError, match="unreadable"):
        other.prepared()


def test_a_cluster_worker_prepares_the_content_and_runs_the_spec_as_sent(
    tmp_path, monkeypatch, bulk_spec
):
    from mptlab.campaign import cluster

    spec = copy.deepcopy(bulk_spec)
    spec["config"]["workload"] = {"type": "web", "page": "google", "http": "2"}
    spec["content_key"] = rundir.content_key(spec["config"]["workload"])
    monkeypatch.setenv("MPTLAB_CACHE", str(tmp_path / "worker-cache"))
    monkeypatch.setattr(cluster, "_worker_setup", lambda *a: (None, None))
    ran: list[RunSpec] = []
    monkeypatch.setattr(cluster, "execute", lambda camp, run, *a: ran.append(run) or "done")
    assert cluster.execute_on_worker(str(tmp_path), {}, copy.deepcopy(spec)) == "done"
    assert ran[0].to_json() == spec  # no strip, no redo: the spec the client sent
    manifest = rundir.content_manifest(tmp_path / "worker-cache" / "content", spec["content_key"])
    assert json.loads(manifest.read_text())["prepared"]["root"].startswith(str(tmp_path))
