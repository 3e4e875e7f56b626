"""The metric registry (mptlab.spec.metrics): lookups and families, every
value mptlab produces is declared, the docs' table is the registry's, and a
misspelled metric in ``expect:`` or a compare rule is a clear error."""

from __future__ import annotations

import ast
import inspect
import json
import shutil
import sys
import textwrap
import types
from pathlib import Path

import pytest

from mptlab.analysis import compare, figures, ingest, readers, report
from mptlab.guest import fec, sbdu
from mptlab.rundir import CampaignDir
from mptlab.spec import metrics
from mptlab.spec.catalog import Catalog
from mptlab.spec.metrics import Metric
from mptlab.spec.yamlsrc import SpecError
from mptlab.workloads import background, blocks, bulk, cbr, dash, idle, live, web
from mptlab.workloads.helpers.dash_player import Session
from mptlab.workloads.helpers.httpd import Fetch

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "analysis" / "results"
WORKLOADS = {
    "bulk": bulk,
    "cbr": cbr,
    "blocks": blocks,
    "web": web,
    "dash": dash,
    "live": live,
    "idle": idle,
}


def undeclared(keys) -> list[str]:
    """The names the registry does not know; a dict's keys as ingest makes
    columns of them (nested dicts joined with _)."""
    if isinstance(keys, dict):
        scalars, lists = readers.base.flatten(keys)
        keys = [*scalars, *lists]
    return sorted(k for k in keys if metrics.get(k) is None)


# ------------------------------------------------------------------ lookups
def test_exact_names_and_families_are_found_with_unit_and_direction():
    assert metrics.get("goodput_mbps") == Metric(
        "goodput_mbps", "Mbit/s", "higher", metrics.get("goodput_mbps").description
    )
    assert metrics.unit("goodput_mbps") == "Mbit/s"
    assert metrics.better("duration_s") == "lower"
    fam = metrics.get("k_ofo_bytes_p95")
    assert fam is not None and fam.name == "k_ofo_bytes_p{q}" and fam.is_family
    assert metrics.get("k_ofo_bytes_p50") is fam
    assert metrics.unit("k_ofo_bytes_p75") == "B"
    assert metrics.unit("path2_share") == "" and metrics.get("path2_share") is not None
    assert metrics.get("delay_p99_ms").name == "delay_{stat}_ms"
    # an exact name wins over a family it would match
    assert metrics.get("k_ofo_bytes_mean").name == "k_ofo_bytes_mean"
    # the placeholder is one word: no underscores, not empty
    assert metrics.get("k_ofo_bytes_p") is None
    assert metrics.get("k_ofo_bytes_p50_x") is None
    assert metrics.get("nonsense") is None
    assert metrics.unit("nonsense") == "" and metrics.better("nonsense") is None


HEADLINES = {  # what report.WORKLOAD_METRICS held before the registry (docs/workloads.md)
    "bulk": ("goodput_mbps", "goodput_cov", "duration_s", "retransmits"),
    "cbr": ("delay_mean_ms", "delay_p95_ms", "jitter_ms", "frames_lost"),
    "blocks": ("delay_mean_ms", "delay_p95_ms", "worst_delay_increase_pct"),
    "web": ("page_load_s",),
    "dash": ("avg_bitrate_mbps", "switches", "stalls", "stall_s"),
    "live": ("in_time_ratio", "frames_in_time", "frames_dropped"),
    "idle": ("duration_s",),
}


def test_headlines_are_the_workloads_primary_metrics():
    for workload, names in HEADLINES.items():
        assert metrics.headline(workload) == names, workload
    assert set(getattr(report, "WORKLOAD_METRICS", HEADLINES)) <= set(HEADLINES)
    assert metrics.headline("no-such-workload") == ()


def test_close_matches_and_why_unknown():
    assert metrics.close_matches("goodput_mbsp")[0] == "goodput_mbps"
    assert metrics.unknown("goodput_mbps") is None
    assert metrics.unknown("k_ofo_bytes_p95") is None
    why = metrics.unknown("goodput_mbsp")
    assert why is not None and "did you mean goodput_mbps?" in why


def test_a_bad_declaration_is_refused():
    with pytest.raises(ValueError, match="unit"):
        Metric("x_mbps", "Mbps")
    with pytest.raises(ValueError, match="better"):
        Metric("x_s", "s", "faster")
    with pytest.raises(ValueError, match="one placeholder"):
        Metric("path{n}_x_{q}")


def test_a_metric_declared_twice_is_an_error(monkeypatch):
    dup = types.ModuleType("mptlab_test_duplicate")
    dup.METRICS = (Metric("goodput_mbps", "Mbit/s", "higher"),)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mptlab_test_duplicate", dup)
    monkeypatch.setattr(metrics, "MODULES", (*metrics.MODULES, "mptlab_test_duplicate"))
    metrics._registry.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="declared twice"):
            metrics.get("goodput_mbps")
    finally:
        monkeypatch.undo()
        metrics._registry.cache_clear()


def test_figures_label_with_the_registrys_unit():
    assert figures.label("goodput_mbps") == "goodput_mbps [Mbit/s]"
    assert figures.label("k_rmem_bytes_p95") == "k_rmem_bytes_p95 [B]"
    assert figures.label("srtt_ms") == "srtt_ms [ms]"
    assert figures.label("path1_share") == "path1_share"


def test_the_reports_metric_lists_are_declared():
    # report.py's own lists, while it has them
    lists = ("MPTCP_METRICS", "FEC_METRICS", "HEALTH_METRICS", "SBD_METRICS")
    names = [m for name in lists for m in getattr(report, name, ())]
    assert undeclared(names) == []


# ------------------------------------------------------------------ producers
def test_bulk_metrics_are_declared():
    intervals = [
        {"sum": {"start": i / 10, "end": (i + 1) / 10, "seconds": 0.1, "bytes": 125000}}
        for i in range(30)
    ]
    report_ = {
        "intervals": intervals,
        "end": {
            "sum_received": {"bytes": 3750000, "seconds": 3.0, "bits_per_second": 1e7},
            "sum_sent": {"bytes": 3800000, "retransmits": 3},
        },
    }
    assert undeclared(bulk.metrics(report_, 1.0)) == []


def test_cbr_blocks_and_live_metrics_are_declared():
    rx = [{"seq": i, "tx": i * 0.04, "rx": i * 0.04 + 0.05, "size": 5120} for i in range(50)]
    assert undeclared(cbr.frame_metrics(rx, rx, 0.5, 5120)) == []
    arrivals = [(i, 100 + i * 0.1, 100 + i * 0.1 + 0.03) for i in range(40)]
    assert undeclared(blocks.block_metrics(arrivals, 40, 1.0, 100.0, 8192)) == []
    frames = [{"type": t, "size": 1000} for t in "IPBBPBBP"]
    got = {i: (i / 25, i / 25 + (0.2 if i != 3 else 1.5)) for i in range(7)}
    assert undeclared(live.frame_metrics(frames, got, 1.0)) == []


def test_web_dash_fec_and_sbd_metrics_are_declared():
    fetches = [
        Fetch(f"/o{i}", 200, 1000, 10.0 + i / 10, 10.05 + i / 10, 10.1 + i / 10, 0)
        for i in range(3)
    ]
    assert undeclared(web.load_metrics([(10.0, fetches)], 3000, 3)) == []
    session = Session(ladder=[1_000_000, 2_000_000], segment_s=4.0)
    assert undeclared(session.metrics()) == []
    snd = [{"fec_sent": 3, "data_segs": 100, "retrans_segs": 2, "ratio_milli": 4000, "path": 1}]
    assert undeclared(fec._socket_metrics(snd, [{"fec_rcvd": 3}])) == []
    assert undeclared([*fec.metrics([], []), "path1_fec_sent", "path2_fec_overhead"]) == []
    judged = [
        sbdu.Judged(t=t, decision=1, shared=t > 5, right=True, bottlenecked=2, subflows=2)
        for t in range(10)
    ]
    truth = [(0.0, [{1}, {2}]), (5.0, [{1, 2}])]
    assert undeclared(sbdu.score(judged, truth)) == []


def _returned_keys(module) -> set[str]:
    """The string keys of the dict literals ``run()``/``stop()`` return or
    ``update`` their metrics with (what the synthetic calls above do not see)."""
    keys: set[str] = set()
    for name in ("run", "stop"):
        fn = getattr(module, name, None)
        if fn is None:
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "update":
                keys |= {k.arg for k in node.keywords if k.arg}
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
                keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return keys


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_what_run_adds_to_its_metrics_is_declared(name):
    module = WORKLOADS[name]
    assert undeclared(_returned_keys(module)) == []
    # and its headline metrics are declared (the registry checks it on loading)
    assert all(metrics.get(m) is not None for m in module.HEADLINE)


def test_the_background_flows_metrics_are_declared_with_their_prefix():
    keys = _returned_keys(background)
    assert {"pairs", "seeds", "schedule"} <= keys
    assert undeclared(f"bg_{k}" for k in ("pairs", "seeds", "schedule")) == []


# ------------------------------------------------------------------ ingest
def _run_dirs():
    for camp in ingest.campaign_dirs(DATA):
        yield from ((camp, rd) for rd in CampaignDir(camp).run_dirs())


def test_every_column_read_run_produces_is_declared_or_an_attribute():
    attributes = set(readers.attributes())
    seen = set()
    for camp, rd in _run_dirs():
        rt = ingest.read_run(rd, str(rd.path), camp.name)
        spec = json.loads((rd.path / "spec.json").read_text())
        keys = {readers.base.colname(k) for k in spec.get("variant_keys") or {}}
        seen |= set(rt.row)
        assert undeclared(set(rt.row) - attributes - keys) == [], rd.path
    # the recorded runs cover the instruments: kernel counters, samplers, captures
    assert {"k_bytes_sent", "host_cpu_s", "pcap_packets", "goodput_mbps"} <= seen


def test_no_declared_metric_is_named_like_a_run_attribute():
    attributes = set(readers.attributes())
    assert [m.name for m in metrics.all_metrics() if m.name in attributes] == []


def test_a_metric_named_like_a_run_column_is_renamed_visibly(tmp_path):
    src = next(rd.path for _camp, rd in _run_dirs() if (rd.path / "result.json").exists())
    dst = tmp_path / "rep-000"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.pcap*"))
    result = json.loads((dst / "result.json").read_text())
    result["metrics"]["status"] = "mine"
    (dst / "result.json").write_text(json.dumps(result))
    with pytest.warns(RuntimeWarning, match=r"status->m_status"):
        rt = ingest.read_run(dst, "x/rep-000", "x", pcap=False)
    assert rt.row["status"] != "mine" and rt.row["m_status"] == "mine"
    assert rt.row["metric_renames"] == "status->m_status"


# ------------------------------------------------------------------ docs
def test_the_docs_metric_table_is_the_registrys():
    text = (ROOT / "docs" / "analysis.md").read_text()
    table = text.split(metrics.DOCS_BEGIN, 1)[1].split(metrics.DOCS_END, 1)[0]
    assert table == metrics.markdown(), (
        "docs/analysis.md's metric table is out of date: regenerate it with "
        "python -m mptlab.spec.metrics --docs docs/analysis.md"
    )


def test_the_markdown_command_prints_the_table_and_updates_a_docs_file(capsys, tmp_path):
    assert metrics.main(["--markdown"]) == 0
    assert "| `goodput_mbps` | Mbit/s | higher |" in capsys.readouterr().out
    docs = tmp_path / "analysis.md"
    docs.write_text(f"# A\n\n{metrics.DOCS_BEGIN}| old |\n{metrics.DOCS_END}\n\nafter\n")
    assert metrics.main(["--docs", str(docs)]) == 0
    assert docs.read_text() == (
        f"# A\n\n{metrics.DOCS_BEGIN}{metrics.markdown()}{metrics.DOCS_END}\n\nafter\n"
    )
    assert not metrics.update_docs(docs)  # up to date
    assert metrics.main([]) == 2


# ------------------------------------------------------------------ validation
CAMPAIGN = """\
experiments:
  mine:
    topology: two-path
    paths: [wlan, 3g]
    workload: {{type: bulk, bytes: 8MiB}}
    matrix:
      kernel.scheduler: [minrtt, blest]
    expect:
      - claim: more goodput
        source: Table I
        metric: {metric}
        compare: [scheduler=blest, scheduler=minrtt]
        paper: [2, 1]
"""


@pytest.mark.parametrize("metric", ["goodput_mbsp", "goodput_mbps / bg_recieved_mbps"])
def test_a_misspelled_metric_in_expect_names_file_line_field_and_the_close_match(tmp_path, metric):
    path = tmp_path / "campaign.yaml"
    path.write_text(CAMPAIGN.format(metric=metric))
    with pytest.raises(SpecError) as err:
        Catalog.load(path).expand("mine")  # as `mptlab validate` does
    msg = str(err.value)
    assert f"{path}:11: experiments.mine.expect.0.metric:" in msg
    assert "is not a known metric; did you mean" in msg
    assert ("goodput_mbps?" if "mbsp" in metric else "bg_received_mbps?") in msg


def test_a_declared_metric_in_expect_validates(tmp_path):
    path = tmp_path / "campaign.yaml"
    path.write_text(CAMPAIGN.format(metric="goodput_mbps / bg_received_mbps"))
    assert Catalog.load(path).claims("mine")[0].metric == "goodput_mbps / bg_received_mbps"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "rules:\n  - metric: goodput_mbsp\n    better: higher\n",
            "rules.yaml:2: rules[0].metric: 'goodput_mbsp' is not a known metric; "
            "did you mean goodput_mbps?",
        ),
        (
            "rules:\n  - metric: ok_rate\n    better: higher\n"
            "  - metric: k_ofo_bytes_p95\n    better: higher\n",
            "rules.yaml:5: rules[1].better: 'higher' disagrees with the metric's declared "
            "direction ('lower', mptlab.analysis.readers.ofo)",
        ),
    ],
)
def test_a_compare_rule_must_name_a_declared_metric_in_its_direction(tmp_path, text, expected):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(compare.RulesError) as err:
        compare.load_rules(path)
    assert str(err.value).startswith(str(tmp_path / expected))


def test_the_shipped_rules_agree_with_the_registry():
    for rule in compare.load_rules(ROOT / "compare-rules.yaml"):
        assert metrics.better(rule.metric) == rule.better
