"""``salon chat``: a REPL where every line addresses the bot.

The terminal keeps no history of its own, so every line, the user's and the bot's, goes
to the chat log in the store; after a restart the bot remembers the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TextIO

from salon.config import PlatformsConfig, TerminalConfig
from salon.model import (
    Approval,
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Elicitation,
    ElicitationAnswer,
    Message,
    MessageEvent,
    Participant,
)
from salon.platforms.adapter import Adapter, BuildContext
from salon.platforms.base import (
    YES_ANSWERS,
    Capability,
    ChatLog,
    EventSink,
    Platform,
    PlatformBase,
    file_lines,
)
from salon.platforms.forms import ask_in_text
from salon.platforms.notes import TERMINAL_WORDS, NotesBook, PeoplesMemory
from salon.printable import printable

__all__ = ["ADAPTER", "Command", "TerminalPlatform", "stdin_lines", "terminal_for"]

Command = Callable[[ChannelRef, str], Awaitable[str]]
"""A slash command of the terminal: gets the channel and the words after it, returns text."""

logger = logging.getLogger(__name__)

CHANNEL = ChannelRef("terminal", "local", name="terminal", is_direct=True)
QUIT_WORDS = frozenset({"/quit", "/exit"})
MAX_LINE = 1 << 20  # characters of one typed (or pasted) line passed on; the rest is dropped
_CHUNK = 1 << 16
WAITING_NOTICE = 15.0  # seconds of silence from the model before the terminal says so


async def stdin_lines(stream: TextIO | None = None) -> AsyncIterator[str]:
    """Lines from stdin without blocking the loop (pipe or tty; a file via a thread). A
    line longer than ``MAX_LINE`` is cut there, so no input can end the session."""
    stream = stream or sys.stdin
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stream)
    except (ValueError, OSError):  # a regular file cannot be watched by the loop
        while line := await asyncio.to_thread(_read_capped, stream):
            yield line
        return
    async for line in _split_lines(reader):
        yield line


def _read_capped(stream: TextIO) -> str:
    """One line of a file, cut to ``MAX_LINE`` characters (the rest of it is skipped)."""
    line = stream.readline(MAX_LINE)
    if len(line) == MAX_LINE and not line.endswith("\n"):
        while (rest := stream.readline(_CHUNK)) and not rest.endswith("\n"):
            pass
        line += "\n"
    return line


async def _split_lines(reader: asyncio.StreamReader) -> AsyncIterator[str]:
    """Decoded lines of ``reader``, each cut to ``MAX_LINE`` characters; the newline kept."""
    pending = b""
    skipping = False  # the rest of an over-long line, already passed on cut
    while chunk := await reader.read(_CHUNK):
        pending += chunk
        while (end := pending.find(b"\n")) >= 0:
            line, pending = pending[: end + 1], pending[end + 1 :]
            if not skipping:
                yield line.decode("utf-8", errors="replace")
            skipping = False
        if len(pending) > MAX_LINE * 4 and not skipping:  # UTF-8: at most 4 bytes a char
            yield pending.decode("utf-8", errors="replace")[:MAX_LINE] + "\n"
            pending, skipping = b"", True
        elif skipping:
            pending = b""
    if pending and not skipping:
        yield pending.decode("utf-8", errors="replace")


class TerminalPlatform(PlatformBase):
    name = "terminal"
    max_message_chars = 100_000
    capabilities = frozenset({Capability.DIRECT_MESSAGES})  # the one person at the terminal

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
        waiting_notice: float = WAITING_NOTICE,
        memory: NotesBook | None = None,
        settled: Callable[[], Awaitable[None]] | None = None,
        prompt: str | None = None,
    ) -> None:
        """``memory``: the notes' rules, for ``/memory`` and ``/forget`` (offered with it).
        ``settled``: returns once the bot has answered all it was given; with it, each line
        is its own turn (the next is read after the answer). ``prompt``: written whenever
        the terminal waits for a line (for a person typing)."""
        self._bot = bot
        self._me = Participant(f"bot:{bot}", bot_name, is_bot=True)
        self._user = Participant("user", user_name)
        self._log = chat_log
        self._lines = lines
        self._out = out or sys.stdout
        self._commands = dict(commands or {})
        if memory is not None:
            self._commands |= self._memory_commands(PeoplesMemory(memory, bot=bot))
        self._waiting_notice = waiting_notice
        self._settled = settled
        self._prompt = prompt
        self._turn: asyncio.Future[None] | None = None  # the answer to the lines handed on
        self._asked = asyncio.Event()  # a question waits for the next line
        self._reader: asyncio.Task[None] | None = None
        self._question: asyncio.Future[str | None] | None = None  # the next line answers
        self._wrote = asyncio.Event()
        self._written = 0
        self.closed = asyncio.Event()
        self.ended = False  # the input ended (end of file), rather than /quit

    @property
    def self_participant(self) -> Participant:
        return self._me

    def _memory_commands(self, memory: PeoplesMemory) -> dict[str, Command]:
        """The terminal's person is its operator: they may forget any note by its number."""

        def command(name: str) -> Command:
            async def run(channel: ChannelRef, rest: str) -> str:
                return await memory.answer(self._user, name, rest, TERMINAL_WORDS, operator=True)

            return run

        return {"/memory": command("memory"), "/forget": command("forget")}

    async def start(self, sink: EventSink) -> None:
        lines = self._lines if self._lines is not None else stdin_lines()
        self._show_prompt()
        self._reader = asyncio.create_task(self._read(lines, sink), name="terminal-reader")

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        if self._turn is not None:
            self._turn.cancel()
        self.closed.set()

    async def _read(self, lines: AsyncIterator[str], sink: EventSink) -> None:
        try:
            async for raw in lines:
                text = raw.strip()
                if text in QUIT_WORDS:
                    break
                await self._line(text, sink)
                await self._answered()
            else:
                self.ended = True
        except (ValueError, OSError):
            logger.exception("stopped reading the terminal")
        finally:
            if self._question is not None and not self._question.done():
                self._question.set_result(None)  # nobody is left to answer
            self.closed.set()

    async def _line(self, text: str, sink: EventSink) -> None:
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE]
            self._write(f"(that line was cut to its first {MAX_LINE:,} characters)\n")
        word, _, rest = text.partition(" ")
        if self._question is not None and not self._question.done():
            self._question.set_result(text)
            self._asked.clear()  # answered: what follows waits for the turn again
        elif word in self._commands:
            self._write(f"{await self._commands[word](CHANNEL, rest)}\n\n")
        elif text:
            message = self._message(self._user, text)
            await self._log.log_message(self._bot, message)
            await sink(MessageEvent(message))

    async def _answered(self) -> None:
        """Wait for the answer to the lines handed on, so each is its own turn, then prompt;
        a question the bot asks meanwhile returns at once (the next line answers it)."""
        if self._settled is None:
            return
        if self._turn is None:
            self._turn = asyncio.ensure_future(self._settled())
        asked = asyncio.ensure_future(self._asked.wait())
        try:
            await asyncio.wait((self._turn, asked), return_when=asyncio.FIRST_COMPLETED)
        finally:
            asked.cancel()
        if self._turn.done():
            self._turn.result()
            self._turn = None
            self._show_prompt()

    def _show_prompt(self) -> None:
        if self._prompt is not None:
            self._out.write(printable(self._prompt))
            self._out.flush()

    def _message(self, author: Participant, text: str, key: str | None = None) -> Message:
        return Message(key or uuid.uuid4().hex, CHANNEL, author, text, datetime.now(UTC))

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """A line is committed to the chat log (under its key) just before it is written
        out, with nothing awaited between: found there, it was shown."""
        return await self._log.logged(self._bot, channel, key)

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
        key: str | None = None,
        reply_to: str | None = None,
    ) -> Message:
        message = self._message(self._me, text, key)
        # In the store before it is on screen: a line shown must survive a crash.
        await self._log.log_message(self._bot, message, "note" if note else "message", durable=True)
        notes = "".join(f"\n{line}" for line in file_lines(files, local=True))
        self._write(f"{text}{notes}\n\n" if note else f"{self._me.name}: {text}{notes}\n\n")
        return message

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        self._write(f"{text}\n\n")  # shown, never logged: no bot reads dot messages

    async def send_direct(self, person: Participant, text: str) -> None:
        """The terminal has one person: shown to them, marked as for them alone, and never
        logged (a link in it is theirs)."""
        self._write(f"({self._me.name} to you only) {text}\n\n")

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        return [self._user.name, self._me.name]

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        return CHANNEL if channel_id == CHANNEL.id else None

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """The one person at the terminal runs the bot on their own machine."""
        return True

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        if self.closed.is_set():
            return ApprovalDecision(Approval.CANCELLED, by="(input ended)")
        loop = asyncio.get_running_loop()
        self._question = loop.create_future()
        self._asked.set()
        self._write(f"{self._me.name} wants to run {request.description}. Allow? [yes/no]\n")
        try:
            said = await asyncio.wait_for(asyncio.shield(self._question), request.timeout)
        except TimeoutError:
            self._write("(no answer: cancelled)\n\n")
            return ApprovalDecision(Approval.TIMEOUT)
        finally:
            self._question = None
            self._asked.clear()
        approved = said is not None and said.lower() in YES_ANSWERS
        answer = Approval.APPROVED if approved else Approval.CANCELLED
        return ApprovalDecision(answer, by=self._user.name)

    async def elicit(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        """Asked a field at a time; the next line typed answers each."""
        return await ask_in_text(self._say, self._reply, request)

    async def _say(self, text: str) -> None:
        self._write(f"{text}\n")

    async def _reply(self, question: str, within: float) -> tuple[str, str] | None:
        if self.closed.is_set():
            return None
        self._question = asyncio.get_running_loop().create_future()
        self._asked.set()
        self._write(f"{question}\n")
        try:
            said = await asyncio.wait_for(asyncio.shield(self._question), max(within, 0.0))
        except TimeoutError:
            return None
        finally:
            self._question = None
            self._asked.clear()
        return None if said is None else (said, self._user.name)

    def _write(self, text: str) -> None:
        self._out.write(printable(text))  # the model's and people's escapes, shown
        self._out.flush()
        self._written += 1
        self._wrote.set()

    async def wait_output(self) -> None:
        """Wait until something more is written (for embedders and tests)."""
        self._wrote.clear()
        await self._wrote.wait()

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._log.chat_history(self._bot, channel, limit=limit)

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        """While the model has said nothing, tell the person every ``WAITING_NOTICE``
        seconds that the bot is still waiting, so a slow or hung server is not silence."""
        watcher = asyncio.create_task(self._watch_silence())
        try:
            yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch_silence(self) -> None:
        started, seen = time.monotonic(), self._written
        while True:
            await asyncio.sleep(self._waiting_notice)
            if self._written != seen:
                return  # the answer (or a question) has started
            waited = time.monotonic() - started
            self._write(f"({self._me.name} is still waiting for the model: {waited:.0f} s)\n")
            seen = self._written


def terminal_for(
    context: BuildContext,
    *,
    lines: AsyncIterator[str] | None = None,
    out: TextIO | None = None,
    waiting_notice: float = WAITING_NOTICE,
    settled: Callable[[], Awaitable[None]] | None = None,
    prompt: str | None = None,
) -> TerminalPlatform:
    """The terminal of ``salon chat`` for the bot ``context`` builds (the options are
    ``TerminalPlatform``'s)."""
    return TerminalPlatform(
        bot=context.bot,
        bot_name=context.config.name,
        user_name=context.config.platforms.terminal.user_name,
        chat_log=context.chat_log,
        commands={"/schedules": context.commands.schedules},
        memory=context.memory,
        lines=lines,
        out=out,
        waiting_notice=waiting_notice,
        settled=settled,
        prompt=prompt,
    )


def _section(platforms: PlatformsConfig) -> TerminalConfig:
    return platforms.terminal


def _build(config: TerminalConfig, context: BuildContext) -> Platform:
    return terminal_for(context)


# Every bot has a terminal; only ``salon chat`` opens it, for the bot's operator.
ADAPTER = Adapter(name="terminal", section=_section, build=_build, unattended=False, operated=True)
