"""The Discord adapter."""

from salon.platforms.discord.platform import PERMISSIONS, DiscordPlatform, invite_url

__all__ = ["PERMISSIONS", "DiscordPlatform", "invite_url"]
