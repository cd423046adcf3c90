"""Sending on IRC: every line paced by one token bucket (the server's flood limit), cut to
fit IRC's 512 bytes, and, where the server echoes our lines (IRCv3 echo-message), matched
to the server's relay or refusal of it, so a refused message is a ``PlatformError``."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime

from pydle.protocol import ProtocolViolation  # type: ignore[import-untyped]

from salon.config import IrcConfig
from salon.errors import PlatformError
from salon.model import Attachment, ChannelRef, Message, Participant
from salon.platforms.base import file_lines
from salon.platforms.irc.client import Client
from salon.platforms.irc.lines import TokenBucket, dot_lines, irc_lines, no_ctcp
from salon.platforms.irc.recording import Recorder

__all__ = ["SEND_ERRORS", "Sender"]

SEND_ERRORS = (OSError, TimeoutError, ProtocolViolation)  # what a write to the server raises

_PREFIX_MARGIN = 16  # bytes kept free on each line for a host that grows after we joined
_MIN_ROOM = 64  # text bytes per line whatever the prefix (nick and channel have limits)
_ECHO_TIMEOUT = 15.0  # for the server to relay a line back (echo-message) or refuse it
_UNCONFIRMED = 100  # lines awaiting their echo per target; older ones count as relayed

Echo = asyncio.Future[str | None]  # settles with None (relayed) or the server's refusal


class Sender:
    def __init__(
        self, config: IrcConfig, current: Callable[[], Client | None], recorder: Recorder
    ) -> None:
        """``current``: the client of the connection now (None between connections)."""
        self._config = config
        self._current = current
        self._recorder = recorder
        self.bucket = TokenBucket(config.flood_burst, config.flood_rate)
        self._lock = asyncio.Lock()
        # Lines sent and not yet relayed back (echo-message) or refused (404), per target.
        self._unconfirmed: dict[str, deque[Echo]] = {}
        self._labels: dict[str, Echo] = {}  # the same, by label
        self._label_count = 0

    @contextlib.asynccontextmanager
    async def paced(self) -> AsyncIterator[None]:
        """One line's turn: nothing else is sent meanwhile, and the flood limit is kept
        (a JOIN or NICK counts against it as a message does)."""
        async with self._lock:
            wait = self.bucket.delay()
            if wait > 0:
                await asyncio.sleep(wait)
            yield

    async def send(
        self,
        client: Client,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment],
        note: bool,
        key: str | None,
        me: Callable[[], Participant],
    ) -> Message:
        """Log the message, then send it; ``me``: the bot as the author of the line."""
        notes = file_lines(files, local=False)
        # No \x01 from the model or a tool: it would make a CTCP of the line (a DCC offer,
        # a VERSION request to everyone in the channel). Only "/me" makes an ACTION.
        body = no_ctcp("\n".join([text, *notes])).strip()
        if body.startswith("/me "):
            room = self.room("PRIVMSG", channel.name) - len("\x01ACTION \x01")
            lines = [f"\x01ACTION {ln}\x01" for ln in irc_lines(body[4:], room)]
        else:
            lines = irc_lines(body, self.room("PRIVMSG", channel.name))
        message_id = key or uuid.uuid4().hex
        message = Message(message_id, channel, me(), body, datetime.now(UTC))
        # In the store before anyone sees it: a line shown must survive a crash.
        await self._recorder.record(message, "note" if note else "message", durable=True)
        shown = 0
        try:
            relayed: list[Echo] = []
            for line in lines:
                echo = await self._send_line(client, "PRIVMSG", channel.name, line)
                if echo is None:
                    shown += 1  # no echo-message: a line sent counts as seen
                else:
                    relayed.append(echo)
            seen, refusal = await _relayed(relayed)
            shown += seen
            if refusal is not None:
                raise PlatformError(f"IRC refused the message in {channel.name}: {refusal}")
        except PlatformError:
            if not shown:  # nobody saw any of it: it was never said
                await self._recorder.forget(message.id)
            raise
        return message

    async def tool_log(self, client: Client, channel: ChannelRef, text: str) -> None:
        # Shown, never logged: a dot message is for people, and no bot reads it.
        for line in dot_lines(no_ctcp(text), self.room("NOTICE", channel.name)):
            await self._send_line(client, "NOTICE", channel.name, line)

    async def notice(self, client: Client, target: str, text: str) -> None:
        """A private answer to a command: NOTICEs to ``target``, never logged."""
        for line in irc_lines(no_ctcp(text), self.room("NOTICE", target)):
            await self._send_line(client, "NOTICE", target, line)

    async def private(self, client: Client, nick: str, text: str) -> None:
        """PRIVMSG lines to ``nick`` alone, never logged (what only they may see); a line
        the server refuses (no such nick) is a ``PlatformError``."""
        relayed: list[Echo] = []
        for line in irc_lines(no_ctcp(text), self.room("PRIVMSG", nick)):
            echo = await self._send_line(client, "PRIVMSG", nick, line)
            if echo is not None:
                relayed.append(echo)
        _, refusal = await _relayed(relayed)
        if refusal is not None:
            raise PlatformError(f"IRC refused the message to {nick}: {refusal}")

    async def spare_line(self, client: Client, command: str, target: str, line: str) -> bool:
        """Send a line that may as well be dropped: only when the flood limit has one to
        spare right now and nothing else is being sent (never delaying other lines)."""
        if self._lock.locked() or not self.bucket.take_if_free():
            return False
        async with self._lock:
            self._expect_echo(client, target)
            with contextlib.suppress(*SEND_ERRORS):
                await client.rawmsg(command, target, line)
        return True

    def room(self, command: str, target: str) -> int:
        """Text bytes per line: ``max_line_bytes``, and never past IRC's 512-byte line as
        the server relays it, our ``:nick!user@host`` prefix included (a server cuts what
        goes past). The margin covers a host the server changes after we joined."""
        client = self._current()
        prefix = client.source_bytes() if client is not None else 0
        relayed = prefix + len(f"{command} {target} :".encode()) + _PREFIX_MARGIN
        return max(min(self._config.max_line_bytes, 510 - relayed), _MIN_ROOM)

    async def _send_line(self, client: Client, command: str, target: str, line: str) -> Echo | None:
        """Send one line, paced by the flood limit; PlatformError if the connection is gone
        (pydle's own writes time out after 30 s). Where the server echoes our lines, the
        future settles when it relays this one (None) or refuses it (the reason)."""
        async with self.paced():
            if client is not self._current() or not client.connected:
                raise PlatformError("the IRC connection was lost while sending")
            echo = self._expect_echo(client, target)
            tags = self._label(echo) if echo is not None and client.labels else {}
            try:
                await client.rawmsg(command, target, line, tags=tags)
            except SEND_ERRORS as exc:
                raise PlatformError(f"cannot send to IRC: {exc}") from exc
            return echo

    def _label(self, echo: Echo) -> dict[str, str]:
        """A label for the line ``echo`` waits on: the server's reply will carry it."""
        self._label_count += 1
        label = f"s{self._label_count}"
        self._labels[label] = echo
        while len(self._labels) > _UNCONFIRMED:
            self._labels.pop(next(iter(self._labels)))
        return {"label": label}

    def _expect_echo(self, client: Client, target: str) -> Echo | None:
        if not client.echoes:
            return None
        waiting = self._unconfirmed.setdefault(target.lower(), deque())
        if len(waiting) >= _UNCONFIRMED:
            oldest = waiting.popleft()
            if not oldest.done():
                oldest.set_result(None)
        future: Echo = asyncio.get_running_loop().create_future()
        waiting.append(future)
        return future

    def confirm(self, target: str, refusal: str | None, label: str | None) -> None:
        """Settle the line the server's reply names (labeled-response), else the oldest
        one sent to ``target``: relayed (None) or refused."""
        labelled = self._labels.pop(label, None) if label else None
        if labelled is not None:
            if not labelled.done():
                labelled.set_result(refusal)
            return
        waiting = self._unconfirmed.get(target.lower())
        while waiting:
            future = waiting.popleft()
            if not future.done():
                future.set_result(refusal)
                return

    def drop_unconfirmed(self, reason: str) -> None:
        """The connection is gone: no line awaiting its echo will get one."""
        self._labels.clear()
        for waiting in self._unconfirmed.values():
            for future in waiting:
                if not future.done():
                    future.set_result(reason)
        self._unconfirmed.clear()


async def _relayed(echoes: list[Echo]) -> tuple[int, str | None]:
    """How many of the lines were relayed before the first the server refused, and its
    reason (None: all relayed). A line with no answer in time counts as relayed."""
    if echoes:
        await asyncio.wait(echoes, timeout=_ECHO_TIMEOUT)
    for shown, echo in enumerate(echoes):
        refusal = echo.result() if echo.done() else None
        if refusal is not None:
            return shown, refusal
    return len(echoes), None
