"""The ``two-path`` topology (two-path.yaml) written as a Mininet ``Topo``.

    topology: {mininet: "two_path:TwoPath"}      # in an experiment (topologies/ is searched)
    mptlab.Experiment(topology=TwoPath(), ...)   # from Python

It plans to the same network as the YAML file (tests/test_mininet.py), with
Mininet's link numbering.  The routers are hosts that forward
(``router=True``), the bottlenecks are the experiment's path slots
(``shape="pathN"``).
"""

from mininet.topo import Topo


class TwoPath(Topo):
    """Two non-shared bottlenecks, one per MPTCP path; each bottleneck also
    carries one background pair (server side -> client side)."""

    source = "Ferlin PhD thesis Fig. 3.1(a); BLEST paper Fig. 2 (emulation setup)"
    roles = {
        "client": "client",
        "server": "server",
        "background": [
            {"sender": "bgs1", "receiver": "bgc1", "path": 1},
            {"sender": "bgs2", "receiver": "bgc2", "path": 2},
        ],
    }

    def build(self):
        client, server = self.addHost("client"), self.addHost("server")
        for n in (1, 2):
            bgc, bgs = self.addHost(f"bgc{n}"), self.addHost(f"bgs{n}")
            near, far = self.addHost(f"r{n}c", router=True), self.addHost(f"r{n}s", router=True)
            self.addLink(client, near)
            self.addLink(bgc, near)
            self.addLink(near, far, shape=f"path{n}")  # bottleneck n
            self.addLink(far, server)
            self.addLink(far, bgs)
