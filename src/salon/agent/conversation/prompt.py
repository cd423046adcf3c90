"""Template variables in a bot's system prompt: ``{{channel}}``, ``{{topic}}``,
``{{server}}`` (or ``{{guild}}``), ``{{time}}`` and ``{{users}}``, filled for each answer
(Terrarium's system prompt with the channel's name, topic and users). Other braces are
left as they are, so a prompt with JSON in it means what it did."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import TypeVar
from zoneinfo import ZoneInfo

from salon.errors import PlatformError
from salon.model import ChannelRef
from salon.platforms.base import Place, Platform

__all__ = ["fill_prompt"]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

_VARIABLE = re.compile(r"\{\{\s*(channel|topic|server|guild|time|users)\s*\}\}")
_USERS_SHOWN = 50  # names at most: a big server's channel lists thousands


async def fill_prompt(system: str, platform: Platform, channel: ChannelRef, timezone: str) -> str:
    """``system`` with its variables filled; the platform is asked only for what it uses."""
    wanted = {m.group(1) for m in _VARIABLE.finditer(system)}
    if not wanted:
        return system
    values: dict[str, str] = {"channel": channel.name or channel.id}
    if wanted & {"topic", "server", "guild"}:
        place = await _or_none(platform.place(channel), channel) or Place()
        values |= {"topic": place.topic, "server": place.server, "guild": place.server}
    if "time" in wanted:
        now = datetime.now(UTC).astimezone(ZoneInfo(timezone))
        values["time"] = f"{now:%Y-%m-%d %H:%M %Z}"
    if "users" in wanted:
        names = list(await _or_none(platform.current_users(channel), channel) or ())
        more = len(names) - _USERS_SHOWN
        values["users"] = ", ".join(names[:_USERS_SHOWN]) + (
            f" and {more} more" if more > 0 else ""
        )
    return _VARIABLE.sub(lambda m: values.get(m.group(1), ""), system)


async def _or_none(asked: Awaitable[_T], channel: ChannelRef) -> _T | None:
    """What the platform says; a refusal leaves the variable empty, not the answer failed."""
    try:
        return await asked
    except PlatformError as exc:
        logger.warning("prompt variables in %s: %s", channel.key, exc)
        return None
