"""One run, fully expanded: what the host hands to the guest in ``spec.json``.

Plain data only (no pydantic), so that the guest agent starts fast: the host
validates and plans, the guest executes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import SimpleNamespace


@dataclass
class RunSpec:
    """An experiment's variant at one repetition."""

    experiment: str
    variant: str
    variant_keys: dict
    repetition: int
    seed: int
    config: dict  # the resolved experiment (ExperimentSpec as JSON data)
    topology: dict  # the topology spec as JSON data
    profiles: dict  # profile name -> spec data, the ones this run uses
    plan: dict  # the network plan (mptlab.spec.plan.NetPlan as JSON data)

    @property
    def run_id(self) -> str:
        return f"{self.variant}/rep-{self.repetition:03d}"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> RunSpec:
        return cls(**data)


def attrs(data):
    """Read-only attribute access to nested JSON data: ``attrs(cfg).kernel.scheduler``."""
    if isinstance(data, dict):
        return SimpleNamespace(**{k: attrs(v) for k, v in data.items()})
    if isinstance(data, list):
        return [attrs(v) for v in data]
    return data
