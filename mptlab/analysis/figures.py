"""Paper-style figures (matplotlib), each saved as PNG and PDF.

Every per-variant figure labels its groups with n (ok runs of the current
attempt only).  Functions return the matplotlib Figure; :func:`save` writes it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..spec import metrics  # noqa: E402
from . import stats  # noqa: E402

STYLE: dict[Any, Any] = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,  # embed TrueType: editable text in the PDF
}
COLORS = plt.get_cmap("tab10").colors  # type: ignore[attr-defined] # a ListedColormap


def label(metric: str) -> str:
    """An axis label: the metric and its unit (``mptlab.spec.metrics``)."""
    unit = metrics.unit(metric)
    return f"{metric} [{unit}]" if unit else metric


def save(fig, out_dir: Path, name: str) -> dict[str, Path]:
    """Write ``name``.png and ``name``.pdf; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    paths = {"png": out_dir / f"{safe}.png", "pdf": out_dir / f"{safe}.pdf"}
    fig.savefig(paths["png"], bbox_inches="tight")
    fig.savefig(paths["pdf"], bbox_inches="tight")
    plt.close(fig)
    return paths


def _groups(runs: pd.DataFrame, metric: str, by: str, order: list | None = None):
    runs = stats.ok_runs(runs)
    keys = order or list(dict.fromkeys(runs[by]))
    out = []
    for k in keys:
        v = pd.to_numeric(runs.loc[runs[by] == k, metric], errors="coerce").dropna().to_numpy()
        out.append((k, v))
    return out


def _ticks(ax, labels: list[str]) -> None:
    """Category labels; long ones break after '=' / ',' and tilt when still crowded."""

    def wrap(text: str) -> str:
        head, _, tail = text.partition("\n")
        if len(head) > 12:
            head = head.replace("=", "=\n").replace(",", ",\n")
        return head + ("\n" + tail if tail else "")

    labels = [wrap(str(v)) for v in labels]
    widest = max((max(len(p) for p in lab.split("\n")) for lab in labels), default=0)
    if widest * len(labels) > 70:
        ax.set_xticklabels(labels, rotation=30, ha="right")
    else:
        ax.set_xticklabels(labels)


def _no_data(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center", transform=ax.transAxes)


def cdf(runs: pd.DataFrame, metric: str, by: str = "variant", order: list | None = None):
    """Empirical CDF of a metric over repetitions, one line per group."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        groups = [(k, v) for k, v in _groups(runs, metric, by, order) if len(v)]
        for i, (k, v) in enumerate(groups):
            x = np.sort(v)
            y = np.arange(1, len(x) + 1) / len(x)
            ax.step(
                np.concatenate([[x[0]], x]),
                np.concatenate([[0], y]),
                where="post",
                color=COLORS[i % 10],
                label=f"{k} (n={len(x)})",
            )
        if not groups:
            _no_data(ax, metric)
        ax.set_xlabel(label(metric))
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.02)
        if groups:
            ax.legend(loc="lower right", frameon=False)
        ax.set_title(f"{metric}: CDF over repetitions")
    return fig


def box(runs: pd.DataFrame, metric: str, by: str = "variant", order: list | None = None):
    """Box plot per group (median, quartiles, 1.5 IQR whiskers) with the runs as dots."""
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        groups = _groups(runs, metric, by, order)
        data = [v if len(v) else np.array([np.nan]) for _, v in groups]
        if any(len(v) for _, v in groups):
            ax.boxplot(data, showfliers=False, widths=0.5, medianprops={"color": "black"})
            rng = np.random.default_rng(0)
            for i, (_, v) in enumerate(groups):
                ax.plot(
                    np.full(len(v), i + 1) + rng.uniform(-0.12, 0.12, len(v)),
                    v,
                    "o",
                    ms=3,
                    color=COLORS[i % 10],
                    alpha=0.7,
                )
        else:
            _no_data(ax, metric)
        ax.set_xticks(range(1, len(groups) + 1))
        _ticks(ax, [f"{k}\nn={len(v)}" for k, v in groups])
        ax.set_ylabel(label(metric))
        ax.set_title(f"{metric} per {by}")
    return fig


def bar_ci(
    runs: pd.DataFrame,
    metric: str,
    x: str = "variant",
    hue: str | None = None,
    conf: float = stats.CONF,
    seed: int = stats.SEED,
):
    """Mean with bootstrap CI as bars: one group of bars per ``x`` value, one bar per
    ``hue`` value (e.g. completion time per page set per scheduler), n above each bar."""
    ok = stats.ok_runs(runs)
    xs = list(dict.fromkeys(ok[x])) if len(ok) else []
    hs = list(dict.fromkeys(ok[hue])) if hue and len(ok) else [None]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        width = 0.8 / len(hs)
        drew = False
        for j, h in enumerate(hs):
            means, lo, hi, ns = [], [], [], []
            for xv in xs:
                sel = ok[(ok[x] == xv) & ((ok[hue] == h) if hue else True)]
                s = stats.describe(sel[metric], conf=conf, seed=seed)
                means.append(s.mean)
                lo.append(s.mean - s.ci_low if math.isfinite(s.ci_low) else 0)
                hi.append(s.ci_high - s.mean if math.isfinite(s.ci_high) else 0)
                ns.append(s.n)
            pos = np.arange(len(xs)) + (j - (len(hs) - 1) / 2) * width
            heights = np.nan_to_num(np.array(means, float))
            ax.bar(
                pos,
                heights,
                width * 0.9,
                yerr=[lo, hi],
                capsize=3,
                color=COLORS[j % 10],
                label=str(h) if hue else None,
                error_kw={"elinewidth": 1},
            )
            for p, m, e, n in zip(pos, heights, hi, ns, strict=True):
                ax.annotate(
                    f"n={n}",
                    (p, m + e),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    xytext=(0, 2),
                    textcoords="offset points",
                )
            drew = drew or any(n for n in ns)
        if not drew:
            _no_data(ax, metric)
        ax.set_xticks(np.arange(len(xs)))
        _ticks(ax, [str(v) for v in xs])
        ax.set_ylabel(label(metric))
        ax.set_title(f"{metric}: mean and {conf:.0%} bootstrap CI")
        if hue:
            ax.legend(title=hue, frameon=False)
    return fig


def path_share(runs: pd.DataFrame, by: str = "variant", order: list | None = None):
    """Stacked bars: the mean share of the data bytes each path carried."""
    ok = stats.ok_runs(runs)
    cols = sorted(
        (c for c in ok.columns if c.startswith("path") and c.endswith("_share")),
        key=lambda c: int(c[4:-6]) if c[4:-6].isdigit() else 0,
    )
    keys = order or list(dict.fromkeys(ok[by])) if len(ok) else []
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        bottom = np.zeros(len(keys))
        for i, c in enumerate(cols):
            vals, ns = [], []
            for k in keys:
                v = pd.to_numeric(ok.loc[ok[by] == k, c], errors="coerce").fillna(0)
                has = ok.loc[ok[by] == k, cols].notna().any(axis=1)
                vals.append(float(v[has].mean()) if has.any() else 0.0)
                ns.append(int(has.sum()))
            vals = list(np.array(vals) * 100)
            ax.bar(
                range(len(keys)),
                vals,
                0.6,
                bottom=bottom,
                color=COLORS[i % 10],
                label=f"path {c[4:-6]}",
            )
            bottom += vals
        if not cols:
            _no_data(ax, "path shares")
        else:
            ns = [int(ok.loc[ok[by] == k, cols].notna().any(axis=1).sum()) for k in keys]
            ax.set_xticks(range(len(keys)))
            _ticks(ax, [f"{k}\nn={n}" for k, n in zip(keys, ns, strict=True)])
            ax.legend(frameon=False, loc="upper right", bbox_to_anchor=(1.0, 1.15), ncol=len(cols))
        ax.set_ylim(0, 105)
        ax.set_ylabel("share of data bytes [%]")
        ax.set_title("Path share (mean over runs)", loc="left")
    return fig


def timeseries(
    ss: pd.DataFrame,
    mptcp: pd.DataFrame,
    run_id: str,
    fields: tuple[str, ...] = ("cwnd", "srtt_ms"),
    pcap_ofo: pd.DataFrame | None = None,
    title: str | None = None,
    kernel_ofo: pd.DataFrame | None = None,
):
    """Per-subflow time series of one run (one panel per field) and the
    receiver's MPTCP out-of-order queue (the kernel's: 10 ms peaks from the
    tracepoint when available, else the connection samples; pcap
    reconstruction dashed when available)."""
    ss = ss[ss["run_id"] == run_id] if len(ss) else ss
    mp = mptcp[mptcp["run_id"] == run_id] if len(mptcp) else mptcp
    po = pcap_ofo[pcap_ofo["run_id"] == run_id] if pcap_ofo is not None and len(pcap_ofo) else None
    ko = (
        kernel_ofo[kernel_ofo["run_id"] == run_id]
        if kernel_ofo is not None and len(kernel_ofo)
        else None
    )
    panels = list(fields) + ["ofo_bytes"]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            len(panels), 1, sharex=True, figsize=(6.4, 1.6 * len(panels) + 0.6)
        )
        sockets = _data_sockets(ss)
        for ax, f in zip(axes, panels, strict=True):
            if f == "ofo_bytes":
                _ofo_panel(ax, mp, po, ko)
            elif len(sockets) and f in ss:
                for i, (sock, g) in enumerate(sockets):
                    lab = f"path {int(g['path'].iloc[0])}" if g["path"].notna().any() else sock
                    ax.plot(
                        g["t_rel"],
                        g[f],
                        lw=1,
                        color=COLORS[i % 10],
                        label=f"{lab} ({g['host'].iloc[0]})",
                    )
                ax.legend(frameon=False, fontsize=7, loc="upper right")
            else:
                _no_data(ax, f)
            ax.set_ylabel(label(f), fontsize=8)
        axes[-1].set_xlabel("time since workload start [s]")
        fig.suptitle(title or run_id, fontsize=9)
        fig.tight_layout()
    return fig


def fec_ratio(fr: pd.DataFrame, run_id: str, title: str | None = None, max_sockets: int = 6):
    """One run's dynamic FEC ratio over time (``traces/fec-ratio.csv``, the
    ``fec_ratio`` table): one line per socket that re-evaluated it, the
    busiest first (the thesis's Fig. 6.4: the first 10 s of a bulk transfer)."""
    g = fr[fr["run_id"] == run_id] if len(fr) else fr
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6.4, 2.6))
        if not len(g):
            _no_data(ax, "FEC ratio events")
        else:
            busiest = g["socket"].value_counts().index[:max_sockets]
            for i, sock in enumerate(busiest):
                h = g[g["socket"] == sock].sort_values("t")
                path = h["path"].iloc[0] if "path" in h else None
                lab = f"path {int(path)}: {sock}" if path is not None and pd.notna(path) else sock
                ax.step(h["t_rel"], h["ratio"], where="post", lw=1, color=COLORS[i % 10], label=lab)
            ax.set_yscale("log", base=2)
            ax.legend(frameon=False, fontsize=7, loc="best")
        ax.set_ylabel(label("fec_ratio"), fontsize=8)
        ax.set_xlabel("time since workload start [s]")
        fig.suptitle(title or run_id, fontsize=9)
        fig.tight_layout()
    return fig


def sbd_accuracy(
    scores: pd.DataFrame, order: list | None = None, bin_s: float = 3.5, by: str = "variant"
):
    """Shared-bottleneck detection's accuracy over time (the ``sbd_scores``
    table, with a ``by`` column): per group, the share of its runs whose
    decisions in each ``bin_s`` time bin were right (a run with several
    decisions in a bin counts with its share of right ones), one line per
    group in ``order``, n (runs) in the legend.  Bins where most decisions
    (all groups) were taken while the truth was "shared" are shaded, so the
    shared (SB) and not shared (NSB) phases show.  The caller picks the runs
    (the report: ok runs of the current attempt)."""
    has = len(scores) > 0 and by in scores
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        drew = False
        if has:
            df = scores[["run_id", by, "t", "shared", "right"]].copy()
            df["bin"] = np.floor(pd.to_numeric(df["t"]) / bin_s).astype(int)
            shared = df.groupby("bin")["shared"].mean() > 0.5
            spans: list[list[float]] = []
            for b in shared[shared].index:
                if spans and spans[-1][1] == b * bin_s:
                    spans[-1][1] = (b + 1) * bin_s
                else:
                    spans.append([b * bin_s, (b + 1) * bin_s])
            for i, (lo, hi) in enumerate(spans):
                ax.axvspan(
                    lo, hi, color="0.5", alpha=0.15, lw=0, label="truth: shared" if i == 0 else None
                )
            keys = order or list(dict.fromkeys(df[by]))
            for i, k in enumerate(keys):
                g = df[df[by] == k]
                if not len(g):
                    continue
                per_run = g.groupby(["bin", "run_id"])["right"].mean()
                share = per_run.groupby(level="bin").mean().sort_index()
                ax.plot(
                    (share.index.to_numpy() + 0.5) * bin_s,
                    share.to_numpy(),
                    lw=1.2,
                    marker="o",
                    ms=2.5,
                    color=COLORS[i % 10],
                    label=f"{k} (n={g['run_id'].nunique()})",
                )
                drew = True
        if drew:
            ax.legend(frameon=False, fontsize=7, loc="lower right")
        else:
            _no_data(ax, "SBD decisions")
        ax.set_ylim(0, 1.02)
        ax.set_xlim(left=0)
        ax.set_xlabel("time since workload start [s]")
        ax.set_ylabel(f"share of runs right ({bin_s:g} s bins)")
        ax.set_title("Shared-bottleneck detection: accuracy over time", loc="left")
        fig.tight_layout()
    return fig


def _data_sockets(ss: pd.DataFrame):
    """The sockets that carried data, from the host that sent the most."""
    if not len(ss) or "socket_bytes" not in ss:
        return []
    sent = ss.groupby("host")["bytes_acked"].max() if "bytes_acked" in ss else None
    host = sent.idxmax() if sent is not None and len(sent) else ss["host"].iloc[0]
    h = ss[ss["host"] == host]
    total = h.groupby("socket")["socket_bytes"].max()
    keep = total[total >= max(10_000, 0.01 * total.sum())].index
    out = [(s, g.sort_values("t")) for s, g in h[h["socket"].isin(keep)].groupby("socket")]
    return sorted(out, key=lambda sg: sg[1]["path"].min() if sg[1]["path"].notna().any() else 99)


def _ofo_panel(
    ax, mp: pd.DataFrame, po: pd.DataFrame | None, ko: pd.DataFrame | None = None
) -> None:
    if ko is not None and len(ko):
        tok = ko.groupby("token")["ofo_bytes_max"].max().idxmax()
        g = ko[ko["token"] == tok].sort_values("t")
        ax.plot(g["t_rel"], g["ofo_bytes_max"], lw=1, color="black", label="kernel (10 ms peak)")
        if po is not None and len(po):
            t0 = g["t"].iloc[0] - g["t_rel"].iloc[0]
            conn = po.groupby(["conn", "direction"])["ofo_bytes_max"].max().idxmax()
            p = po[(po["conn"] == conn[0]) & (po["direction"] == conn[1])]
            ax.plot(p["t"] - t0, p["ofo_bytes_max"], lw=1, ls="--", color="tab:red", label="pcap")
        ax.legend(frameon=False, fontsize=7, loc="upper right")
        return
    drew = False
    if len(mp) and "ofo_bytes" in mp:
        by_token = mp.groupby("token")["ofo_bytes_max"].max() if "ofo_bytes_max" in mp else None
        if by_token is not None and len(by_token) and by_token.max() > 0:
            tok = by_token.idxmax()
            g = mp[mp["token"] == tok].sort_values("t")
            ax.plot(g["t_rel"], g["ofo_bytes"], lw=1, color="black", label="kernel counter")
            drew = True
            t0 = g["t"].iloc[0] - g["t_rel"].iloc[0]
            if po is not None and len(po):
                conn = po.groupby(["conn", "direction"])["ofo_bytes_max"].max().idxmax()
                p = po[(po["conn"] == conn[0]) & (po["direction"] == conn[1])]
                ax.plot(
                    p["t"] - t0, p["ofo_bytes_max"], lw=1, ls="--", color="tab:red", label="pcap"
                )
            ax.legend(frameon=False, fontsize=7, loc="upper right")
    if not drew:
        _no_data(ax, "OFO samples")
