"""The Discord adapter. Importing this package loads no discord.py: ``ADAPTER`` builds the
platform for a bot on Discord, and the platform's names load it when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from salon.platforms.discord.adapter import ADAPTER

if TYPE_CHECKING:
    from salon.platforms.discord.platform import PERMISSIONS, DiscordPlatform, invite_url

__all__ = ["ADAPTER", "PERMISSIONS", "DiscordPlatform", "invite_url"]

_PLATFORM_NAMES = frozenset({"PERMISSIONS", "DiscordPlatform", "invite_url"})


def __getattr__(name: str) -> Any:
    if name in _PLATFORM_NAMES:
        from salon.platforms.discord import platform

        return getattr(platform, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
