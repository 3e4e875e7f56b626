"""The experiment language: clear errors (file, line, field, what is allowed)
and matrix expansion."""

import textwrap
from pathlib import Path

import pytest

from mptlab.spec.catalog import WORD_PARAMS, Catalog, known_schedulers
from mptlab.spec.yamlsrc import SpecError


def campaign(tmp_path, text: str):
    path = tmp_path / "campaign.yaml"
    path.write_text(textwrap.dedent(text))
    return path


GOOD = """\
experiments:
  mine:
    topology: two-path
    paths: [wlan, 3g]
    workload: {type: bulk, bytes: 8MiB}
    repetitions: 3
    matrix:
      kernel.scheduler: [minrtt, blest]
      paths: [[wlan, 3g], [wlan, wlan]]
    variants:
      - {name: tcp, kernel.mptcp: false}
"""


def test_matrix_expands_to_the_cross_product_plus_variants(tmp_path):
    cat = Catalog.load(campaign(tmp_path, GOOD))
    variants = cat.variants("mine")
    assert [v for v, _ in variants] == [
        "scheduler=minrtt,paths=wlan+3g",
        "scheduler=minrtt,paths=wlan+wlan",
        "scheduler=blest,paths=wlan+3g",
        "scheduler=blest,paths=wlan+wlan",
        "tcp",
    ]
    runs = cat.expand("mine")
    assert len(runs) == 5 * 3
    blest_ww = [r for r in runs if r.variant == "scheduler=blest,paths=wlan+wlan"]
    assert {r.config["kernel"]["scheduler"] for r in blest_ww} == {"blest"}
    assert blest_ww[0].config["paths"] == ["wlan", "wlan"]
    assert blest_ww[0].config["workload"]["bytes"] == 8 * 1024 * 1024
    # bottleneck shapes in the plan follow the variant's paths
    shaped = [ln for ln in blest_ww[0].plan["links"] if ln["label"]]
    assert [ln["a_to_b"]["rate"] for ln in shaped] == [25, 25]
    # seeds differ per run and are stable
    assert len({r.seed for r in runs}) == len(runs)
    assert [r.seed for r in Catalog.load(campaign(tmp_path, GOOD)).expand("mine")] == [
        r.seed for r in runs
    ]


@pytest.mark.parametrize(
    "text,line,name",
    [
        (GOOD.replace("kernel.scheduler: [minrtt, blest]", "kernel.sysctls: [{}, {a: 1}]"), 7,
         "sysctls={},paths=wlan+3g"),
        (GOOD.replace("{name: tcp, kernel.mptcp: false}", "{name: my tcp, kernel.mptcp: false}"),
         10, "my tcp"),
    ],
)  # fmt: skip
def test_a_variant_name_that_cannot_name_a_run_dir_is_refused(tmp_path, text, line, name):
    # every run of such a variant crashed at start ("cannot be passed to the guest")
    with pytest.raises(SpecError) as exc:
        Catalog.load(campaign(tmp_path, text)).expand("mine")
    msg = str(exc.value)
    assert f"campaign.yaml:{line}:" in msg and f"variant name {name!r} cannot name a run dir" in msg
    assert "variants with a name:" in msg


def test_extends_merges_and_overrides(tmp_path):
    cat = Catalog.load(
        campaign(
            tmp_path,
            GOOD
            + """\
  child:
    extends: mine
    paths: [wlan, wlan]
    repetitions: 1
    matrix: {}
    variants: []
""",
        )
    )
    runs = cat.expand("child")
    assert len(runs) == 1 and runs[0].config["paths"] == ["wlan", "wlan"]
    assert runs[0].config["workload"]["bytes"] == 8 * 1024 * 1024


@pytest.mark.parametrize(
    "snippet,expected",
    [
        (
            "    kernel: {schedulr: blest}\n",
            r"campaign.yaml:\d+: experiments.bad.kernel.schedulr: unknown field",
        ),
        (
            "    repetitions: many\n",
            r"experiments.bad.repetitions: Input should be a valid integer",
        ),
        (
            "    kernel: {scheduler: blset}\n",
            r"campaign.yaml:\d+: experiments.bad.kernel.scheduler: unknown scheduler 'blset'; allowed: default, blest",
        ),
        ("    warmup: 5 parsecs\n", r"experiments.bad.warmup: cannot read duration '5 parsecs'"),
        (
            "    kernel: {scheduler: redundant, scheduler_params: {pace: quickest}}\n",
            r"campaign.yaml:\d+: experiments.bad.kernel.scheduler_params.pace: 'quickest' is not "
            r"a value of redundant's pace; allowed: slowest, fastest",
        ),
        (
            "    kernel: {congestion_control: cubic, congestion_params: {min_ssthresh: 1}}\n",
            r"campaign.yaml:\d+: experiments.bad.kernel.congestion_params: cubic is built into "
            r"the kernel and takes no parameters here; .*: lia, olia, olia_sbd, balia, wvegas",
        ),
    ],
)
def test_bad_fields_name_file_line_field_and_allowed(tmp_path, snippet, expected):
    text = (
        "experiments:\n  bad:\n    topology: two-path\n    paths: [wlan, 3g]\n    workload: {type: bulk, bytes: 1MiB}\n"
        + snippet
    )
    with pytest.raises(SpecError, match=expected):
        Catalog.load(campaign(tmp_path, text)).expand("bad")


def test_line_numbers_point_at_the_offending_key(tmp_path):
    text = "experiments:\n  bad:\n    topology: two-path\n    paths: [wlan, 3g]\n    workload:\n      type: bulk\n      bytes: 1MiB\n      speed: 3\n"
    with pytest.raises(SpecError) as err:
        Catalog.load(campaign(tmp_path, text)).expand("bad")
    assert "campaign.yaml:8: experiments.bad.workload.speed: unknown field" in str(err.value)


def test_missing_topology_unknown_profile_and_workload(tmp_path):
    base = "experiments:\n  bad:\n    paths: [wlan, 3g]\n    workload: {type: bulk, bytes: 1MiB}\n"
    with pytest.raises(SpecError, match="experiments.bad.topology: Field required"):
        Catalog.load(campaign(tmp_path, base)).expand("bad")
    with pytest.raises(
        SpecError,
        # the shipped topologies, sorted (the list grows with topologies/)
        match="unknown topology 'ring'; allowed: nsb-3, nsb-4, .*shifting, two-path, "
        "two-path-direct, two-path-shared, two-path-switched$",
    ):
        Catalog.load(campaign(tmp_path, base + "    topology: ring\n")).expand("bad")
    with pytest.raises(
        SpecError, match=r"experiments.bad.paths.1: unknown link profile '5g'; allowed: 3g"
    ):
        Catalog.load(
            campaign(
                tmp_path, base.replace("[wlan, 3g]", "[wlan, 5g]") + "    topology: two-path\n"
            )
        ).expand("bad")
    with pytest.raises(SpecError, match="has 2 path\\(s\\), 1 profile"):
        Catalog.load(
            campaign(tmp_path, base.replace("[wlan, 3g]", "[wlan]") + "    topology: two-path\n")
        ).expand("bad")
    wrong = base.replace("type: bulk", "type: torrent") + "    topology: two-path\n"
    with pytest.raises(SpecError, match="unknown workload type 'torrent'; allowed: .*bulk"):
        Catalog.load(campaign(tmp_path, wrong)).expand("bad")


def test_bad_yaml_and_bad_matrix_key(tmp_path):
    with pytest.raises(SpecError, match=r"campaign.yaml:\d+: invalid YAML"):
        Catalog.load(campaign(tmp_path, "experiments:\n  x: [1, 2\n"))
    text = GOOD.replace("kernel.scheduler: [minrtt, blest]", "kernel.scheduler.name: [minrtt]")
    with pytest.raises(SpecError, match="matrix key 'kernel.scheduler.name' does not name a field"):
        Catalog.load(campaign(tmp_path, text)).expand("mine")


def test_every_shipped_experiment_validates():
    cat = Catalog.load()
    assert {
        "blest-3g-wlan",
        "blest-wlan-wlan",
        "kubde-wifi-lte",
        "kubde-wifi-eth",
        "kubde-wifi-wifi",
    } <= set(cat.names())
    for name in cat.names():
        assert cat.expand(name)
    assert "blest" in known_schedulers() and "default" in known_schedulers()


def test_quick_shortens_the_workload(tmp_path):
    cat = Catalog.load(campaign(tmp_path, GOOD))
    run = cat.expand("mine", quick=True, repetitions=1)[0]
    assert run.config["workload"]["bytes"] == 1024 * 1024
    assert run.config["warmup"] == 0


def test_link_events_resolve_to_new_shapes_in_time_order(tmp_path):
    cat = Catalog.load(
        campaign(
            tmp_path,
            GOOD
            + """\
  drop:
    extends: mine
    matrix: {}
    variants: []
    events:
      - {at: 60s, link: path1, set: {loss: 0}}
      - {at: 30s, link: path1, set: {rate: 2mbit}, direction: b_to_a}
      - {at: 45s, link: r2c-r2s, profile: wlan}
""",
        )
    )
    events = cat.expand("drop", repetitions=1)[0].plan["events"]
    assert [e["at_ms"] for e in events] == [30000, 45000, 60000]
    first, second, third = events
    assert first["a_to_b"] is None and first["b_to_a"]["rate"] == 2
    assert second["a_to_b"]["rate"] == 25  # path2 (3g) becomes wlan
    # the later change builds on the earlier one: the download direction keeps 2 Mbit/s
    assert third["b_to_a"]["rate"] == 2 and third["b_to_a"]["loss"] == 0
    assert third["a_to_b"]["rate"] == 25 and third["a_to_b"]["loss"] == 0


def test_bad_link_events_are_reported(tmp_path):
    base = GOOD + "  drop:\n    extends: mine\n    events:\n"
    with pytest.raises(SpecError, match=r"events.0.link: topology 'two-path' has path1..path2"):
        Catalog.load(campaign(tmp_path, base + "      - {at: 1s, link: path7}\n")).expand("drop")
    with pytest.raises(SpecError, match=r"events: no link 'client-server'; links: path1, path2"):
        Catalog.load(campaign(tmp_path, base + "      - {at: 1s, link: client-server}\n")).expand(
            "drop"
        )
    with pytest.raises(SpecError, match=r"events.0.profile: unknown link profile 'warp'"):
        Catalog.load(
            campaign(tmp_path, base + "      - {at: 1s, link: path1, profile: warp}\n")
        ).expand("drop")
    with pytest.raises(
        SpecError,
        match=r"campaign.yaml:\d+: experiments.drop.events.0.set.rate: cannot read rate 'fast'",
    ):
        Catalog.load(
            campaign(tmp_path, base + "      - {at: 1s, link: path1, set: {rate: fast}}\n")
        ).expand("drop")


def test_unknown_congestion_control_lists_the_built_in_and_coupled_ones(tmp_path):
    text = GOOD.replace(
        "    repetitions: 3\n", "    repetitions: 3\n    kernel: {congestion_control: oila}\n"
    )
    with pytest.raises(
        SpecError,
        match=r"kernel.congestion_control: value not allowed: .*'reno', 'cubic', 'bbr'.*'olia'",
    ):
        Catalog.load(campaign(tmp_path, text)).expand("mine")


def test_mptbm_is_off_unless_given_and_its_lambda_is_a_matrix_key(tmp_path):
    from mptlab.spec.models import MptbmSpec

    assert all(
        r.config["kernel"]["mptbm"] is None
        for r in Catalog.load(campaign(tmp_path, GOOD)).expand("mine")
    )
    text = GOOD.replace(
        "      kernel.scheduler: [minrtt, blest]\n",
        "      kernel.mptbm.lambda: [0, 1.5]\n",
    ).replace(
        "    repetitions: 3\n",
        "    repetitions: 1\n    kernel: {mptbm: {lambda: 3, theta: 50ms}}\n",
    )
    runs = Catalog.load(campaign(tmp_path, text)).expand("mine")
    # the guest gets the YAML's names and sets the kernel's per-namespace knobs from them
    got = {
        r.config["kernel"]["mptbm"]["lambda"]: MptbmSpec.model_validate(
            r.config["kernel"]["mptbm"]
        ).sysctls()
        for r in runs
    }  # the matrix's 0 and 1.5; the tcp variant keeps the experiment's 3
    assert got == {
        lam: {
            "net.mptcp.mptbm_lambda": round(lam * 1000),
            "net.mptcp.mptbm_theta_ms": 50,
            "net.mptcp.mptbm_window_ms": 60000,
        }
        for lam in (0, 1.5, 3)
    }
    # the guest's own reading of the plain data (it imports no pydantic) agrees
    from mptlab.guest.agent import mptbm_sysctls

    for r in runs:
        lam = r.config["kernel"]["mptbm"]["lambda"]
        assert mptbm_sysctls(r.config["kernel"]["mptbm"]) == got[lam]
    bad = GOOD.replace(
        "    repetitions: 3\n",
        "    repetitions: 3\n    kernel: {mptbm: {lambda: 1.5, theta: -1s}}\n",
    )
    with pytest.raises(SpecError, match=r"campaign.yaml:\d+: experiments.mine.kernel.mptbm.theta"):
        Catalog.load(campaign(tmp_path, bad)).expand("mine")


def test_virtual_time_needs_rate_limited_paths(tmp_path):
    text = """\
    profiles:
      fast: {delay: 5ms, queue: 100 packets}
    experiments:
      unshaped:
        topology: two-path
        paths: [wlan, fast]
        workload: {type: bulk, bytes: 1MiB}
    """
    cat = Catalog.load(campaign(tmp_path, text))
    assert cat.raw("unshaped").get("clock") is None  # the default: virtual
    with pytest.raises(SpecError) as err:
        cat.expand("unshaped")
    msg = str(err.value)
    assert "campaign.yaml:6" in msg and "path 2 (profile 'fast') has no rate" in msg
    assert "clock: real" in msg
    real = Catalog.load(
        campaign(tmp_path, text.replace("bytes: 1MiB}", "bytes: 1MiB}\n        clock: real"))
    )
    assert len(real.expand("unshaped")) == 1


def test_extends_with_another_workload_type_replaces_the_workload(tmp_path):
    cat = Catalog.load(
        campaign(
            tmp_path,
            """\
            experiments:
              idle-too:
                extends: blest-3g-wlan
                workload: {type: idle, duration: 1s}
              smaller:
                extends: blest-3g-wlan
                workload: {bytes: 1MiB}
            """,
        )
    )
    assert cat.raw("idle-too")["workload"] == {"type": "idle", "duration": "1s"}
    # the same type: merged key by key, as every other mapping
    assert cat.raw("smaller")["workload"] == {
        "type": "bulk",
        "bytes": "1MiB",
        "direction": "download",
    }
    cat.expand("idle-too")  # no stale `bytes`/`direction` from the parent


def test_python_api_errors_name_the_file_and_line(tmp_path):
    from mptlab import api

    path = campaign(
        tmp_path,
        """\
        profiles:
          fast: {delay: 5ms, queue: 100 packets}
        experiments:
          typo:
            extends: blest-3g-wlan
            workload: {type: bulk, bytez: 1MiB}
          unshaped:
            topology: two-path
            paths: [wlan, fast]
            workload: {type: bulk, bytes: 1MiB}
            clock: real
        """,
    )
    with pytest.raises(SpecError, match=r"campaign\.yaml:6: experiments\.typo\.workload\.bytez"):
        api.Experiment.from_yaml(path, "typo")
    exp = api.Experiment.from_yaml(path, "unshaped")
    with pytest.raises(SpecError, match=r"campaign\.yaml:9: experiments\.unshaped\.paths: path 2"):
        exp.replace(clock="virtual").runs()  # what `mptlab run --clock virtual` does


def test_word_params_are_the_modules_own():
    """WORD_PARAMS (checked at validation) names the words each module's
    parameter callback accepts, in the module's order."""
    for scheduler, params in WORD_PARAMS.items():
        src = (Path(__file__).parent.parent / f"kernel/modules/mptcp_{scheduler}.c").read_text()
        for name, words in params.items():
            assert f"module_param_cb({name}," in src, (scheduler, name)
            assert "{ " + ", ".join(f'"{w}"' for w in words) + " }" in src, (scheduler, name)
