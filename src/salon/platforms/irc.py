"""IRC through pydle. IRC keeps no history, so every line seen is logged to the store.

The adapter owns one pydle client at a time and reconnects with backoff when the server
goes away (pydle's own reconnect is off: the policy is ours). Users of each channel are
tracked by pydle from NAMES, JOIN, PART, QUIT, NICK and KICK.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pydle  # type: ignore[import-untyped]
from pydle.features.whox import WHOXSupport  # type: ignore[import-untyped]

from salon.config import IrcConfig, Secrets
from salon.errors import PlatformError
from salon.model import (
    Approval,
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Message,
    MessageEvent,
    Participant,
)
from salon.platforms.base import NO_ANSWERS, YES_ANSWERS, ChatLog, EventSink, PlatformBase

__all__ = ["IrcPlatform", "TokenBucket", "irc_lines"]

logger = logging.getLogger(__name__)

_IN_ORDER = frozenset({"PRIVMSG", "NOTICE", "JOIN", "PART", "QUIT", "KICK", "NICK"})


class TokenBucket:
    """Flood control: ``burst`` lines at once, then ``rate`` lines per second."""

    def __init__(self, burst: int, rate: float) -> None:
        self.capacity = float(burst)
        self.rate = rate
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def delay(self) -> float:
        """Take a token; return how long to wait before sending."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= 1
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


def irc_lines(text: str, max_bytes: int) -> list[str]:
    """One chat message as IRC lines: no newlines, each at most ``max_bytes`` of UTF-8,
    split at spaces where possible and never inside a character."""
    lines: list[str] = []
    for raw in text.replace("\r", "").split("\n"):
        line = raw.rstrip()
        while len(line.encode("utf-8")) > max_bytes:
            cut = _byte_cut(line, max_bytes)
            space = line.rfind(" ", 0, cut + 1)
            if space > cut // 2:
                cut = space
            lines.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
        if line:
            lines.append(line)
    return lines


def _byte_cut(line: str, max_bytes: int) -> int:
    """The longest prefix (in characters) of ``line`` whose UTF-8 fits ``max_bytes``."""
    used = 0
    for index, char in enumerate(line):
        used += len(char.encode("utf-8"))
        if used > max_bytes:
            return max(index, 1)
    return len(line)


@dataclass
class _Question:
    channel: str
    request: ApprovalRequest
    answer: asyncio.Future[ApprovalDecision]


class _Client(pydle.Client):  # type: ignore[misc]
    """pydle's client with its callbacks routed to the platform."""

    RECONNECT_ON_ERROR = False

    def __init__(self, platform: IrcPlatform, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.platform = platform
        self._tasks: set[asyncio.Task[None]] = set()

    async def on_data(self, data: bytes) -> None:
        # pydle runs each message in a task of its own, which can reorder lines. Lines people
        # write (and joins, parts...) are handled in turn, so the log and the context keep
        # their order; the rest (registration, CAP) stays concurrent, as some of it waits
        # for later replies.
        self._receive_buffer += data
        while self._has_message():
            message = self._parse_message()
            if message.command in _IN_ORDER:
                await self._handle(message)
            else:
                task = asyncio.create_task(self._handle(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _create_user(self, nickname: str) -> None:
        # pydle's WHOX feature sends a WHOIS for every new nick and waits for the reply,
        # which would stall the in-order handling above; Salon needs nicks, not hostnames.
        super(WHOXSupport, self)._create_user(nickname)

    async def _handle(self, message: Any) -> None:
        try:
            await self.on_raw(message)
        except Exception:  # one bad line must not end the connection
            logger.exception("IRC: failed to handle %s", message.command)

    async def on_connect(self) -> None:
        await super().on_connect()
        await self.platform._on_connect(self)

    async def on_disconnect(self, expected: bool) -> None:
        await super().on_disconnect(expected)
        self.platform._on_disconnect(self, expected)

    async def on_channel_message(self, target: str, by: str, message: str) -> None:
        await self.platform._on_line("message", target, by, message)

    async def on_private_message(self, target: str, by: str, message: str) -> None:
        await self.platform._on_line("message", by, by, message, private=True)

    async def on_ctcp_action(self, by: str, target: str, contents: str) -> None:
        private = not self.is_channel(target)
        await self.platform._on_line(
            "action", by if private else target, by, contents, private=private
        )

    async def on_notice(self, target: str, by: str, message: str) -> None:
        if by and self.is_channel(target):
            await self.platform._log_event("notice", target, by, message)

    async def on_join(self, channel: str, user: str) -> None:
        await self.platform._log_event("join", channel, user, "")
        if self.is_same_nick(user, self.nickname):
            self.platform._joined_channel(self, channel)

    async def on_part(self, channel: str, user: str, message: str | None = None) -> None:
        await self.platform._log_event("part", channel, user, message or "")

    async def on_kick(self, channel: str, target: str, by: str, reason: str | None = None) -> None:
        await self.platform._log_event("kick", channel, by, f"{target} {reason or ''}".strip())
        if self.is_same_nick(target, self.nickname):
            await self.join(channel)  # kicked: come back

    async def on_raw_quit(self, message: Any) -> None:
        nick = self._parse_user(message.source)[0]
        where = [c for c, info in self.channels.items() if nick in info["users"]]
        await super().on_raw_quit(message)
        for channel in where:
            reason = message.params[0] if message.params else ""
            await self.platform._log_event("quit", channel, nick, reason)

    async def on_raw_nick(self, message: Any) -> None:
        old = self._parse_user(message.source)[0]
        new = message.params[0]
        where = [c for c, info in self.channels.items() if old in info["users"]]
        await super().on_raw_nick(message)
        for channel in where:
            await self.platform._log_event("nick", channel, old, new)


class IrcPlatform(PlatformBase):
    name = "irc"
    max_message_chars = 2000

    def __init__(
        self, *, bot: str, bot_name: str, config: IrcConfig, secrets: Secrets, chat_log: ChatLog
    ) -> None:
        self.config = config
        self._bot = bot
        self._bot_name = bot_name
        self._secrets = secrets
        self._log = chat_log
        self._sink: EventSink | None = None
        self._stopping = False
        self._writes = 0
        self._writes_done = asyncio.Event()
        self._writes_done.set()
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._lost = asyncio.Event()
        self._joined = asyncio.Event()
        self._bucket = TokenBucket(config.flood_burst, config.flood_rate)
        self._send_lock = asyncio.Lock()
        self._questions: dict[str, _Question] = {}
        self._seen: deque[tuple[str, str]] = deque(maxlen=200)
        self._joining: set[str] = set()
        self._seen_changed = asyncio.Condition()
        self.connections = 0

    @property
    def self_participant(self) -> Participant:
        nick = self._client.nickname if self._client is not None else self.config.nick
        return Participant(f"irc:{nick.lower()}", nick, is_bot=True)

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        self._runner = asyncio.create_task(self._stay_connected(), name="irc")
        try:
            await asyncio.wait_for(self._connected.wait(), 30)
        except TimeoutError:
            logger.error(
                "IRC: not connected to %s:%d yet; still trying",
                self.config.server,
                self.config.port,
            )

    async def stop(self) -> None:
        self._stopping = True  # lines still arriving must not reach a closing store
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        client, self._client = self._client, None
        if client is not None and client.connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.quit("bye"), 3)
            with contextlib.suppress(Exception):
                await client.disconnect(expected=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._writes_done.wait(), 5)

    async def wait_connected(self) -> None:
        await self._connected.wait()

    async def wait_reconnected(self) -> None:
        """Wait for the next successful connection (``connections`` counts them)."""
        self._joined.clear()
        await self._joined.wait()

    async def _stay_connected(self) -> None:
        delay = self.config.reconnect_backoff_initial
        while True:
            self._lost.clear()
            client = self._new_client()
            self._client = client
            try:
                await client.connect(
                    self.config.server,
                    self.config.port,
                    tls=self.config.tls,
                    tls_verify=self.config.tls_verify,
                    password=self._secrets.get(self.config.password_env),
                )
                await self._lost.wait()
                delay = self.config.reconnect_backoff_initial
            except (OSError, TimeoutError) as exc:
                logger.warning(
                    "IRC: cannot connect to %s:%d: %s", self.config.server, self.config.port, exc
                )
            finally:
                self._connected.clear()
                with contextlib.suppress(Exception):
                    await client.disconnect(expected=True)
            logger.info("IRC: reconnecting in %.1fs", delay)
            await asyncio.sleep(delay)
            delay = min(max(delay * 2, 0.1), self.config.reconnect_backoff_max)

    def _new_client(self) -> _Client:
        kwargs: dict[str, Any] = {
            "fallback_nicknames": self.config.fallback_nicks,
            "username": self.config.username,
            "realname": self.config.realname,
        }
        if self.config.sasl_username:
            kwargs["sasl_username"] = self.config.sasl_username
            kwargs["sasl_password"] = self._secrets.get(self.config.sasl_password_env)
        return _Client(self, self.config.nick, **kwargs)

    async def _on_connect(self, client: _Client) -> None:
        self.connections += 1
        self._joining = {c.lower() for c in self.config.channels}
        for channel in self.config.channels:
            await client.join(channel)
        if not self._joining:
            self._ready(client)

    def _joined_channel(self, client: _Client, channel: str) -> None:
        """The server confirmed one of our JOINs; ready once every channel is joined."""
        if client is self._client and channel.lower() in self._joining:
            self._joining.discard(channel.lower())
            if not self._joining:
                self._ready(client)

    def _ready(self, client: _Client) -> None:
        joined = ", ".join(self.config.channels) or "no channels"
        logger.info("IRC: connected as %s, joined %s", client.nickname, joined)
        self._connected.set()
        self._joined.set()

    def _on_disconnect(self, client: _Client, expected: bool) -> None:
        if client is self._client:
            if not expected:
                logger.warning("IRC: connection lost")
            self._lost.set()

    def _channel(self, target: str, *, private: bool = False) -> ChannelRef:
        return ChannelRef("irc", target.lower(), name=target, is_direct=private)

    def _participant(self, nick: str) -> Participant:
        me = self._client is not None and self._client.is_same_nick(nick, self._client.nickname)
        return Participant(f"irc:{nick.lower()}", nick, is_bot=me)

    async def _log_event(self, kind: str, target: str, nick: str, text: str) -> None:
        if self._stopping:
            return
        message = Message(
            uuid.uuid4().hex,
            self._channel(target),
            self._participant(nick),
            text,
            datetime.now(UTC),
        )
        await self._record(message, kind)
        await self._note(kind, nick)

    async def _record(self, message: Message, kind: str) -> None:
        """Log one line; ``stop`` waits for writes under way so the store can close."""
        self._writes += 1
        self._writes_done.clear()
        try:
            await self._log.log_message(self._bot, message, kind)
        finally:
            self._writes -= 1
            if self._writes == 0:
                self._writes_done.set()

    async def _note(self, kind: str, nick: str) -> None:
        async with self._seen_changed:
            self._seen.append((kind, nick.lower()))
            self._seen_changed.notify_all()

    async def wait_seen(self, kind: str, nick: str) -> None:
        """Wait until a line of ``kind`` from ``nick`` has been handled (join, part, ...)."""
        async with self._seen_changed:
            await self._seen_changed.wait_for(lambda: (kind, nick.lower()) in self._seen)

    async def _on_line(
        self, kind: str, target: str, nick: str, text: str, *, private: bool = False
    ) -> None:
        if self._stopping:
            return
        channel = self._channel(target, private=private)
        question = self._command_question(text) if kind == "message" else None
        if question is not None:
            # ".terrarium why?" is logged and seen as "why?" addressed to the bot: the
            # command word would otherwise make it a dot message no bot reads.
            text = question
        addressed = kind == "message" and (private or question is not None or self._addressed(text))
        mentions = (self.self_participant,) if addressed else ()
        author = self._participant(nick)
        message = Message(
            uuid.uuid4().hex, channel, author, text, datetime.now(UTC), mentions=mentions
        )
        await self._record(message, kind)
        if self._answers_question(channel.key, nick, text):
            return  # an answer to "may I run ...?" is not a new question for the bot
        if self._sink is not None:
            await self._sink(MessageEvent(message))

    def _addressed(self, text: str) -> bool:
        nick = self._client.nickname if self._client is not None else self.config.nick
        # "Nick: hi", "Nick, hi" and "hi Nick" alike: the nick as a word of its own. Nicks
        # may hold []\`^{}|- besides word characters, so those do not end one.
        pattern = rf"(?<![\w\[\]\\`^{{}}|-]){re.escape(nick)}(?![\w\[\]\\`^{{}}|-])"
        return re.search(pattern, text, re.IGNORECASE) is not None

    def _command_question(self, text: str) -> str | None:
        """The question after one of the bot's command words, or None."""
        parts = text.strip().split(maxsplit=1)
        if parts and parts[0].lower() in {c.lower() for c in self.config.commands}:
            return parts[1] if len(parts) > 1 else ""
        return None

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
    ) -> Message:
        client = self._require_client()
        notes = [f"[file {f.filename}, {f.content_type}, {f.size} bytes]" for f in files]
        body = "\n".join([text, *notes]).strip()
        if body.startswith("/me "):
            await self._paced(client.ctcp(channel.name, "ACTION", body[4:].replace("\n", " ")))
        else:
            for line in irc_lines(body, self.config.max_line_bytes):
                await self._paced(client.message(channel.name, line))
        message = Message(uuid.uuid4().hex, channel, self.self_participant, body, datetime.now(UTC))
        await self._record(message, "note" if note else "message")
        return message

    async def _paced(self, sending: Any) -> None:
        async with self._send_lock:
            wait = self._bucket.delay()
            if wait > 0:
                await asyncio.sleep(wait)
            await sending

    def _require_client(self) -> _Client:
        client = self._client
        if client is None or not client.connected:
            raise PlatformError("not connected to IRC")
        return client

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        client = self._require_client()
        for line in irc_lines(text, self.config.max_line_bytes)[:4]:
            await self._paced(client.notice(channel.name, line))

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._log.chat_history(self._bot, channel, limit=limit)

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        client = self._client
        if client is None or not client.in_channel(channel.name):
            return []
        return sorted(client.channels[channel.name]["users"], key=str.lower)

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._questions[channel.key] = _Question(channel.key, request, future)
        who = request.requester.name
        question = f"{who}: may I run {request.description}? Answer yes or no."
        await self.send(channel, question, note=True)
        try:
            return await asyncio.wait_for(asyncio.shield(future), request.timeout)
        except TimeoutError:
            return ApprovalDecision(Approval.TIMEOUT)
        finally:
            self._questions.pop(channel.key, None)

    def _answers_question(self, channel_key: str, nick: str, text: str) -> bool:
        question = self._questions.get(channel_key)
        if question is None or question.answer.done():
            return False
        if f"irc:{nick.lower()}" != question.request.requester.id:
            return False  # IRC has no roles: only the person who asked may answer
        word = text.strip().lower().rstrip(".!")
        word = word.split(":", 1)[-1].strip() if ":" in word else word
        if word in YES_ANSWERS:
            question.answer.set_result(ApprovalDecision(Approval.APPROVED, by=nick))
            return True
        if word in NO_ANSWERS:
            question.answer.set_result(ApprovalDecision(Approval.CANCELLED, by=nick))
            return True
        return False
