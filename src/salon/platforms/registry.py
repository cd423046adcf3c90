"""The platforms Salon knows, one ``Adapter`` each (``salon.platforms.adapter``). The app
builds a bot's platforms from this list and checks schedules' targets by it; ``salon check
--live`` runs each adapter's live check. A new platform is one package and one line here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

from salon.config import BotConfig, Secrets
from salon.platforms import discord, irc, matrix, slack, terminal
from salon.platforms.adapter import Adapter, BuildContext
from salon.platforms.base import Platform

__all__ = [
    "ADAPTERS",
    "adapter_named",
    "live_checks",
    "names_on",
    "operated",
    "target_problem",
    "unattended",
]

ADAPTERS: tuple[Adapter[Any], ...] = (
    discord.ADAPTER,
    irc.ADAPTER,
    matrix.ADAPTER,
    slack.ADAPTER,
    terminal.ADAPTER,
)


def adapter_named(name: str) -> Adapter[Any] | None:
    return next((a for a in ADAPTERS if a.name == name), None)


def names_on(config: BotConfig) -> list[str]:
    """The platforms the bot's config puts it on (the terminal always)."""
    return [a.name for a in ADAPTERS if a.configured(config)]


def operated(channel_key: str) -> bool:
    """Whether who writes in the channel is the bot's operator (the terminal's user)."""
    name, colon, _ = channel_key.partition(":")
    found = adapter_named(name)
    return bool(colon) and found is not None and found.operated


def unattended(context: BuildContext) -> list[Platform]:
    """The bot's platforms that run without a terminal (``salon run``), in registry order."""
    built = (a.platform(context) for a in ADAPTERS if a.unattended)
    return [platform for platform in built if platform is not None]


def target_problem(config: BotConfig, on: Collection[str], target: str, source: str) -> str | None:
    """Why a schedule may not post in ``target`` (``platform:channel``) for a bot ``on``
    those platforms, or None; ``source`` is the channel it is set in, as an example."""
    name, colon, channel_id = target.partition(":")
    if not colon or not channel_id:
        example = source or "irc:#salon"
        return f"{target!r} is not a channel: write platform:channel, e.g. {example}"
    if name not in on:
        return f"this bot is not on {name!r} (it is on: {', '.join(sorted(on))})"
    found = adapter_named(name)
    return None if found is None else found.check_target(config, channel_id)


async def live_checks(
    config: BotConfig, secrets: Secrets, data_dir: Path
) -> AsyncIterator[tuple[list[str], bool]]:
    """The live check of each platform the bot is on, as each ends: the lines to print,
    and whether all is well."""
    for adapter in ADAPTERS:
        if adapter.live_check is not None and adapter.configured(config):
            yield await adapter.live_check(config, secrets, data_dir)
