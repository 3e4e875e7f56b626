"""``mptlab sweep``: where do an experiment's claims hold, and which of those
settings do the paper's baselines allow?

    import mptlab
    sw = mptlab.sweep("blest-3g-wlan", vary={"kernel.buffers": ["autotune", "socket"],
                      "profiles.wlan.loss": ["0.5%", "2%"]}, repetitions=20, claims=[1, 2, 3])
    sw.table        # pandas: one row per (point, claim): change, CI, verdict, n, baseline error
    sw.forest(1)    # the forest plot of claim 1 (a matplotlib Figure)

Every point is a campaign of its own below ``OUT/points/<slug>/``, run by the
same runner as ``mptlab run`` (resumable: a second call continues, nothing
finished is redone), with the same seeds at every point (the experiment's
name, variant and repetition derive them), so that points differ by the
parameter, not by the draw.  The language of the axes and points is
``mptlab.spec.sweep``; the evaluation and figures ``mptlab.analysis.sweep``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from . import api, home
from .analysis import sweep as analysis
from .spec.models import Profile
from .spec.sweep import Axis, Point, SweepSpec, apply_point, get_key, words
from .spec.yamlsrc import SpecError


def _experiment(spec: SweepSpec) -> api.Experiment:
    if spec.file:
        return api.Experiment.from_yaml(Path(spec.file), spec.experiment)
    return api.Experiment.from_yaml(spec.experiment)


def claim_numbers(exp: api.Experiment, wanted: list[int]) -> list[int]:
    """The 1-based claim numbers a sweep evaluates (all when ``wanted`` is empty)."""
    claims = exp.catalog.claims(exp.name)
    if not claims:
        raise SpecError(f"{exp.name}: has no claims (expect:) for a sweep to map")
    bad = [n for n in wanted if not 1 <= n <= len(claims)]
    if bad:
        raise SpecError(f"--claim {bad[0]}: {exp.name} has claims 1 to {len(claims)}")
    return wanted or list(range(1, len(claims) + 1))


def variants_to_run(exp: api.Experiment, numbers: list[int], extra: list[str]) -> list[str]:
    """The variants the chosen claims compare, then ``extra`` (checked)."""
    from .spec.expect import resolve

    variants = exp.variants()
    labels = [v for v, _ in variants]
    wanted: list[str] = []
    claims = exp.catalog.claims(exp.name)
    for n in numbers:
        for entry in claims[n - 1].entries():  # with over: every cell
            label, _ = resolve(entry, variants)
            if label and label not in wanted:
                wanted.append(label)
    for v in extra:
        if v not in labels:
            raise SpecError(f"--variant {v!r}: not a variant of {exp.name}; {', '.join(labels)}")
        if v not in wanted:
            wanted.append(v)
    return [v for v in labels if v in wanted]


def current_test(exp: api.Experiment, axes: list[Axis]) -> Callable[[str, Any], bool]:
    """``is_current(key, value)``: is ``value`` the experiment's own setting of
    ``key`` (its centre)?  Values are compared as the experiment reads them: a
    profile field through the profile's model (``1%`` is 0.01), anything else
    against the experiment's mapping, then its model's defaults."""
    dumped = exp.spec.model_dump(mode="json", by_alias=True)
    checked: dict[str, Any] = {}
    for axis in axes:
        if axis.key.startswith("profiles."):
            parts = axis.key.split(".")
            name = parts[1] if len(parts) > 1 else ""
            profile = exp.catalog.profiles.get(name)
            if len(parts) != 3 or profile is None:
                raise SpecError(
                    f"--vary {axis.key}: write profiles.NAME.FIELD with a profile of this "
                    f"experiment (its paths: {', '.join(exp.spec.paths)})"
                )
            if parts[2] not in {f.name for f in fields(Profile)}:
                raise SpecError(
                    f"--vary {axis.key}: a profile has no field {parts[2]!r}; fields: "
                    f"{', '.join(sorted(f.name for f in fields(Profile)))}"
                )
            for v in axis.values:
                try:
                    Profile.parse({**profile.to_json(), parts[2]: v})
                except Exception as exc:  # pydantic's ValidationError, in words
                    first = str(exc).splitlines()
                    raise SpecError(
                        f"--vary {axis.key}={words(v)}: {first[-1] if first else exc}"
                    ) from None
            continue
        for source in (exp.data, dumped):
            try:
                checked[axis.key] = get_key(source, axis.key)
                break
            except KeyError:
                continue

    def is_current(key: str, value: Any) -> bool:
        if key.startswith("profiles."):
            _, name, fld = key.split(".")
            profile = exp.catalog.profiles[name]
            moved = Profile.parse({**profile.to_json(), fld: value})
            return bool(getattr(moved, fld) == getattr(profile, fld))
        if key not in checked:
            return False
        return bool(checked[key] == value or words(checked[key]) == words(value))

    return is_current


def point_experiment(exp: api.Experiment, point: Point, keep: list[str]) -> api.Experiment:
    """The experiment at ``point`` (same name: the same seeds at every point)."""
    if point.is_centre:
        return exp
    data, profiles = apply_point(exp.data, point, exp.variants(), keep)
    changes: dict[str, Any] = {}
    for name, moved in profiles.items():
        base = exp.catalog.profiles.get(name)
        if base is None:
            raise SpecError(f"--vary profiles.{name}: no profile {name!r}")
        changes.setdefault("profiles", {})[name] = {**base.to_json(), **moved}
    for key in set(data) | set(exp.data):
        if data.get(key) != exp.data.get(key) and key != "extends":
            changes[key] = data.get(key)
    try:
        return exp.replace(**changes)
    except SpecError as exc:
        raise SpecError(f"sweep point {point.label}: {exc}") from None


@dataclass
class SweepResults:
    """A sweep root and what it holds."""

    path: Path
    spec: SweepSpec
    points: list[Point] = field(default_factory=list)
    elapsed_s: float = 0.0
    not_ok: int = 0  # runs of this invocation that did not end ok (failed, stalled, ...)

    @classmethod
    def open(cls, path: Path | str) -> SweepResults:
        root = Path(path)
        return cls(root, analysis.load_spec(root), analysis.load_points(root))

    @property
    def table(self) -> Any:
        exp = _experiment(self.spec)
        numbers = claim_numbers(exp, self.spec.claims)
        claims = exp.catalog.claims(exp.name)
        chosen = [claims[n - 1] for n in numbers]
        return analysis.evaluate(
            self.path, chosen, numbers, self.points, self.spec.targets, shown=self.spec.show
        )

    def forest(self, claim_no: int) -> Any:
        return analysis.forest(self.table, claim_no)

    def write(self) -> dict[str, Path]:
        return analysis.write(self.path, self.table, self.spec)


def run_sweep(
    spec: SweepSpec,
    out: Path | str | None = None,
    *,
    jobs: int | None = None,
    progress: bool = True,
    clock: str | None = None,
    dry_run: bool = False,
) -> SweepResults:
    """Run every point of ``spec`` (resuming what ``out`` holds), then write
    the tables and forest plots (``out/analysis``).  ``out`` defaults to
    ``./results/sweeps/<experiment>``."""
    exp = _experiment(spec)
    if clock is not None:
        exp = exp.replace(clock=clock)
    numbers = claim_numbers(exp, spec.claims)
    keep = variants_to_run(exp, numbers, spec.variants)
    points = spec.points(current_test(exp, spec.axes))
    # every point's experiment is built (and so checked) before any guest starts
    experiments = [(p, point_experiment(exp, p, keep)) for p in points]
    root = Path(out or home.results_dir() / "sweeps" / spec.experiment)
    if dry_run:
        runs = len(keep) * spec.repetitions
        print(f"sweep {spec.experiment}: variants {', '.join(keep)}; {runs} runs a point -> {root}")
        for i, point in enumerate(points, 1):
            print(f"  {i:2}. {point.label}  [{point.slug}]")
        return SweepResults(root, spec, points)
    root.mkdir(parents=True, exist_ok=True)
    _check_same_sweep(root, spec)
    (root / "sweep.json").write_text(json.dumps(spec.to_json(), indent=1) + "\n")
    (root / "points.json").write_text(
        json.dumps(
            [{"slug": p.slug, "label": p.label, "assign": list(p.assign)} for p in points],
            indent=1,
        )
        + "\n"
    )
    started = time.monotonic()
    not_ok = 0
    total = len(points) * len(keep) * spec.repetitions
    if progress:
        print(
            f"sweep {spec.experiment}: {len(points)} points x {len(keep)} variants "
            f"({', '.join(keep)}) x {spec.repetitions} = {total} runs -> {root}",
            flush=True,
        )
    for i, (point, pexp) in enumerate(experiments, 1):
        if progress:
            elapsed = time.monotonic() - started
            eta = (
                f", ~{elapsed / (i - 1) * (len(points) - i + 1) / 60:.0f} min left" if i > 1 else ""
            )
            print(f"point {i}/{len(points)}: {point.label}{eta}", flush=True)
        done = api.run(
            pexp,
            out=analysis.point_dir(root, point),
            repetitions=spec.repetitions,
            jobs=jobs,
            quick=spec.quick,
            seed=spec.seed,
            variants=keep,
            progress=progress,
        )
        if done.report and done.report.stopped:
            raise KeyboardInterrupt(
                f"sweep stopped by {done.report.stopped}: run it again to resume"
            )
        not_ok += len(done.report.failed) if done.report else 0
    result = SweepResults(root, spec, points, time.monotonic() - started, not_ok)
    paths = result.write()
    if progress:
        print(f"sweep {spec.experiment}: {paths['html']}  ({result.elapsed_s / 60:.1f} min)")
        if not_ok:
            print(f"sweep {spec.experiment}: {not_ok} runs not ok (counted in the tables)")
    return result


def _check_same_sweep(root: Path, spec: SweepSpec) -> None:
    """A results root holds one experiment's sweep: another's is refused."""
    path = root / "sweep.json"
    if not path.exists():
        return
    old = json.loads(path.read_text())
    for key in ("experiment", "seed", "quick", "file"):
        if old.get(key) != spec.to_json()[key]:
            raise SpecError(
                f"{root} holds a sweep with {key} {old.get(key)!r}, not {spec.to_json()[key]!r}: "
                "use another --out"
            )


def sweep(
    experiment: str | api.Experiment,
    vary: dict[str, list[Any]],
    *,
    repetitions: int = 10,
    grid: bool = False,
    claims: list[int] | None = None,
    variants: list[str] | None = None,
    targets: list[str] | None = None,
    show: list[str] | None = None,
    out: Path | str | None = None,
    jobs: int | None = None,
    seed: int = 1,
    quick: bool = False,
    file: Path | str | None = None,
    progress: bool = True,
) -> SweepResults:
    """The Python face of ``mptlab sweep`` (a named experiment, or one of ``file``)."""
    name = experiment.name if isinstance(experiment, api.Experiment) else experiment
    spec = SweepSpec(
        experiment=name,
        axes=[Axis(k, tuple(v)) for k, v in vary.items()],
        grid=grid,
        repetitions=repetitions,
        variants=list(variants or []),
        claims=list(claims or []),
        targets=list(targets or []),
        show=list(show or []),
        seed=seed,
        quick=quick,
        file=str(file) if file else None,
    )
    return run_sweep(spec, out, jobs=jobs, progress=progress)


def cmd_sweep(args) -> int:
    from .campaign.boot import ConfinementError
    from .campaign.kernel import KernelNotBuilt
    from .campaign.runner import CampaignLocked

    if args.analyse:
        root = Path(args.analyse)
        if args.show:  # other levels to show, without running anything
            spec = analysis.load_spec(root)
            spec.show = list(args.show)
            (root / "sweep.json").write_text(json.dumps(spec.to_json(), indent=1) + "\n")
        try:
            paths = analysis.build(root)
        except (ValueError, FileNotFoundError) as exc:
            raise SpecError(str(exc)) from None
        print(f"sweep {analysis.load_spec(root).experiment}: {paths['md']}, {paths['html']}")
        return 0
    if not args.name:
        raise SpecError("mptlab sweep: give an experiment NAME (or --analyse DIR)")
    if not args.vary:
        raise SpecError("mptlab sweep: give at least one --vary KEY=V1,V2,...")
    try:
        targets = [analysis.Target.parse(t) for t in args.target or []]
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    del targets  # checked here, parsed again where they are used
    spec = SweepSpec(
        experiment=args.name,
        axes=[Axis.parse(v) for v in args.vary],
        grid=args.grid,
        repetitions=args.reps,
        variants=args.variant or [],
        claims=args.claim or [],
        targets=args.target or [],
        show=args.show or [],
        seed=args.seed,
        quick=args.quick,
        file=args.file,
    )
    try:
        result = run_sweep(spec, args.out, jobs=args.jobs, clock=args.clock, dry_run=args.dry_run)
    except (KernelNotBuilt, CampaignLocked, ConfinementError) as exc:
        print(f"mptlab: {exc}", file=sys.stderr)
        return 2
    # as mptlab run: 1 when a run did not end ok (they stay counted in the tables)
    return 1 if result.not_ok else 0


def add_parser(sub) -> None:
    from .rundir import CLOCKS
    from .spec import cliargs

    p = sub.add_parser(
        "sweep",
        help="an experiment's claims over a range of settings: forest plots, baseline error",
        description=(
            "Run the variants an experiment's claims compare at every point of a sweep "
            "(one parameter at a time around the experiment's setting; --grid: every "
            "combination) and draw, per claim, the change with its CI at every point beside "
            "the point's baseline error (docs/analysis.md, 'Sweeps')."
        ),
    )
    p.add_argument("name", nargs="?", help="experiment name (experiments.yaml or --file)")
    p.add_argument(
        "--vary",
        action="append",
        metavar="KEY=V1,V2,...",
        help="a parameter and its values: a dotted key as in matrix:, profiles.NAME.FIELD, "
        "background.0.FIELD, kernel.sysctls.NAME, kernel.scheduler_params.P (repeat)",
    )
    p.add_argument("--grid", action="store_true", help="every combination of the values")
    p.add_argument(
        "--reps", type=cliargs.REPS, default=10, help="repetitions per variant and point"
    )
    p.add_argument("--claim", type=int, action="append", metavar="N", help="only claim N (1-based)")
    p.add_argument("--variant", action="append", metavar="V", help="run variant V as well")
    p.add_argument(
        "--target",
        action="append",
        metavar="VARIANT:METRIC=VALUE",
        help="another baseline number of the paper for the baseline error",
    )
    p.add_argument(
        "--show",
        action="append",
        metavar="VARIANT:METRIC",
        help="a level to show per point beside the baseline error (e.g. tcp-wlan:goodput_mbps)",
    )
    p.add_argument("--out", help="sweep root (default: ./results/sweeps/NAME)")
    p.add_argument("--jobs", type=cliargs.JOBS, help="guests at most at once")
    p.add_argument("--seed", type=cliargs.SEED, default=1, help="campaign seed")
    p.add_argument("--quick", action="store_true", help="the short version of every run")
    p.add_argument("--file", help="campaign file holding NAME")
    p.add_argument("--clock", choices=CLOCKS, help="the guests' clock for every run")
    p.add_argument(
        "--dry-run", action="store_true", help="check every point and list them; run nothing"
    )
    p.add_argument("--analyse", metavar="DIR", help="only evaluate and draw the sweep in DIR again")
    p.set_defaults(func=cmd_sweep)


__all__ = [
    "SweepResults",
    "add_parser",
    "current_test",
    "point_experiment",
    "run_sweep",
    "sweep",
]
