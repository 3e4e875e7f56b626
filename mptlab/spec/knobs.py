"""Kernel knobs an experiment's settings turn into, as plain functions of
the resolved config (JSON data, no pydantic): the host validates the
settings (``mptlab.spec.models``), the guest sets the knobs from the config
it gets, and both use these functions, so the mapping has one home."""

from __future__ import annotations


def buffer_sysctls(rmem: int | None, wmem: int | None, mode: str) -> dict[str, str]:
    """``kernel.rmem`` / ``kernel.wmem`` (bytes) -> per-namespace TCP buffer
    sysctls.  ``autotune``: they are the ceiling of TCP's buffer autotuning
    (tcp_rmem[2], tcp_wmem[2]), the buffers start at Linux's defaults and
    grow with the measured need.  ``socket``: as an application that calls
    setsockopt(SO_RCVBUF / SO_SNDBUF) with the value gets them: Linux
    doubles the value (half of it for its own bookkeeping) and autotuning
    stops, so every socket starts and stays at twice the value.  The
    papers' "buffers set to 16 MiB" leave the mechanism open
    (docs/reproduction.md: the minRTT baseline picks one)."""
    out: dict[str, str] = {}
    for key, value, start in (
        ("net.ipv4.tcp_rmem", rmem, 131072),
        ("net.ipv4.tcp_wmem", wmem, 16384),
    ):
        if not value:
            continue
        if mode == "socket":
            out[key] = f"4096 {2 * value} {2 * value}"
        else:
            out[key] = f"4096 {start} {value}"
    return out


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


# The TCP-dFEC kernel's per-namespace knobs (net.ipv4.tcp_fec*): 0 off, 1
# dynamic, 2 fixed ratio.  A connection uses FEC only if both ends asked for
# it in the handshake; otherwise it is plain TCP (docs/fec.md).
FEC_MODES = {"off": 0, "dynamic": 1, "fixed": 2}


def fec_on(fec: dict | None) -> bool:
    """Is ``kernel.fec`` (as the catalog resolves it) asking for FEC?  Null
    and ``mode: off`` are the same: nothing is set, nothing is traced."""
    if not fec:
        return False
    return FEC_MODES.get(str(fec.get("mode", "dynamic")), 0) != 0


def fec_sysctls(fec: dict | None) -> dict[str, int]:
    """``kernel.fec`` (``{mode, ratio, delta, target, min, max, hosts}``;
    delta and target as fractions, as the catalog resolves them) -> the
    per-namespace sysctls of the TCP-dFEC kernel, in an order the kernel
    accepts on a fresh namespace (the bounds first, the switch last).  {}
    when off."""
    if not fec_on(fec):
        return {}
    assert fec is not None
    return {
        "net.ipv4.tcp_fec_min": int(fec.get("min", 4)),
        "net.ipv4.tcp_fec_max": int(fec.get("max", 256)),
        "net.ipv4.tcp_fec_ratio": int(fec.get("ratio", 9)),
        "net.ipv4.tcp_fec_delta": round(float(fec.get("delta", 0.33)) * 1000),  # permille
        "net.ipv4.tcp_fec_target": round(float(fec.get("target", 0.01)) * 1_000_000),  # ppm
        "net.ipv4.tcp_fec": FEC_MODES[str(fec.get("mode", "dynamic"))],
    }


def fec_hosts(fec: dict | None, client: str, server: str) -> list[str]:
    """The namespaces FEC is switched on in: the client's and the server's
    (``hosts: both``), or one of them (an interoperability test: the other
    end stays plain TCP, so no connection negotiates FEC).  Routers and
    background hosts never: background flows are plain TCP.  [] when off."""
    if not fec_on(fec):
        return []
    assert fec is not None
    which = str(fec.get("hosts", "both"))
    return {"both": [client, server], "client": [client], "server": [server]}[which]
