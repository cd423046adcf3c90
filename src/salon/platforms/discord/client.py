"""The discord.py client: gateway events go to the platform's handlers.

``Client`` is one gateway connection; ``ShardedClient`` (discord.py's AutoShardedClient)
runs the shards the config names, each guild's events arriving on its shard. Both connect
to ``gateway_url`` when it is set, for every connection and resume, and send REST calls to
``api_base_url`` (discord.py keeps one API base per process, so it is set for the process:
a bot process runs one Discord client).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
import yarl
from discord import app_commands

from salon.config.models import DiscordMentions

if TYPE_CHECKING:
    from salon.platforms.discord.platform import DiscordPlatform

__all__ = ["AnyClient", "Client", "ShardedClient", "allowed_mentions", "build_client"]

logger = logging.getLogger(__name__)


def _intents() -> discord.Intents:
    """Guilds, guild and DM messages with their content, and reactions; no privileged
    member or presence intents (names and roles come from ``MemberCache``)."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    intents.guild_reactions = True
    intents.dm_reactions = True
    return intents


def allowed_mentions(config: DiscordMentions) -> discord.AllowedMentions:
    """What the bot's messages may notify, as the config says: discord.py sends it with
    every message, edit, webhook post and interaction answer of the client (without it
    Discord notifies every @everyone, @here and role a channel message names)."""
    roles = [discord.Object(id=int(r)) for r in config.roles]
    return discord.AllowedMentions(
        everyone=config.everyone,
        users=config.users,
        roles=roles or False,
        replied_user=config.replied_user,
    )


def point_at(client: discord.Client, api_base_url: str | None, gateway_url: str | None) -> None:
    """Send ``client``'s REST calls to ``api_base_url`` and open its gateway connections at
    ``gateway_url`` (its query, which names the version and encoding, kept)."""
    if api_base_url:
        discord.http.Route.BASE = api_base_url.rstrip("/")
    if not gateway_url:
        return
    gateway = yarl.URL(gateway_url)
    connect = client.http.ws_connect

    async def ws_connect(url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        asked = yarl.URL(url)
        return await connect(str(gateway.with_query(asked.query)), compress=compress)

    client.http.ws_connect = ws_connect  # type: ignore[method-assign]


class _Handlers(discord.Client):
    """The gateway events Salon listens to, shared by both kinds of client."""

    platform: DiscordPlatform
    tree: app_commands.CommandTree[Any]

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


class Client(_Handlers):
    """One gateway connection."""

    def __init__(self, platform: DiscordPlatform) -> None:
        super().__init__(
            intents=_intents(),
            max_messages=None,
            guild_ready_timeout=platform.guild_ready_timeout,
            allowed_mentions=allowed_mentions(platform.config.mentions),
            max_ratelimit_timeout=platform.config.rate_limit_wait_max,
        )
        self.platform = platform
        self.tree = app_commands.CommandTree(self)


class ShardedClient(_Handlers, discord.AutoShardedClient):
    """The shards ``shard_ids`` of ``shard_count``; ready when all of them are."""

    def __init__(self, platform: DiscordPlatform, shard_count: int, shard_ids: list[int]) -> None:
        super().__init__(
            intents=_intents(),
            max_messages=None,
            guild_ready_timeout=platform.guild_ready_timeout,
            allowed_mentions=allowed_mentions(platform.config.mentions),
            max_ratelimit_timeout=platform.config.rate_limit_wait_max,
            shard_count=shard_count,
            shard_ids=shard_ids,
        )
        self.platform = platform
        self.tree = app_commands.CommandTree(self)


AnyClient = _Handlers  # a Client or a ShardedClient


def build_client(platform: DiscordPlatform) -> AnyClient:
    config = platform.config
    client: AnyClient
    if config.shard_count is None:
        client = Client(platform)
    else:
        client = ShardedClient(platform, config.shard_count, config.local_shards())
    point_at(client, config.api_base_url, config.gateway_url)
    return client
