"""What the readers share: the run being read (its files, read once, and what
the readers before have found) and small conversions."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ... import rundir
from ...rundir import RunDir, RunDirError
from ...spec.plan import NetPlan


class IngestError(ValueError):
    """A results dir that cannot be ingested."""


def read_file(read, name: str) -> tuple[dict | None, str]:
    """A run dir file through its reader: (data, "") or (None, why not)."""
    try:
        data = read()
    except RunDirError as exc:
        return None, str(exc)
    return (data, "") if data is not None else (None, f"{name} missing")


@dataclass
class Run:
    """One run dir as the readers see it: run.json (``info``), spec.json and
    result.json, read once; ``row`` and ``tables`` hold what the readers
    before this one found (a reader reads them, ``read_run`` adds to them).
    Readers run in ``readers.READERS`` order because some need another's
    result: the analysis window (the result's marks, the spec's warm-up),
    the path of an address, whether the kernel gave the path shares."""

    rd: RunDir
    run_id: str
    campaign: str
    pcap: bool = True
    info: dict | None = None
    info_err: str = ""
    spec: dict = field(default_factory=dict)
    result: dict = field(default_factory=dict)
    result_err: str = ""
    row: dict = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    _plan: NetPlan | bool | None = field(default=None, repr=False)  # False: unreadable

    @classmethod
    def open(cls, run_dir: RunDir | Path, run_id: str, campaign: str, pcap: bool = True) -> Run:
        rd = RunDir(run_dir)
        info, info_err = read_file(rd.run_info, rundir.RUN)
        spec, _ = read_file(rd.spec, rundir.SPEC)
        result, result_err = read_file(rd.result, rundir.RESULT)
        return cls(rd, run_id, campaign, pcap, info, info_err, spec or {}, result or {}, result_err)

    @property
    def config(self) -> dict:
        return self.spec.get("config") or {}

    @property
    def addresses(self) -> dict:
        return self.result.get("addresses") or {}

    @property
    def t0(self) -> float | None:
        """The workload's start (epoch s): the origin of every ``t_rel``."""
        marks = self.result.get("marks") or {}
        return marks.get("workload_start") or self.result.get("started") or self.row.get("started")

    def window(self) -> tuple[float, float] | None:
        """The analysis window (epoch s): the workload's start plus the warm-up
        to its end; None without both marks."""
        start, end = self.row.get("workload_start"), self.row.get("workload_end")
        if not (start and end):
            return None
        return start + (self.row.get("warmup_ms") or 0) / 1000, end

    def roles(self) -> tuple[str, str]:
        """The client's and the server's host names (``topology.roles``;
        a Mininet topology may call them h1 and h2)."""
        roles = (self.spec.get("topology") or {}).get("roles") or {}
        return roles.get("client") or "client", roles.get("server") or "server"

    def path_of(self, addr: str) -> int | None:
        """The path of an address: ``NetPlan.path_of``, the rule the guest
        labels its own tables by; from the addresses the guest reported
        (``result.json``) where the run's plan cannot be read (run dirs of
        an older plan format)."""
        hosts = self.roles()
        if self._plan is None:
            try:
                self._plan = NetPlan.from_json(self.spec["plan"])
            except Exception:  # an older format: the guest's reported addresses
                self._plan = False
        if isinstance(self._plan, NetPlan):
            return self._plan.path_of(addr, hosts)
        for host in hosts:
            addrs = self.addresses.get(host) or []
            if addr in addrs:
                return addrs.index(addr) + 1
        return None


def colname(key: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def scalar(v):
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return json.dumps(v, sort_keys=True)


def num(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None


def flatten(d: dict, prefix: str = "") -> tuple[dict, dict]:
    """Scalars of a nested dict (keys joined with _) and its lists (name -> list)."""
    scalars, lists = {}, {}
    for k, v in (d or {}).items():
        name = f"{prefix}{colname(str(k))}"
        if isinstance(v, dict):
            s, l2 = flatten(v, name + "_")
            scalars.update(s)
            lists.update(l2)
        elif isinstance(v, list):
            lists[name] = v
        else:
            scalars[name] = v
    return scalars, lists


def token(v) -> str | None:
    """An MPTCP token as 8 hex digits (the samplers write it as a number)."""
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        return v.lower() if not v.isdigit() else f"{int(v):08x}"
    return f"{int(v):08x}"


def read_csv(path: Path, what: str, dtype=None, check=None) -> pd.DataFrame | None:
    """A trace CSV (None when absent or empty); IngestError naming ``what`` it
    should be.  ``dtype``: as pandas', or a function of the header's column
    names returning it; ``check``: a function of the table returning it
    checked and converted (its ValueError or TypeError is the file's fault)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    try:
        if callable(dtype):
            dtype = dtype(list(pd.read_csv(path, nrows=0).columns))
        df = pd.read_csv(path, dtype=dtype)
        return check(df) if check is not None else df
    except (ValueError, TypeError, pd.errors.ParserError) as exc:
        raise IngestError(f"{path}: not {what}: {exc}") from None


def socket_name(df: pd.DataFrame) -> pd.Series:
    """``saddr:sport>daddr:dport`` per row."""
    return (
        df["saddr"].astype(str)
        + ":"
        + df["sport"].astype(str)
        + ">"
        + df["daddr"].astype(str)
        + ":"
        + df["dport"].astype(str)
    )


def weighted_percentiles(levels: np.ndarray, weights: np.ndarray, qs) -> dict[int, float]:
    """{q: the smallest level at or below which q % of the total weight lies}
    (levels held for ``weights`` seconds: a time-weighted percentile)."""
    o = np.argsort(levels, kind="stable")
    cum = np.cumsum(weights[o])
    out = {}
    for q in qs:
        k = min(int(np.searchsorted(cum, q / 100 * cum[-1])), len(o) - 1)
        out[q] = float(levels[o][k])
    return out
