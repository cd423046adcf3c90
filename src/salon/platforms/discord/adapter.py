"""Discord in the registry. discord.py loads only when a bot on Discord is built or
checked: this module imports none of it."""

from __future__ import annotations

from pathlib import Path

from salon.config import BotConfig, DiscordConfig, PlatformsConfig, Secrets
from salon.platforms.adapter import Adapter, BuildContext
from salon.platforms.base import Platform

__all__ = ["ADAPTER"]


def _section(platforms: PlatformsConfig) -> DiscordConfig | None:
    return platforms.discord


def _build(config: DiscordConfig, context: BuildContext) -> Platform:
    from salon.platforms.discord.platform import DiscordPlatform

    return DiscordPlatform(
        bot=context.bot,
        bot_name=context.config.name,
        config=config,
        secrets=context.secrets,
        monitors=context.monitors,
        schedules=context.commands.schedules,
        generate=context.commands.generate,
        authorized_roles=context.config.authorized_roles,
        activity=context.commands.activity,
        memory=context.memory,
    )


async def _live_check(
    config: BotConfig, secrets: Secrets, data_dir: Path
) -> tuple[list[str], bool]:
    from salon.platforms.discord.check import live_check

    return await live_check(config, secrets)


def _target_problem(config: DiscordConfig, channel_id: str) -> str | None:
    """A Discord channel is named by its id (a name is not unique)."""
    if channel_id.isdigit():
        return None
    target = f"discord:{channel_id}"
    return f"{target!r} is not a Discord channel: use the channel's id, discord:123…"


ADAPTER = Adapter(
    name="discord",
    section=_section,
    build=_build,
    live_check=_live_check,
    target_problem=_target_problem,
)
