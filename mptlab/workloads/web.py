"""Web page loads over HTTP/1.1 (6 connections) or HTTP/2 (one connection).

The page sets of the Ferlin thesis (``helpers/pages.py``: wikipedia, amazon,
huffingtonpost, google, youtube, espn) are generated on the host by
``prepare()`` and cached under ``~/.cache/mptlab/content/``.

- ``http: "1.1"`` (BLEST paper: "6 concurrent connections to mimic the
  behaviour of a real browser"): the server is ``helpers/httpd.py`` (MPTCP
  listener, or TCP for the baseline); the client, in the agent, fetches the
  HTML on one connection, reads its links, then fetches the objects in
  document order from a shared queue over ``connections`` persistent
  connections (the first one reused, the others opened when the HTML has
  arrived), one request at a time per connection.
- ``http: "2"`` (FEC chapter, nghttp2): ``nghttpd`` serves the page,
  ``nghttp -a`` fetches the HTML and every object it links over one
  connection (dependency-based priorities, stream window 2^23-1 B,
  connection window 2^24-1 B: browser-like, chosen), both through
  ``mptcpize`` for MPTCP.  Times come from nghttp's HAR output (1 ms
  resolution for the request start, microseconds for durations).

``loads`` page loads run one after another (fresh connections each time,
``gap`` apart), after the experiment's ``warmup``.

Metrics: ``page_load_s`` (mean completion time: from the client starting
its first connection to the last byte of the last object), ``page_loads_s``
(each load), ``page_load_min_s``/``_max_s``, ``first_request_max_ms`` (the
latest start of a load's first request), ``late_first_request_loads`` (loads
whose first request started ``SYN_RTO_S`` or later: a lost SYN or SYN-ACK
on paths with RTTs below 1 s, a scheduler-independent second), ``objects``, ``bytes`` (body
bytes per load), ``page_bytes`` (the page set's total), ``connections``,
``http``; ``object_times`` (first load: ``[path, bytes, start_ms, end_ms,
connection]`` relative to the load's start), ``capacity_mbps`` (sum of the
path rates for MPTCP, the TCP path's rate for TCP) and ``min_transfer_s``
(the page's bytes at that capacity: no load can be faster).  Per-object records of every load:
``traces/web-objects.csv``.
"""

from __future__ import annotations

import csv
import json
import subprocess
import threading
import time
from collections import deque
from datetime import datetime
from pathlib import Path

from ..guest.netlab import wait_listening
from ..guest.sockets import connect
from ..guest.workload import WorkloadError
from ..spec.metrics import Metric
from .helpers import httpd, pages
from .helpers.common import endpoints, mptcp, mptcpize, stop
from .helpers.content import build_once, content_dir, prepared
from .helpers.httpd import Connection, Fetch

H1_PORT = 8081
H2_PORT = 8080
H2_WINDOW_BITS = 23  # nghttp -w: per-stream window 8 MiB (Chrome: 6 MiB)
H2_CONN_WINDOW_BITS = 24  # nghttp -W: connection window 16 MiB (Chrome: 15 MiB)

HEADLINE = ("page_load_s",)
METRICS = (
    Metric(
        "page_load_s",
        "s",
        "lower",
        "mean page load time: from the client starting its first connection to the last "
        "byte of the last object",
    ),
    Metric("page_loads_s", "s", "lower", "each load's page load time", table="series"),
    Metric("page_load_min_s", "s", "lower", "the fastest load"),
    Metric("page_load_max_s", "s", "lower", "the slowest load"),
    Metric("first_request_max_ms", "ms", "lower", "the latest start of a load's first request"),
    Metric(
        "late_first_request_loads",
        "",
        "lower",
        "loads whose first request started SYN_RTO_S or later (a lost SYN or SYN-ACK)",
    ),
    Metric("objects", "", None, "objects fetched per load"),
    Metric("bytes", "B", None, "body bytes per load"),
    Metric("page_bytes", "B", None, "the page set's total bytes"),
    Metric(
        "object_times",
        "ms",
        None,
        "first load: [path, bytes, start_ms, end_ms, connection] per object",
        table="series",
    ),
    Metric("http", "", None, "the HTTP version (text)"),
    Metric("page", "", None, "the page set (text)"),
    Metric("connections", "", None, "connections per load"),
    Metric(
        "capacity_mbps",
        "Mbit/s",
        None,
        "sum of the path rates for MPTCP, the TCP path's rate for TCP",
    ),
    Metric("min_transfer_s", "s", None, "the page's bytes at that capacity: no load is faster"),
)


def prepare(p: dict) -> dict:
    """Write the page's files (once; cached) and return where they are."""
    page = p["page"]
    target = content_dir("page", {"page": page, "generator": pages.GENERATOR})
    build_once(target, lambda tmp: pages.write(page, tmp))
    objs = pages.objects(page)
    return {"root": str(target), "objects": len(objs), "bytes": sum(o["size"] for o in objs)}


# ------------------------------------------------------------- HTTP/1.1
def load_h1(ctx, dest: str, bind: str | None, connections: int) -> tuple[float, list[Fetch]]:
    """One page load; returns (start epoch s, fetches)."""
    ns = ctx.net.ns(ctx.client)
    use = mptcp(ctx)
    host = f"{dest}:{H1_PORT}"
    start = time.time()
    first = Connection(connect(ns, use, dest, H1_PORT, bind), host, 0)
    root = first.get("/index.html", keep=True)
    if root.status != 200:
        raise RuntimeError(f"GET /index.html: HTTP {root.status}")
    queue = deque(pages.links(root.body or b""))
    fetches = [root]
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(conn: Connection | None, index: int) -> None:
        try:
            if conn is None:
                with lock:
                    if not queue:
                        return
                conn = Connection(connect(ns, use, dest, H1_PORT, bind), host, index)
            while True:
                with lock:
                    if not queue:
                        break
                    path = queue.popleft()
                f = conn.get(path)
                with lock:
                    fetches.append(f)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            if conn is not None:
                conn.close()

    threads = [
        threading.Thread(target=worker, args=(first if i == 0 else None, i))
        for i in range(connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise WorkloadError(f"HTTP/1.1 page load failed: {errors[0]!r}")
    bad = [f for f in fetches if f.status != 200]
    if bad:
        raise WorkloadError(f"HTTP/1.1 page load: {bad[0].path} gave HTTP {bad[0].status}")
    return start, fetches


# --------------------------------------------------------------- HTTP/2
def _iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_har(har: dict) -> tuple[float, list[Fetch]]:
    """(client start epoch s, fetches) from nghttp's HAR: entry 0 starts when
    the client starts (its ``time`` includes DNS and connect), every entry's
    ``time`` runs from its request to its last byte.  A HAR without the
    fields read here is a ``WorkloadError`` naming what is missing."""
    try:
        return _parse_har(har)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
        raise WorkloadError(
            f"nghttp: unexpected HAR output ({type(exc).__name__}: {what})"
        ) from None


def _parse_har(har: dict) -> tuple[float, list[Fetch]]:
    entries = har["log"]["entries"]
    if not entries:
        raise WorkloadError("nghttp fetched nothing")
    start = _iso(entries[0]["startedDateTime"])
    out = []
    for i, e in enumerate(entries):
        t_req = _iso(e["startedDateTime"])
        tm = e["timings"]
        if i == 0:
            t_req = start + (tm.get("dns", 0) + tm.get("connect", 0)) / 1000
            end = start + e["time"] / 1000
        else:
            end = t_req + e["time"] / 1000
        first = end - tm.get("receive", 0) / 1000
        path = (
            "/" + e["request"]["url"].split("/", 3)[3]
            if e["request"]["url"].count("/") >= 3
            else "/"
        )
        size = e["response"].get("content", {}).get("size", e["response"].get("bodySize", 0))
        out.append(Fetch(path, int(e["response"]["status"]), int(size), t_req, first, end, 0))
    return start, out


def load_h2(ctx, dest: str, k: int) -> tuple[float, list[Fetch]]:
    har_path = ctx.trace_dir / f"nghttp-{k}.har"
    args = mptcpize(ctx) + ["nghttp", "-a", "-n", "-s", "-r", str(har_path), "-t", "120"]
    args += ["-w", str(H2_WINDOW_BITS), "-W", str(H2_CONN_WINDOW_BITS)]
    args += [f"http://{dest}:{H2_PORT}/index.html"]
    proc = ctx.net.popen(
        ctx.client, args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        (ctx.trace_dir / f"nghttp-{k}.out").write_text(out)
        raise WorkloadError(f"nghttp did not finish in 300 s: {out.strip()[-300:]}") from None
    (ctx.trace_dir / f"nghttp-{k}.out").write_text(out)
    if proc.returncode != 0 or not har_path.exists():
        raise WorkloadError(f"nghttp failed ({proc.returncode}): {out.strip()[-400:]}")
    try:
        har = json.loads(har_path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"nghttp: its HAR file is not JSON ({exc.msg})") from None
    start, fetches = parse_har(har)
    bad = [f for f in fetches if f.status != 200]
    if bad:
        raise WorkloadError(f"HTTP/2 page load: {bad[0].path} gave HTTP {bad[0].status}")
    return start, fetches


# ------------------------------------------------------------------- run
def path_rates_mbps(ctx) -> list[float | None]:
    """Each path's bottleneck rate (the slower direction of its ``pathN``
    links; None: unshaped)."""
    out = []
    for n in range(1, len(ctx.config.paths) + 1):
        rates = [
            s.rate
            for ln in ctx.plan.links
            if ln.label == f"path{n}"
            for s in (ln.a_to_b, ln.b_to_a)
            if s is not None and s.rate
        ]
        out.append(min(rates) if rates else None)
    return out


def capacity_mbps(ctx) -> float | None:
    """What the connection can use at most: the sum of the path rates with
    MPTCP, the TCP path's rate for single-path TCP (None if unshaped)."""
    rates = path_rates_mbps(ctx)
    if not mptcp(ctx):
        rates = [rates[min(ctx.config.kernel.tcp_path, len(rates)) - 1]]
    known = [r for r in rates if r is not None]
    return sum(known) if len(known) == len(rates) else None


# The initial retransmission timeout of a SYN (RFC 6298, Linux TCP_TIMEOUT_INIT).
# A load whose first request starts this late lost its first SYN or SYN-ACK
# (on paths with RTTs below it): the BLEST WLAN + WLAN amazon runs had one
# such 1.1 s start in 10, which moved a mean of 10 by ~10 points.
SYN_RTO_S = 1.0


def load_metrics(loads: list[tuple[float, list[Fetch]]], page_bytes: int, n_objects: int) -> dict:
    times = [max(f.end for f in fetches) - start for start, fetches in loads]
    first = [min(f.start for f in fetches) - start for start, fetches in loads]
    start0, fetches0 = loads[0]
    for _start, fetches in loads:
        got = {f.path for f in fetches}
        if len(got) != n_objects:
            raise RuntimeError(
                f"a page load fetched {len(got)} distinct objects, the page has {n_objects}"
            )
    return {
        "page_load_s": sum(times) / len(times),
        "page_loads_s": times,
        "page_load_min_s": min(times),
        "page_load_max_s": max(times),
        "first_request_max_ms": round(max(first) * 1000, 3),
        "late_first_request_loads": sum(t >= SYN_RTO_S for t in first),
        "objects": len(fetches0),
        "bytes": sum(f.size for f in fetches0),
        "page_bytes": page_bytes,
        "object_times": [
            [
                f.path,
                f.size,
                round((f.start - start0) * 1000, 3),
                round((f.end - start0) * 1000, 3),
                f.connection,
            ]
            for f in sorted(fetches0, key=lambda f: f.start)
        ],
    }


def run(ctx) -> dict:
    p = ctx.workload
    prep = prepared(ctx)
    root = Path(prep["root"])
    if not (root / "index.html").exists():
        raise RuntimeError(f"page content missing in {root} (prepare() on the host makes it)")
    dest, bind = endpoints(ctx)
    if p.http == "2":
        server_cmd = mptcpize(ctx) + ["nghttpd", "--no-tls", "-d", str(root), str(H2_PORT)]
        port = H2_PORT
    else:
        server_cmd = httpd.command(root, H1_PORT, mptcp(ctx))
        port = H1_PORT
    log = open(ctx.trace_dir / "web-server.log", "w")  # noqa: SIM115
    server = ctx.net.popen(ctx.server, server_cmd, stdout=log, stderr=subprocess.STDOUT)
    loads = []
    try:
        wait_listening(ctx.net.ns(ctx.server), port, server)
        time.sleep(ctx.config.warmup / 1000)
        ctx.mark("workload_start")
        for k in range(p.loads):
            if k:
                time.sleep(p.gap / 1000)
            if p.http == "2":
                loads.append(load_h2(ctx, dest, k))
            else:
                loads.append(load_h1(ctx, dest, bind, p.connections))
            ctx.log(
                f"web: load {k + 1}/{p.loads}: {max(f.end for f in loads[-1][1]) - loads[-1][0]:.3f} s"
            )
        ctx.mark("workload_end")
    finally:
        stop(server)
        log.close()
    with open(ctx.trace_dir / "web-objects.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["load", "path", "status", "bytes", "start", "first_byte", "end", "connection"])
        for k, (_, fetches) in enumerate(loads):
            for f in fetches:
                w.writerow(
                    [
                        k,
                        f.path,
                        f.status,
                        f.size,
                        f"{f.start:.6f}",
                        f"{f.first_byte:.6f}",
                        f"{f.end:.6f}",
                        f.connection,
                    ]
                )
    metrics = load_metrics(loads, prep["bytes"], prep["objects"])
    rate = capacity_mbps(ctx)
    metrics.update(
        http=p.http,
        page=p.page,
        connections=1 if p.http == "2" else p.connections,
        capacity_mbps=rate,
        min_transfer_s=prep["bytes"] * 8 / (rate * 1e6) if rate else None,
    )
    return metrics
