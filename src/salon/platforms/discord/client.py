"""The discord.py client: gateway events go to the platform's handlers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

if TYPE_CHECKING:
    from salon.platforms.discord.platform import DiscordPlatform

__all__ = ["Client"]

logger = logging.getLogger(__name__)


class Client(discord.Client):
    """Guilds, guild and DM messages with their content, and reactions; no privileged
    member or presence intents (names and roles come from ``MemberCache``)."""

    def __init__(self, platform: DiscordPlatform) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = True
        intents.guild_reactions = True
        intents.dm_reactions = True
        super().__init__(
            intents=intents, max_messages=None, guild_ready_timeout=platform.guild_ready_timeout
        )
        self.platform = platform
        self.tree: app_commands.CommandTree[Client] = app_commands.CommandTree(self)

    async def setup_hook(self) -> None:
        self.platform._register_commands(self.tree)

    async def on_ready(self) -> None:
        await self.platform._on_ready(self)

    async def on_message(self, message: discord.Message) -> None:
        await self.platform._on_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        self.platform._on_edit(payload.message)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        self.platform._on_delete(str(payload.channel_id), [str(payload.message_id)])

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        self.platform._on_delete(str(payload.channel_id), [str(i) for i in payload.message_ids])

    async def on_guild_channel_pins_update(self, channel: Any, last_pin: Any) -> None:
        self.platform._on_pins_changed(str(channel.id))

    async def on_private_channel_pins_update(self, channel: Any, last_pin: Any) -> None:
        self.platform._on_pins_changed(str(channel.id))

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        self.platform._on_reaction(payload, added=True)

    async def on_raw_reaction_remove(self, payload: discord.RawReactionActionEvent) -> None:
        self.platform._on_reaction(payload, added=False)

    async def on_disconnect(self) -> None:
        self.platform._on_disconnect()

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        logger.exception("Discord: the %s handler failed", event_method)
