"""The effective config of a bot in one channel.

Layers, later winning: ``shared.yaml``, ``guilds/<guild>.yaml``, ``bots/<bot>.yaml``,
``bots/<bot>-<guild>.yaml``, then the channel's pinned ``.config`` messages, oldest first.
A pinned config is a message::

    .config [targets]
    ---
    yaml

It applies to the bots whose inner name is among the space-separated targets (to every bot
when there are none). A pinned config that is not valid YAML (or breaks the limits of
``salon.config._yaml``: no aliases, bounded depth and size, no key twice), or that sets an
unknown key, a value of the wrong type or a key a channel may not change, is skipped with
its reason; the rest still apply.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from salon.config._yaml import MAX_PIN_CHARS, YamlRefused, parse_yaml
from salon.config.merge import merge_layers
from salon.config.models import BotConfig

__all__ = [
    "CHANNEL_FORBIDDEN_KEYS",
    "PROCESS_KEYS",
    "ChannelConfigs",
    "PinnedConfig",
    "Resolved",
    "parse_config_message",
]

PROCESS_KEYS = frozenset(
    {
        "providers",
        "platforms",
        "mcp_servers",
        "integrations",
        "builtin_tools",
        "data_dir",
        "database_url",
        "database_password_env",
        "process_lease",
        "shutdown_grace",
        "catch_up",
        "log_level",
        "restart_backoff_initial",
        "restart_backoff_max",
        "event_queue_size",
        "event_batch_max",
        "max_concurrent_activations",
        "tool_log_seed_hours",
        "outputs",
        "traces",
        "memory",
        "otel",
        "prices",
        "web",
    }
)
"""Keys that belong to the bot's process as a whole: not settable per guild or channel."""

CHANNEL_FORBIDDEN_KEYS = PROCESS_KEYS | {
    "tool_policies",
    "default_tool_policy",
    "authorized_roles",
    "limits",
}
"""A pinned message may not change these: whoever can pin must not loosen tool approval."""

_CACHE_SIZE = 512


@dataclass(frozen=True, slots=True)
class PinnedConfig:
    """A pinned message's id and text (already known to start with ``.config``)."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Resolved:
    config: BotConfig
    rejected: tuple[tuple[str, str], ...] = ()  # (message id, reason)
    layers: tuple[str, ...] = ()  # the files and pinned messages it was made of, in order


def parse_config_message(text: str) -> tuple[list[str], str] | None:
    """``(targets, yaml text)`` of a ``.config`` message, or None if it is not one."""
    head, sep, body = text.partition("\n")
    words = head.split()
    if not words or words[0] != ".config":
        return None
    lines = body.split("\n") if sep else []
    if lines and lines[0].strip() == "---":
        lines = lines[1:]
    return words[1:], "\n".join(lines)


class ChannelConfigs:
    """Resolves and caches a bot's config per guild and per set of pinned configs."""

    def __init__(
        self,
        base: BotConfig,
        *,
        shared: Mapping[str, Any] | None = None,
        bot: Mapping[str, Any] | None = None,
        guilds: Mapping[str, Mapping[str, Any]] | None = None,
        bot_guilds: Mapping[str, Mapping[str, Any]] | None = None,
        default_name: str | None = None,
        sources: Mapping[str, str] | None = None,
    ) -> None:
        """``sources`` names the file of each layer (``shared``, ``bot``, ``guild:<id>``,
        ``bot_guild:<id>``), for telling which files made a config."""
        self.base = base
        self._shared = dict(shared or {})
        self._bot = dict(bot or {})
        self._guilds = dict(guilds or {})
        self._bot_guilds = dict(bot_guilds or {})
        self._default_name = default_name or base.name
        self._sources = dict(sources or {})
        self._layered = shared is not None or bot is not None
        self._by_guild: dict[str | None, BotConfig] = {None: base}
        self._cache: OrderedDict[tuple[str | None, tuple[PinnedConfig, ...]], Resolved] = (
            OrderedDict()
        )

    @property
    def guild_ids(self) -> set[str]:
        return set(self._guilds) | set(self._bot_guilds)

    def guild_data(self, guild_id: str | None) -> dict[str, Any]:
        """The merged layers for a guild, before validation."""
        if not self._layered:
            return self.base.model_dump(exclude_unset=True)
        layers = [self._shared]
        if guild_id is not None:
            layers.append(dict(self._guilds.get(guild_id, {})))
        layers.append(self._bot)
        if guild_id is not None:
            layers.append(dict(self._bot_guilds.get(guild_id, {})))
        data = merge_layers(layers)
        data.setdefault("name", self._default_name)
        return data

    def for_guild(self, guild_id: str | None) -> BotConfig:
        if guild_id not in self._by_guild:
            if guild_id not in self._guilds and guild_id not in self._bot_guilds:
                self._by_guild[guild_id] = self.base
            else:
                # The loader validated every guild's layers, so this cannot fail.
                self._by_guild[guild_id] = BotConfig.model_validate(self.guild_data(guild_id))
        return self._by_guild[guild_id]

    def layers(self, guild_id: str | None) -> tuple[str, ...]:
        """The files a guild's config is made of, first to last."""
        names = ["shared", f"guild:{guild_id}", "bot", f"bot_guild:{guild_id}"]
        return tuple(self._sources[n] for n in names if n in self._sources)

    def resolve(self, guild_id: str | None, pinned: Sequence[PinnedConfig] = ()) -> Resolved:
        """The config for a channel of ``guild_id`` with ``pinned`` configs, oldest first."""
        guild_config = self.for_guild(guild_id)
        if not pinned:
            return Resolved(guild_config, layers=self.layers(guild_id))
        key = (guild_id, tuple(pinned))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        resolved = self._apply(guild_id, guild_config, pinned)
        self._cache[key] = resolved
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return resolved

    def _apply(
        self, guild_id: str | None, guild_config: BotConfig, pinned: Sequence[PinnedConfig]
    ) -> Resolved:
        data = self.guild_data(guild_id)
        config = guild_config
        rejected: list[tuple[str, str]] = []
        applied: list[str] = []
        for entry in pinned:
            parsed = parse_config_message(entry.text)
            if parsed is None:
                continue
            targets, body = parsed
            if targets and guild_config.name not in targets:
                continue
            overlay, problem = _read_overlay(body)
            if overlay is None:
                rejected.append((entry.message_id, problem))
                continue
            candidate = merge_layers([data, overlay])
            try:
                validated = BotConfig.model_validate(candidate)
            except ValidationError as exc:
                rejected.append((entry.message_id, _errors(exc)))
                continue
            data, config = candidate, validated
            applied.append(f"pinned .config {entry.message_id}")
        return Resolved(config, tuple(rejected), (*self.layers(guild_id), *applied))


def _read_overlay(body: str) -> tuple[dict[str, Any] | None, str]:
    try:
        overlay = parse_yaml(body, max_chars=MAX_PIN_CHARS).data
    except YamlRefused as exc:
        return None, str(exc)
    if overlay is None:
        return {}, ""
    if not isinstance(overlay, dict):
        return None, "the YAML must be a mapping of keys"
    forbidden = sorted(str(k) for k in overlay if k in CHANNEL_FORBIDDEN_KEYS)
    if forbidden:
        return None, f"{', '.join(forbidden)}: cannot be set by a pinned message"
    return overlay, ""


def _errors(exc: ValidationError) -> str:
    reasons = []
    for error in exc.errors():
        path = ".".join(str(part) for part in error["loc"])
        reason = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
        reasons.append(f"{path}: {reason}")
    return "; ".join(reasons)
