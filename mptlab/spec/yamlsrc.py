"""YAML loading that remembers where every value came from, so that errors can
name the file and the line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


class SpecError(ValueError):
    """Bad input: the message names the file, the line, the field and what is allowed."""


@dataclass
class Source:
    """A loaded YAML document and the line of each value, keyed by its path."""

    path: Path
    data: object
    lines: dict[tuple, int]

    def line(self, loc: tuple) -> int | None:
        """Line of the value at ``loc`` or of its nearest ancestor that has one."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)

    def where(self, loc: tuple) -> str:
        line = self.line(loc)
        return f"{self.path}:{line}" if line else str(self.path)


def _walk(node, loc: tuple, lines: dict) -> object:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out = {}
        for key_node, value_node in node.value:
            key = yaml.safe_load(yaml.serialize(key_node))
            if key in out:
                raise SpecError(f"{_fmt(lines, loc, key_node)}: key {key!r} appears twice")
            lines[loc + (key,)] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, loc + (key,), lines)
            lines[loc + (key,)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, loc + (i,), lines) for i, item in enumerate(node.value)]
    return yaml.safe_load(yaml.serialize(node))


def _fmt(lines, loc, node) -> str:
    return f"line {node.start_mark.line + 1}"


def load(path: Path) -> Source:
    """Parse ``path``; YAML syntax errors become SpecError with file and line."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(f"{path}: file not found") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SpecError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    lines: dict[tuple, int] = {}
    try:
        data = _walk(node, (), lines) if node is not None else {}
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
    return Source(path, data, lines)
