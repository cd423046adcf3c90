"""A complete in-memory platform: what tests, benchmarks and embedders drive the agent with."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from salon.errors import PlatformError
from salon.model import ChannelRef, Message, MessageEvent, Participant
from salon.platforms.base import EventSink

__all__ = ["MemoryPlatform"]


class MemoryPlatform:
    """Channels are lists; people ``post``, the bot ``send``s; everything is observable."""

    def __init__(
        self, *, name: str = "memory", bot_name: str = "Bot", max_message_chars: int = 2000
    ) -> None:
        self.name = name
        self.max_message_chars = max_message_chars
        self._me = Participant("bot", bot_name, is_bot=True)
        self._channels: dict[str, list[Message]] = {}
        self._ids = itertools.count(1)
        self._sink: EventSink | None = None
        self._sent_changed = asyncio.Condition()
        self.sent: list[Message] = []
        self.typing_log: list[tuple[str, str]] = []
        self.fail_sends: list[PlatformError] = []
        self.history_requests = 0

    @property
    def self_participant(self) -> Participant:
        return self._me

    def channel(self, channel_id: str = "general", *, is_direct: bool = False) -> ChannelRef:
        return ChannelRef(self.name, channel_id, name=channel_id, is_direct=is_direct)

    async def start(self, sink: EventSink) -> None:
        self._sink = sink

    async def stop(self) -> None:
        self._sink = None

    def add(
        self,
        channel: ChannelRef,
        author: Participant,
        text: str,
        *,
        mentions: Sequence[Participant] = (),
        reply_to: Message | None = None,
    ) -> Message:
        """Put a message in the channel without telling the bot (history setup)."""
        message = Message(
            id=str(next(self._ids)),
            channel=channel,
            author=author,
            text=text,
            created_at=datetime.now(UTC),
            mentions=tuple(mentions),
            reply_to_id=reply_to.id if reply_to else None,
            reply_to_author_id=reply_to.author.id if reply_to else None,
        )
        self._channels.setdefault(channel.key, []).append(message)
        return message

    async def post(
        self,
        channel: ChannelRef,
        author: Participant,
        text: str,
        *,
        mentions: Sequence[Participant] = (),
        reply_to: Message | None = None,
    ) -> Message:
        """A participant writes in the channel; the bot is told."""
        message = self.add(channel, author, text, mentions=mentions, reply_to=reply_to)
        if self._sink is not None:
            await self._sink(MessageEvent(message))
        return message

    async def send(self, channel: ChannelRef, text: str) -> Message:
        if self.fail_sends:
            raise self.fail_sends.pop(0)
        if len(text) > self.max_message_chars:
            raise PlatformError(f"message of {len(text)} chars over {self.max_message_chars}")
        message = self.add(channel, self._me, text)
        async with self._sent_changed:
            self.sent.append(message)
            self._sent_changed.notify_all()
        return message

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        self.history_requests += 1
        return self._channels.get(channel.key, [])[-limit:]

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        self.typing_log.append(("start", channel.key))
        try:
            yield
        finally:
            self.typing_log.append(("stop", channel.key))

    async def wait_sent(self, count: int, within: float = 5.0) -> list[Message]:
        """Wait until the bot has sent at least ``count`` messages in all; return them."""
        async with asyncio.timeout(within), self._sent_changed:
            await self._sent_changed.wait_for(lambda: len(self.sent) >= count)
        return list(self.sent)

    def messages(self, channel: ChannelRef) -> list[Message]:
        return list(self._channels.get(channel.key, []))
