"""Slack in the registry. The Slack SDK loads only when a bot on Slack is built or checked
(the ``slack`` extra): this module imports none of it."""

from __future__ import annotations

from pathlib import Path

from salon.config import BotConfig, PlatformsConfig, Secrets
from salon.config.platforms import SlackConfig
from salon.platforms.adapter import Adapter, BuildContext
from salon.platforms.base import Platform

__all__ = ["ADAPTER", "live_check"]


def _section(platforms: PlatformsConfig) -> SlackConfig | None:
    return platforms.slack


def _build(config: SlackConfig, context: BuildContext) -> Platform:
    from salon.platforms.slack.platform import SlackPlatform

    return SlackPlatform(
        bot=context.bot,
        bot_name=context.config.name,
        config=config,
        secrets=context.secrets,
        monitors=context.monitors,
        authorized_roles=context.config.authorized_roles,
    )


async def live_check(config: BotConfig, secrets: Secrets) -> tuple[str, bool]:
    """``salon check --live`` for a bot on Slack: one line, and whether all is well."""
    slack = config.platforms.slack
    if slack is None:
        return "live: slack: not configured", True
    from salon.platforms.slack.scopes import check_tokens

    return await check_tokens(slack, secrets)


async def _live_lines(
    config: BotConfig, secrets: Secrets, data_dir: Path
) -> tuple[list[str], bool]:
    line, ok = await live_check(config, secrets)
    return [line], ok


ADAPTER = Adapter(name="slack", section=_section, build=_build, live_check=_live_lines)
