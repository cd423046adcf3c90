"""The chat log of an IRC bot: IRC keeps no history, so every line seen or sent is logged
to the store, and history is read back from there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from salon.model import ChannelRef, Message
from salon.platforms.base import ChatLog

__all__ = ["Recorder"]

_SETTLE_TIMEOUT = 5.0  # for writes under way when the platform stops


class Recorder:
    def __init__(self, bot: str, chat_log: ChatLog) -> None:
        self._bot = bot
        self._log = chat_log
        self._writes = 0
        self._writes_done = asyncio.Event()
        self._writes_done.set()

    async def record(self, message: Message, kind: str, *, durable: bool = False) -> None:
        """Log one line; ``settled`` waits for writes under way so the store can close."""
        self._writes += 1
        self._writes_done.clear()
        try:
            await self._log.log_message(self._bot, message, kind, durable=durable)
        finally:
            self._writes -= 1
            if self._writes == 0:
                self._writes_done.set()

    async def forget(self, message_id: str) -> None:
        """Take back a line logged before it was sent, when nobody saw it."""
        await self._log.forget_message(self._bot, message_id)

    async def settled(self) -> None:
        """Wait (a while at most) for the writes under way."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_SETTLE_TIMEOUT):
                await self._writes_done.wait()

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._log.chat_history(self._bot, channel, limit=limit)

    async def logged(self, channel: ChannelRef, key: str) -> bool | None:
        return await self._log.logged(self._bot, channel, key)
