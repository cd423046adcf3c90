"""Load a config directory.

A bot's layers, later winning: ``shared.yaml``, ``guilds/<guild>.yaml``, ``bots/<bot>.yaml``,
``bots/<bot>-<guild>.yaml`` (the guild layers apply only in that guild; a guild is a Discord
server id). A file ``bots/<bot>-<guild>.yaml`` is a guild overlay when ``bots/<bot>.yaml``
exists and ``<guild>`` is all digits or has a ``guilds/<guild>.yaml``; otherwise it is a bot.

Every problem found is reported with the file, the line where we know it, the key path and
the reason; all problems of a directory are collected before raising, so one ``salon check``
shows everything that needs fixing.

Values may name environment variables, ``${NAME}`` or ``${NAME:-default}``
(``salon.config.interpolation``), read from ``environ`` (the process's by default) as the
files are read; no problem shows the value of a variable named like a secret.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from salon.config._yaml import KeyPath, YamlRefused, read_yaml_file
from salon.config.channels import PROCESS_KEYS, ChannelConfigs
from salon.config.interpolation import interpolate, looks_secret
from salon.config.merge import merge_layers
from salon.config.models import BotConfig
from salon.config.secrets import Redactor
from salon.errors import ConfigError, ConfigProblem

__all__ = ["ConfigSet", "load_config_dir", "merge_layers"]


@dataclass(frozen=True)
class Layer:
    """One parsed YAML file: its data and the line of every key in it."""

    file: str
    data: dict[str, Any]
    lines: dict[KeyPath, int]
    variables: frozenset[str] = frozenset()  # the environment variables its values name


@dataclass(frozen=True)
class ConfigSet:
    """Every bot of a config directory, validated."""

    root: Path
    bots: dict[str, BotConfig]
    layers: dict[str, list[Layer]]
    guilds: dict[str, Layer] = field(default_factory=dict)
    bot_guilds: dict[str, dict[str, Layer]] = field(default_factory=dict)

    def channel_configs(self, name: str) -> ChannelConfigs:
        """The per-guild and per-channel resolver of one bot."""
        shared, bot = _split_base(self.layers[name])
        base = self.layers[name]
        sources = {"bot": _shown(base[-1].file, self.root)}
        if len(base) > 1:
            sources["shared"] = _shown(base[0].file, self.root)
        sources |= {f"guild:{g}": _shown(la.file, self.root) for g, la in self.guilds.items()}
        overlays = self.bot_guilds.get(name, {})
        sources |= {f"bot_guild:{g}": _shown(la.file, self.root) for g, la in overlays.items()}
        return ChannelConfigs(
            self.bots[name],
            shared=shared,
            bot=bot,
            guilds={g: layer.data for g, layer in self.guilds.items()},
            bot_guilds={g: layer.data for g, layer in overlays.items()},
            default_name=name,
            sources=sources,
        )

    def configs_in_use(self, name: str) -> list[BotConfig]:
        """The bot's config, then its config in each guild that has layers: between them
        they name every provider the bot uses (a pinned message may choose others)."""
        resolver = self.channel_configs(name)
        return [self.bots[name], *(resolver.for_guild(g) for g in sorted(resolver.guild_ids))]

    def bot(self, name: str | None) -> tuple[str, BotConfig]:
        if name is None:
            if len(self.bots) != 1:
                names = ", ".join(sorted(self.bots)) or "none"
                problem = f"there are several bots ({names}); choose one with --bot"
                raise ConfigError([ConfigProblem(str(self.root), "", problem)])
            name = next(iter(self.bots))
        if name not in self.bots:
            known = ", ".join(sorted(self.bots)) or "none"
            reason = f"no bot named {name!r} (known: {known})"
            raise ConfigError([ConfigProblem(str(self.root / "bots"), "", reason)])
        return name, self.bots[name]

    def variables(self, name: str) -> frozenset[str]:
        """The environment variables the files of bot ``name`` name in their values (its
        guild layers included): ``resolve_secrets`` redacts those named like secrets."""
        layers = [
            *self.layers[name],
            *self.guilds.values(),
            *self.bot_guilds.get(name, {}).values(),
        ]
        return frozenset().union(*(layer.variables for layer in layers))

    def locator(self, name: str) -> Callable[[str, str], ConfigProblem]:
        """Turns (key path, reason) into a problem blamed on the file that set the key."""
        layers = self.layers[name]
        return lambda key_path, reason: _locate(tuple(key_path.split(".")), reason, layers)


def load_config_dir(root: Path | str, environ: Mapping[str, str] | None = None) -> ConfigSet:
    root = Path(root)
    if not root.is_dir():
        raise ConfigError([ConfigProblem(str(root), "", "config directory does not exist")])
    problems: list[ConfigProblem] = []
    read = _Reader(os.environ if environ is None else environ, problems)
    try:
        return _load(root, read, problems)
    except ConfigError as exc:
        raise ConfigError([read.hidden(p) for p in exc.problems]) from None


def _load(root: Path, read_layer: _Reader, problems: list[ConfigProblem]) -> ConfigSet:
    shared_path = root / "shared.yaml"
    shared = read_layer(shared_path) if shared_path.exists() else None
    guilds: dict[str, Layer] = {}
    for path in sorted((root / "guilds").glob("*.yaml")):
        layer = read_layer(path)
        if layer is not None:
            _forbid_process_keys(layer, problems)
            guilds[path.stem] = layer
    bot_paths, overlay_paths = _bot_files(root / "bots", set(guilds))
    if not bot_paths:
        problems.append(ConfigProblem(str(root / "bots"), "", "no bot files (bots/<name>.yaml)"))
    bots: dict[str, BotConfig] = {}
    bot_layers: dict[str, list[Layer]] = {}
    bot_guilds: dict[str, dict[str, Layer]] = {}
    for path in bot_paths:
        layer = read_layer(path)
        if layer is None:
            continue
        layers = [x for x in (shared, layer) if x is not None]
        bot = _validate_bot(path.stem, layers, problems)
        if bot is None:
            continue
        bots[path.stem] = bot
        bot_layers[path.stem] = layers
        overlays: dict[str, Layer] = {}
        for guild_id, overlay_path in overlay_paths.get(path.stem, {}).items():
            overlay = read_layer(overlay_path)
            if overlay is not None:
                _forbid_process_keys(overlay, problems)
                overlays[guild_id] = overlay
        bot_guilds[path.stem] = overlays
        for guild_id in sorted(set(guilds) | set(overlays)):
            guild_layers = [
                x for x in (shared, guilds.get(guild_id), layer, overlays.get(guild_id)) if x
            ]
            _validate_bot(path.stem, guild_layers, problems)
    if problems:
        raise ConfigError(problems)
    return ConfigSet(root, bots, bot_layers, guilds, bot_guilds)


def _bot_files(
    directory: Path, guild_ids: set[str]
) -> tuple[list[Path], dict[str, dict[str, Path]]]:
    """Split ``bots/*.yaml`` into bot files and ``<bot>-<guild>`` overlays."""
    paths = sorted(directory.glob("*.yaml"))
    stems = {p.stem for p in paths}
    bots: list[Path] = []
    overlays: dict[str, dict[str, Path]] = {}
    for path in paths:
        bot, dash, guild = path.stem.rpartition("-")
        if dash and bot in stems and (guild.isdigit() or guild in guild_ids):
            overlays.setdefault(bot, {})[guild] = path
        else:
            bots.append(path)
    return bots, overlays


def _forbid_process_keys(layer: Layer, problems: list[ConfigProblem]) -> None:
    """Guild layers may not set what belongs to the whole process (one per bot)."""
    for key in sorted(set(layer.data) & PROCESS_KEYS):
        del layer.data[key]
        reason = "applies to the whole bot: set it in shared.yaml or bots/<bot>.yaml"
        problems.append(ConfigProblem(layer.file, key, reason, layer.lines.get((key,))))


def _shown(file: str, root: Path) -> str:
    """A layer's file as people know it: relative to the config directory."""
    path = Path(file)
    return str(path.relative_to(root)) if path.is_relative_to(root) else file


def _split_base(layers: list[Layer]) -> tuple[dict[str, Any], dict[str, Any]]:
    if len(layers) == 1:
        return {}, layers[0].data
    return layers[0].data, layers[1].data


class _Reader:
    """Reads each layer, its variables filled from ``environ``; remembers the values of
    the secret-named ones, which no problem may show."""

    def __init__(self, environ: Mapping[str, str], problems: list[ConfigProblem]) -> None:
        self.environ = environ
        self.problems = problems
        self.secrets: set[str] = set()

    def __call__(self, path: Path) -> Layer | None:
        try:
            parsed = read_yaml_file(path)
        except YamlRefused as exc:
            found = (ConfigProblem(str(path), p.key_path, p.reason, p.line) for p in exc.problems)
            self.problems.extend(found)
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self.problems.append(ConfigProblem(str(path), "", f"cannot read: {exc}"))
            return None
        data = {} if parsed.data is None else parsed.data
        if not isinstance(data, dict):
            self.problems.append(ConfigProblem(str(path), "", "the file must be a mapping of keys"))
            return None
        filled = interpolate(data, self.environ)
        for key_path, reason in filled.problems:
            line = parsed.lines.get(key_path)
            self.problems.append(ConfigProblem(str(path), ".".join(key_path), reason, line))
        self.secrets.update(
            self.environ[n] for n in filled.names if looks_secret(n) and self.environ.get(n)
        )
        return Layer(str(path), filled.data, parsed.lines, frozenset(filled.names))

    def hidden(self, problem: ConfigProblem) -> ConfigProblem:
        """``problem`` without the value of any secret-named variable (a URL's hint
        repeats what was written)."""
        return replace(problem, reason=Redactor(frozenset(self.secrets))(problem.reason))


def _validate_bot(
    stem: str, layers: list[Layer], problems: list[ConfigProblem]
) -> BotConfig | None:
    data = merge_layers([layer.data for layer in layers])
    data.setdefault("name", stem)
    try:
        bot = BotConfig.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            problems.append(_locate(error["loc"], _reason(error), layers))
        return None
    return _check_references(bot, layers, problems)


def _check_references(
    bot: BotConfig, layers: list[Layer], problems: list[ConfigProblem]
) -> BotConfig | None:
    before = len(problems)
    if bot.provider not in bot.providers:
        known = ", ".join(sorted(bot.providers)) or "none configured"
        reason = f"unknown provider {bot.provider!r} (known: {known})"
        problems.append(_locate(("provider",), reason, layers))
    elif not (bot.model or bot.providers[bot.provider].model):
        reason = f"no model: set `model` here or in providers.{bot.provider}.model"
        problems.append(_locate(("model",), reason, layers))
    elif bot.provider_config().type == "anthropic" and not bot.provider_config().api_key_env:
        reason = "anthropic needs an API key: set api_key_env (e.g. ANTHROPIC_API_KEY)"
        problems.append(_locate(("providers", bot.provider, "api_key_env"), reason, layers))
    elif bot.provider_config().type == "google" and not bot.provider_config().api_key_env:
        reason = "google needs an API key: set api_key_env (e.g. GEMINI_API_KEY)"
        problems.append(_locate(("providers", bot.provider, "api_key_env"), reason, layers))
    elif bot.provider_config().type == "bedrock":
        problems.extend(_bedrock_problems(bot, layers))
    return bot if len(problems) == before else None


def _bedrock_problems(bot: BotConfig, layers: list[Layer]) -> list[ConfigProblem]:
    config = bot.provider_config()
    where = ("providers", bot.provider)
    found = []
    if not config.aws_region:
        reason = "bedrock needs a region: set aws_region (e.g. us-east-1)"
        found.append(_locate((*where, "aws_region"), reason, layers))
    keys = (config.aws_access_key_env, config.aws_secret_key_env)
    if any(keys) and not all(keys):
        reason = "set both aws_access_key_env and aws_secret_key_env"
        found.append(_locate((*where, "aws_secret_key_env"), reason, layers))
    if not (all(keys) or config.aws_profile or config.api_key_env):
        reason = (
            "bedrock needs credentials: aws_access_key_env and aws_secret_key_env, "
            "aws_profile, or api_key_env (a Bedrock API key)"
        )
        found.append(_locate((*where, "type"), reason, layers))
    return found


def _reason(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "required key is missing"
    return str(error["msg"])


def _locate(loc: tuple[Any, ...], reason: str, layers: list[Layer]) -> ConfigProblem:
    """Blame the last layer that defines the deepest existing prefix of ``loc``."""
    path = tuple(str(part) for part in loc)
    for depth in range(len(path), 0, -1):
        prefix = path[:depth]
        for layer in reversed(layers):
            if prefix in layer.lines:
                return ConfigProblem(layer.file, ".".join(path), reason, layer.lines[prefix])
    return ConfigProblem(layers[-1].file, ".".join(path), reason)
