"""mptlab: an emulation testbed for multipath transport (MPTCP) research.

The package follows the data: ``spec`` (the experiment language) ->
``campaign`` (the host runs guests) -> ``guest`` (the agent in the UML
guest) -> ``workloads`` -> ``analysis``, with ``rundir`` (the run dir, the
contract between them) at the bottom and ``cli``/``api`` on top.

The Python API (docs/python-api.md)::

    import mptlab
    exp = mptlab.Experiment(topology="two-path", paths=["wlan", "3g"],
                            scheduler=["minrtt", "blest"], workload=mptlab.Bulk(bytes="64MiB"))
    results = mptlab.run(exp, jobs=2)
    results.stats("goodput_mbps")

    with mptlab.Network("blest-3g-wlan") as net:      # the topology up, no workload
        print(net["client"].cmd("ping -c 2 " + net["server"].IP()))

Its names are imported on first use, so that the guest, which imports
``mptlab.guest``, never pays for pydantic or pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_API = {
    "Experiment": "mptlab.api",
    "Results": "mptlab.api",
    "Network": "mptlab.api",
    "Node": "mptlab.api",
    "run": "mptlab.api",
    "experiments_of": "mptlab.api",
    "reproduce_all": "mptlab.api",
    "sweep": "mptlab.sweeps",
    "SweepResults": "mptlab.sweeps",
    "Bulk": "mptlab.spec.workloads",
    "Cbr": "mptlab.spec.workloads",
    "Blocks": "mptlab.spec.workloads",
    "Web": "mptlab.spec.workloads",
    "Dash": "mptlab.spec.workloads",
    "Live": "mptlab.spec.workloads",
    "Idle": "mptlab.spec.workloads",
    "Command": "mptlab.spec.workloads",
    "Workload": "mptlab.workloads.custom",
    "Metric": "mptlab.spec.metrics",
    "Background": "mptlab.spec.workloads",
    "SpecError": "mptlab.spec.yamlsrc",
    "KernelNotBuilt": "mptlab.campaign.kernel",
}
__all__ = [
    "Background",
    "Blocks",
    "Bulk",
    "Cbr",
    "Command",
    "Dash",
    "Experiment",
    "Idle",
    "KernelNotBuilt",
    "Live",
    "Metric",
    "Network",
    "Node",
    "Results",
    "SpecError",
    "SweepResults",
    "Web",
    "Workload",
    "experiments_of",
    "reproduce_all",
    "run",
    "sweep",
]

if TYPE_CHECKING:
    from .api import Experiment, Network, Node, Results, experiments_of, reproduce_all, run
    from .campaign.kernel import KernelNotBuilt
    from .spec.metrics import Metric
    from .spec.workloads import Background, Blocks, Bulk, Cbr, Command, Dash, Idle, Live, Web
    from .spec.yamlsrc import SpecError
    from .sweeps import SweepResults, sweep
    from .workloads.custom import Workload


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mptlab' has no attribute {name!r}")
