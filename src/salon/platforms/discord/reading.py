"""Reading Discord: a channel's history, a stretch up to a linked message, pins and reply
chains, with the caches that spare a fetch.

The history cache (``HistoryCache``) is kept exact by the gateway's events; pins and
``.history`` stretches are kept until an event says they changed (``changed``,
``pins_changed``) and all dropped when the connection drops (``forget``). A channel whose
events go to another shard's process is read but not kept: nothing would drop a stale copy.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime

import discord

from salon.config import DiscordConfig
from salon.model import ChannelRef, Message
from salon.platforms.discord.attachments import AttachmentLoader
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.convert import is_conversation, parse_message_link
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import READ_HISTORY
from salon.platforms.discord.refusals import translated, where

__all__ = ["Reader"]

_FETCH_MARGIN = 50  # extra messages fetched so deletions do not force a refetch
logger = logging.getLogger(__name__)

_SEARCH_PAGE = 25  # Discord's most results per search request
_NOT_INDEXED = 110000  # the code of a 202 from a guild search before the guild is indexed
_RANGE_CACHE = 32  # .history stretches kept (dropped on any edit or deletion in the channel)


class Reader:
    def __init__(
        self,
        *,
        config: DiscordConfig,
        cache: HistoryCache,
        channels: Channels,
        people: People,
        attachments: AttachmentLoader,
    ) -> None:
        self._config = config
        self._cache = cache
        self._channels = channels
        self._people = people
        self._attachments = attachments
        self._pins: OrderedDict[str, list[Message]] = OrderedDict()  # oldest first
        self._ranges: OrderedDict[tuple[str, str, int], list[Message]] = OrderedDict()

    # -- what the gateway says changed -------------------------------------------------

    def changed(self, channel_id: str, ids: list[str], *, pinned: bool = False) -> None:
        """An edit or deletion: ``.history`` stretches of the channel are stale, and its
        pins when the message is (or was) one of them."""
        pins = self._pins.get(channel_id)
        if pinned or (pins is not None and any(m.id in ids for m in pins)):
            self._pins.pop(channel_id, None)
        for key in [k for k in self._ranges if k[0] == channel_id]:
            del self._ranges[key]

    def pins_changed(self, channel_id: str) -> None:
        self._pins.pop(channel_id, None)

    def forget(self) -> None:
        """The connection dropped: events may be missed until it is back."""
        self._pins.clear()
        self._ranges.clear()

    # -- reading -----------------------------------------------------------------------

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._with_files(await self._history(channel, limit))

    async def _with_files(self, messages: Sequence[Message]) -> list[Message]:
        loaded = await self._attachments.load(messages)
        for before, after in zip(messages, loaded, strict=True):
            if after is not before:
                self._cache.edited(after)  # downloaded once, kept with the cached message
        return loaded

    async def _history(self, channel: ChannelRef, limit: int) -> Sequence[Message]:
        cached = self._cache.get(channel.id, limit)
        if cached is not None:
            return cached
        target = await self._channels.get(channel)
        depth = limit + _FETCH_MARGIN
        short = self._cache.short(channel.id)
        if short is not None:  # deletions used up the margin: fetch only what is missing
            oldest, known = short
            older = await self._fetch(target, depth - known, before=int(oldest))
            self._cache.extend_older(channel.id, older, depth)
            return self._cache.get(channel.id, limit) or []
        fetched = await self._fetch(target, depth)
        opens_with_history = bool(fetched) and fetched[0].text.startswith(".history")
        if isinstance(target, discord.Thread) and len(fetched) < depth and not opens_with_history:
            fetched = [*await self._before_thread(target, depth - len(fetched)), *fetched]
        if self._channels.hears(target):
            self._cache.fill(channel.id, fetched, depth)
        return fetched[-limit:]

    async def after(self, channel: ChannelRef, after: str, *, limit: int) -> list[Message]:
        """What was said in ``channel`` after the message ``after``, the newest ``limit``
        of it, oldest first (a read-back after a gap)."""
        target = await self._channels.get(channel)
        with translated(f"read back {where(target)}", needs=READ_HISTORY):
            raw = [m async for m in target.history(limit=limit)]
        newer = [m for m in raw if m.id > int(after) and is_conversation(m)]
        if len(raw) == limit and raw[-1].id > int(after):
            logger.warning(
                "Discord: more than %d messages in %s since the gap; the newest read back",
                limit,
                channel.key,
            )
        return (await self._people.converted(newer))[::-1]

    async def mentions_after(self, since: float, *, limit: int) -> list[Message]:
        """Messages that mention the bot in its guilds since ``since`` (epoch seconds),
        oldest first, by Discord's guild search (one request per guild, at most 25 each)."""
        client = self._channels.client
        me = client.user
        if me is None:
            return []
        after = discord.utils.time_snowflake(datetime.fromtimestamp(since, UTC))
        found: list[discord.Message] = []
        for guild in client.guilds:
            found += await self._search(client, guild, me.id, after, min(limit, _SEARCH_PAGE))
        return await self._people.converted(sorted(found, key=lambda m: m.id))

    async def _search(
        self, client: discord.Client, guild: discord.Guild, me: int, after: int, limit: int
    ) -> list[discord.Message]:
        route = discord.http.Route("GET", "/guilds/{guild_id}/messages/search", guild_id=guild.id)
        query = {"mentions": str(me), "min_id": str(after), "sort_order": "asc", "limit": limit}
        with translated(f"search {guild.name} for mentions", needs=READ_HISTORY):
            data = await client.http.request(route, params=query)
        if data.get("code") == _NOT_INDEXED:  # a 202: nothing to find until it is indexed
            logger.info("Discord: %s is not indexed for search yet; skipped", guild.name)
            return []
        messages = []
        for hit in data.get("messages", []):
            for payload in hit[:1]:
                channel = client.get_channel(int(payload["channel_id"]))
                if isinstance(channel, discord.abc.Messageable):
                    state = client._connection
                    messages.append(discord.Message(state=state, channel=channel, data=payload))
        return messages

    async def _fetch(
        self, target: discord.abc.Messageable, limit: int, *, before: int | None = None
    ) -> list[Message]:
        """Up to ``limit`` messages (before the id ``before``), oldest first."""
        until = discord.Object(id=before) if before is not None else None
        with translated(f"read the history of {where(target)}", needs=READ_HISTORY):
            raw = [m async for m in target.history(limit=limit, before=until)]
        return (await self._people.converted(raw))[::-1]

    async def _before_thread(self, thread: discord.Thread, limit: int) -> list[Message]:
        """The parent channel up to and including the message the thread branched from."""
        parent = thread.parent
        if not isinstance(parent, discord.TextChannel):
            return []  # a forum post has no messages before it
        # A thread's id is its starter message's: the parent up to and including it.
        return await self._fetch(parent, limit, before=thread.id + 1)

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        parsed = parse_message_link(link)
        if parsed is None:
            return None
        channel_id, message_id = parsed
        cached = self._cache.get(channel_id, 1, everything=True) or []
        for index, message in enumerate(cached):
            if message.id == message_id and index + 1 >= limit:
                return await self._with_files(cached[index + 1 - limit : index + 1])
        key = (channel_id, message_id, limit)
        if key not in self._ranges:
            target = await self._channels.get(ChannelRef("discord", channel_id))
            found = await self._fetch_until(target, message_id, limit)
            if not self._channels.hears(
                target
            ):  # no edit or deletion of it would drop a stale copy
                return await self._with_files(found)
            self._ranges[key] = found
            while len(self._ranges) > _RANGE_CACHE:
                self._ranges.popitem(last=False)
        self._ranges.move_to_end(key)
        return await self._with_files(self._ranges[key])

    async def _fetch_until(
        self, target: discord.abc.Messageable, message_id: str, limit: int
    ) -> list[Message]:
        with translated(f"read message {message_id} in {where(target)}", needs=READ_HISTORY):
            last = await target.fetch_message(int(message_id))
            before = discord.Object(id=int(message_id))
            older = [m async for m in target.history(limit=limit - 1, before=before)]
        return await self._people.converted([*reversed(older), last])

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        own = await self._pins_of(channel.id)
        if channel.parent_id is None:
            return own
        return [*await self._pins_of(channel.parent_id), *own]

    async def _pins_of(self, channel_id: str) -> list[Message]:
        """A channel's pins, oldest first; kept until a pin, or an edit or deletion of a
        pinned message. An unreadable list is not kept: the next activation asks again."""
        if channel_id not in self._pins:
            target = await self._channels.get(ChannelRef("discord", channel_id))
            with translated(f"read the pins of {where(target)}", needs=READ_HISTORY):
                raw = [m async for m in target.pins(limit=None)]
            found = sorted(await self._people.converted(raw), key=lambda m: int(m.id))
            if not self._channels.hears(target):
                return found
            self._pins[channel_id] = found
            while len(self._pins) > self._config.history_cache_channels:
                self._pins.popitem(last=False)
        return self._pins[channel_id]

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        """Walk replies back, at most ``reply_chain_max_depth``; the cache first, then REST.
        Only the ``reply_chain_image_max_depth`` nearest messages are scanned for images."""
        chain = await self._chain(message)  # the nearest first
        depth = self._config.reply_chain_image_max_depth
        scanned = await self._with_files(chain[:depth][::-1])  # downloads kept in the cache
        beyond = await self._attachments.load(chain[depth:][::-1], images=False)
        return [*beyond, *scanned]

    async def _chain(self, message: Message) -> list[Message]:
        target = await self._channels.get(message.channel)
        known = {m.id: m for m in self._cache.get(message.channel.id, 1, everything=True) or ()}
        chain: list[Message] = []
        seen = {message.id}
        current = message
        while current.reply_to_id and len(chain) < self._config.reply_chain_max_depth:
            if current.reply_to_id in seen:
                break  # a cycle: stop
            found = known.get(current.reply_to_id) or await self._replied(
                target, current.reply_to_id
            )
            if found is None:
                break  # deleted or out of reach: the chain ends here
            seen.add(found.id)
            chain.append(found)
            current = found
        return chain

    async def _replied(self, target: discord.abc.Messageable, message_id: str) -> Message | None:
        with translated(f"read message {message_id} in {where(target)}", needs=READ_HISTORY):
            try:
                fetched = await target.fetch_message(int(message_id))
            except discord.NotFound:
                return None
        converted = await self._people.converted([fetched])
        return converted[0] if converted else None
