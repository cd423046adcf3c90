"""IRC through pydle. IRC keeps no history, so every line seen is logged to the store.

The adapter owns one pydle client at a time and reconnects with backoff when the server
goes away (pydle's own reconnect is off: the policy is ours). Users of each channel are
tracked by pydle from NAMES, JOIN, PART, QUIT, NICK and KICK.

Who wrote a line is the strongest identity the server vouches for: the services account
where the server tells it (IRCv3 ``account-tag`` on the line, else the account pydle tracks
from ``extended-join``, ``account-notify``, WHOX or WHOIS for someone in one of our
channels), else ``nick!user@host`` from the line's source. Approvals compare it.
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

from pydle.protocol import ProtocolViolation  # type: ignore[import-untyped]

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
from salon.platforms._irc_client import Client
from salon.platforms.base import (
    NO_ANSWERS,
    YES_ANSWERS,
    ChatLog,
    EventSink,
    PlatformBase,
    file_lines,
)
from salon.tasks import TaskState, supervise

__all__ = ["IrcPlatform", "TokenBucket", "dot_lines", "irc_lines"]

logger = logging.getLogger(__name__)

_TOOL_LOG_LINES = 4
_CUT = "…"
_PREFIX_MARGIN = 16  # bytes kept free on each line for a host that grows after we joined
_MIN_ROOM = 64  # text bytes per line whatever the prefix (nick and channel have limits)
_ECHO_TIMEOUT = 15.0  # for the server to relay a line back (echo-message) or refuse it
_UNCONFIRMED = 100  # lines awaiting their echo per target; older ones count as relayed
_REJOIN_STATES = 1000
_REGAIN_INTERVAL = 60.0  # seconds between asking for our own nick back
_CTCP_INTERVAL = 60.0  # seconds between two CTCP answers to the same person
_CTCP_ASKERS = 256  # people remembered for that
_TOLD_PER_MINUTE = 20  # server and private notices written to the log


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

    def take_if_free(self) -> bool:
        """Take a token only if one is there now (for lines that may as well be dropped)."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def irc_lines(text: str, max_bytes: int) -> list[str]:
    """One chat message as IRC lines: no newlines, each at most ``max_bytes`` of UTF-8,
    split at spaces where possible and never inside a character."""
    lines: list[str] = []
    for raw in text.replace("\r", "").replace("\0", "").split("\n"):  # IRC forbids both
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


def dot_lines(text: str, max_bytes: int, max_lines: int = _TOOL_LOG_LINES) -> list[str]:
    """A dot message as at most ``max_lines`` IRC lines, every one starting with ``.`` (so
    no bot reads any of them); a cut shows as ``…`` at the end of the last line."""
    lines = [ln if ln.startswith(".") else f".{ln}" for ln in irc_lines(text, max_bytes - 1)]
    if len(lines) <= max_lines:
        return lines
    last = lines[max_lines - 1]
    room = max_bytes - len(_CUT.encode("utf-8"))
    return [*lines[: max_lines - 1], last[: _byte_cut(last, room)].rstrip() + _CUT]


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


class IrcPlatform(PlatformBase):
    name = "irc"
    max_message_chars = 2000
    quit_timeout = 3.0

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
        self._client: Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self.connection = TaskState("IRC connection")
        self._connected = asyncio.Event()
        self._registered = asyncio.Event()
        self._all_joined = asyncio.Event()
        self._lost = asyncio.Event()
        self._halt = asyncio.Event()  # stop() was called: Python 3.11 can swallow a cancel
        self._joined = asyncio.Event()
        self._bucket = TokenBucket(config.flood_burst, config.flood_rate)
        self._send_lock = asyncio.Lock()
        self._questions: dict[str, _Question] = {}
        self._seen: deque[tuple[str, str]] = deque(maxlen=200)
        self._joining: set[str] = set()
        self._seen_changed = asyncio.Condition()
        self.connections = 0
        # Lines sent and not yet relayed back (echo-message) or refused (404), per target.
        self._unconfirmed: dict[str, deque[asyncio.Future[str | None]]] = {}
        self._labels: dict[str, asyncio.Future[str | None]] = {}  # the same, by label
        self._label_count = 0
        self._rejoins: dict[str, asyncio.Task[None]] = {}
        self._rejoin_state: dict[str, tuple[int, float]] = {}  # channel: (repeats, when)
        self._ctcp_answered: dict[str, float] = {}  # nick: when we last answered a CTCP
        self._nicklen: int | None = None  # the server's NICKLEN, once it said it
        self._told = TokenBucket(_TOLD_PER_MINUTE, _TOLD_PER_MINUTE / 60)
        self._told_muted = False

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def self_participant(self) -> Participant:
        nick = self._client.nickname if self._client is not None else self.config.nick
        return Participant(f"irc:{nick.lower()}", nick, is_bot=True)

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        work = supervise(
            "IRC connection",
            self._stay_connected,
            state=self.connection,
            finished=self._halt.is_set,
        )
        self._runner = asyncio.create_task(work, name="irc")
        try:
            async with asyncio.timeout(30):
                await self._connected.wait()
        except TimeoutError:
            logger.error(
                "IRC: not connected to %s:%d yet; still trying",
                self.config.server,
                self.config.port,
            )

    async def stop(self) -> None:
        self._stopping = True  # lines still arriving must not reach a closing store
        self._halt.set()
        for task in self._rejoins.values():
            task.cancel()
        self._rejoins.clear()
        # QUIT before the runner goes: cancelling it closes the connection, and people
        # would see "Connection closed" instead of our goodbye.
        client = self._client
        if client is not None and client.connected:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self.quit_timeout):
                    await client.quit("bye")
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
            self._runner = None
        client, self._client = self._client, None
        if client is not None and client.connected:
            with contextlib.suppress(Exception):
                await client.disconnect(expected=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._writes_done.wait()

    async def wait_connected(self) -> None:
        await self._connected.wait()

    async def wait_disconnected(self) -> None:
        """Return once the connection is down (at once if it is down already)."""
        client = self._client
        if client is not None and client.connected:
            await self._lost.wait()

    async def wait_reconnected(self) -> None:
        """Wait for the next successful connection (``connections`` counts them)."""
        self._joined.clear()
        await self._joined.wait()

    async def _stay_connected(self) -> None:
        delay = self.config.reconnect_backoff_initial
        while not self._halt.is_set():
            for event in (self._lost, self._registered, self._all_joined):
                event.clear()
            client = self._new_client()
            self._client = client
            try:
                if await self._session(client):
                    delay = self.config.reconnect_backoff_initial
            except (OSError, TimeoutError) as exc:
                logger.warning(
                    "IRC: cannot connect to %s:%d: %s", self.config.server, self.config.port, exc
                )
            finally:
                self._connected.clear()
                with contextlib.suppress(Exception):
                    await client.disconnect(expected=True)
            if self._halt.is_set():
                return
            logger.info("IRC: reconnecting in %.1fs", delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._halt.wait()
            delay = min(max(delay * 2, 0.1), self.config.reconnect_backoff_max)

    async def _session(self, client: Client) -> bool:
        """One connection, until it drops; whether it got as far as being registered."""
        async with asyncio.timeout(self.config.connect_timeout):
            await client.connect(
                self.config.server,
                self.config.port,
                tls=self.config.tls,
                tls_verify=self.config.tls_verify,
                password=self._secrets.get(self.config.password_env),
            )
        try:
            async with asyncio.timeout(self.config.register_timeout):
                if not await self._unless_lost(self._registered):
                    return False
        except TimeoutError:
            logger.warning(
                "IRC: no welcome from the server within %.0fs", self.config.register_timeout
            )
            return False
        try:
            async with asyncio.timeout(self.config.join_timeout):
                if not await self._unless_lost(self._all_joined):
                    return True
        except TimeoutError:
            missing = ", ".join(sorted(self._joining))
            logger.warning("IRC: could not join %s within %.0fs", missing, self.config.join_timeout)
        self._ready(client)
        regain = asyncio.create_task(self._regain_nick(client))
        try:
            await self._unless_lost(self._lost)  # until the connection drops, or stop()
        finally:
            regain.cancel()
            await asyncio.gather(regain, return_exceptions=True)
        return True

    async def _regain_nick(self, client: Client) -> None:
        """On a fallback nick, ask for our own now and then: its holder may have left
        unseen (the client also asks at once when it sees the holder quit or rename)."""
        while True:
            await asyncio.sleep(_REGAIN_INTERVAL)  # a timer, not a wait for an event
            if not client.is_same_nick(client.nickname, self.config.nick):
                async with self._send_lock:
                    wait = self._bucket.delay()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    with contextlib.suppress(OSError, TimeoutError, ProtocolViolation):
                        await client.set_nickname(self.config.nick)

    def logged_in(self, client: Client, account: str) -> None:
        logger.info("IRC: logged in as %s", account)

    def sasl_failed(self, client: Client, mechanism: str, reason: str) -> None:
        # The password never: the account name and the server's words only.
        who = self.config.sasl_username or "the TLS certificate"
        logger.error("IRC: SASL %s as %s failed: %s; going on unidentified", mechanism, who, reason)

    def nick_refused(self, client: Client, nick: str, reason: str) -> None:
        if client is not self._client:
            return
        if client.registered:  # asking for our own nick back: routine, not news
            logger.info("IRC: nick %s refused: %s; keeping %s", nick, reason, client.nickname)
        else:
            logger.warning("IRC: nick %s refused: %s", nick, reason)

    async def no_nick(self, client: Client) -> None:
        if client is not self._client:
            return
        logger.error(
            "IRC: every nick was refused on %s (see above); reconnecting with backoff",
            self.config.server,
        )
        with contextlib.suppress(Exception):
            await client.quit("no free nick")

    async def _unless_lost(self, event: asyncio.Event) -> bool:
        """Wait for ``event``; False when the connection drops or ``stop`` comes first."""
        events = {event, self._lost, self._halt}
        waits = {asyncio.create_task(e.wait()) for e in events}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return not self._lost.is_set() and not self._halt.is_set()

    def _new_client(self) -> Client:
        kwargs: dict[str, Any] = {
            "fallback_nicknames": self.config.fallback_nicks,
            "username": self.config.username,
            "realname": self.config.realname,
        }
        if self.config.sasl_mechanism == "EXTERNAL":
            kwargs["sasl_mechanism"] = "EXTERNAL"
        elif self.config.sasl_username:
            kwargs["sasl_username"] = self.config.sasl_username
            kwargs["sasl_password"] = self._secrets.get(self.config.sasl_password_env)
        if self.config.tls_client_cert:
            kwargs["tls_client_cert"] = self.config.tls_client_cert
            kwargs["tls_client_cert_key"] = self.config.tls_client_key
        return Client(self, self.config.nick, nicklen=self._nicklen, **kwargs)

    # The client's events (``ClientEvents``), in the order the server sent them.

    async def client_connected(self, client: Client) -> None:
        if client is not self._client:
            return
        wants_sasl = self.config.sasl_username or self.config.sasl_mechanism == "EXTERNAL"
        if wants_sasl and not client.sasl_tried:
            logger.error("IRC: SASL is configured but %s does not offer it", self.config.server)
        self._joining = {c.lower() for c in self.config.channels}
        self._registered.set()
        for channel in self.config.channels:
            await client.join(channel)
        if not self._joining:
            self._all_joined.set()

    def channel_joined(self, client: Client, channel: str) -> None:
        """The server confirmed one of our JOINs (also after a kick)."""
        if client is self._client and channel.lower() in self._joining:
            self._joining.discard(channel.lower())
            if not self._joining:
                self._all_joined.set()

    def _ready(self, client: Client) -> None:
        self.connections += 1
        self._nicklen = client.nicklen or self._nicklen
        joined = ", ".join(sorted(client.channels)) or "no channels"
        logger.info("IRC: connected as %s, joined %s", client.nickname, joined)
        self._connected.set()
        self._joined.set()

    def client_disconnected(self, client: Client, expected: bool) -> None:
        if client is self._client:
            if not expected:
                logger.warning("IRC: connection lost")
            self._lost.set()
            self._drop_unconfirmed("the IRC connection was lost")
            for task in self._rejoins.values():
                task.cancel()  # the next connection joins every channel anew
            self._rejoins.clear()

    def echoed(self, target: str, label: str | None) -> None:
        self._confirm(target, None, label)

    def line_refused(self, target: str, reason: str, label: str | None) -> None:
        logger.warning("IRC refused a line in %s: %s", target, reason)
        self._confirm(target, reason or "refused", label)

    def _confirm(self, target: str, refusal: str | None, label: str | None) -> None:
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

    def _drop_unconfirmed(self, reason: str) -> None:
        self._labels.clear()
        for waiting in self._unconfirmed.values():
            for future in waiting:
                if not future.done():
                    future.set_result(reason)
        self._unconfirmed.clear()

    def join_refused(self, client: Client, channel: str, reason: str) -> None:
        if client is not self._client or self._halt.is_set():
            return
        delay = self._rejoin_delay(channel)
        logger.warning("IRC: cannot join %s: %s; trying again in %.1fs", channel, reason, delay)
        self._join_later(client, channel, delay)

    def kicked(self, client: Client, channel: str, by: str, reason: str) -> None:
        if client is not self._client or self._halt.is_set():
            return
        # Come back, but not at once: an operator kicking again and again (or a bot doing
        # it) must not meet a rejoin loop. The wait grows with each kick in a row.
        delay = self._rejoin_delay(channel)
        logger.warning(
            "IRC: kicked from %s by %s (%s); rejoining in %.1fs", channel, by, reason, delay
        )
        self._join_later(client, channel, delay)

    async def ctcp_version(self, client: Client, by: str) -> None:
        """Answer VERSION with our own text: once a minute per person, and only when the
        flood limit has a line to spare right now (never delaying an answer), else not."""
        text = _no_ctcp(self.config.ctcp_version).strip()
        if not text or client is not self._client or not client.connected:
            return
        now = time.monotonic()
        key = by.lower()
        if now - self._ctcp_answered.get(key, -_CTCP_INTERVAL) < _CTCP_INTERVAL:
            return
        self._ctcp_answered.pop(key, None)
        self._ctcp_answered[key] = now
        while len(self._ctcp_answered) > _CTCP_ASKERS:
            self._ctcp_answered.pop(next(iter(self._ctcp_answered)))
        if self._send_lock.locked() or not self._bucket.take_if_free():
            logger.debug("IRC: CTCP VERSION from %s left unanswered (busy)", by)
            return
        async with self._send_lock:
            self._expect_echo(client, by)
            with contextlib.suppress(OSError, TimeoutError, ProtocolViolation):
                await client.rawmsg("NOTICE", by, f"\x01VERSION {text}\x01")

    def _rejoin_delay(self, channel: str) -> float:
        """The wait before joining ``channel`` again: it doubles with each kick or refusal
        in a row, and starts over once the channel has left the bot alone for a while."""
        key = channel.lower()
        now = time.monotonic()
        repeats, last = self._rejoin_state.get(key, (0, now))
        if now - last > 2 * self.config.rejoin_delay_max:
            repeats = 0
        if len(self._rejoin_state) > _REJOIN_STATES:  # channels we were invited into, ...
            self._rejoin_state.pop(next(iter(self._rejoin_state)))
        self._rejoin_state[key] = (repeats + 1, now)
        initial = self.config.rejoin_delay_initial
        return float(min(initial * 2**repeats, max(self.config.rejoin_delay_max, initial)))

    def _join_later(self, client: Client, channel: str, delay: float) -> None:
        key = channel.lower()
        previous = self._rejoins.pop(key, None)
        if previous is not None:
            previous.cancel()
        task = asyncio.create_task(self._join_after(client, channel, delay))
        self._rejoins[key] = task
        task.add_done_callback(
            lambda t: self._rejoins.pop(key, None) if self._rejoins.get(key) is t else None
        )

    async def _join_after(self, client: Client, channel: str, delay: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._halt.wait()
                return
        if client is not self._client or not client.connected or client.in_channel(channel):
            return
        async with self._send_lock:  # a JOIN counts against the server's flood limit too
            wait = self._bucket.delay()
            if wait > 0:
                await asyncio.sleep(wait)
            with contextlib.suppress(OSError, TimeoutError, ProtocolViolation):
                await client.join(channel)

    def _line_time(self) -> datetime:
        """The line's time as the server gives it (server-time), else now."""
        client = self._client
        return (client.line_time() if client is not None else None) or datetime.now(UTC)

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

    def _channel(self, target: str, *, private: bool = False) -> ChannelRef:
        return ChannelRef("irc", target.lower(), name=target, is_direct=private)

    def _participant(self, nick: str) -> Participant:
        client = self._client
        if client is None:
            return Participant(f"irc:{nick.lower()}", nick)
        me = client.is_same_nick(nick, client.nickname)
        return Participant(f"irc:{nick.lower()}", nick, is_bot=me, identity=client.identity(nick))

    def _is_me(self, nick: str) -> bool:
        client = self._client
        return client is not None and client.is_same_nick(nick, client.nickname)

    async def channel_event(self, kind: str, target: str, nick: str, text: str) -> None:
        if self._stopping:
            return
        message = Message(
            uuid.uuid4().hex,
            self._channel(target),
            self._participant(nick),
            text,
            self._line_time(),
        )
        await self._record(message, kind)
        await self._note(kind, nick)

    async def _record(self, message: Message, kind: str, *, durable: bool = False) -> None:
        """Log one line; ``stop`` waits for writes under way so the store can close."""
        self._writes += 1
        self._writes_done.clear()
        try:
            await self._log.log_message(self._bot, message, kind, durable=durable)
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

    async def line(
        self, kind: str, target: str, nick: str, text: str, *, private: bool = False
    ) -> None:
        if self._stopping or self._is_me(nick):
            return  # our own lines come back with echo-message; ``send`` logged them whole
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
            uuid.uuid4().hex, channel, author, text, self._line_time(), mentions=mentions
        )
        if kind == "message" and await self._answer_question(message):
            return  # an answer to "may I run ...?" is not a new question for the bot
        await self._record(message, kind)
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
        key: str | None = None,
    ) -> Message:
        client = self._require_client()
        notes = file_lines(files, local=False)
        # No \x01 from the model or a tool: it would make a CTCP of the line (a DCC offer,
        # a VERSION request to everyone in the channel). Only "/me" makes an ACTION.
        body = _no_ctcp("\n".join([text, *notes])).strip()
        if body.startswith("/me "):
            room = self._room("PRIVMSG", channel.name) - len("\x01ACTION \x01")
            lines = [f"\x01ACTION {ln}\x01" for ln in irc_lines(body[4:], room)]
        else:
            lines = irc_lines(body, self._room("PRIVMSG", channel.name))
        message_id = key or uuid.uuid4().hex
        message = Message(message_id, channel, self.self_participant, body, datetime.now(UTC))
        # In the store before anyone sees it: a line shown must survive a crash.
        await self._record(message, "note" if note else "message", durable=True)
        shown = 0
        try:
            relayed: list[asyncio.Future[str | None]] = []
            for line in lines:
                echo = await self._send_line(client, "PRIVMSG", channel.name, line)
                if echo is None:
                    shown += 1  # no echo-message: a line sent counts as seen
                else:
                    relayed.append(echo)
            seen, refusal = await self._relayed(relayed)
            shown += seen
            if refusal is not None:
                raise PlatformError(f"IRC refused the message in {channel.name}: {refusal}")
        except PlatformError:
            if not shown:  # nobody saw any of it: it was never said
                await self._log.forget_message(self._bot, message.id)
            raise
        return message

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """A line is committed to the chat log (under its key) before it is sent, and taken
        back when sending it failed: found there, it went out."""
        return await self._log.logged(self._bot, channel, key)

    async def _relayed(self, echoes: list[asyncio.Future[str | None]]) -> tuple[int, str | None]:
        """How many of the lines were relayed before the first the server refused, and
        its reason (None: all relayed). A line with no answer in time counts as relayed."""
        if echoes:
            await asyncio.wait(echoes, timeout=_ECHO_TIMEOUT)
        for shown, echo in enumerate(echoes):
            refusal = echo.result() if echo.done() else None
            if refusal is not None:
                return shown, refusal
        return len(echoes), None

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        # Shown, never logged: a dot message is for people, and no bot reads it.
        client = self._require_client()
        for line in dot_lines(_no_ctcp(text), self._room("NOTICE", channel.name)):
            await self._send_line(client, "NOTICE", channel.name, line)

    def _room(self, command: str, target: str) -> int:
        """Text bytes per line: ``max_line_bytes``, and never past IRC's 512-byte line as
        the server relays it, our ``:nick!user@host`` prefix included (a server cuts what
        goes past). The margin covers a host the server changes after we joined."""
        client = self._client
        prefix = client.source_bytes() if client is not None else 0
        relayed = prefix + len(f"{command} {target} :".encode()) + _PREFIX_MARGIN
        return max(min(self.config.max_line_bytes, 510 - relayed), _MIN_ROOM)

    async def _send_line(
        self, client: Client, command: str, target: str, line: str
    ) -> asyncio.Future[str | None] | None:
        """Send one line, paced by the flood limit; PlatformError if the connection is gone
        (pydle's own writes time out after 30 s). Where the server echoes our lines, the
        future settles when it relays this one (None) or refuses it (the reason)."""
        async with self._send_lock:
            wait = self._bucket.delay()
            if wait > 0:
                await asyncio.sleep(wait)
            if client is not self._client or not client.connected:
                raise PlatformError("the IRC connection was lost while sending")
            echo = self._expect_echo(client, target)
            tags = self._label(echo) if echo is not None and client.labels else {}
            try:
                await client.rawmsg(command, target, line, tags=tags)
            except (OSError, TimeoutError, ProtocolViolation) as exc:
                raise PlatformError(f"cannot send to IRC: {exc}") from exc
            return echo

    def _label(self, echo: asyncio.Future[str | None]) -> dict[str, str]:
        """A label for the line ``echo`` waits on: the server's reply will carry it."""
        self._label_count += 1
        label = f"s{self._label_count}"
        self._labels[label] = echo
        while len(self._labels) > _UNCONFIRMED:
            self._labels.pop(next(iter(self._labels)))
        return {"label": label}

    def _expect_echo(self, client: Client, target: str) -> asyncio.Future[str | None] | None:
        if not client.echoes:
            return None
        waiting = self._unconfirmed.setdefault(target.lower(), deque())
        if len(waiting) >= _UNCONFIRMED:
            oldest = waiting.popleft()
            if not oldest.done():
                oldest.set_result(None)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        waiting.append(future)
        return future

    def _require_client(self) -> Client:
        client = self._client
        if client is None or not client.connected:
            raise PlatformError("not connected to IRC")
        return client

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
        if request.by_others:  # IRC has neither roles nor an operator: nobody could approve
            text = (
                f"{request.requester.name}: {request.description} needs the approval of "
                "someone else with an authorized role, or of the bot's operator, and nobody "
                "can give it on IRC."
            )
            await self.send(channel, text, note=True)
            return ApprovalDecision(Approval.CANCELLED)
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._questions[channel.key] = _Question(channel.key, request, future)
        who = request.requester
        if not who.identity:
            logger.warning(
                "IRC: %s has no identity on record (set before identities were kept); "
                "the approval in %s goes by the nick alone",
                who.name,
                channel.key,
            )
        question = f"{who.name}: may I run {request.description}? Answer yes or no."
        try:
            await self.send(channel, question, note=True)
            async with asyncio.timeout(request.timeout):
                return await future
        except TimeoutError:
            return ApprovalDecision(Approval.TIMEOUT)
        finally:
            self._questions.pop(channel.key, None)

    async def _answer_question(self, message: Message) -> bool:
        """Whether ``message`` answers the open question of its channel; the answer is
        logged as a note, so it never comes back to the model as conversation."""
        question = self._questions.get(message.channel.key)
        if question is None or question.answer.done():
            return False
        if not _same_person(message.author, question.request.requester):
            return False  # IRC has no roles: only the person who asked may answer
        word = message.text.strip().lower().rstrip(".!")
        word = word.split(":", 1)[-1].strip() if ":" in word else word
        if word in YES_ANSWERS:
            answer = Approval.APPROVED
        elif word in NO_ANSWERS:
            answer = Approval.CANCELLED
        else:
            return False
        await self._record(message, "note")
        question.answer.set_result(ApprovalDecision(answer, by=message.author.name))
        return True


def _no_ctcp(text: str) -> str:
    return text.replace("\x01", "")


def _same_person(author: Participant, requester: Participant) -> bool:
    """Identities where the requester has one (a nick can be taken by someone else);
    the nick for a requester recorded without."""
    if requester.identity:
        return author.identity == requester.identity
    return author.id == requester.id
