"""Which Discord shards a bot process runs: ``salon run --shards`` and ``shards_per_process``."""

from __future__ import annotations

from pydantic import ValidationError

from salon.config.models import BotConfig, DiscordConfig
from salon.errors import ConfigError, ConfigProblem

__all__ = ["parse_shards", "shard_groups", "with_shards"]

_WHERE = "(command line)"


def _problem(reason: str) -> ConfigError:
    return ConfigError([ConfigProblem(_WHERE, "--shards", reason)])


def parse_shards(text: str) -> list[int]:
    """``0-3`` or ``4,5`` or ``0-1,6``: shard ids in the order written, each once."""
    found: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            low, high = int(first), int(last or first)
            if high < low:
                raise _problem(f"{part.strip()!r} runs backwards")
            found += [i for i in range(low, high + 1) if i not in found]
    except ValueError:
        raise _problem(f"{text!r} is not a list of shard ids such as 0-3 or 4,5") from None
    return found


def with_shards(config: BotConfig, text: str) -> BotConfig:
    """``config`` with its Discord ``shard_ids`` replaced by ``text``'s, checked against its
    ``shard_count``."""
    discord = config.platforms.discord
    if discord is None or discord.shard_count is None:
        raise _problem("needs a Discord platform with shard_count set")
    data = discord.model_dump() | {"shard_ids": parse_shards(text)}
    try:
        checked = DiscordConfig.model_validate(data)
    except ValidationError as exc:
        reasons = [e["msg"].removeprefix("Value error, ") for e in exc.errors()]
        raise _problem("; ".join(reasons)) from None
    platforms = config.platforms.model_copy(update={"discord": checked})
    return config.model_copy(update={"platforms": platforms})


def shard_groups(config: BotConfig, override: str | None = None) -> list[list[int]]:
    """The shard ids of each process ``salon run`` starts for the bot: one group per
    ``shards_per_process`` of this machine's shards (``override``, when given, names
    them); ``[[]]`` (one process, as configured) for a bot that is not sharded."""
    discord = config.platforms.discord
    if discord is None or discord.shard_count is None:
        return [[]]
    if override is not None:
        discord = with_shards(config, override).platforms.discord
        assert discord is not None
    return discord.shard_groups()
