"""A workload of your own: ping from the client to the server.

Used by campaign.yaml next to it (``type: "ping_workload:Ping"``) and by
run_from_python.py; docs/workloads.md, "Your own workloads", explains it.
"""

from mptlab.workloads.custom import Metric, Workload


class Ping(Workload):
    """ICMP echo from the client to the server's first address."""

    # fields: checked on the host like a built-in workload's (YAML: count: 10)
    count: int = 10
    interval: float = 0.2  # s between echoes

    METRICS = (
        Metric("ping_rtt_min_ms", "ms", "lower", "least RTT ping measured"),
        Metric("ping_rtt_avg_ms", "ms", "lower", "mean RTT ping measured"),
        Metric("ping_loss_pct", "%", "lower", "echoes without a reply"),
    )
    HEADLINE = ("ping_rtt_avg_ms", "ping_loss_pct")
    QUICK = {"count": 3}  # mptlab run --quick

    def client(self, ctx):
        # a string runs with sh -c; $SERVER_ADDR is the address to reach
        return f"ping -n -c {self.count} -i {self.interval} $SERVER_ADDR"

    def metrics(self, ctx, out):
        # "rtt min/avg/max/mdev = 40.1/48.0/80.2/16.0 ms", "20% packet loss"
        return {
            "ping_rtt_min_ms": out.number(r"= ([\d.]+)/"),
            "ping_rtt_avg_ms": out.number(r"= [\d.]+/([\d.]+)/"),
            "ping_loss_pct": out.number(r"([\d.]+)% packet loss"),
        }


def iperf3_text(client_output: str) -> dict:
    """A command workload's parser: iperf3's text report -> metrics."""
    for line in client_output.splitlines():
        if line.rstrip().endswith("receiver"):
            words = line.split()
            return {"iperf_receiver_mbps": float(words[words.index("Mbits/sec") - 1])}
    return {}
