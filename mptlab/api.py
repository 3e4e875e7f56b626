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
from pathlib import Path
from typing import Any

from . import home
from .analysis import ingest, stats
from .analysis import report as html_report
from .campaign.kernel import KernelBuild, KernelNotBuilt, find_kernel
from .campaign.progress import Progress, summary
from .campaign.runner import Campaign, CampaignReport
from .rundir import CLOCKS, Clock, RunSpec
from .spec import mininet, usercode
from .spec.catalog import Catalog, file_kind, merge_experiment
from .spec.models import ExperimentSpec, Profile, TopologySpec
from .spec.workloads import Background, Workload
from .spec.yamlsrc import Source, SpecError, load

__all__ = ["Experiment", "KernelNotBuilt", "Results", "experiments_of", "reproduce_all", "run"]


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
        for entry in claim.compare:
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
