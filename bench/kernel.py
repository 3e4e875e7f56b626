"""Kernel benchmarks: boot time to the guest program, and netem throughput.

python -m bench.run kernel
MPTLAB_BENCH_COMPARE=/root/.cache/mptlab/kernel/<key> python -m bench.run kernel

The current kernel (``find_kernel()``) is measured with the guest memory
runs get (1 GiB) and with the old default (256 MB); kernel dirs named in
``MPTLAB_BENCH_COMPARE`` (comma separated, e.g. the 6.1 build still in the
cache) are measured the same way in the same invocation, so the table
compares kernels on one machine state.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from mptlab.campaign.boot import run_script
from mptlab.campaign.kernel import KernelBuild, find_kernel

from .report import write_section

BOOTS = 10
MEMORIES = (1024, 256)  # MB: what runs get now, and the old default

NETEM_SCRIPT = """
ip netns add a; ip netns add b
ip link add va netns a type veth peer vb netns b
ip -n a addr add 10.9.0.1/24 dev va; ip -n b addr add 10.9.0.2/24 dev vb
ip -n a link set va up; ip -n b link set vb up
ip netns exec a tc qdisc add dev va root netem delay 5ms limit 100000
ip netns exec b tc qdisc add dev vb root netem delay 5ms limit 100000
ip netns exec b iperf3 -s -1 -D; sleep 0.3
ip netns exec a iperf3 -c 10.9.0.2 -t 10 -J > $MPTLAB_RUN_DIR/iperf.json
"""


def boot_times(kernel, base: Path, mem_mb: int) -> list[float]:
    """Seconds from starting UML until the guest program has run and the guest is off."""
    times = []
    for i in range(BOOTS):
        d = base / f"boot{i}"
        started = time.monotonic()
        r = run_script(kernel, d, "true\n", timeout=60, mem_mb=mem_mb)
        times.append(time.monotonic() - started)
        assert r.ok, r.reason
    return times


def boot_to_program(kernel, base: Path, mem_mb: int) -> list[float]:
    """Seconds from starting UML until the guest program starts (host clock
    read inside the guest: UML shares the host's clock)."""
    out = []
    for i in range(BOOTS):
        d = base / f"prog{i}"
        started = time.time()
        r = run_script(kernel, d, "date +%s.%N > $MPTLAB_RUN_DIR/t\n", timeout=60, mem_mb=mem_mb)
        assert r.ok, r.reason
        out.append(float((d / "t").read_text()) - started)
    return out


def netem_throughput(kernel, base: Path, mem_mb: int) -> float:
    d = base / "netem"
    r = run_script(kernel, d, NETEM_SCRIPT, timeout=120, mem_mb=mem_mb)
    assert r.ok, r.reason
    data = json.loads((d / "iperf.json").read_text())
    return data["end"]["sum_received"]["bits_per_second"] / 1e6


def kernels() -> list[KernelBuild]:
    out = [find_kernel()]
    for d in filter(None, os.environ.get("MPTLAB_BENCH_COMPARE", "").split(",")):
        kdir = Path(d)
        mods = sorted((kdir / "modules").glob("*/"))
        out.append(KernelBuild(kdir, mods[-1] if mods else kdir / "modules"))
    return out


def _stats(v: list[float]) -> str:
    return f"{statistics.median(v):.2f} s | {min(v):.2f}-{max(v):.2f} s"


def main() -> None:
    rows = []
    for kernel in kernels():
        info = json.loads(kernel.build_info.read_text())
        name = (
            f"{info['kernel_release']} ({info.get('source_package', 'linux-source-6.1')} "
            f"{info['source_version']}, key {info['kernel_key']})"
        )
        for mem in MEMORIES:
            with tempfile.TemporaryDirectory(prefix="mptlab-bench-", dir="/var/tmp") as tmp:
                base = Path(tmp)
                to_prog = boot_to_program(kernel, base, mem)
                full = boot_times(kernel, base, mem)
                mbit = netem_throughput(kernel, base, mem)
            rows.append(
                f"| {name} | {mem} MB | {_stats(to_prog)} | {_stats(full)} | {mbit:.0f} Mbit/s |"
            )
            print(rows[-1], flush=True)
    body = f"""
UML guests, {BOOTS} boots per row.  Boot: from starting UML to the guest
program running, and the whole boot + `true` + power-off (median and range).
Throughput: a single veth pair between two namespaces, netem 5 ms each way
(no rate limit), iperf3 TCP for 10 s.  Runs boot with 1024 MB since
2026-11-23 (docs/stalls.md).

| kernel | guest RAM | start -> program, median | range | whole boot, median | range | netem throughput |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}
"""
    write_section(
        "kernel", "Kernel: boot time and netem throughput", "python -m bench.run kernel", body
    )
    print(body)
