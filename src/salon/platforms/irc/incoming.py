"""What people and servers write to us: lines become ``Message``s, logged to the chat log
(IRC keeps no history) and handed to the agent; joins, parts, kicks, quits, nick changes
and channel notices are logged; notices to us go to the log file, a few a minute.

Who wrote a line is the strongest identity the server vouches for (``Client.identity``);
approvals compare it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from salon.config import IrcConfig
from salon.model import ChannelRef, Message, MessageEvent, Participant
from salon.platforms.irc.approvals import Approvals
from salon.platforms.irc.client import Client
from salon.platforms.irc.dotcommands import DotCommands
from salon.platforms.irc.lines import TokenBucket
from salon.platforms.irc.recording import Recorder

__all__ = ["Command", "Incoming"]

logger = logging.getLogger(__name__)

Command = Callable[[Participant, str, str], Awaitable[bool]]
"""A person's command: (who, their nick, the line); True when the line was one."""
_TOLD_PER_MINUTE = 20  # server and private notices written to the log
_SEEN = 200  # lines remembered for ``wait_seen``


class Incoming:
    def __init__(
        self,
        *,
        config: IrcConfig,
        current: Callable[[], Client | None],
        recorder: Recorder,
        approvals: Approvals,
        deliver: Callable[[MessageEvent], Awaitable[None]],
        stopping: Callable[[], bool],
        commands: Command | None = None,
        dot_commands: DotCommands | None = None,
    ) -> None:
        """``current``: the client of the connection now; ``deliver``: to the agent;
        ``stopping``: lines still arriving then must not reach a closing store;
        ``commands``: a person's own commands (``!memory``), answered before all else."""
        self._config = config
        self._current = current
        self._recorder = recorder
        self._approvals = approvals
        self._deliver = deliver
        self._stopping = stopping
        self._commands = commands
        self._dot_commands = dot_commands  # .ping and .help, when on
        self._seen: deque[tuple[str, str]] = deque(maxlen=_SEEN)
        self._seen_changed = asyncio.Condition()
        self._told = TokenBucket(_TOLD_PER_MINUTE, _TOLD_PER_MINUTE / 60)
        self._told_muted = False

    def myself(self) -> Participant:
        client = self._current()
        nick = client.nickname if client is not None else self._config.nick
        return Participant(f"irc:{nick.lower()}", nick, is_bot=True)

    async def line(
        self, kind: str, target: str, nick: str, text: str, *, private: bool = False
    ) -> None:
        if self._stopping() or self._is_me(nick):
            return  # our own lines come back with echo-message; ``send`` logged them whole
        author = self._participant(nick)
        if kind == "message" and self._commands and await self._commands(author, nick, text):
            return  # answered to the person alone: not a line for the bot or the log
        channel = _channel(target, private=private)
        question = self._command_question(text) if kind == "message" else None
        if question is not None:
            # ".terrarium why?" is logged and seen as "why?" addressed to the bot: the
            # command word would otherwise make it a dot message no bot reads.
            text = question
        addressed = kind == "message" and (private or question is not None or self._addressed(text))
        mentions = (self.myself(),) if addressed else ()
        message = Message(
            uuid.uuid4().hex, channel, author, text, self._line_time(), mentions=mentions
        )
        if kind == "message" and await self._approvals.answer(message):
            return  # an answer to "may I run ...?" is not a new question for the bot
        if kind == "message" and self._dot_commands and await self._dot_commands.answer(message):
            await self._recorder.record(message, kind)  # said in the channel: logged
            return  # answered here, without the model
        await self._recorder.record(message, kind)
        await self._deliver(MessageEvent(message))

    async def channel_event(self, kind: str, target: str, nick: str, text: str) -> None:
        if self._stopping():
            return
        message = Message(
            uuid.uuid4().hex,
            _channel(target),
            self._participant(nick),
            text,
            self._line_time(),
        )
        await self._recorder.record(message, kind)
        await self._note(kind, nick)

    def told(self, source: str, text: str) -> None:
        # Anyone can send the bot notices: past a few a minute they are dropped, so a
        # flood cannot fill the log.
        if self._told.take_if_free():
            self._told_muted = False
            logger.info("IRC: %s says: %s", source, text[:400])
        elif not self._told_muted:
            self._told_muted = True
            logger.warning(
                "IRC: more notices than %d a minute; the rest are not logged", _TOLD_PER_MINUTE
            )

    async def wait_seen(self, kind: str, nick: str) -> None:
        """Wait until a line of ``kind`` from ``nick`` has been handled (join, part, ...)."""
        async with self._seen_changed:
            await self._seen_changed.wait_for(lambda: (kind, nick.lower()) in self._seen)

    async def _note(self, kind: str, nick: str) -> None:
        async with self._seen_changed:
            self._seen.append((kind, nick.lower()))
            self._seen_changed.notify_all()

    def _participant(self, nick: str) -> Participant:
        client = self._current()
        if client is None:
            return Participant(f"irc:{nick.lower()}", nick)
        me = client.is_same_nick(nick, client.nickname)
        return Participant(f"irc:{nick.lower()}", nick, is_bot=me, identity=client.identity(nick))

    def _is_me(self, nick: str) -> bool:
        client = self._current()
        return client is not None and client.is_same_nick(nick, client.nickname)

    def _addressed(self, text: str) -> bool:
        client = self._current()
        nick = client.nickname if client is not None else self._config.nick
        # "Nick: hi", "Nick, hi" and "hi Nick" alike: the nick as a word of its own. Nicks
        # may hold []\`^{}|- besides word characters, so those do not end one.
        pattern = rf"(?<![\w\[\]\\`^{{}}|-]){re.escape(nick)}(?![\w\[\]\\`^{{}}|-])"
        return re.search(pattern, text, re.IGNORECASE) is not None

    def _command_question(self, text: str) -> str | None:
        """The question after one of the bot's command words, or None."""
        parts = text.strip().split(maxsplit=1)
        if parts and parts[0].lower() in {c.lower() for c in self._config.commands}:
            return parts[1] if len(parts) > 1 else ""
        return None

    def _line_time(self) -> datetime:
        """The line's time as the server gives it (server-time), else now."""
        client = self._current()
        return (client.line_time() if client is not None else None) or datetime.now(UTC)


def _channel(target: str, *, private: bool = False) -> ChannelRef:
    return ChannelRef("irc", target.lower(), name=target, is_direct=private)
