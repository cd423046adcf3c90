"""IRC in the registry. pydle loads only when a bot on IRC is built: this module imports
none of it."""

from __future__ import annotations

from salon.config import IrcConfig, PlatformsConfig
from salon.platforms.adapter import Adapter, BuildContext
from salon.platforms.base import Platform

__all__ = ["ADAPTER"]


def _section(platforms: PlatformsConfig) -> IrcConfig | None:
    return platforms.irc


def _build(config: IrcConfig, context: BuildContext) -> Platform:
    from salon.platforms.irc.platform import IrcPlatform

    return IrcPlatform(
        bot=context.bot,
        bot_name=context.config.name,
        config=config,
        secrets=context.secrets,
        chat_log=context.chat_log,
        memory=context.memory,
    )


def _target_problem(config: IrcConfig, channel_id: str) -> str | None:
    """A channel (not a nick) the bot joins: it posts nowhere else."""
    if not channel_id.startswith(("#", "&")):
        return None
    if channel_id.lower() in {c.lower() for c in config.channels}:
        return None
    return f"this bot is not in {channel_id} (it joins: {', '.join(config.channels)})"


ADAPTER = Adapter(name="irc", section=_section, build=_build, target_problem=_target_problem)
