"""``salon chat``: a REPL where every line addresses the bot.

The terminal keeps no history of its own, so every line, the user's and the bot's, goes
to the chat log in the store; after a restart the bot remembers the conversation.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TextIO

from salon.model import (
    ApprovalAnswer,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Message,
    MessageEvent,
    Participant,
)
from salon.platforms.base import YES_ANSWERS, ChatLog, EventSink

__all__ = ["Command", "TerminalPlatform", "stdin_lines"]

Command = Callable[[ChannelRef, str], Awaitable[str]]
"""A slash command of the terminal: gets the channel and the words after it, returns text."""

logger = logging.getLogger(__name__)

CHANNEL = ChannelRef("terminal", "local", name="terminal", is_direct=True)
QUIT_WORDS = frozenset({"/quit", "/exit"})
_MAX_LINE = 1 << 20  # one pasted megabyte is plenty; beyond it the reader errors cleanly


async def stdin_lines(stream: TextIO | None = None) -> AsyncIterator[str]:
    """Lines from stdin without blocking the loop (pipe or tty; a file via a thread)."""
    stream = stream or sys.stdin
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_MAX_LINE)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    except (ValueError, OSError):  # a regular file cannot be watched by the loop
        while line := await asyncio.to_thread(stream.readline):
            yield line
        return
    while raw := await reader.readline():
        yield raw.decode("utf-8", errors="replace")


class TerminalPlatform:
    name = "terminal"
    max_message_chars = 100_000

    def __init__(
        self,
        *,
        bot: str,
        bot_name: str,
        user_name: str,
        chat_log: ChatLog,
        lines: AsyncIterator[str] | None = None,
        out: TextIO | None = None,
        commands: Mapping[str, Command] | None = None,
    ) -> None:
        self._bot = bot
        self._me = Participant(f"bot:{bot}", bot_name, is_bot=True)
        self._user = Participant("user", user_name)
        self._log = chat_log
        self._lines = lines
        self._out = out or sys.stdout
        self._commands = dict(commands or {})
        self._reader: asyncio.Task[None] | None = None
        self._question: asyncio.Future[bool] | None = None
        self._wrote = asyncio.Event()
        self.closed = asyncio.Event()

    @property
    def self_participant(self) -> Participant:
        return self._me

    async def start(self, sink: EventSink) -> None:
        lines = self._lines if self._lines is not None else stdin_lines()
        self._reader = asyncio.create_task(self._read(lines, sink), name="terminal-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        self.closed.set()

    async def _read(self, lines: AsyncIterator[str], sink: EventSink) -> None:
        try:
            async for raw in lines:
                text = raw.strip()
                if text in QUIT_WORDS:
                    break
                word, _, rest = text.partition(" ")
                if self._question is not None and not self._question.done():
                    self._question.set_result(text.lower() in YES_ANSWERS)
                elif word in self._commands:
                    self._write(f"{await self._commands[word](CHANNEL, rest)}\n\n")
                elif text:
                    message = self._message(self._user, text)
                    await self._log.log_message(self._bot, message)
                    await sink(MessageEvent(message))
        except ValueError:
            logger.exception("stopped reading the terminal")
        finally:
            self.closed.set()

    def _message(self, author: Participant, text: str) -> Message:
        return Message(uuid.uuid4().hex, CHANNEL, author, text, datetime.now(UTC))

    async def send(
        self, channel: ChannelRef, text: str, *, files: Sequence[Attachment] = ()
    ) -> Message:
        message = self._message(self._me, text)
        await self._log.log_message(self._bot, message)
        notes = "".join(f"\n[file {f.filename}, {f.content_type}, {f.size} bytes]" for f in files)
        self._write(f"{self._me.name}: {text}{notes}\n\n")
        return message

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        self._write(f"{text}\n\n")  # shown, never logged: no bot reads dot messages

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        return [self._user.name, self._me.name]

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalAnswer:
        loop = asyncio.get_running_loop()
        self._question = loop.create_future()
        self._write(f"{self._me.name} wants to run {request.description}. Allow? [yes/no]\n")
        try:
            approved = await asyncio.wait_for(asyncio.shield(self._question), request.timeout)
        except TimeoutError:
            self._write("(no answer: cancelled)\n\n")
            return "timeout"
        finally:
            self._question = None
        return "approved" if approved else "cancelled"

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()
        self._wrote.set()

    async def wait_output(self) -> None:
        """Wait until something more is written (for embedders and tests)."""
        self._wrote.clear()
        await self._wrote.wait()

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._log.chat_history(self._bot, channel, limit=limit)

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        return None  # lines cannot be taken back here

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        return None  # lines have no links here

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        return []  # nothing is pinned here

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        return None  # no reactions here

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        return []  # a terminal has no replies

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        yield  # a terminal shows the answer as it streams; no indicator needed
