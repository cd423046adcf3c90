"""One YAML reader for config files and pinned ``.config`` messages, with limits.

PyYAML's safe loader still follows aliases (a few hundred bytes can stand for billions of
nodes once something walks them), recurses once per nesting level (a deep file ends in a
RecursionError), and keeps the last of two equal keys without a word. Here:

- anchors (``&name``) and aliases (``*name``) are refused outright. Salon's layers
  (``shared.yaml``, guild files) already share settings between files, which is what
  anchors are for elsewhere; refusing them keeps the data a tree, so every key has one
  line to blame, and nobody who can pin a message can make the bot do more work than the
  text they wrote. A bound on expansion would be a number users hit without knowing why;
- nesting deeper than ``MAX_DEPTH`` levels is refused while the text is composed;
- a text longer than its limit is refused before it is parsed;
- a key set twice in one mapping is refused, naming both lines.

Problems come back as ``YamlRefused`` with the line, the key path and the reason of each.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_PIN_CHARS",
    "KeyPath",
    "ParsedYaml",
    "YamlProblem",
    "YamlRefused",
    "parse_yaml",
    "read_yaml_file",
]

MAX_DEPTH = 64  # the deepest real config (tool rules, extra_body) is about ten levels
MAX_FILE_BYTES = 1_000_000
MAX_PIN_CHARS = 20_000  # a Discord message holds at most 4 000

_ALIASES = "YAML anchors (&) and aliases (*) are not supported: write the value out"
_MERGE_TAG = "tag:yaml.org,2002:merge"

KeyPath = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class YamlProblem:
    line: int | None
    key_path: str
    reason: str

    def describe(self) -> str:
        """One line for a pinned message's rejection."""
        where = f"line {self.line}: " if self.line is not None else ""
        key = f"{self.key_path}: " if self.key_path else ""
        return f"{where}{key}{self.reason}"


class YamlRefused(ValueError):
    def __init__(self, problems: list[YamlProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.describe() for p in problems))


@dataclass(frozen=True, slots=True)
class ParsedYaml:
    """The data of a YAML text and the line of every key and list item in it."""

    data: Any
    lines: dict[KeyPath, int]


class _LimitedLoader(yaml.SafeLoader):
    """A safe loader that refuses aliases and deep nesting while composing."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._path: list[str] = []
        self._depth = 0  # counted apart from the path: a key may be a mapping too

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        pushed = _path_part(parent, index)
        if pushed is not None:
            self._path.append(pushed)
        self._depth += 1
        try:
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
            line = event.start_mark.line + 1 if event.start_mark else None
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise YamlRefused([YamlProblem(line, ".".join(self._path), _ALIASES)])
            if self._depth > MAX_DEPTH:
                reason = f"nested deeper than {MAX_DEPTH} levels"
                raise YamlRefused([YamlProblem(line, ".".join(self._path[:1]), reason)])
            return super().compose_node(parent, index)  # type: ignore[arg-type]
        finally:
            self._depth -= 1
            if pushed is not None:
                self._path.pop()


def _path_part(parent: yaml.Node | None, index: object) -> str | None:
    """The key path part of a node: its key in a mapping, its index in a list."""
    if isinstance(parent, yaml.MappingNode) and isinstance(index, yaml.Node):
        return str(index.value)
    if isinstance(parent, yaml.SequenceNode) and isinstance(index, int):
        return str(index)
    return None


def read_yaml_file(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> ParsedYaml:
    """Parse a file of at most ``max_bytes``; OSError and UnicodeDecodeError pass through."""
    with path.open("rb") as file:
        raw = file.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise YamlRefused([YamlProblem(None, "", f"larger than {max_bytes} bytes")])
    return parse_yaml(raw.decode("utf-8"), max_chars=max_bytes)


def parse_yaml(text: str, *, max_chars: int) -> ParsedYaml:
    """Parse one YAML document within the limits above, or raise ``YamlRefused``."""
    if len(text) > max_chars:
        raise YamlRefused([YamlProblem(None, "", f"longer than {max_chars} characters")])
    try:
        loader = _LimitedLoader(text)
    except yaml.reader.ReaderError as exc:  # a control character, found before parsing
        line = text.count("\n", 0, exc.position) + 1
        reason = f"invalid YAML: character #x{exc.character:04x} is not allowed"
        raise YamlRefused([YamlProblem(line, "", reason)]) from None
    try:
        node = loader.get_single_node()
        lines: dict[KeyPath, int] = {}
        if node is None:
            return ParsedYaml(None, lines)
        duplicates: list[YamlProblem] = []
        _index(node, (), lines, duplicates)
        if duplicates:
            raise YamlRefused(duplicates)
        return ParsedYaml(loader.construct_document(node), lines)
    except yaml.MarkedYAMLError as exc:
        raise YamlRefused([_syntax_problem(exc)]) from None
    except yaml.YAMLError as exc:
        raise YamlRefused([YamlProblem(None, "", f"invalid YAML: {exc}")]) from None
    finally:
        loader.dispose()


def _syntax_problem(exc: yaml.MarkedYAMLError) -> YamlProblem:
    # The context mark is where the broken construct began, which is where to look.
    mark = exc.context_mark or exc.problem_mark
    line = mark.line + 1 if mark else None
    context = f"{exc.context}: " if exc.context else ""
    return YamlProblem(line, "", f"invalid YAML: {context}{exc.problem}")


def _index(
    node: yaml.Node, prefix: KeyPath, lines: dict[KeyPath, int], duplicates: list[YamlProblem]
) -> None:
    """Record the line of every key and item; report keys set twice in one mapping."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            path = (*prefix, key)
            if key in seen and key_node.tag != _MERGE_TAG:
                reason = f"set twice, first on line {seen[key]}"
                duplicates.append(YamlProblem(line, ".".join(path), reason))
            seen.setdefault(key, line)
            lines[path] = line
            _index(value_node, path, lines, duplicates)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = (*prefix, str(i))
            lines[path] = item.start_mark.line + 1
            _index(item, path, lines, duplicates)
