"""The discord.py client: gateway events go to ``Handlers`` (the platform's ``Events``).

``Client`` is one gateway connection; ``ShardedClient`` (discord.py's AutoShardedClient)
runs the shards the config names, each guild's events arriving on its shard. Both connect
to ``gateway_url`` when it is set, for every connection and resume, and send REST calls to
``api_base_url`` (discord.py keeps one API base per process, so it is set for the process:
a bot process runs one Discord client).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import aiohttp
import discord
import yarl
from discord import app_commands

from salon.config import DiscordConfig
from salon.config.platforms import DiscordMentions

__all__ = ["AnyClient", "Client", "Handlers", "ShardedClient", "allowed_mentions", "build_client"]

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


class Handlers(Protocol):
    """What a client hands the gateway's events to, as Salon's values where it can (ids
    as strings); the client itself holds no state of the platform's."""

    def register_commands(self, tree: app_commands.CommandTree[Any]) -> None:
        """Put the slash commands on ``tree``, before the client connects."""

    async def on_ready(self, client: AnyClient, *, by_shard: bool = False) -> None:
        """Connected (again): every guild of the client's shards is there. ``by_shard``:
        a sharded client, whose shards' new sessions come by ``on_shard_ready``."""

    async def on_shard_ready(self, shard_id: int) -> None:
        """One shard of a sharded client has a new session."""

    def on_shard_disconnect(self, shard_id: int) -> None:
        """One shard's connection dropped (``on_disconnect`` is told too)."""

    def on_shard_resumed(self, shard_id: int) -> None:
        """One shard's session resumed (``on_resumed`` is told too)."""

    async def on_message(self, message: discord.Message) -> None: ...

    def on_edit(self, message: discord.Message) -> None: ...

    def on_delete(self, channel_id: str, message_ids: list[str]) -> None: ...

    def on_pins_changed(self, channel_id: str) -> None: ...

    def on_reaction(self, payload: discord.RawReactionActionEvent, *, added: bool) -> None: ...

    def on_resumed(self) -> None:
        """The session resumed: Discord replayed what was missed."""

    def on_disconnect(self) -> None:
        """The connection dropped: events may be missed until the next ``on_ready``."""


class _Listening(discord.Client):
    """The gateway events Salon listens to, shared by both kinds of client."""

    handlers: Handlers
    tree: app_commands.CommandTree[Any]

    async def setup_hook(self) -> None:
        self.handlers.register_commands(self.tree)

    async def on_ready(self) -> None:
        await self.handlers.on_ready(self)

    async def on_message(self, message: discord.Message) -> None:
        await self.handlers.on_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        self.handlers.on_edit(payload.message)

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        self.handlers.on_delete(str(payload.channel_id), [str(payload.message_id)])

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        self.handlers.on_delete(str(payload.channel_id), [str(i) for i in payload.message_ids])

    async def on_guild_channel_pins_update(self, channel: Any, last_pin: Any) -> None:
        self.handlers.on_pins_changed(str(channel.id))

    async def on_private_channel_pins_update(self, channel: Any, last_pin: Any) -> None:
        self.handlers.on_pins_changed(str(channel.id))

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        self.handlers.on_reaction(payload, added=True)

    async def on_raw_reaction_remove(self, payload: discord.RawReactionActionEvent) -> None:
        self.handlers.on_reaction(payload, added=False)

    async def on_disconnect(self) -> None:
        self.handlers.on_disconnect()

    async def on_resumed(self) -> None:
        self.handlers.on_resumed()

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        logger.exception("Discord: the %s handler failed", event_method)


class Client(_Listening):
    """One gateway connection."""

    def __init__(
        self, handlers: Handlers, config: DiscordConfig, *, guild_ready_timeout: float
    ) -> None:
        super().__init__(
            intents=_intents(),
            max_messages=None,
            guild_ready_timeout=guild_ready_timeout,
            allowed_mentions=allowed_mentions(config.mentions),
            max_ratelimit_timeout=config.rate_limit_wait_max,
        )
        self.handlers = handlers
        self.tree = app_commands.CommandTree(self)


class ShardedClient(_Listening, discord.AutoShardedClient):
    """The shards ``shard_ids`` of ``shard_count``; ready when all of them are."""

    def __init__(
        self,
        handlers: Handlers,
        config: DiscordConfig,
        shard_count: int,
        shard_ids: list[int],
        *,
        guild_ready_timeout: float,
    ) -> None:
        super().__init__(
            intents=_intents(),
            max_messages=None,
            guild_ready_timeout=guild_ready_timeout,
            allowed_mentions=allowed_mentions(config.mentions),
            max_ratelimit_timeout=config.rate_limit_wait_max,
            shard_count=shard_count,
            shard_ids=shard_ids,
        )
        self.handlers = handlers
        self.tree = app_commands.CommandTree(self)

    async def on_ready(self) -> None:
        await self.handlers.on_ready(self, by_shard=True)

    async def on_shard_ready(self, shard_id: int) -> None:
        # After the start, a shard whose session Discord ended gets a new one alone:
        # discord.py then tells of that shard, not of the client (no second on_ready).
        await self.handlers.on_shard_ready(shard_id)

    async def on_shard_disconnect(self, shard_id: int) -> None:
        self.handlers.on_shard_disconnect(shard_id)

    async def on_shard_resumed(self, shard_id: int) -> None:
        self.handlers.on_shard_resumed(shard_id)


AnyClient = _Listening  # a Client or a ShardedClient


def build_client(
    handlers: Handlers, config: DiscordConfig, *, guild_ready_timeout: float
) -> AnyClient:
    """A client for ``config`` (sharded when it names shards) handing events to
    ``handlers``; ``guild_ready_timeout``: how long it waits for more guilds after READY."""
    client: AnyClient
    if config.shard_count is None:
        client = Client(handlers, config, guild_ready_timeout=guild_ready_timeout)
    else:
        shards = config.local_shards()
        client = ShardedClient(
            handlers, config, config.shard_count, shards, guild_ready_timeout=guild_ready_timeout
        )
    point_at(client, config.api_base_url, config.gateway_url)
    return client
