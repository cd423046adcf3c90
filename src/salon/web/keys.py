"""The configurator overview's tables: what each bot's files set, where, and the defaults
only on demand (folded), so a fleet reads at a glance.

Keys only ``shared.yaml`` sets, equal for every bot shown, are listed once above the bots.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from salon.config import ConfigSet, merge_layers
from salon.config.channels import PROCESS_KEYS

__all__ = ["LIVE_KEYS", "key_tables"]

LIVE_KEYS = frozenset({"log_level"})  # process keys a running bot applies at once (upkeep)
SHARED = "shared.yaml"
NOTE = (
    '<p class="meta">Values as the files set them; "with defaults" shows the rest. * applies '
    "after a restart.</p>"
)


class Source(NamedTuple):
    key: str
    written: Any  # as the files set it, merged as the loader merges them
    effective: Any  # with every default
    files: list[str]  # the files that set it, in the order they apply


def _file_name(configs: ConfigSet, file: str) -> str:
    path = Path(file)
    return str(path.relative_to(configs.root)) if path.is_relative_to(configs.root) else file


def sources(configs: ConfigSet, bot: str) -> list[Source]:
    """Each top-level key the bot's files set."""
    config = configs.bots[bot].model_dump(mode="json")
    layers = configs.layers[bot]
    written = merge_layers([layer.data for layer in layers])
    found: dict[str, list[str]] = {}
    for layer in layers:
        for key in layer.data:
            found.setdefault(key, []).append(_file_name(configs, layer.file))
    return [
        Source(key, written[key], config[key], found[key]) for key in sorted(found) if key in config
    ]


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    dumped = yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return dumped.removesuffix("...\n").strip()


def _defaults(text: str, summary: str = "with defaults") -> str:
    return (
        f'<details class="defaults"><summary>{escape(summary)}</summary>'
        f"<pre>{escape(text)}</pre></details>"
    )


def _row(source: Source) -> str:
    """A key as its files set it, with its defaults folded away when they add anything."""
    restart = " *" if source.key in PROCESS_KEYS - LIVE_KEYS else ""
    written, whole = _shown(source.written), _shown(source.effective)
    return (
        f"<tr><th>{escape(source.key)}{restart}</th>"
        f'<td class="set"><pre>{escape(written)}</pre>'
        f"{_defaults(whole) if whole != written else ''}</td>"
        f'<td class="layer">{escape(", ".join(source.files))}</td></tr>'
    )


def _table(rows: list[Source]) -> str:
    shown = "".join(_row(source) for source in rows)
    return (
        '<table class="keys settings"><tr><th>key</th><th>value</th><th>from</th></tr>'
        f"{shown}</table>"
    )


def _unset(configs: ConfigSet, bot: str, listed: set[str]) -> str:
    """Every key no file sets, with its default, folded away."""
    config = configs.bots[bot].model_dump(mode="json")
    rest = {key: value for key, value in sorted(config.items()) if key not in listed}
    if not rest:
        return ""
    return _defaults(_shown(rest), f"the {len(rest)} keys no file sets, with their defaults")


def _common(found: dict[str, list[Source]]) -> list[Source]:
    """The keys only shared.yaml sets, with the same value for every bot."""
    by_key: dict[str, list[Source]] = {}
    for rows in found.values():
        for source in rows:
            by_key.setdefault(source.key, []).append(source)
    return [
        rows[0]
        for key, rows in sorted(by_key.items())
        if len(rows) == len(found)
        and all(r.files == [SHARED] and r.effective == rows[0].effective for r in rows)
    ]


def key_tables(configs: ConfigSet, bots: list[str], reload_errors: dict[str, str | None]) -> str:
    """The keys every bot shares, once, then each bot's own keys and what it could not
    apply."""
    found = {bot: sources(configs, bot) for bot in bots}
    common = _common(found) if bots else []
    shared = {source.key for source in common}
    parts = []
    if common:
        parts.append(
            f'<section class="shared"><h2>Every bot ({SHARED})</h2>{_table(common)}</section>'
        )
    for bot in bots:
        error = reload_errors.get(bot)
        warning = f'<p class="problems">The running bot says: {escape(error)}</p>' if error else ""
        own = [source for source in found[bot] if source.key not in shared]
        listed = {source.key for source in found[bot]}
        parts.append(
            f'<section class="bot"><h2>{escape(bot)}</h2>{warning}{_table(own)}'
            f"{_unset(configs, bot, listed)}{NOTE}</section>"
        )
    return "".join(parts)
