"""Kernel knobs an experiment's settings turn into, as plain functions of
the resolved config (JSON data, no pydantic): the host validates the
settings (``mptlab.spec.models``), the guest sets the knobs from the config
it gets, and both use these functions, so the mapping has one home."""

from __future__ import annotations


def mptbm_sysctls(mptbm: dict | None) -> dict[str, int]:
    """``kernel.mptbm`` (``{lambda, theta, window}``, durations in ms, as the
    catalog resolves them) -> the per-namespace sysctls of kernel patch 0004
    (lambda in thousandths; 0 turns MPT-BM off).  {} when not set."""
    if not mptbm:
        return {}
    return {
        "net.mptcp.mptbm_lambda": round(float(mptbm["lambda"]) * 1000),
        "net.mptcp.mptbm_theta_ms": round(float(mptbm["theta"])),
        "net.mptcp.mptbm_window_ms": round(float(mptbm["window"])),
    }
