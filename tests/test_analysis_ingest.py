"""Ingest of real run dirs (tests/data/analysis/results: trimmed copies of a short
campaign on the mptlab kernel, a timed-out run retried with --retry-failed,
and a run with packet captures), incremental re-ingest, DuckDB queries."""

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mptlab.analysis import ingest
from mptlab.rundir import CampaignDir

DATA = Path(__file__).parent / "data" / "analysis" / "results"


@pytest.fixture
def results(tmp_path):
    dst = tmp_path / "results"
    shutil.copytree(DATA, dst)
    return dst


def _result(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def test_every_run_dir_becomes_one_row_with_its_variant_keys_and_metrics(results):
    rep = ingest.ingest(results, pcap=False)
    assert rep.errors == []
    all_dirs = [r for c in ingest.campaign_dirs(results) for r in CampaignDir(c).run_dirs()]
    assert rep.read == rep.runs == len(all_dirs) == 9
    runs = ingest.load_table(results, "runs")
    assert len(runs) == 9 and runs["run_id"].is_unique
    fx = runs[runs["campaign"] == "fixture"].set_index("run_id")
    assert sorted(fx["variant"].unique()) == ["scheduler=blest", "scheduler=minrtt", "tcp-wlan"]
    blest = fx.loc["fixture/scheduler=blest/rep-001"]
    assert (
        blest["kernel_scheduler"] == "blest"
        and blest["scheduler"] == "blest"
        and bool(blest["mptcp"])
    )
    tcp = fx.loc["fixture/tcp-wlan/rep-000"]
    assert (
        bool(tcp["kernel_mptcp"]) is False
        and tcp["kernel_tcp_path"] == 1
        and tcp["scheduler"] == "tcp"
    )
    # workload metrics are copied as they are
    res = _result(Path(blest["run_dir"]))
    for k in ("goodput_mbps", "bytes_received", "duration_s", "retransmits"):
        assert blest[k] == pytest.approx(res["metrics"][k])
    # list metrics go to the series table
    series = ingest.load_table(results, "series")
    ib = series[(series["run_id"] == blest.name) & (series["metric"] == "interval_bytes")]
    assert ib.sort_values("idx")["value"].tolist() == [
        float(v) for v in res["metrics"]["interval_bytes"]
    ]


def test_kernel_counters_of_the_data_connection(results):
    ingest.ingest(results, pcap=False)
    runs = ingest.load_table(results, "runs").set_index("run_id")
    row = runs.loc["fixture/scheduler=minrtt/rep-000"]
    k = _result(Path(row["run_dir"]))["kernel"]
    sender = max(k["connections"], key=lambda c: c["bytes_sent"])
    receiver = max(k["connections"], key=lambda c: c["bytes_received"])
    assert row["k_bytes_sent"] == sender["bytes_sent"]
    assert row["k_bytes_reinjected"] == sender["bytes_reinjected"]
    assert row["k_ofo_bytes_max"] == receiver["ofo_bytes_max"] > 0
    subs = [s for s in k["subflows"] if s["token"] == sender["token"]]
    per_path = {p: sum(s["bytes_sent"] for s in subs if s["path"] == p) for p in (1, 2)}
    assert row["path1_bytes"] == per_path[1] and row["path2_bytes"] == per_path[2]
    assert row["path1_share"] + row["path2_share"] == pytest.approx(1.0)
    assert row["path_share_source"] == "kernel"
    assert row["k_tcp_retrans"] == sum(s["tcp_retrans"] for s in subs)
    # single-path TCP: no MPTCP counters, the share comes from the sampled sockets
    tcp = runs.loc["fixture/tcp-wlan/rep-001"]
    assert pd.isna(tcp.get("k_ofo_bytes_max")) and tcp["path_share_source"] == "ss"
    assert tcp["path1_share"] > 0.99


def test_failed_runs_are_kept_with_status_and_reason(results):
    ingest.ingest(results, pcap=False)
    runs = ingest.load_table(results, "runs").set_index("run_id")
    cur = runs.loc["fixture-fail/scheduler=blest/rep-000"]
    old = runs.loc["fixture-fail/scheduler=blest/rep-000.failed-1"]
    info = json.loads((Path(cur["run_dir"]) / "run.json").read_text())
    assert cur["status"] == info["status"] != "ok" and cur["reason"] == info["reason"] != ""
    assert cur["attempt"] == "current" and old["attempt"] == "superseded"
    assert old["status"] != "ok"
    # load_runs keeps the current attempt only
    current = ingest.load_runs(results)
    assert "fixture-fail/scheduler=blest/rep-000" in set(current["run_id"])
    assert "fixture-fail/scheduler=blest/rep-000.failed-1" not in set(current["run_id"])


def test_an_unfinished_run_dir_is_listed_as_incomplete(results):
    rd = results / "fixture" / "runs" / "scheduler=blest" / "rep-002"
    rd.mkdir()
    (rd / "spec.json").write_text(
        (results / "fixture/runs/scheduler=blest/rep-000/spec.json").read_text()
    )
    ingest.ingest(results, pcap=False)
    runs = ingest.load_table(results, "runs").set_index("run_id")
    row = runs.loc["fixture/scheduler=blest/rep-002"]
    assert row["status"] == "incomplete" and "no run.json" in row["reason"]


def test_time_series_tables(results):
    ingest.ingest(results, pcap=False)
    ss = ingest.load_table(results, "ss")
    mp = ingest.load_table(results, "mptcp")
    run = "fixture/scheduler=blest/rep-000"
    s = ss[ss["run_id"] == run]
    assert {
        "t",
        "t_rel",
        "host",
        "path",
        "cwnd",
        "srtt_ms",
        "in_flight",
        "total_retrans",
        "socket",
    } <= set(s.columns)
    assert set(s["path"].dropna()) == {1, 2}
    # in flight = unacked - sacked - lost + retrans (Linux tcp_packets_in_flight)
    assert (s["in_flight"] == s["unacked"] - s["sacked"] - s["lost"] + s["retrans"]).all()
    assert (s["srtt_ms"].dropna() == s["srtt_us"][s["srtt_ms"].notna()] / 1000).all()
    m = mp[mp["run_id"] == run]
    assert m["ofo_bytes"].max() > 0 and m["token"].str.fullmatch("[0-9a-f]{8}").all()
    # the receiver's samples never exceed the final kernel maximum
    runs = ingest.load_table(results, "runs").set_index("run_id")
    assert m["ofo_bytes"].max() <= runs.loc[run, "k_ofo_bytes_max"]


def test_reingest_reads_only_new_or_changed_run_dirs(results):
    first = ingest.ingest(results, pcap=False)
    assert first.read == 9
    before = (ingest.load_table(results, "ss")["run_id"] == "fixture/tcp-wlan/rep-000").sum()
    again = ingest.ingest(results, pcap=False)
    assert (again.read, again.unchanged, again.removed) == (0, 9, 0)
    # a rerun of one run (new run.json) and a vanished run dir
    rj = results / "fixture" / "runs" / "tcp-wlan" / "rep-000" / "run.json"
    info = json.loads(rj.read_text())
    info["status"], info["reason"] = "failed", "injected by the test"
    rj.write_text(json.dumps(info))
    os.utime(rj, (rj.stat().st_atime, rj.stat().st_mtime + 10))
    shutil.rmtree(results / "fixture" / "runs" / "scheduler=minrtt" / "rep-001")
    third = ingest.ingest(results, pcap=False)
    assert (third.read, third.removed) == (1, 1)
    runs = ingest.load_table(results, "runs").set_index("run_id")
    assert len(runs) == 8 and runs.index.is_unique
    assert runs.loc["fixture/tcp-wlan/rep-000", "status"] == "failed"
    assert "fixture/scheduler=minrtt/rep-001" not in runs.index
    ss = ingest.load_table(results, "ss")
    assert "fixture/scheduler=minrtt/rep-001" not in set(ss["run_id"])
    assert (
        (ss["run_id"] == "fixture/tcp-wlan/rep-000").sum() == before > 0
    )  # re-read, not duplicated


def test_duckdb_query_over_the_tables(results):
    ingest.ingest(results, pcap=False)
    con = ingest.connect(results)
    rows = con.execute(
        "SELECT variant, count(*) AS n, avg(goodput_mbps) AS g FROM runs "
        "WHERE campaign = 'fixture' GROUP BY variant ORDER BY variant"
    ).fetchall()
    runs = ingest.load_table(results, "runs")
    fx = runs[runs["campaign"] == "fixture"]
    expect = fx.groupby("variant")["goodput_mbps"].agg(["count", "mean"])
    assert [(v, n) for v, n, _ in rows] == [(v, int(c)) for v, c in expect["count"].items()]
    for v, _n, g in rows:
        assert g == pytest.approx(expect.loc[v, "mean"])
    joined = con.execute(
        "SELECT r.variant, max(s.cwnd) FROM ss s JOIN runs r USING (run_id) GROUP BY 1"
    ).fetchall()
    assert len(joined) >= 3


def test_mptlab_query_command(results, mptlab):
    sql = "SELECT run_id, status FROM runs WHERE status <> 'ok' ORDER BY run_id"
    p = mptlab("query", "-d", results, "--no-pcap", "--format", "csv", sql)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[0] == "run_id,status" and len(lines) == 3
    assert all("fixture-fail" in line for line in lines[1:])
    bad = mptlab("query", "-d", results, "SELECT nope FROM runs")
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_missing_dir_is_a_clear_error(tmp_path, mptlab):
    with pytest.raises(ingest.IngestError, match="no such directory"):
        ingest.ingest(tmp_path / "nope")
    p = mptlab("ingest", tmp_path / "nope")
    assert p.returncode == 2 and "no such directory" in p.stderr


def test_ofo_changes_become_10ms_bins_with_end_value_and_peak():
    import pandas as pd

    from mptlab.analysis.ingest import ofo_bins

    events = pd.DataFrame(
        {
            "t": [10.001, 10.004, 10.008, 10.032, 10.045],
            "token": ["aa"] * 5,
            "ofo_bytes": [1000, 3000, 2000, 0, 500],
            "ofo_segs": [1, 3, 2, 0, 1],
        }
    )
    b = ofo_bins(events)
    assert [round(t, 3) for t in b["t"]] == [10.0, 10.01, 10.02, 10.03, 10.04]
    assert list(b["ofo_bytes"]) == [2000, 2000, 2000, 0, 500]  # queue at the end of each bin
    assert list(b["ofo_bytes_max"]) == [3000, 2000, 2000, 2000, 500]  # carried in, or peaked
    assert list(b["ofo_segs_max"]) == [3, 2, 2, 2, 1]
    assert ofo_bins(None).empty


def test_ofo_occupancy_percentiles_are_time_weighted_on_the_largest_queue():
    import pandas as pd

    from mptlab.analysis.ingest import ofo_occupancy

    # receiver "bb": 8000 B for 2 s, 4000 B for 5 s, then 0 for 3 s with 200
    # blips of 100 B, which must not pull the median down (time weights, not
    # event counts): 0 for 30 % of the time, 4000 up to 80 %, 8000 above
    t = [0.0, 2.0, 7.0] + [7.0 + 0.001 * i for i in range(1, 400)] + [10.0]
    v = [8000, 4000, 0] + [100 if i % 2 else 0 for i in range(1, 400)] + [0]
    events = pd.DataFrame(
        {
            "t": t + [0.0, 5.0],
            "token": ["bb"] * len(t) + ["aa", "aa"],  # the sender side: a tiny queue
            "ofo_bytes": v + [10, 0],
            "ofo_segs": [1] * (len(t) + 2),
        }
    )
    occ = ofo_occupancy(events)
    assert occ == {"k_ofo_bytes_p50": 4000.0, "k_ofo_bytes_p75": 4000.0, "k_ofo_bytes_p95": 8000.0}
    assert ofo_occupancy(None) == {}


def test_background_pairs_sum_to_bg_received_mbps(results):
    run_dir = next(
        r.path
        for c in ingest.campaign_dirs(results)
        for r in CampaignDir(c).run_dirs()
        if r.path.name == "rep-001" and "blest" in str(r.path)
    )
    res = _result(run_dir)
    res["background"] = {
        "pairs": [
            {"pair": 1, "received_mbps": 6.5, "sent_mbps": 6.6},
            {"pair": 2, "received_mbps": 3.0, "sent_mbps": 3.1},
        ]
    }
    (run_dir / "result.json").write_text(json.dumps(res))
    ingest.ingest(results, pcap=False)
    runs = ingest.load_table(results, "runs").set_index("run_dir")
    assert runs.loc[str(run_dir), "bg_received_mbps"] == pytest.approx(9.5)
    # runs without background have no value, not zero
    assert runs["bg_received_mbps"].isna().sum() == len(runs) - 1


def test_the_blest_papers_ofo_statistic_sees_bursts_the_median_misses():
    import pandas as pd

    from mptlab.analysis.ingest import ofo_bins, ofo_occupancy, ofo_sampled_mean

    # a CBR-like receiver: an empty queue but for two 20 ms bursts of 6000 B
    # in a 1 s window (and one before the window, which must not count)
    events = pd.DataFrame(
        {
            "t": [99.5, 99.52, 100.1, 100.12, 100.6, 100.62],
            "token": ["bb"] * 6,
            "ofo_bytes": [9000, 0, 6000, 0, 6000, 0],
            "ofo_segs": [6, 0, 4, 0, 4, 0],
        }
    )
    bins = ofo_bins(events)
    mean = ofo_sampled_mean(bins, 100.0, 101.0)["k_ofo_bytes_mean"]
    # 100 bins of 10 ms; each burst is the maximum of 3 bins (its two, and the
    # bin where it empties): 6 bins of 6000 B
    assert mean == pytest.approx(6 * 6000 / 100)
    assert ofo_occupancy(events)["k_ofo_bytes_p50"] == 0.0
    assert ofo_sampled_mean(ofo_bins(None), 100.0, 101.0) == {"k_ofo_bytes_mean": 0.0}
    assert ofo_sampled_mean(bins, 101.0, 100.0) == {}


def _mptcp_samples(host, sport, t, rmem, received, rcvbuf=None):
    import pandas as pd

    n = len(t)
    df = pd.DataFrame(
        {
            "host": [host] * n,
            "t": t,
            "saddr": ["10.0.0.1"] * n,
            "sport": [sport] * n,
            "daddr": ["10.0.3.2"] * n,
            "dport": [5201] * n,
            "bytes_received": received,
            "rmem_alloc": rmem,
        }
    )
    df["rcvbuf"] = rcvbuf if rcvbuf is not None else [1 << 20] * n
    return df


def test_the_receivers_allocated_memory_is_time_weighted_over_the_analysis_window():
    import numpy as np
    import pandas as pd

    from mptlab.analysis.ingest import rmem_occupancy

    # the receiver (client, most bytes received) sampled every 0.1 s from t=99.9
    # to 102.0, window [100, 102]: 1000 B at 99.9 (held until 100.0: before the
    # window), 8000 B for 0.4 s, 2000 B for 0.6 s (a skipped tick, 100.6: the
    # 100.5 sample holds 0.2 s), 4000 B for 1 s; 50000 B after the window
    t = [99.9 + 0.1 * i for i in range(22) if i != 7]
    rmem = [1000 if x < 99.95 else 8000 if x < 100.35 else 2000 if x < 100.95 else 4000 for x in t]
    t.append(102.1)
    rmem.append(50000)
    client = _mptcp_samples("client", 40000, t, rmem, [1000 * i for i in range(len(t))])
    client.loc[client["t"] > 101.5, "rcvbuf"] = 2 << 20
    # the sender's socket (server): more memory, nothing received: not the one
    server = _mptcp_samples("server", 5201, t, [10**7] * len(t), [0] * len(t))
    out = rmem_occupancy(pd.concat([client, server], ignore_index=True), 100.0, 102.0)
    # 2000 B for 30 % of the time, 4000 up to 80 %, 8000 above
    assert out == {
        "k_rmem_bytes_p50": 4000.0,
        "k_rmem_bytes_p75": 4000.0,
        "k_rmem_bytes_p95": 8000.0,
        "k_rmem_bytes_mean": pytest.approx(0.2 * 8000 + 0.3 * 2000 + 0.5 * 4000),
        "k_rmem_bytes_max": 8000.0,
        "k_rcvbuf_bytes_max": float(2 << 20),
        # 1 MiB until 101.5, 2 MiB for the last 0.5 s of the window (25 %)
        "k_rcvbuf_bytes_p50": float(1 << 20),
        "k_rcvbuf_bytes_p75": float(1 << 20),
        "k_rcvbuf_bytes_p95": float(2 << 20),
    }
    # the connection's last sample (100.9) holds one sampling interval, not
    # to the window's end: 8000 B for 0.4 s, 2000 B for 0.6 s
    out = rmem_occupancy(client[client["t"] < 101.0], 100.0, 102.0)
    assert out["k_rmem_bytes_mean"] == pytest.approx((0.4 * 8000 + 0.6 * 2000) / 1.0)
    assert out["k_rmem_bytes_p50"] == 2000.0 and out["k_rmem_bytes_p95"] == 8000.0
    # no sample in the window, or no value in them: NaN, not 0
    assert np.isnan(rmem_occupancy(client, 200.0, 201.0)["k_rmem_bytes_p50"])
    blank = client.assign(rmem_alloc=np.nan, rcvbuf=np.nan)
    assert all(np.isnan(v) for v in rmem_occupancy(blank, 100.0, 102.0).values())


def test_traces_from_before_the_memory_columns_give_no_value_not_zero(results):
    from mptlab.analysis.ingest import rmem_occupancy

    # a sampler CSV without rmem_alloc (every fixture run dir: recorded before
    # the sampler read SKMEMINFO): nothing, so the runs table has NaN
    old = _mptcp_samples("client", 40000, [1.0, 2.0], [0, 0], [1, 2]).drop(
        columns=["rmem_alloc", "rcvbuf"]
    )
    assert rmem_occupancy(old, 1.0, 2.0) == {} and rmem_occupancy(None, 1.0, 2.0) == {}
    # one run dir with the columns among old ones: its values, NaN for the others
    run_dir = next(
        r.path
        for c in ingest.campaign_dirs(results)
        for r in CampaignDir(c).run_dirs()
        if r.path.name == "rep-001" and "blest" in str(r.path) and c.name == "fixture"
    )
    csv = run_dir / "traces" / "client-mptcp.csv"
    df = pd.read_csv(csv)
    df["rmem_alloc"] = 5000
    df["rcvbuf"] = 1 << 20
    df.to_csv(csv, index=False)
    rep = ingest.ingest(results, pcap=False)
    assert rep.errors == []
    runs = ingest.load_table(results, "runs").set_index("run_dir")
    assert runs.loc[str(run_dir), "k_rmem_bytes_p50"] == 5000.0
    assert runs.loc[str(run_dir), "k_rcvbuf_bytes_max"] == float(1 << 20)
    others = runs.drop(index=str(run_dir))
    assert others["k_rmem_bytes_p50"].isna().all() and others["k_rmem_bytes_mean"].isna().all()
    mptcp = ingest.load_table(results, "mptcp")
    assert mptcp.loc[mptcp["rmem_alloc"].notna(), "host"].unique().tolist() == ["client"]


def _judged(shift: float = 30.0, n: int = 17, right_every: int = 3):
    """A shifting bottleneck's judged decisions: shared for ``shift`` s, then not."""
    from mptlab.guest.sbdu import Judged

    return [
        Judged(
            t=3.5 * (i + 1),
            decision=i,
            shared=(3.5 * (i + 1)) // shift % 2 == 0,
            right=i % right_every != 0,
            bottlenecked=2 if i % 2 else 1,
            subflows=2,
        )
        for i in range(n)
    ]


def test_sbd_scores_become_one_row_per_judged_decision(results):
    from mptlab.guest.sbdu import write_scores

    run = results / "fixture" / "runs" / "scheduler=blest" / "rep-000"
    judged = _judged()
    write_scores(run / "traces" / "sbd-scores.csv", judged)
    rep = ingest.ingest(results, pcap=False)
    assert rep.errors == []
    sc = ingest.load_table(results, "sbd_scores")
    assert set(sc["run_id"]) == {"fixture/scheduler=blest/rep-000"}
    assert list(sc.columns) == [
        "run_id",
        "t",
        "decision",
        "shared",
        "right",
        "bottlenecked",
        "subflows",
    ]
    sc = sc.sort_values("decision")
    assert sc["t"].tolist() == pytest.approx([j.t for j in judged])
    assert sc["right"].tolist() == [int(j.right) for j in judged]
    assert sc["shared"].tolist() == [int(j.shared) for j in judged]
    assert sc["bottlenecked"].sum() == sum(j.bottlenecked for j in judged)
    # a run without the file has no rows; a header-only file neither
    (results / "fixture/runs/scheduler=minrtt/rep-000/traces/sbd-scores.csv").write_text(
        "t,decision,shared,right,bottlenecked,subflows\n"
    )
    os.utime(results / "fixture/runs/scheduler=minrtt/rep-000/run.json")
    ingest.ingest(results, pcap=False)
    assert set(ingest.load_table(results, "sbd_scores")["run_id"]) == {
        "fixture/scheduler=blest/rep-000"
    }


def test_a_malformed_sbd_scores_file_is_an_error_naming_it(results, tmp_path):
    bad = tmp_path / "sbd-scores.csv"
    bad.write_text("t,decision,right\n1.0,0,1\n")
    with pytest.raises(ingest.IngestError, match="sbd-scores.csv.*no column shared"):
        ingest._read_sbd_scores(bad)
    bad.write_text("t,decision,shared,right,bottlenecked,subflows\n1.0,0,yes,1,2,2\n")
    with pytest.raises(ingest.IngestError, match="sbd-scores.csv: not an SBD scores CSV"):
        ingest._read_sbd_scores(bad)
    # in a campaign: that run is unreadable, named, and the others are read
    run = results / "fixture" / "runs" / "scheduler=blest" / "rep-000"
    (run / "traces" / "sbd-scores.csv").write_text(bad.read_text())
    rep = ingest.ingest(results, pcap=False)
    assert len(rep.errors) == 1 and "sbd-scores.csv" in rep.errors[0]
    runs = ingest.load_table(results, "runs").set_index("run_id")
    assert runs.loc["fixture/scheduler=blest/rep-000", "status"] == "unreadable"
    assert (runs.drop(index="fixture/scheduler=blest/rep-000")["status"] != "unreadable").all()
