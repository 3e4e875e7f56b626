"""The Python API: experiments loaded or built in Python, run as ``mptlab run`` runs them.

    import mptlab

    exp = mptlab.Experiment.from_yaml("blest-3g-wlan").replace(repetitions=5)
    exp = mptlab.Experiment(
        topology="two-path", paths=["wlan", "3g"], scheduler=["minrtt", "blest"],
        workload=mptlab.Bulk(bytes="64MiB"), repetitions=5,
    )
    results = mptlab.run(exp, jobs=2)   # same runner, resume, progress as the CLI
    results.runs                        # pandas DataFrame, one row per run
    results.stats("goodput_mbps")

An ``Experiment`` is the YAML's mapping of one experiment, checked when it
is made (``SpecError`` names the field); docs/python-api.md has the rest.
"""

from __future__ import annotations

import copy
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import home
from .analysis import ingest, stats
from .analysis import report as html_report
from .campaign.control import ControlledGuest, GuestError
from .campaign.kernel import KernelBuild, KernelNotBuilt, find_kernel
from .campaign.progress import Progress, summary
from .campaign.runner import Campaign, CampaignReport
from .rundir import CLOCKS, Clock, RunSpec
from .spec import mininet, usercode
from .spec.catalog import Catalog, file_kind, merge_experiment
from .spec.models import ExperimentSpec, Profile, TopologySpec
from .spec.workloads import Background, Workload
from .spec.yamlsrc import Source, SpecError, load

__all__ = [
    "Experiment",
    "GuestError",
    "KernelNotBuilt",
    "Network",
    "Node",
    "Results",
    "experiments_of",
    "reproduce_all",
    "run",
]


def _is_mininet_topo(value: Any) -> bool:
    return all(
        callable(getattr(value, m, None)) for m in ("hosts", "switches", "links", "nodeInfo")
    )


class Experiment:
    """One experiment: a topology, profiles for its path slots, kernel knobs,
    a workload, repetitions, maybe a matrix of variants.

    Keyword arguments are the YAML's fields (``kernel``, ``background``,
    ``repetitions``, ``warmup``, ``timeout``, ``stall_timeout``, ``traces``,
    ``events``, ``matrix``, ``variants``, ``description``, ...), plus:

    - ``topology``: a shipped topology's name, a Mininet ``Topo`` instance
      or a ``{mininet: "module:Class", args: {...}}`` mapping;
    - ``paths``: a profile name per path slot, or a profile's fields
      (``{"rate": "25mbit", "delay": "12.5ms"}``), named ``<name>-pathN``;
    - ``scheduler``: ``kernel.scheduler``; a list makes it a matrix key;
    - ``workload``: ``mptlab.Bulk(...)``, ``mptlab.Web(...)``, ... or the
      YAML's mapping; ``background``: ``mptlab.Background(...)`` entries;
    - ``profiles``: link profiles of your own, by name.
    """

    def __init__(
        self,
        name: str = "experiment",
        *,
        topology: Any,
        workload: Workload | dict,
        paths: list[str | dict | Profile] | tuple = (),
        scheduler: str | list[str] | None = None,
        profiles: dict[str, dict] | None = None,
        **fields: Any,
    ):
        self.name = name
        self.catalog = Catalog.load()
        self.catalog.add_profiles(profiles or {})
        data: dict[str, Any] = {}
        self._set(data, topology=topology, workload=workload, paths=paths, scheduler=scheduler)
        self._set(data, **fields)
        self._commit(data)

    @classmethod
    def from_yaml(cls, name_or_file: str | Path, name: str | None = None) -> Experiment:
        """A named experiment (``experiments.yaml``), or one of a campaign file
        (``name`` may be left out when the file holds one experiment)."""
        path = Path(name_or_file)
        if path.suffix in (".yaml", ".yml") or path.exists():
            catalog = Catalog.load(path)
            own = catalog.names(path)
            if name is None:
                if len(own) != 1:
                    raise SpecError(f"{path}: holds {len(own)} experiments; say which: {own}")
                name = own[0]
        else:
            catalog, name = Catalog.load(), str(name_or_file)
        exp = cls.__new__(cls)
        exp.name = name
        exp.catalog = catalog
        exp.data = catalog.raw(name)
        exp.spec = catalog.spec(name)  # checked against its file: errors name the line
        return exp

    # ----------------------------------------------------------- fields
    def _set(self, data: dict, **fields: Any) -> None:
        for key, value in fields.items():
            if key == "topology":
                data["topology"] = self._topology(value)
            elif key == "paths":
                data["paths"] = [self._profile(p, i + 1) for i, p in enumerate(value)]
            elif key == "scheduler":
                if isinstance(value, list | tuple):
                    data.setdefault("matrix", {})["kernel.scheduler"] = list(value)
                elif value is not None:
                    data.setdefault("kernel", {})["scheduler"] = value
            elif key == "workload":
                data["workload"] = self._workload(value)
            elif key == "background":
                data["background"] = [
                    b.model_dump(mode="json", exclude_defaults=True)
                    if isinstance(b, Background)
                    else b
                    for b in value
                ]
            else:
                data[key] = value

    def _workload(self, value: Any) -> dict:
        """The YAML's mapping of a workload: a built-in's (``mptlab.Bulk(...)``,
        ``mptlab.Command(...)``), a workload class of your own (the class, or
        an instance with its fields: ``Ping`` or ``Ping(count=3)``), or a mapping."""
        if isinstance(value, Workload):
            return value.to_config()
        cls = value if isinstance(value, type) else type(value)
        if callable(getattr(cls, "run", None)) and not isinstance(value, dict):
            ref = usercode.ref_of(cls)
            self.catalog.classes[ref] = cls
            fields = value.fields() if not isinstance(value, type) else {}
            return {"type": ref, **fields}
        if isinstance(value, dict):
            return value
        raise SpecError(
            "workload: mptlab.Bulk(...) etc., mptlab.Command(...), a workload class of "
            f"your own (or an instance of it) or the YAML's mapping, not {value!r}"
        )

    def _topology(self, value: Any) -> Any:
        if isinstance(value, str | dict):
            return value
        if isinstance(value, TopologySpec):
            name = f"python:{id(value):x}"
            self.catalog.add_topology(name, value)
            return name
        if _is_mininet_topo(value):
            name = mininet.name_of(value)
            try:
                self.catalog.add_topology(name, mininet.from_topo(value))
            except ValueError as exc:
                raise SpecError(f"topology {name}: {exc}") from None
            return name
        raise SpecError(f"topology: a name, a Mininet Topo or {{mininet: ...}}, not {value!r}")

    def _profile(self, value: Any, slot: int) -> str:
        if isinstance(value, str):
            return value
        name = f"{self.name}-path{slot}"
        fields = value.to_json() if isinstance(value, Profile) else value
        self.catalog.add_profiles({name: fields})
        return name

    def _commit(self, data: dict, source: Source | None = None) -> None:
        self.data = data
        self.catalog.add(self.name, data, source)
        self.spec: ExperimentSpec = self.catalog.spec(self.name)  # checks it, SpecError if wrong

    # ------------------------------------------------------------- use
    def replace(self, **changes: Any) -> Experiment:
        """A copy with some fields changed (the constructor's keywords; mappings
        such as ``kernel`` merge key by key, as ``extends`` does)."""
        new = copy.copy(self)
        new.catalog = copy.copy(self.catalog)
        new.catalog.profiles = dict(self.catalog.profiles)
        new.catalog.topologies = dict(self.catalog.topologies)
        new.catalog.experiments = dict(self.catalog.experiments)
        new.catalog.sources = dict(self.catalog.sources)
        new.name = changes.pop("name", self.name)
        if "profiles" in changes:
            new.catalog.add_profiles(changes.pop("profiles"))
        over: dict[str, Any] = {}
        new._set(over, **changes)
        # an experiment from a file keeps its file for errors (the nearest line)
        new._commit(merge_experiment(self.data, over), self.catalog.sources[self.name][0])
        return new

    def variants(self) -> list[tuple[str, dict]]:
        """(variant name, {dotted key: value}) for every variant."""
        return self.catalog.variants(self.name)

    def runs(
        self, quick: bool = False, repetitions: int | None = None, seed: int = 1
    ) -> list[RunSpec]:
        """Every run: variants x repetitions, fully resolved (``spec.json``)."""
        return self.catalog.expand(self.name, repetitions, campaign_seed=seed, quick=quick)

    def __repr__(self) -> str:
        return (
            f"Experiment({self.name!r}, {len(self.variants())} variants x {self.spec.repetitions})"
        )


def experiments_of(file: Path) -> list[Experiment]:
    """Every experiment a campaign file defines (not those it extends)."""
    src = load(file)
    if file_kind(src) != "campaign":
        raise SpecError(f"{file}: not a campaign file (no experiments:)")
    catalog = Catalog.load(file)
    return [Experiment.from_yaml(file, name) for name in catalog.names(file)]


class Results:
    """A campaign dir and what it holds, as tables (the analysis store,
    ingested on first use and brought up to date at every access)."""

    def __init__(self, path: Path | str, report: CampaignReport | None = None, pcap: bool = True):
        self.path = Path(path)
        self.report = report  # the invocation's outcomes, when run() made this
        self.pcap = pcap

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r})"

    def ingest(self, force: bool = False) -> ingest.IngestReport:
        return ingest.ingest(self.path, pcap=self.pcap, force=force)

    @property
    def runs(self) -> Any:
        """The runs table (pandas): one row per run, current attempts only."""
        self.ingest()
        return ingest.load_runs(self.path)

    def table(self, name: str) -> Any:
        """Any table of the store (docs/analysis.md): ``series``, ``ss``, ``nstat``, ..."""
        self.ingest()
        return ingest.load_table(self.path, name)

    def query(self, sql: str) -> Any:
        """DuckDB SQL over the tables, as a DataFrame."""
        self.ingest()
        return ingest.connect(self.path).execute(sql).df()

    def stats(self, metric: str | list[str], by: str = "variant", seed: int = 0) -> Any:
        """n, mean, median, sd and a 95 % bootstrap CI per ``by`` group (ok runs)."""
        metrics = [metric] if isinstance(metric, str) else list(metric)
        return stats.summarize(stats.qualify_variants(self.runs), metrics, by=by, seed=seed)

    def reproduce(self, experiment: Experiment | str | None = None, seed: int = 0) -> Any:
        """The paper's claims (``expect:``) against these runs, one row per claim
        (``mptlab reproduce``): an Experiment's own claims, a named experiment's
        (experiments.yaml), or (None) those of every experiment in the runs."""
        import pandas as pd

        from .analysis import reproduce

        self.ingest()
        runs = ingest.load_runs(self.path)
        if isinstance(experiment, Experiment):
            exps = [
                reproduce.Expectations(experiment.name, experiment.catalog.claims(experiment.name))
            ]
        else:
            names = [experiment] if experiment else sorted(set(runs["experiment"].dropna()))
            exps = reproduce.expectations([str(n) for n in names])
        frames = []
        for exp in exps:
            if exp.error:
                raise SpecError(exp.error)
            mine = reproduce.experiment_runs(runs, exp.experiment)
            results = reproduce.evaluate(exp.claims, mine, seed=seed)
            frames.append(reproduce.to_frame(exp.experiment, results))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def html(self, out: Path | None = None, **options: Any) -> Path:
        """The self-contained HTML report (``mptlab report``); its path."""
        return html_report.build(self.path, out=out, pcap=self.pcap, **options)


def run(
    experiment: Experiment,
    *,
    jobs: int | None = None,
    out: Path | str | None = None,
    quick: bool = False,
    repetitions: int | None = None,
    seed: int = 1,
    retry_failed: bool = False,
    retry_starved: bool = False,
    cluster: str | None = None,
    quiet: bool = False,
    back_off: bool = True,
    progress: bool = True,
    kernel: KernelBuild | None = None,
    clock: Clock | None = None,
    variants: list[str] | None = None,
) -> Results:
    """Run every run of ``experiment`` into ``out/<name>`` (default
    ``./results``; ``quick`` appends ``-quick``) with the campaign runner of
    ``mptlab run``: at most ``jobs`` guests at once, resuming what an earlier
    invocation left, a line per run and a summary (``progress=False``: silent).
    ``kernel``: another build than this checkout's.  ``clock``: ``real`` or
    ``virtual`` for every run, whatever the experiment says (``clock:``).
    ``variants``: only these variants (names as ``mptlab show`` prints them);
    the others can be run later into the same dir.  Raises ``KernelNotBuilt`` when the kernel is not built, ``ClusterError``
    when ``cluster`` cannot run it, ``SpecError`` when ``out`` holds runs of
    the other clock."""
    if clock is not None:
        if clock not in CLOCKS:
            raise SpecError(f"clock {clock!r}: use one of {', '.join(CLOCKS)}")
        experiment = experiment.replace(clock=clock)
    runs = experiment.runs(quick=quick, repetitions=repetitions, seed=seed)
    if variants is not None:
        known = [v for v, _ in experiment.variants()]
        unknown = [v for v in variants if v not in known]
        if unknown:
            raise SpecError(
                f"{experiment.name}: no variant {', '.join(map(repr, unknown))}; "
                f"variants: {', '.join(known)}"
            )
        runs = [r for r in runs if r.variant in variants]
    kernel = kernel or find_kernel()
    name = experiment.name + ("-quick" if quick else "")
    out_dir = Path(out or home.results_dir()) / name
    bar = Progress(len(runs), quiet) if progress else None
    if progress:
        print(f"{experiment.name}: {len(runs)} runs -> {out_dir}", flush=True)
    campaign = Campaign(
        out_dir,
        runs,
        kernel,
        jobs=jobs,
        seed=seed,
        retry_failed=retry_failed,
        retry_starved=retry_starved,
        back_off=back_off,
        on_progress=bar,
        cluster=cluster,
    )
    try:
        report = campaign.run()
    finally:
        if bar:
            bar.close()
    if progress:
        summary(experiment.name, out_dir, report)
    return Results(out_dir, report)


def claimed_variants(experiment: Experiment) -> list[str]:
    """The variants an experiment's claims compare (each claim's entries
    resolved among its variants; an entry that names none is left out)."""
    from .spec.expect import resolve

    variants = experiment.variants()
    wanted: list[str] = []
    for claim in experiment.catalog.claims(experiment.name):
        for entry in claim.entries():  # with over: every cell's variants
            label, _ = resolve(entry, variants)
            if label and label not in wanted:
                wanted.append(label)
    return [v for v, _ in variants if v in wanted]


def reproduce_all(
    results: Path | str | None = None,
    out: Path | str | None = None,
    markdown: Path | str | None = None,
    *,
    pcap: bool = True,
    file: Path | str | None = None,
    seed: int = 0,
    do_ingest: bool = True,
    run_missing: bool = False,
    repetitions: int | None = None,
    jobs: int | None = None,
    quick: bool = False,
) -> Any:
    """Every experiment with claims (``expect:``; those of experiments.yaml, or
    of the campaign file ``file``) against its campaign dir below ``results``
    (default ``./results``): ``NAME``, else ``NAME-quick``, else its claims
    are ``not run`` (``mptlab reproduce --all``).  One row per claim (pandas),
    ``Results.reproduce()``'s columns with ``paper``, ``campaign_dir`` and
    ``quick``.  ``out``: write the HTML page there; ``markdown``: the summary
    tables as Markdown.

    ``run_missing``: first run, with :func:`run` (``repetitions``, ``jobs``,
    ``quick`` as there), the variants that the claims compare of every
    experiment with claims, resuming what a campaign dir holds (an experiment
    whose only campaign dir is of the other kind, ``NAME-quick`` or ``NAME``,
    is left alone): what it takes to judge the claims, not the whole matrix
    (run the experiment for the rest).  A run stopped by SIGINT or SIGTERM
    raises ``KeyboardInterrupt``: nothing is evaluated; call again to resume."""
    from .analysis import reproduce_page

    root = Path(results or home.results_dir())
    claims_file = Path(file) if file else None
    if run_missing:
        for name in reproduce_page.to_run(root, claims_file, quick):
            exp = (
                Experiment.from_yaml(claims_file, name)
                if claims_file
                else Experiment.from_yaml(name)
            )
            done = run(
                exp,
                out=root,
                repetitions=repetitions,
                jobs=jobs,
                quick=quick,
                variants=claimed_variants(exp),
            )
            if done.report and done.report.stopped:
                raise KeyboardInterrupt(f"{name}: stopped by {done.report.stopped}")
    page = reproduce_page.build(
        root,
        out=Path(out) if out else None,
        markdown=Path(markdown) if markdown else None,
        file=claims_file,
        pcap=pcap,
        seed=seed,
        do_ingest=do_ingest,
    )
    return page.frame


# ------------------------------------------------------------- a running topology
class CommandFailed(subprocess.CalledProcessError):
    """``Node.run(..., check=True)`` of a command that exited non-zero."""


class Node:
    """A node of a running ``Network``: a host, router or switch, i.e. a
    network namespace of the guest (Mininet's ``net["h1"]``)."""

    def __init__(self, net: Network, name: str, info: dict):
        self.net = net
        self.name = name
        self.kind: str = info["kind"]  # host, router or switch
        # (device, "address/prefix"), in link order; a switch's ports have no address
        self.interfaces: list[tuple[str, str]] = [(d, a) for d, a in info["interfaces"]]

    def __repr__(self) -> str:
        intfs = " ".join(f"{d}:{a.split('/')[0]}" if a else d for d, a in self.interfaces)
        return f"<{self.kind.capitalize()} {self.name}: {intfs}>"

    @property
    def addresses(self) -> list[str]:
        """Its addresses (without prefix length), in interface order."""
        return [a.split("/")[0] for _, a in self.interfaces if a]

    def IP(self, intf: str | None = None) -> str | None:  # noqa: N802 - Mininet's name
        """The address of interface ``intf`` (default: its first), as Mininet's ``IP()``."""
        for dev, addr in self.interfaces:
            if addr and (intf is None or dev == intf):
                return addr.split("/")[0]
        return None

    def cmd(self, command: str | Sequence[str], timeout: float | None = None) -> str:
        """Run ``command`` (a ``sh -c`` line, or an argv list) in this node's
        namespace and return its output, stdout and stderr as they came
        (Mininet's ``cmd``).  ``timeout``: guest seconds, then it is killed."""
        return self.net._run(self.name, command, merge=True, timeout=timeout).stdout

    def run(
        self, command: str | Sequence[str], timeout: float | None = None, check: bool = False
    ) -> subprocess.CompletedProcess:
        """Like ``cmd``, stdout and stderr apart, with the exit status
        (``check``: ``CommandFailed`` when it is not 0)."""
        done = self.net._run(self.name, command, merge=False, timeout=timeout)
        if check and done.returncode != 0:
            raise CommandFailed(done.returncode, done.args, done.stdout, done.stderr)
        return done

    def background(self, command: str) -> Path:
        """Start ``command`` and return at once; its output goes to the file
        returned (in the run dir); it is killed when the network stops."""
        return self.net._background(self.name, command)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.,=+@%-]", "_", text)


class Network:
    """An experiment's topology, up in a guest, to probe by hand or by script:

        with mptlab.Network("blest-3g-wlan", variant="scheduler=blest") as net:
            print(net["client"].cmd("ping -c 2 " + net["server"].IP()))
            net["server"].cmd("ss -tni")

    The guest is set up as a run of the variant is (modules, network, netem
    seeds, kernel knobs: ``mptlab.guest.agent.set_up``) but runs no workload
    (``workload()`` runs it once).  It stops at the end of the ``with``
    block, also on an exception: no guest process is left, only the run dir
    (``run_dir``: the console, the guest's logs, background output).
    ``experiment``: an ``Experiment``, a name of experiments.yaml or a
    campaign file; ``variant``: a name as ``mptlab show`` prints it
    (default: the first); ``clock``: ``real`` or ``virtual`` (default: the
    experiment's; under virtual time guest time runs on while the guest
    waits for the next command); ``quick``: the short workload
    (``mptlab run --quick``); ``out``: where the run dir goes (default
    ``./results/shell``)."""

    def __init__(
        self,
        experiment: Experiment | str | Path,
        variant: str | None = None,
        *,
        clock: Clock | None = None,
        quick: bool = False,
        seed: int = 1,
        out: Path | str | None = None,
        kernel: KernelBuild | None = None,
    ):
        exp = experiment if isinstance(experiment, Experiment) else Experiment.from_yaml(experiment)
        if clock is not None:
            if clock not in CLOCKS:
                raise SpecError(f"clock {clock!r}: use one of {', '.join(CLOCKS)}")
            exp = exp.replace(clock=clock)
        self.experiment = exp
        self.variants = [v for v, _ in exp.variants()]
        self.variant = variant if variant is not None else self.variants[0]
        if self.variant not in self.variants:
            raise SpecError(
                f"{exp.name}: no variant {self.variant!r}; variants: {', '.join(self.variants)}"
            )
        runs = exp.runs(quick=quick, repetitions=1, seed=seed)
        self.spec: RunSpec = next(r for r in runs if r.variant == self.variant)
        self.clock: Clock = self.spec.config.get("clock", "virtual")
        root = Path(out) if out is not None else home.results_dir() / "shell"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = root / _slug(f"{exp.name}-{self.variant}-{stamp}")
        self.run_dir = base
        k = 1
        while self.run_dir.exists():
            k += 1
            self.run_dir = base.with_name(f"{base.name}-{k}")
        self._kernel = kernel
        self._guest: ControlledGuest | None = None
        self.info: dict = {}
        self.nodes: dict[str, Node] = {}

    def __repr__(self) -> str:
        state = "up" if self._guest is not None else "down"
        return f"Network({self.experiment.name!r}, variant={self.variant!r}, {state})"

    # ------------------------------------------------------------ life
    def start(self) -> Network:
        """Boot the guest and build the topology (``GuestError`` if it failed)."""
        if self._guest is not None:
            return self
        kernel = self._kernel or find_kernel()
        guest = ControlledGuest(self.spec, self.run_dir, kernel)
        self.info = guest.start()
        self._guest = guest
        self.nodes = {name: Node(self, name, data) for name, data in self.info["nodes"].items()}
        return self

    def stop(self) -> None:
        """Tear it down: the guest powers off and is reaped (idempotent)."""
        guest, self._guest = self._guest, None
        if guest is not None:
            guest.stop()

    def __enter__(self) -> Network:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ nodes
    def __getitem__(self, name: str) -> Node:
        if name not in self.nodes:
            known = ", ".join(self.nodes) or "none: the network is not started"
            raise KeyError(f"no node {name!r}; nodes: {known}")
        return self.nodes[name]

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    @property
    def hosts(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "host"]

    @property
    def client(self) -> Node:
        return self[self.info["client"]]

    @property
    def server(self) -> Node:
        return self[self.info["server"]]

    @property
    def links(self) -> list[dict]:
        """Every link: its two ends (node, device) and each direction's shape in words."""
        return list(self.info.get("links", []))

    # ------------------------------------------------------------ requests
    def _request(self, op: str, on_output: Callable[[str, str], None] | None = None, **fields):
        if self._guest is None:
            raise GuestError("the network is not started (use `with mptlab.Network(...)`)")
        reply = self._guest.request(op, on_output, **fields)
        if "error" in reply and "rc" not in reply:
            raise GuestError(f"{op}: {reply['error']}")
        return reply

    def _run(
        self,
        node: str | None,
        command: str | Sequence[str],
        *,
        merge: bool,
        timeout: float | None = None,
        on_output: Callable[[str, str], None] | None = None,
    ) -> subprocess.CompletedProcess:
        cmd = command if isinstance(command, str) else [str(a) for a in command]
        parts: dict[str, list[str]] = {"out": [], "err": []}

        def collect(stream: str, text: str) -> None:
            parts[stream].append(text)
            if on_output is not None:
                on_output(stream, text)

        reply = self._request("run", collect, node=node, cmd=cmd, merge=merge, timeout=timeout)
        if reply.get("interrupted"):
            raise KeyboardInterrupt(f"{node}: {command!r} interrupted")
        return subprocess.CompletedProcess(
            cmd, reply["rc"], "".join(parts["out"]), "".join(parts["err"])
        )

    def _background(self, node: str | None, command: str) -> Path:
        reply = self._request("background", node=node, cmd=command)
        return self.run_dir / reply["log"]

    def sh(self, command: str | Sequence[str], timeout: float | None = None) -> str:
        """Run a command in the guest's initial namespace (no node's), output as ``cmd``."""
        return self._run(None, command, merge=True, timeout=timeout).stdout

    def set_scheduler(self, name: str) -> None:
        """``net.mptcp.scheduler`` in the client's and the server's namespaces,
        where a run sets it (every module of the kernel build is loaded)."""
        for node in (self.info["client"], self.info["server"]):
            done = self[node].run(["sysctl", "-qw", f"net.mptcp.scheduler={name}"])
            if done.returncode != 0:
                raise GuestError(
                    f"{node}: scheduler {name!r}: {done.stderr.strip()}; "
                    f"available: {' '.join(self.schedulers())}"
                )

    def schedulers(self) -> list[str]:
        """The schedulers registered in the guest kernel now."""
        return self.sh("sysctl -n net.mptcp.available_schedulers").split()

    def load(self, module: str | Path, **params: object) -> list[str]:
        """Load a kernel module file (a scheduler or congestion control of
        your own) with parameters; the schedulers registered afterwards."""
        reply = self._request("load", path=str(module), params=params)
        return list(reply.get("schedulers", []))

    def workload(self) -> dict:
        """Run the experiment's workload once, as a run would (without the
        background flows and the traces); its metrics."""
        from .campaign import content

        content.prepare(self.spec)  # web pages, videos: made on the host, once
        reply = self._request("workload")
        if reply.get("rc") != 0:
            raise GuestError(f"workload: {reply.get('error', reply)}")
        return dict(reply.get("metrics") or {})
