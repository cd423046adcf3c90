"""``${NAME}`` and ``${NAME:-default}`` in the values of config files.

A reference is replaced by the environment variable's value; ``:-default`` is used when
the variable is unset or empty (the default may hold balanced braces, such as
``{reason}``). ``$${`` is a literal ``${``; any other ``$`` stays as written. The result is
text: the typed keys read it as their type (``"0.8"`` as a number, ``"true"`` as a flag).
Keys are never interpolated, nor pinned ``.config`` messages: whoever can pin a message
must not read the bot's environment.

Problems come back with the key path of the value, so the loader can name its file and
line. A variable named like a secret (``looks_secret``) is a secret wherever its value
ends up: the loader reports the names used, and ``resolve_secrets`` redacts their values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Interpolated", "interpolate", "looks_secret"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A part of a variable's name (split at _) that marks it a secret, or ends one (GITHUBTOKEN).
_SECRET_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "CREDENTIALS")
_SECRET_WORDS = frozenset({*_SECRET_PARTS, "APIKEY", "AUTH", "CREDENTIAL", "COOKIE", "PRIVATE"})
_HOW = "write ${NAME} or ${NAME:-default} (or $${ for a literal ${)"


def looks_secret(name: str) -> bool:
    """Whether a variable's name says it holds a secret (``GROK_API_KEY``, ``DISCORD_TOKEN``;
    not ``AGENT_MAX_TOKENS``)."""
    parts = name.upper().split("_")
    return any(p in _SECRET_WORDS or p.endswith(_SECRET_PARTS) for p in parts if p)


@dataclass
class Interpolated:
    """The data with every reference replaced, the variables used, and the problems as
    (key path, reason)."""

    data: Any
    names: set[str] = field(default_factory=set)
    problems: list[tuple[tuple[str, ...], str]] = field(default_factory=list)


def interpolate(data: Any, environ: Mapping[str, str]) -> Interpolated:
    """``data`` (parsed YAML) with the references in its string values replaced."""
    found = Interpolated(None)
    found.data = _walk(data, (), environ, found)
    return found


def _walk(
    value: Any, path: tuple[str, ...], environ: Mapping[str, str], found: Interpolated
) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, (*path, str(k)), environ, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, (*path, str(i)), environ, found) for i, v in enumerate(value)]
    if isinstance(value, str) and "$" in value:
        return _replace(value, path, environ, found)
    return value


def _replace(
    text: str, path: tuple[str, ...], environ: Mapping[str, str], found: Interpolated
) -> str:
    out: list[str] = []
    at = 0
    while (start := text.find("$", at)) >= 0:
        out.append(text[at:start])
        if text.startswith("$${", start):
            out.append("${")
            at = start + 3
            continue
        if not text.startswith("${", start):
            out.append("$")
            at = start + 1
            continue
        end = _closing(text, start + 2)
        inner = text[start + 2 : end] if end >= 0 else text[start + 2 :]
        at = end + 1 if end >= 0 else len(text)
        out.append(_resolve(inner, end >= 0, path, environ, found))
    out.append(text[at:])
    return "".join(out)


def _closing(text: str, start: int) -> int:
    """Where the ``}`` that closes a reference is (braces inside a default balance), or -1."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            if depth == 0:
                return index
            depth -= 1
    return -1


def _resolve(
    inner: str,
    closed: bool,
    path: tuple[str, ...],
    environ: Mapping[str, str],
    found: Interpolated,
) -> str:
    name, sep, default = inner.partition(":-")
    if not closed or not _NAME.fullmatch(name):
        shown = "${" + inner + ("}" if closed else "")
        found.problems.append((path, f"{shown} is not a variable: {_HOW}"))
        return ""
    found.names.add(name)
    value = environ.get(name)
    if value:
        return value
    if sep:
        return default
    if value is None:
        reason = f"environment variable {name} is not set and has no default"
        found.problems.append((path, f"{reason} (write ${{{name}:-default}} for one)"))
    return ""
