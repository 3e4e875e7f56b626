"""A paper's claims about an experiment: the ``expect:`` list of the language.

    expect:
      - {metric: delay_mean_ms, compare: [scheduler=blest, scheduler=minrtt],
         paper: [62.8, 68], unit: ms, claim: "BLEST -8 % vs minRTT", source: "Table IV"}

``compare`` is ``[SUBJECT, BASELINE]``: the claim is about the subject's
mean relative to the baseline's (``mean(subject) / mean(baseline) - 1``).
Each entry names one variant of the experiment:

- a variant's name as ``mptlab show`` prints it (``scheduler=blest``,
  ``tcp-wlan``, ``page=amazon,scheduler=blest``): an exact name wins;
- else ``key=value[,key=value...]``: the variant whose keys include these
  (a key is the dotted one, ``kernel.scheduler``, or its last part,
  ``scheduler``; a value as the variant name writes it: lists joined by
  ``+``, booleans ``on``/``off``); it must match one variant only;
- alternatives separated by ``|``, the first the campaign has is used:
  ``scheduler=minrtt_pr | scheduler=minrtt``.

The claim's direction is the sign of the paper's difference: from ``paper``
(the two values, in ``compare``'s order, or a mapping keyed by the entries)
or from ``change`` (the paper's relative difference, e.g. ``-0.08`` or
``"-8%"``).  With ``tolerance`` the claim is one of no difference (the
paper says "similar"; its own difference must lie within the band); equal
values need it.  ``size_tolerance`` is how far our relative difference may
lie from the paper's and still count as its size (default: max(3 points,
a third of the paper's change)).  ``scale`` converts the paper's
values to the metric's unit (KiB -> bytes: 1024); verdicts use relative
differences only, so units matter for showing paper and ours side by side.

A *level claim* is about one variant's value, not a difference:
``compare`` with one entry and the paper's ``value`` (in the paper's unit,
``scale`` and ``unit`` as for ``paper``); ``paper``, ``change`` and
``tolerance`` are not allowed, ``value`` with two entries is an error:

    expect:
      - {metric: sbd_accuracy, compare: [congestion_control=olia_sbd], value: 0.75,
         claim: "SBD right in 75 % of its decisions", source: "Table II"}

Its ``size_tolerance`` is the relative band around the paper's value
(default 10 %: 0.75 is met by 0.675 to 0.825; ``Claim.size_band``).

A claim's *kind* (``Claim.kind``) is what the paper's words say, and each
verdict shows it:

- ``change`` (the default): "8 % lower": the paper's change, within its
  size band;
- ``at least`` / ``at most`` (``bound``): a one-sided change ("more than
  100 %": ``change: "+100%", bound: at least``; "more than 30 % faster",
  of a time: ``change: "-30%", bound: at most``); the bound lies away from
  zero on the paper's side (at least a positive change, at most a negative
  one), else it would admit no change at all;
- ``equivalence`` (``tolerance``): no difference within the band;
- ``level`` (one ``compare`` entry and ``value``), ``level at least`` /
  ``level at most`` with ``bound``;
- ``statistic: median`` (default ``mean``): the claim is about medians
  over the runs, as a paper that says "median" means; orthogonal to the above;
- ``over`` (a change only): "up to X over these cells": ``compare``
  names one cell in full (``[mode=dynamic,paths=a+b, mode=off,paths=a+b]``),
  ``over`` lists the cells as the ``key=value`` of the keys that vary
  (``[paths=a+b, paths=c+d]``: each replaces that value in both entries;
  compare's own cell among them); the claim is judged on the cell whose
  difference lies furthest in the paper's direction.

``metric`` is a column of the runs table or the ratio of two
(``goodput_mbps / bg_received_mbps``), computed per run.  In a campaign
file each must be a metric the registry declares (``mptlab.spec.metrics``;
``unknown_columns``), else the catalog refuses the claim with the file, the
line and the close matches ("did you mean goodput_mbps?"); a claim built in
Python may name any column (one no run has is "not run").

The analysis (``mptlab.analysis.reproduce``) evaluates them.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from . import metrics as registry

_COLUMN = r"[A-Za-z_][A-Za-z0-9_]*"
# a level claim's default band around the paper's value (Claim.size_band)
LEVEL_BAND = 0.10
_METRIC = re.compile(rf"^\s*({_COLUMN})\s*(?:/\s*({_COLUMN})\s*)?$")


def short(value) -> str:
    """A variant key's value as the variant's name writes it."""
    if isinstance(value, list):
        return "+".join(short(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _percent(value):
    """``-0.08``, ``"-8%"``, ``"-8 %"`` -> -0.08."""
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if text.endswith("%"):
            try:
                return float(text[:-1]) / 100
            except ValueError:
                raise ValueError(f"{value!r} is not a percentage (e.g. -8%)") from None
    return value


Fraction = Annotated[float, BeforeValidator(_percent)]


def metric_columns(metric: str) -> tuple[str, str | None]:
    """``"a"`` -> ("a", None); ``"a / b"`` -> ("a", "b")."""
    m = _METRIC.match(metric)
    if not m:
        raise ValueError(f"{metric!r}: a runs column, or the ratio of two ('a / b')")
    return m.group(1), m.group(2)


def unknown_columns(metric: str) -> list[str]:
    """Why each column of a claim's ``metric`` is not a declared metric ([]: all are)."""
    return [why for c in metric_columns(metric) if c and (why := registry.unknown(c))]


def alternatives(entry: str) -> list[str]:
    return [a.strip() for a in entry.split("|") if a.strip()]


def pairs(alternative: str) -> list[tuple[str, str]] | None:
    """``"page=amazon,scheduler=blest"`` -> [(page, amazon), (scheduler, blest)];
    a plain name (no ``=``) -> None."""
    if "=" not in alternative:
        return None
    out = []
    for part in alternative.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(
                f"{alternative!r}: expected key=value[,key=value...] or a variant name"
            )
        out.append((key.strip(), value.strip()))
    return out


def _key_matches(key: str, dotted: str) -> bool:
    return key == dotted or key == dotted.split(".")[-1]


def _same_key(a: str, b: str) -> bool:
    """Two spellings of one variant key (``kernel.fec.mode``, ``mode``)."""
    return a == b or a.split(".")[-1] == b.split(".")[-1]


def matches(alternative: str, label: str, assignment: dict) -> bool:
    """Does one alternative of a ``compare`` entry name this variant?"""
    if alternative == label:
        return True
    want = pairs(alternative)
    if want is None:
        return False
    return all(
        any(_key_matches(k, dotted) and short(v) == value for dotted, v in assignment.items())
        for k, value in want
    )


def resolve(entry: str, variants: list[tuple[str, dict]]) -> tuple[str | None, str]:
    """The variant an entry names among ``variants`` ((label, assignment)):
    (label, "") or (None, why not).  An exact name wins; several matches
    of one alternative are an error (ambiguous), none moves to the next."""
    tried = []
    for alt in alternatives(entry):
        exact = [label for label, _ in variants if label == alt]
        if exact:
            return exact[0], ""
        found = [label for label, keys in variants if matches(alt, label, keys)]
        if len(found) > 1:
            return None, f"{alt!r} is ambiguous: it matches {', '.join(found)}"
        if found:
            return found[0], ""
        tried.append(alt)
    return None, f"{' | '.join(tried)}: variant not in this campaign"


class Claim(BaseModel):
    """One claim of a paper about two variants of an experiment (``compare:
    [SUBJECT, BASELINE]``), or about one variant's level (``compare: [SUBJECT]``
    with ``value``)."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(description="a runs column, or 'a / b' (their ratio per run)")
    compare: list[str] = Field(
        min_length=1,
        max_length=2,
        description="[SUBJECT, BASELINE]: the subject's mean relative to the baseline's; "
        "[SUBJECT] with value: a level claim",
    )
    paper: list[float] | dict[str, float] | None = Field(
        None, description="the paper's values, in compare's order (or keyed by the entries)"
    )
    value: float | None = Field(
        None,
        description="a level claim (compare with one entry): the paper's value of the "
        "subject, in the paper's unit",
    )
    bound: Literal["at least", "at most"] | None = Field(
        None,
        description="the paper's value or change is a bound ('over 60 %', 'more than "
        "+100 %': at least; 'more than 30 % faster': change -30 %, at most): ours meets "
        "it from that side too",
    )
    statistic: Literal["mean", "median"] = Field(
        "mean",
        description="the statistic over runs the paper's words name: mean (its 'average', "
        "the default) or median",
    )
    over: list[str] | None = Field(
        None,
        min_length=2,
        description="'up to X over these cells': key=value entries, each replacing those "
        "keys' values in both compare entries (compare's cell among them); judged on the "
        "best cell in the paper's direction",
    )
    change: Fraction | None = Field(
        None, description="the paper's relative difference subject vs baseline (-0.08, '-8%')"
    )
    tolerance: Fraction | None = Field(
        None,
        ge=0,
        description="a claim of no difference: the relative band that counts as equal",
    )
    size_tolerance: Fraction | None = Field(
        None,
        gt=0,
        description="how far our relative difference may lie from the paper's and still be "
        "its size (0.05: 5 points); default max(3 points, a third of the paper's change); "
        "a level claim: the relative band around the paper's value (default 10 %)",
    )
    unit: str = Field("", description="the unit of the paper's values, as the paper gives them")
    scale: float = Field(1.0, gt=0, description="metric unit per paper unit (KiB -> B: 1024)")
    claim: str = Field(min_length=1, description="the claim in words")
    source: str = Field(min_length=1, description="where in the paper (table, section)")
    derived: bool = Field(
        False, description="the paper's numbers here are derived (our arithmetic on its numbers)"
    )
    note: str = ""

    @field_validator("over")
    @classmethod
    def _cells(cls, over: list[str] | None) -> list[str] | None:
        """Each cell a ``key=value[,key=value...]`` entry, without alternatives:
        it is appended to the compare entries, which a plain variant name or a
        choice between several cannot be."""
        if over is None:
            return over
        seen = set()
        for i, entry in enumerate(over):
            text = entry.strip()
            if "|" in text:
                raise ValueError(f"entry {i} ({entry!r}): one cell, no alternatives ('|')")
            if pairs(text) is None:
                raise ValueError(
                    f"entry {i} ({entry!r}): key=value[,key=value...] (a cell's keys, e.g. "
                    "paths=fec-b1-loss5+fec-b2), not a variant's name"
                )
            if text in seen:
                raise ValueError(f"entry {i} ({entry!r}) is listed twice")
            seen.add(text)
        return [e.strip() for e in over]

    @model_validator(mode="after")
    def _consistent(self):
        metric_columns(self.metric)
        for entry in self.compare:
            if not alternatives(entry):
                raise ValueError("compare: an entry is empty")
            for alt in alternatives(entry):
                pairs(alt)
        if self.over is not None:
            self._check_over()
        if self.is_level:
            given = [k for k in ("paper", "change", "tolerance") if getattr(self, k) is not None]
            if given:
                raise ValueError(
                    f"compare with one entry is a level claim: give value (the paper's value "
                    f"of {self.compare[0]!r}), not {', '.join(given)}"
                )
            if self.value is None:
                raise ValueError(
                    f"compare with one entry is a level claim: give value (the paper's value "
                    f"of {self.compare[0]!r}); or a second entry (the baseline) with paper "
                    "or change"
                )
            return self
        if self.value is not None:
            raise ValueError(
                "value is a level claim's, with one compare entry ([SUBJECT]); for two "
                "variants give paper (their two values) or change"
            )
        if self.compare[0].strip() == self.compare[1].strip():
            raise ValueError(f"compare: the two entries are the same ({self.compare[0]!r})")
        if isinstance(self.paper, dict):
            keys = set(self.paper)
            want = set(self.compare)
            if keys != want:
                raise ValueError(
                    f"paper: keys {sorted(keys)} must be the compare entries {self.compare}"
                )
        elif isinstance(self.paper, list) and len(self.paper) != 2:
            raise ValueError("paper: two values, in compare's order (subject, baseline)")
        if self.paper is None and self.change is None:
            raise ValueError("give the paper's values (paper) or its relative difference (change)")
        values = self.paper_values()
        if values and values[1] == 0 and values[0] != 0 and self.change is None:
            raise ValueError("paper: the baseline's value is 0: give change as well")
        derived = self.paper_change()
        if (
            self.change is not None
            and values
            and values[1]
            and (values[0] / values[1] - 1) * self.change < 0
        ):
            raise ValueError(
                f"change {self.change:+.1%} and paper {list(values)} disagree in direction"
            )
        if derived == 0 and self.tolerance is None:
            raise ValueError(
                "the paper's values claim no difference: give tolerance (e.g. 0.05: within 5 %)"
            )
        if self.tolerance is not None and abs(derived) > self.tolerance:
            raise ValueError(
                f"tolerance {self.tolerance:.0%} makes this a claim of no difference, but the "
                f"paper's own difference is {derived:+.1%}"
            )
        if self.bound is not None:
            if self.tolerance is not None:
                raise ValueError(
                    "bound and tolerance: a claim is one-sided (bound: at least / at most) or "
                    "of no difference (tolerance), not both"
                )
            # a bound on the near side of zero ("at least -30 %") admits no change
            # at all, which a verdict on the sign could not test: the paper's
            # "more than X" always points away from zero
            want = "at least" if derived > 0 else "at most"
            if self.bound != want:
                raise ValueError(
                    f"bound: {self.bound!r} with the paper's change {derived:+.1%}: a one-sided "
                    f"change lies beyond it, away from zero; allowed here: {want!r} (a rise: "
                    "at least +X; a fall, e.g. 'more than 30 % faster' of a time: at most -X)"
                )
        return self

    def _check_over(self) -> None:
        """``over``: cells of a change (not of a level or of no difference).
        ``compare`` names one cell in full, as a claim read at one cell does
        (so the catalog checks its entries as every claim's, unambiguous);
        each ``over`` entry sets keys that both compare entries set, to the
        same value in both (subject and baseline share the cell), and
        compare's own cell is one of them, so that the claim without ``over``
        still reads at one of its cells."""
        if self.is_level or self.tolerance is not None:
            what = "a level claim" if self.is_level else "a claim of no difference (tolerance)"
            raise ValueError(
                f"over is for a change between two variants ('up to X over these cells': "
                f"the best cell in the paper's direction), not for {what}"
            )
        assert self.over is not None
        alts: list[list[tuple[str, str]]] = []
        for entry in self.compare:
            for alt in alternatives(entry):
                got = pairs(alt)
                if got is None:
                    raise ValueError(
                        f"over: compare entry {alt!r} is a variant's name; with over, compare "
                        "entries are key=value (each cell replaces the values of its keys)"
                    )
                alts.append(got)
        own, found = None, False
        for entry in self.over:
            cell = pairs(entry) or []
            for key, _ in cell:
                values = {v for got in alts for k, v in got if _same_key(k, key)}
                if len(values) != 1 or not all(any(_same_key(k, key) for k, _ in g) for g in alts):
                    raise ValueError(
                        f"over: {entry!r} sets {key!r}: each compare entry must set it, to the "
                        f"same value (the cell both sides share); compare sets it to "
                        f"{sorted(values) or 'nothing'}"
                    )
            here = [(k, next(v for g in alts for kk, v in g if _same_key(kk, k))) for k, _ in cell]
            if own is None:
                own = here
            found = found or sorted(cell) == sorted(here)
        if found:
            return
        named = ",".join(f"{k}={v}" for k, v in own or [])
        raise ValueError(
            f"over: the cell compare names ({named}) is not among the cells; list it too"
        )

    def cell(self, i: int) -> Claim:
        """The claim at ``over``'s i-th cell: in both compare entries (each
        alternative) the values of the cell's keys replaced by the cell's,
        without ``over``."""
        assert self.over is not None, "no cells"
        cell = pairs(self.over[i]) or []

        def at_cell(alt: str) -> str:
            out = []
            for k, v in pairs(alt) or []:
                v = next((cv for ck, cv in cell if _same_key(k, ck)), v)
                out.append(f"{k}={v}")
            return ",".join(out)

        compare = [" | ".join(at_cell(a) for a in alternatives(e)) for e in self.compare]
        data = self.model_dump()
        data.update(compare=compare, over=None)
        if isinstance(self.paper, dict):
            data["paper"] = dict(zip(compare, self.paper_values() or (), strict=True))
        return Claim.model_validate(data)

    def entries(self) -> list[str]:
        """Every compare entry the claim evaluates: ``compare``'s, and with
        ``over`` those of each cell (what a run of the claim's variants needs)."""
        if not self.over:
            return list(self.compare)
        out: list[str] = []
        for i in range(len(self.over)):
            out += [e for e in self.cell(i).compare if e not in out]
        return out

    @property
    def kind(self) -> str:
        """What the paper's words claim, shown with each verdict: change, at
        least, at most, equivalence, level, level at least / at most; then
        ", median" and ", best of N cells" where they apply."""
        if self.is_level:
            words = "level" + (f" {self.bound}" if self.bound else "")
        elif self.tolerance is not None:
            words = "equivalence"
        else:
            words = self.bound or "change"
        if self.statistic != "mean":
            words += f", {self.statistic}"
        if self.over:
            words += f", best of {len(self.over)} cells"
        return words

    @property
    def is_level(self) -> bool:
        """A level claim: one variant (``compare: [SUBJECT]``) against the paper's ``value``."""
        return len(self.compare) == 1

    @property
    def baseline(self) -> str | None:
        """The baseline's compare entry; None for a level claim."""
        return self.compare[1] if len(self.compare) > 1 else None

    def paper_level(self) -> float:
        """A level claim's paper value in the metric's unit (``value`` x ``scale``)."""
        assert self.value is not None, "not a level claim"
        return float(self.value) * self.scale

    def paper_values(self) -> tuple[float, float] | None:
        """(subject, baseline) in the paper's unit, or None (a level claim: ``value``)."""
        if self.paper is None:
            return None
        if isinstance(self.paper, dict):
            return self.paper[self.compare[0]], self.paper[self.compare[1]]
        return self.paper[0], self.paper[1]

    def paper_change(self) -> float:
        """The paper's relative difference, subject vs baseline (nan: a level claim)."""
        if self.is_level:
            return math.nan
        if self.change is not None:
            return float(self.change)
        values = self.paper_values()
        assert values is not None
        return values[0] / values[1] - 1 if values[1] else 0.0

    def size_band(self) -> float:
        """How far our relative difference may lie from the paper's and still
        count as the paper's size: ``size_tolerance``, else max(3 points, a
        third of the paper's change) (chosen: a +12 % claim is met by +8 to
        +16 %, a -65 % one by -87 to -43 %).

        A level claim: the band around the paper's value, relative to it:
        ``size_tolerance``, else 10 % (``LEVEL_BAND``; chosen: 0.75 is met by
        0.675 to 0.825, wide enough for a paper's rounding to two digits and
        a testbed that is not the paper's, narrow enough to tell the SBD
        paper's accuracies on disjoint (~0.72) from shared (~0.97) bottlenecks)."""
        if self.size_tolerance is not None:
            return float(self.size_tolerance)
        if self.is_level:
            return LEVEL_BAND
        return max(0.03, abs(self.paper_change()) / 3)

    @property
    def direction(self) -> int:
        """+1: the paper's subject is higher, -1 lower, 0 no difference (``tolerance``)
        or a level claim (no difference to the paper's value within its band)."""
        if self.tolerance is not None or self.is_level:
            return 0
        c = self.paper_change()
        return (c > 0) - (c < 0)


__all__ = [
    "LEVEL_BAND",
    "Claim",
    "alternatives",
    "matches",
    "metric_columns",
    "pairs",
    "resolve",
    "short",
    "unknown_columns",
]
