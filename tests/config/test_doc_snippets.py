"""Every YAML example in the README and docs/ is a valid part of a bot's config: a key the
docs show is a key the models take (so a renamed or removed key fails here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from salon.config import BotConfig, merge_layers
from salon.config.interpolation import interpolate

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
BLOCK = re.compile(r"```yaml\n(.*?)```", re.S)


def _snippets() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{path.name}:{line}", match.group(1)))
    return found


def _providers_named(data: Any) -> set[str]:
    """Every ``provider: NAME`` in the snippet, at any depth."""
    if isinstance(data, dict):
        named = {v for k, v in data.items() if k == "provider" and isinstance(v, str)}
        return named.union(*(_providers_named(v) for v in data.values()))
    if isinstance(data, list):
        return set().union(*(_providers_named(v) for v in data))
    return set()


def _as_bot(snippet: dict[str, Any]) -> dict[str, Any]:
    """The snippet over the least a bot file needs; providers it only names are filled in."""
    stand_in = {"type": "openai", "model": "m"}
    base: dict[str, Any] = {"name": "Doc", "provider": "p", "providers": {"p": stand_in}}
    merged: dict[str, Any] = merge_layers([base, snippet])
    for name in _providers_named(snippet):
        merged["providers"].setdefault(name, stand_in)
    return merged


SNIPPETS = _snippets()


def test_the_docs_have_examples() -> None:
    assert len(SNIPPETS) >= 15


@pytest.mark.parametrize(("where", "text"), SNIPPETS, ids=[w for w, _ in SNIPPETS])
def test_a_documented_example_is_a_valid_config(where: str, text: str) -> None:
    data = yaml.safe_load(text)
    assert isinstance(data, dict), f"{where}: not a mapping"
    filled = interpolate(data, {})  # as a config file is read: ${NAME:-default} filled
    assert not filled.problems, f"{where}: {filled.problems}"
    BotConfig.model_validate(_as_bot(filled.data))


def test_a_key_the_models_do_not_take_fails() -> None:
    with pytest.raises(ValueError, match="no_such_key"):
        BotConfig.model_validate(_as_bot({"platforms": {"discord": {"no_such_key": 1}}}))
