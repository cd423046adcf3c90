"""The Slack adapter. Importing this package loads no Slack SDK: ``build`` does, and only
for a bot with a ``platforms.slack`` section (the ``slack`` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from salon.config import BotConfig, Secrets
from salon.platforms.base import Platform

if TYPE_CHECKING:
    from salon.platforms.slack.events import MonitorStore

__all__ = ["build", "live_check"]


def build(bot: str, config: BotConfig, secrets: Secrets, monitors: MonitorStore) -> list[Platform]:
    """The bot's Slack platform, when its config puts it on Slack."""
    slack = config.platforms.slack
    if slack is None:
        return []
    from salon.platforms.slack.platform import SlackPlatform

    platform = SlackPlatform(
        bot=bot,
        bot_name=config.name,
        config=slack,
        secrets=secrets,
        monitors=monitors,
        authorized_roles=config.authorized_roles,
    )
    return [platform]


async def live_check(config: BotConfig, secrets: Secrets) -> tuple[str, bool]:
    """``salon check --live`` for a bot on Slack: one line, and whether all is well."""
    slack = config.platforms.slack
    if slack is None:
        return "live: slack: not configured", True
    from salon.platforms.slack.scopes import check_tokens

    return await check_tokens(slack, secrets)
