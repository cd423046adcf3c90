"""What the gateway tells the platform (``client.Handlers``): new messages go to the agent;
edits, deletions, reactions and pin changes keep the caches exact; a dropped connection
drops them, since events may be missed until it is back.

The first ``on_ready`` of the process also says who the bot is (and its invite link),
reads whether the application has the Message Content intent and registers the slash
commands with Discord. A later one is a new session (the last was
invalidated, or a new client connected): Discord replays nothing of the gap, so the agent
is told to read back what it missed (``gap``). With shards, a shard whose session ended
gets a new one alone (``on_shard_ready``; the client is not ready again), and that is the
read-back's cue, from when that shard dropped (another shard may have resumed meanwhile).
A resumed session needs none: Discord replays the missed events itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

from salon.model import Event, MessageEvent
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.client import AnyClient
from salon.platforms.discord.commands import Commands
from salon.platforms.discord.convert import is_conversation
from salon.platforms.discord.members import MemberCache
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import has_content_intent, invite_url
from salon.platforms.discord.reading import Reader

__all__ = ["Events"]

logger = logging.getLogger(__name__)


class Events:
    def __init__(
        self,
        *,
        cache: HistoryCache,
        members: MemberCache,
        people: People,
        channels: Channels,
        reader: Reader,
        commands: Commands,
        deliver: Callable[[Event], Awaitable[None]],
        ready: asyncio.Event,
        gap: Callable[[float | None], Awaitable[None]],
    ) -> None:
        """``deliver``: where new messages go (the agent); ``ready``: set once connected;
        ``gap``: told of a new session after the first, with when the last one dropped."""
        self._cache = cache
        self._members = members
        self._people = people
        self._channels = channels
        self._reader = reader
        self._commands = commands
        self._deliver = deliver
        self._ready = ready
        self._introduced = False  # application info read and commands registered
        self._gap = gap
        self._dropped_at: float | None = None  # when the connection last dropped
        self._shards_dropped: dict[int, float] = {}  # sharded: when each shard dropped
        self.content_intent = False  # the application has the Message Content intent

    def register_commands(self, tree: app_commands.CommandTree[Any]) -> None:
        self._commands.register(tree)

    async def on_ready(self, client: AnyClient, *, by_shard: bool = False) -> None:
        self._cache.forget()
        if not self._introduced:  # a reconnect needs neither again
            await self._introduce(client)
            self._introduced = True
            self._ready.set()
            return
        self._ready.set()
        if not by_shard:  # a sharded client's shards each said so (on_shard_ready)
            await self._read_back()

    async def on_shard_ready(self, shard_id: int) -> None:
        since = self._shards_dropped.pop(shard_id, None)
        if self._introduced:  # before, the start: on_ready follows
            self._cache.forget()
            await self._read_back(since)

    async def _read_back(self, since: float | None = None) -> None:
        """The gap since ``since`` (unsharded: since the connection dropped)."""
        if since is None:
            since, self._dropped_at = self._dropped_at, None
        logger.info("Discord: a new session; reading back what was missed")
        await self._gap(since)

    async def _introduce(self, client: AnyClient) -> None:
        """Once per process: say who the bot is, read its intent, register commands.
        discord.py read the application at login; it is asked again only if it did not."""
        app = client.application or await client.application_info()
        logger.info("Discord: logged in as %s; invite: %s", client.user, invite_url(app.id))
        # Granted, or Discord would have closed the connection (4014); read as reported.
        self.content_intent = has_content_intent(app.flags.value)
        try:
            await client.tree.sync()
        except discord.HTTPException as exc:
            logger.warning("Discord: could not register slash commands: %s", exc)

    async def on_message(self, message: discord.Message) -> None:
        if not is_conversation(message):
            return  # a pin notice, a join, a boost: nothing anyone said
        self._channels.remember(message.channel)
        converted = self._people.convert(message)
        self._cache.added(converted)
        await self._deliver(MessageEvent(converted))

    def on_edit(self, message: discord.Message) -> None:
        channel_id = str(message.channel.id)
        if is_conversation(message):
            self._cache.edited(self._people.convert(message))
        self._reader.changed(channel_id, [str(message.id)], pinned=message.pinned)

    def on_delete(self, channel_id: str, message_ids: list[str]) -> None:
        self._cache.deleted(channel_id, message_ids)
        self._reader.changed(channel_id, message_ids)

    def on_pins_changed(self, channel_id: str) -> None:
        self._reader.pins_changed(channel_id)

    def on_reaction(self, payload: discord.RawReactionActionEvent, *, added: bool) -> None:
        if payload.member is not None:
            self._members.remember(payload.member)
        channel_id, message_id = str(payload.channel_id), str(payload.message_id)
        self._cache.reacted(channel_id, message_id, str(payload.emoji), added=added)

    def on_resumed(self) -> None:
        self._dropped_at = None

    def on_shard_disconnect(self, shard_id: int) -> None:
        self._shards_dropped.setdefault(shard_id, time.time())

    def on_shard_resumed(self, shard_id: int) -> None:
        self._shards_dropped.pop(shard_id, None)  # Discord replayed that shard's gap

    def on_disconnect(self) -> None:
        self._cache.forget()  # events may be missed until we are back
        self._reader.forget()
        if self._dropped_at is None:
            self._dropped_at = time.time()
