"""Where the chat-log tools read a channel: the store's log for platforms that keep no
history of their own (the terminal, IRC, whose lines Salon logs), the platform itself for
the others (Discord keeps its channels' history; Salon's log holds none of it, and reading
that would tell the model a busy channel is empty).

A platform's history is read newest first and only so far (``PLATFORM_SCAN`` messages):
search and counts there cover what was read, and the counts say so.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol

from salon.errors import ToolError
from salon.model import ChannelRef, ChatLine, Message, Tag

__all__ = [
    "CONVERSATION",
    "LOGGED_PLATFORMS",
    "PLATFORM_SCAN",
    "ChannelHistory",
    "ChannelLog",
    "ChatLogQueries",
    "log_only",
]

LOGGED_PLATFORMS = frozenset({"terminal", "irc"})
"""Platforms whose channels Salon logs in the store (they keep no history of their own)."""
CONVERSATION = ("message", "action")
"""The chat log's kinds of lines that are conversation (the store's CONVERSATION_KINDS)."""
PLATFORM_SCAN = 200
"""Newest messages of a platform's channel that search and counts read."""
_TOP_POSTERS = 5


class ChatLogQueries(Protocol):
    """What the chat-log tools read: the store has these, and so has ``ChannelLog``."""

    async def search_chat(
        self,
        bot: str,
        channel_key: str,
        query: str,
        *,
        user: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
    ) -> list[ChatLine]: ...

    async def recent_chat(
        self,
        bot: str,
        channel_key: str,
        *,
        limit: int = 50,
        since: datetime | None = None,
        kinds: Sequence[str] = CONVERSATION,
    ) -> list[ChatLine]: ...

    async def channel_stats(self, bot: str, channel_key: str) -> dict[str, object]: ...


ChannelHistory = Callable[[ChannelRef, int], Awaitable[Sequence[Message]]]
"""(channel, how many) -> the newest messages of a channel of a platform that keeps its own
history, oldest first; ToolError when that platform is not reachable from here."""


async def log_only(channel: ChannelRef, limit: int) -> Sequence[Message]:
    """For a process without platforms (``salon tools serve``): other channels are refused."""
    raise ToolError(
        f"{channel.key}: this process is not connected to {channel.platform}, "
        f"whose history is read from {channel.platform} itself"
    )


class ChannelLog:
    """``ChatLogQueries`` that reads each channel where its history is kept."""

    def __init__(self, log: ChatLogQueries, history: ChannelHistory = log_only) -> None:
        self._log = log
        self._history = history

    async def search_chat(
        self,
        bot: str,
        channel_key: str,
        query: str,
        *,
        user: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
    ) -> list[ChatLine]:
        """Lines holding every word of ``query`` (case-insensitive), newest first."""
        channel = ChannelRef.from_key(channel_key)
        if channel.platform in LOGGED_PLATFORMS:
            return await self._log.search_chat(
                bot, channel_key, query, user=user, since=since, limit=limit
            )
        terms = [re.compile(rf"(?<!\w){re.escape(t)}(?!\w)", re.I) for t in query.split()]
        if not terms:
            return []
        lines = await self._lines(channel, PLATFORM_SCAN, since)
        found = [
            line
            for line in reversed(lines)
            if all(t.search(line.text) for t in terms)
            and (not user or line.user.casefold() == user.casefold())
        ]
        return found[:limit]

    async def recent_chat(
        self,
        bot: str,
        channel_key: str,
        *,
        limit: int = 50,
        since: datetime | None = None,
        kinds: Sequence[str] = CONVERSATION,
    ) -> list[ChatLine]:
        """The newest lines of these kinds, oldest first. A platform's own history holds
        messages only (joins and parts are logged where Salon keeps the log)."""
        channel = ChannelRef.from_key(channel_key)
        if channel.platform in LOGGED_PLATFORMS:
            return await self._log.recent_chat(
                bot, channel_key, limit=limit, since=since, kinds=kinds
            )
        if not set(kinds) & set(CONVERSATION):
            raise ToolError(f"{channel.platform} keeps messages only, not joins or parts")
        return (await self._lines(channel, limit, since))[-limit:]

    async def channel_stats(self, bot: str, channel_key: str) -> dict[str, object]:
        """Counts per person; on a platform's channel, of the newest ``PLATFORM_SCAN``
        messages at most, and ``counted`` says whether that was the whole channel."""
        channel = ChannelRef.from_key(channel_key)
        if channel.platform in LOGGED_PLATFORMS:
            return await self._log.channel_stats(bot, channel_key)
        messages = await self._read(channel, PLATFORM_SCAN)
        lines = [_line(m) for m in messages if Tag.NOTE not in m.tags]
        posters = Counter(line.user for line in lines)
        ranked = sorted(posters.items(), key=lambda item: (-item[1], item[0]))
        whole = len(messages) < PLATFORM_SCAN
        return {
            "messages": len(lines),
            "participants": len(posters),
            "first": lines[0].time.isoformat() if lines else None,
            "last": lines[-1].time.isoformat() if lines else None,
            "top_posters": dict(ranked[:_TOP_POSTERS]),
            "counted": "the whole channel"
            if whole
            else f"the newest {PLATFORM_SCAN} messages only ({channel.platform} keeps more)",
        }

    async def _lines(
        self, channel: ChannelRef, limit: int, since: datetime | None
    ) -> list[ChatLine]:
        messages = await self._read(channel, limit)
        return [
            _line(m)
            for m in messages
            if Tag.NOTE not in m.tags and (since is None or m.created_at >= since)
        ]

    async def _read(self, channel: ChannelRef, limit: int) -> Sequence[Message]:
        messages = await self._history(channel, limit)
        if not messages:
            # Discord answers a bot without Read Message History with no messages, not a
            # refusal: "none" would be a guess, so it is said as what it is.
            raise ToolError(
                f"{channel.platform} gave no messages of this channel: the bot may lack the "
                "permission to read its history, or the channel is empty"
            )
        return messages


def _line(message: Message) -> ChatLine:
    files = " ".join(f"[{a.label or a.filename}]" for a in message.attachments)
    text = f"{message.text} {files}" if message.text and files else message.text or files
    return ChatLine(message.created_at, message.author.name, text)
