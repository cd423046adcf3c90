"""A replay's arms: the bot's effective config in the replayed channel, with an overlay
each (``--arm NAME=FILE.yaml``), layered exactly as a channel layer is (deep-merged on the
guild's layers, then validated whole)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from salon.config import BotConfig, ChannelConfigs, merge_layers
from salon.config._yaml import MAX_FILE_BYTES, YamlRefused, parse_yaml
from salon.errors import ConfigError, ConfigProblem

__all__ = ["Arm", "arms_for", "parse_arm_option"]


@dataclass(frozen=True)
class Arm:
    name: str
    config: BotConfig
    layers: tuple[str, ...] = ()  # the files it was made of, first to last


def parse_arm_option(text: str) -> tuple[str, Path]:
    """``NAME=FILE.yaml``."""
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        reason = f"expected NAME=FILE.yaml, got {text!r}"
        raise ConfigError([ConfigProblem("(command line)", "--arm", reason)])
    return name.strip(), Path(path.strip())


def arms_for(
    resolver: ChannelConfigs, guild_id: str | None, options: list[tuple[str, Path]]
) -> list[Arm]:
    """One arm per option, or the bot as configured (``current``) with none."""
    base = resolver.resolve(guild_id)
    if not options:
        return [Arm("current", base.config, base.layers)]
    names = [name for name, _ in options]
    if len(set(names)) != len(names):
        raise ConfigError([ConfigProblem("(command line)", "--arm", "arm names must differ")])
    data = resolver.guild_data(guild_id)
    return [Arm(name, _overlaid(data, path), (*base.layers, str(path))) for name, path in options]


def _overlaid(data: dict[str, object], path: Path) -> BotConfig:
    try:
        text = path.read_text(encoding="utf-8")
        overlay = parse_yaml(text, max_chars=MAX_FILE_BYTES).data or {}
    except OSError as exc:
        raise ConfigError([ConfigProblem(str(path), "", f"cannot read: {exc}")]) from exc
    except YamlRefused as exc:
        raise ConfigError([ConfigProblem(str(path), "", str(exc))]) from exc
    if not isinstance(overlay, dict):
        raise ConfigError([ConfigProblem(str(path), "", "the YAML must be a mapping of keys")])
    try:
        return BotConfig.model_validate(merge_layers([dict(data), overlay]))
    except ValidationError as exc:
        problems = [
            ConfigProblem(str(path), ".".join(str(p) for p in error["loc"]), error["msg"])
            for error in exc.errors()
        ]
        raise ConfigError(problems) from exc
