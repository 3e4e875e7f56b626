"""Kernel benchmarks: boot time to the guest program, and netem throughput.

python -m bench.run kernel
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from orchestrator.paths import find_kernel
from orchestrator.uml import run_script

from .report import write_section

BOOTS = 10

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


def boot_times(kernel, base: Path) -> list[float]:
    """Seconds from starting UML until the guest program has run and the guest is off."""
    times = []
    for i in range(BOOTS):
        d = base / f"boot{i}"
        started = time.monotonic()
        r = run_script(kernel, d, "true\n", timeout=60)
        times.append(time.monotonic() - started)
        assert r.ok, r.reason
    return times


def boot_to_program(kernel, base: Path) -> list[float]:
    """Seconds from starting UML until the guest program starts (host clock
    read inside the guest: UML shares the host's clock)."""
    out = []
    for i in range(BOOTS):
        d = base / f"prog{i}"
        started = time.time()
        r = run_script(kernel, d, "date +%s.%N > $MPTLAB_RUN_DIR/t\n", timeout=60)
        assert r.ok, r.reason
        out.append(float((d / "t").read_text()) - started)
    return out


def netem_throughput(kernel, base: Path) -> float:
    d = base / "netem"
    r = run_script(kernel, d, NETEM_SCRIPT, timeout=120)
    assert r.ok, r.reason
    data = json.loads((d / "iperf.json").read_text())
    return data["end"]["sum_received"]["bits_per_second"] / 1e6


def main() -> None:
    kernel = find_kernel()
    with tempfile.TemporaryDirectory(prefix="mptlab-bench-", dir="/var/tmp") as tmp:
        base = Path(tmp)
        to_prog = boot_to_program(kernel, base)
        full = boot_times(kernel, base)
        mbit = netem_throughput(kernel, base)
    info = json.loads(kernel.build_info.read_text())
    body = f"""
Kernel {info["kernel_release"]} (Debian linux-source-6.1 {info["source_version"]}, key {info["kernel_key"]}), UML, `mem=256M`.

| measure | median | min | max | n |
|---|---|---|---|---|
| start of UML -> guest program running | {statistics.median(to_prog):.2f} s | {min(to_prog):.2f} s | {max(to_prog):.2f} s | {len(to_prog)} |
| whole boot + `true` + power-off | {statistics.median(full):.2f} s | {min(full):.2f} s | {max(full):.2f} s | {len(full)} |

Single veth pair between two namespaces, netem 5 ms each way (no rate
limit), iperf3 TCP for 10 s: **{mbit:.0f} Mbit/s** received.
"""
    write_section(
        "kernel", "Kernel: boot time and netem throughput", "python -m bench.run kernel", body
    )
    print(body)
