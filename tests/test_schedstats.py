"""The scheduler modules' mechanism counters, guest side (mptlab/guest/schedstats.py):
parsing the stats parameter, mapping address pairs to paths, deriving the metrics."""

from types import SimpleNamespace

import pytest

from mptlab.guest import schedstats
from mptlab.spec import metrics
from mptlab.spec.catalog import Catalog, SpecError

BLEST = """\
calls 1000
observed_us 20000000
busy_us 10000000
blocked_us 4000000
unheld_us 100000
or_lost 3
or_queued 40
rto 1
blocked_pair 10.0.8.2 10.0.5.1 3000000
blocked_pair 10.0.2.2 10.0.1.1 600000
blocked_pair 192.0.2.9 192.0.2.10 300000
lambda_sum 11000000000
lambda_us 10000000
lambda_at_min_us 2500000
lambda_at_max_us 500000
slow_skips 70
slow_sends 30
"""
# the client has 10.0.1.1 (path 1) and 10.0.5.1 (path 2); the server one address
# per path, 10.0.2.2 and 10.0.8.2, which path_of would give as 1 and 2 too
CLIENT = ["10.0.1.1", "10.0.5.1"]
SERVER = ["10.0.2.2", "10.0.8.2"]


def path_of(addr: str) -> int | None:
    for addrs in (CLIENT, SERVER):
        if addr in addrs:
            return addrs.index(addr) + 1
    return None


def test_parse_reads_counters_and_pairs():
    parsed = schedstats.parse(BLEST)
    assert parsed["counters"]["busy_us"] == 10_000_000
    assert parsed["counters"]["slow_skips"] == 70
    assert parsed["pairs"][0] == {"saddr": "10.0.8.2", "daddr": "10.0.5.1", "blocked_us": 3_000_000}
    assert len(parsed["pairs"]) == 3


def test_parse_keeps_ipv6_pairs_and_unknown_counters():
    text = BLEST + "blocked_pair 2001:db8::1 2001:db8::2 5\nnew_counter 7\n"
    parsed = schedstats.parse(text)
    assert parsed["pairs"][-1]["saddr"] == "2001:db8::1"
    assert parsed["counters"]["new_counter"] == 7


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (BLEST + "busy_us 3\n", "busy_us given twice"),
        (BLEST + "calls many\n", "line 18 'calls many'"),
        (BLEST + "blocked_pair 10.0.0.1 5\n", "blocked_pair SADDR DADDR"),
        ("calls 1\n", "no observed_us, busy_us"),
    ],
)
def test_parse_refuses_what_the_modules_do_not_print(text, words):
    with pytest.raises(schedstats.SchedStatsError, match=words.replace("(", r"\(")):
        schedstats.parse(text)


def test_a_pair_takes_its_client_addresss_path_whichever_end_sends():
    # a single-homed server: its address would say path 1 for every subflow
    def single(addr):
        return {"10.0.1.1": 1, "10.0.5.1": 2, "10.0.9.9": 1}.get(addr)

    down = {"saddr": "10.0.9.9", "daddr": "10.0.5.1"}
    up = {"saddr": "10.0.5.1", "daddr": "10.0.9.9"}
    assert schedstats.pair_path(down, single, CLIENT) == 2
    assert schedstats.pair_path(up, single, CLIENT) == 2
    assert schedstats.pair_path({"saddr": "1.2.3.4", "daddr": "5.6.7.8"}, single, CLIENT) is None


def test_metrics_shares_of_busy_time_split_by_path_sum_to_the_total():
    record = schedstats.annotate(schedstats.parse(BLEST), path_of, CLIENT, 2)
    m = schedstats.metrics(record)
    assert m["sched_busy_s"] == 10.0
    assert m["sndwnd_blocked_s"] == 4.0
    assert m["sndwnd_blocked_share"] == pytest.approx(0.4)
    assert m["sndwnd_blocked_share_path2"] == pytest.approx(0.3)
    assert m["sndwnd_blocked_share_path1"] == pytest.approx(0.06)
    # the unmapped pair's time joins the unheld time
    assert m["sndwnd_blocked_unheld_share"] == pytest.approx(0.04)
    parts = sum(m[f"sndwnd_blocked_share_path{n}"] for n in (1, 2))
    assert parts + m["sndwnd_blocked_unheld_share"] == pytest.approx(m["sndwnd_blocked_share"])
    assert (m["or_resends_lost"], m["or_resends_queued"], m["rto_resends"]) == (3, 40, 1)
    assert m["blest_lambda_mean"] == pytest.approx(1.1)
    assert m["blest_lambda_at_min_share"] == pytest.approx(0.25)
    assert m["blest_lambda_at_max_share"] == pytest.approx(0.05)
    assert (m["blest_slow_skips"], m["blest_slow_sends"]) == (70, 30)


def test_every_path_gets_a_share_even_one_that_never_blocked():
    text = BLEST.replace("blocked_pair 10.0.2.2 10.0.1.1 600000\n", "")
    m = schedstats.metrics(schedstats.annotate(schedstats.parse(text), path_of, CLIENT, 3))
    assert m["sndwnd_blocked_share_path1"] == 0
    assert m["sndwnd_blocked_share_path3"] == 0


def test_a_module_without_time_counters_keeps_its_resend_counts_only():
    # cp and daps: no room for the per-connection state, busy_us stays 0
    text = "".join(
        f"{c} {v}\n" for c, v in zip(schedstats.COUNTERS, (5, 0, 0, 0, 0, 2, 3, 0), strict=True)
    )
    m = schedstats.metrics(schedstats.annotate(schedstats.parse(text), path_of, CLIENT, 2))
    assert m == {"or_resends_lost": 2, "or_resends_queued": 3, "rto_resends": 0}


def test_no_record_no_metrics():
    assert schedstats.metrics(None) == {}
    assert schedstats.metrics({"module": "mptcp_blest", "error": "bad"}) == {}


def test_every_metric_is_declared_and_no_path_share_is_mistaken_for_a_byte_share():
    record = schedstats.annotate(schedstats.parse(BLEST), path_of, CLIENT, 2)
    for name in schedstats.metrics(record):
        assert metrics.get(name) is not None, name
        # the report takes path*_share columns for the paths' byte shares
        assert not (name.startswith("path") and name.endswith("_share")), name


class Ctx:
    def __init__(self, scheduler):
        self.config = SimpleNamespace(kernel=SimpleNamespace(scheduler=scheduler))
        self.plan = SimpleNamespace(addresses={"client": CLIENT, "server": SERVER}.__getitem__)
        self.client, self.server = "client", "server"
        self.path_of = path_of
        self.logged = []

    def log(self, msg):
        self.logged.append(msg)


def test_collect_reads_the_modules_file_and_labels_pairs(tmp_path):
    params = tmp_path / "mptcp_blest" / "parameters"
    params.mkdir(parents=True)
    (params / "stats").write_text(BLEST)
    record = schedstats.collect(Ctx("blest"), tmp_path)
    assert record["module"] == "mptcp_blest" and record["paths"] == 2
    assert [p["path"] for p in record["pairs"]] == [2, 1, None]
    # Linux's built-in default has no module: no record
    assert schedstats.collect(Ctx("default"), tmp_path) is None


def test_collect_records_a_bad_file_as_an_error_without_failing(tmp_path):
    params = tmp_path / "mptcp_minrtt_pr" / "parameters"
    params.mkdir(parents=True)
    (params / "stats").write_text("calls x\n")
    ctx = Ctx("minrtt_pr")
    record = schedstats.collect(ctx, tmp_path)
    assert "line 1" in record["error"] and ctx.logged


def test_a_misspelled_blest_rule_set_fails_validation_with_file_line_and_allowed(tmp_path):
    text = (
        "experiments:\n  bad:\n    topology: two-path\n    paths: [wlan, 3g]\n"
        "    workload: {type: bulk, bytes: 1MiB}\n"
        "    kernel: {scheduler: blest, scheduler_params: {rules: v0.95}}\n"
    )
    f = tmp_path / "campaign.yaml"
    f.write_text(text)
    with pytest.raises(
        SpecError,
        match=r"campaign.yaml:\d+: .*rules: 'v0.95' is not a value of "
        r"blest's rules; allowed: paper, v095",
    ):
        Catalog.load(f).expand("bad")
    f.write_text(text.replace("v0.95", "v095"))
    assert Catalog.load(f).expand("bad")[0].config["kernel"]["scheduler_params"] == {
        "rules": "v095"
    }


def test_the_reports_mechanism_section_shows_bulk_runs_per_variant():
    import pandas as pd

    from mptlab.analysis.sections import mechanism

    ok = pd.DataFrame(
        {
            "variant": ["minrtt_pr"] * 3 + ["blest"] * 3 + ["cbr"],
            "workload": ["bulk"] * 6 + ["cbr"],
            "sndwnd_blocked_share": [0.2, 0.3, 0.25, 0.1, 0.12, 0.11, 0.9],
            "sndwnd_blocked_share_path2": [0.15, 0.2, 0.2, 0.05, 0.06, 0.05, 0.9],
            "sndwnd_blocked_share_path10": [0.0] * 7,
            "blest_lambda_mean": [None] * 3 + [0.95, 0.97, 0.96, None],
        }
    )
    ctx = SimpleNamespace(ok=ok, by="variant", order=["minrtt_pr", "blest", "cbr"])
    html = str(mechanism.section(ctx))
    assert "Scheduler mechanism" in html
    # families in path order, after the total; lambda only where blest ran
    assert html.index("sndwnd_blocked_share_path2") < html.index("sndwnd_blocked_share_path10")
    assert "0.25 [" in html and "0.96 [" in html
    assert "cbr" not in html  # not a bulk run
    # no counters at all: no section
    assert (
        mechanism.section(SimpleNamespace(ok=ok[["variant", "workload"]], by="variant", order=[]))
        is None
    )
