"""pydle's client as Salon uses it: lines people write are handled in order, and each line
tells who wrote it (see ``Client.identity``)."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Coroutine
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Protocol

import pydle  # type: ignore[import-untyped]
from pydle.features.ircv3 import cap  # type: ignore[import-untyped]
from pydle.features.whox import WHOXSupport  # type: ignore[import-untyped]

__all__ = ["Client", "ClientEvents"]

logger = logging.getLogger(__name__)

# 404 too: a refused line is matched to the lines sent in the order the server answers.
_IN_ORDER = frozenset({"PRIVMSG", "NOTICE", "JOIN", "PART", "QUIT", "KICK", "NICK", 404, 477})
# Why a JOIN fails: no such channel, too many channels, full, invite only, banned, bad
# key, needs a registered nick, needs TLS.
_JOIN_REFUSALS = frozenset({403, 405, 471, 473, 474, 475, 477, 489})
_RFC1459_NICKLEN = 9  # the shortest limit a server may have: made-up nicks fit it
_MADE_UP_NICKS = 3  # nicks tried past the configured ones (nick1, nick2, ...)
_SASL_TIMEOUT = 15.0  # for the server's answer to each step of SASL
_SASL_CHUNK = 400  # AUTHENTICATE carries at most this many bytes of base64
_MAX_ASKING = 100  # WHOIS requests awaiting a reply; past that, accounts are not asked

_LINE: ContextVar[Any] = ContextVar("salon_irc_line", default=None)
"""The server line being handled in order, for the handlers pydle calls with a nick only."""


class ClientEvents(Protocol):
    """What a ``Client`` tells its owner (the platform's ``Connection``), in the order the server
    sent it."""

    async def client_connected(self, client: Client) -> None:
        """Registration is done: join the channels."""

    def client_disconnected(self, client: Client, expected: bool) -> None:
        """The connection ended (``expected`` when we asked for it)."""

    def channel_joined(self, client: Client, channel: str) -> None:
        """The server confirmed one of our own JOINs."""

    async def line(
        self, kind: str, target: str, nick: str, text: str, *, private: bool = False
    ) -> None:
        """Someone wrote ``text`` (``kind`` is "message" or "action") in ``target``."""

    async def channel_event(self, kind: str, target: str, nick: str, text: str) -> None:
        """A notice, join, part, kick, quit or nick change seen in channel ``target``."""

    def told(self, source: str, text: str) -> None:
        """A server, or services in a private notice, told us ``text``: for the log only."""

    def echoed(self, target: str, label: str | None) -> None:
        """The server relayed one of our lines to ``target`` (IRCv3 echo-message), with
        the label we gave it (IRCv3 labeled-response) where it carries one."""

    def line_refused(self, target: str, reason: str, label: str | None) -> None:
        """The server refused our line to ``target`` (404: moderated, banned, ...)."""

    def join_refused(self, client: Client, channel: str, reason: str) -> None:
        """The server refused to let us join ``channel`` (banned, invite only, ...)."""

    def kicked(self, client: Client, channel: str, by: str, reason: str) -> None:
        """``by`` kicked us out of ``channel``."""

    async def ctcp_version(self, client: Client, by: str) -> None:
        """``by`` asked which client we are (CTCP VERSION)."""

    def nick_refused(self, client: Client, nick: str, reason: str) -> None:
        """The server refused ``nick`` (in use, erroneous, too long, unavailable)."""

    async def no_nick(self, client: Client) -> None:
        """Every nick we could try during registration was refused."""

    def logged_in(self, client: Client, account: str) -> None:
        """The server says we are logged into services ``account`` (900)."""

    def sasl_failed(self, client: Client, mechanism: str, reason: str) -> None:
        """SASL with ``mechanism`` did not log us in."""


def _label(message: Any) -> str | None:
    label = getattr(message, "tags", {}).get("label")
    return label if isinstance(label, str) else None


def _is_person(source: str | None) -> bool:
    """Whether a line's source is a client (``nick!user@host``) rather than a server."""
    return bool(source) and "!" in str(source)


class Client(pydle.Client):  # type: ignore[misc]
    """pydle's client with its callbacks routed to its owner's ``ClientEvents``."""

    RECONNECT_ON_ERROR = False
    stall_seconds = 30.0  # an in-order line taking longer is logged and left to finish alone

    def __init__(
        self,
        events: ClientEvents,
        nickname: str,
        *args: Any,
        nicklen: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(nickname, *args, **kwargs)
        self.events = events
        self.primary_nick = nickname
        # The nicks left to try; ``nicklen`` is the server's NICKLEN from an earlier connection.
        self._nick_queue = self._candidates(nicklen)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._asking: set[asyncio.Task[Any]] = set()
        self._own_source = ""  # nick!user@host as the server relays our lines
        self._quitting = False
        self.sasl_tried = False
        self._sasl_timer: asyncio.TimerHandle | None = None

    def _candidates(self, nicklen: int | None) -> list[str]:
        """The nicks to try after the first: the configured fallbacks that fit the server's
        NICKLEN (where known), then a few made up from the nick that fit any server."""
        made_up = [
            f"{self.primary_nick[: (nicklen or _RFC1459_NICKLEN) - 1]}{n}"
            for n in range(1, _MADE_UP_NICKS + 1)
        ]
        nicks: list[str] = []
        for nick in [*self._nicknames[1:], *made_up]:
            if (nicklen is None or len(nick) <= nicklen) and nick not in nicks:
                nicks.append(nick)
        return nicks

    @property
    def nicklen(self) -> int | None:
        """The server's NICKLEN as it told (ISUPPORT), once registered."""
        value = self._isupport.get("NICKLEN")
        return int(value) if isinstance(value, str) and value.isdigit() else None

    def topic(self, channel: str) -> str:
        """The channel's topic as last seen (332 on join, TOPIC since), or ""."""
        if not self.in_channel(channel):
            return ""
        return str(self.channels[channel].get("topic") or "")

    async def _nick_refused(self, message: Any) -> None:
        params = message.params
        nick = str(params[1]) if len(params) > 2 else "?"
        self.events.nick_refused(self, nick, f"{params[-1] if params else ''} ({message.command})")
        if self.registered:
            return  # trying to regain our nick: we keep the one we have
        if self._nick_queue:
            await self.set_nickname(self._nick_queue.pop(0))
        else:
            await self.events.no_nick(self)

    # Not pydle's own: it tries nick_, nick__, ... for ever, past the server's NICKLEN.
    on_raw_432 = _nick_refused  # erroneous (InspIRCd: also too long)
    on_raw_433 = _nick_refused  # in use
    on_raw_437 = _nick_refused  # temporarily unavailable

    async def _regain(self, freed: str) -> None:
        """Take our own nick back when its holder leaves it."""
        mine = self.is_same_nick(self.nickname, self.primary_nick)
        if not mine and self.is_same_nick(freed, self.primary_nick):
            await self.set_nickname(self.primary_nick)

    async def handle_forever(self) -> None:
        try:
            await super().handle_forever()
        except OSError as exc:
            # pydle's reader ends on a reset connection without telling anyone: the client
            # would stay "connected", deaf, and never reconnect.
            logger.warning("IRC: connection failed: %s", exc)
            if self.connected:
                await self.disconnect(expected=False)

    async def on_data(self, data: bytes) -> None:
        # pydle runs each message in a task of its own, which can reorder lines. Lines people
        # write (and joins, parts...) are handled in turn, so the log and the context keep
        # their order; the rest (registration, CAP, WHOIS replies) stays concurrent.
        self._receive_buffer += data
        while self._has_message():
            message = self._parse_message()
            if message.command in _IN_ORDER:
                await self._in_order(message)
            else:
                self._spawn(self._tasks, self._handle(message))

    async def _in_order(self, message: Any) -> None:
        """Handle one line before the next is read; one that stalls is logged and left to
        finish on its own, so the connection never goes deaf."""
        token = _LINE.set(message)
        try:
            task = asyncio.create_task(self._handle(message))  # sees _LINE
        finally:
            _LINE.reset(token)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.stall_seconds)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            logger.error(
                "IRC: handling %s stalled for %.1fs; reading on",
                message.command,
                self.stall_seconds,
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _spawn(self, tasks: set[asyncio.Task[Any]], work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def whois(self, nickname: str) -> Any:
        if _LINE.get() is None:
            return await super().whois(nickname)
        # pydle's account tracking asks on every NICK (AccountSupport._rename_user) and waits
        # for the reply, which in-order handling reads only after this line: ask, don't wait.
        if len(self._asking) < _MAX_ASKING:
            self._spawn(self._asking, super().whois(nickname))
        return None

    async def _create_user(self, nickname: str) -> None:
        # pydle's WHOX feature sends a WHOIS for every new nick: a flood in a big channel.
        super(WHOXSupport, self)._create_user(nickname)

    async def _handle(self, message: Any) -> None:
        try:
            await self.on_raw(message)
        except Exception:  # one bad line must not end the connection
            logger.exception("IRC: failed to handle %s", message.command)

    # SASL (IRCv3 sasl 3.1/3.2), PLAIN or EXTERNAL: ours, not pydle's, which needs the
    # pure-sasl package for PLAIN and skips SASL silently without it.

    def _sasl_choice(self) -> str | None:
        if self.sasl_mechanism:
            return str(self.sasl_mechanism).upper()
        return "PLAIN" if self.sasl_username and self.sasl_password else None

    async def on_capability_sasl_available(self, value: Any) -> bool:
        mechanism = self._sasl_choice()
        if mechanism is None:
            return False
        self.sasl_tried = True
        offered = str(value).upper().split(",") if isinstance(value, str) and value else None
        if offered is not None and mechanism not in offered:
            self.events.sasl_failed(self, mechanism, f"the server offers {', '.join(offered)}")
            return False
        return True

    async def on_capability_sasl_enabled(self) -> Any:
        await self.rawmsg("AUTHENTICATE", self._sasl_choice())
        self._sasl_wait()
        return cap.NEGOTIATING

    def _sasl_wait(self) -> None:
        if self._sasl_timer is not None:
            self._sasl_timer.cancel()
        loop = asyncio.get_running_loop()
        self._sasl_timer = loop.call_later(
            _SASL_TIMEOUT, lambda: self._spawn(self._tasks, self._sasl_timed_out())
        )

    async def _sasl_timed_out(self) -> None:
        self.events.sasl_failed(self, self._sasl_choice() or "", "no answer from the server")
        await self._send_secret("AUTHENTICATE *")
        await self._sasl_done()

    async def _sasl_done(self) -> None:
        if self._sasl_timer is not None:
            self._sasl_timer.cancel()
            self._sasl_timer = None
            await self._capability_negotiated("sasl")

    async def on_raw_authenticate(self, message: Any) -> None:
        if not message.params or message.params[0] != "+" or self._sasl_timer is None:
            return  # PLAIN and EXTERNAL start from an empty challenge, and have no other
        if self._sasl_choice() == "EXTERNAL":
            payload = b""  # the server knows us by our TLS client certificate
        else:
            identity = self.sasl_identity or ""
            payload = f"{identity}\0{self.sasl_username}\0{self.sasl_password}".encode()
        encoded = base64.b64encode(payload).decode("ascii")
        for start in range(0, len(encoded), _SASL_CHUNK):
            await self._send_secret(f"AUTHENTICATE {encoded[start : start + _SASL_CHUNK]}")
        if len(encoded) % _SASL_CHUNK == 0:  # empty, or ends on a full chunk
            await self._send_secret("AUTHENTICATE +")
        self._sasl_wait()

    async def _send_secret(self, line: str) -> None:
        """Send a line past pydle's debug log: it carries the password."""
        await self.connection.send(f"{line}\r\n".encode())

    async def on_raw_900(self, message: Any) -> None:
        if len(message.params) > 2:
            self.events.logged_in(self, str(message.params[2]))

    async def on_raw_903(self, message: Any) -> None:
        await self._sasl_done()

    async def on_raw_907(self, message: Any) -> None:  # already logged in
        await self._sasl_done()

    async def on_raw_908(self, message: Any) -> None:
        """The mechanisms the server knows: a 904 follows."""

    async def _sasl_refused(self, message: Any) -> None:
        reason = str(message.params[-1]) if message.params else ""
        self.events.sasl_failed(self, self._sasl_choice() or "", f"{reason} ({message.command})")
        await self._sasl_done()

    on_raw_902 = _sasl_refused  # nick locked
    on_raw_904 = _sasl_refused  # authentication failed
    on_raw_905 = _sasl_refused  # too long
    on_raw_906 = _sasl_refused  # aborted

    async def quit(self, message: str | None = None) -> None:
        self._quitting = True
        await super().quit(message)

    async def on_raw_error(self, message: Any) -> None:
        if self._quitting:  # "ERROR :Closing link ... [bye]": the answer to our QUIT
            await self.disconnect(expected=True)
            return
        logger.warning("IRC: the server closes the connection: %s", " ".join(message.params))
        await super().on_raw_error(message)

    async def on_connect(self) -> None:
        await super().on_connect()
        await self.events.client_connected(self)

    async def on_disconnect(self, expected: bool) -> None:
        for task in list(self._asking):
            task.cancel()  # no reply will come on this connection
        await super().on_disconnect(expected)
        self.events.client_disconnected(self, expected)

    async def on_raw(self, message: Any) -> None:
        command, params = message.command, message.params
        if command in (404, *_JOIN_REFUSALS) and len(params) > 1:
            target = str(params[1])
            reason = str(params[-1]) if len(params) > 2 else ""
            # 477 and 489 also refuse a line to a channel we are in (InspIRCd's +M).
            if command == 404 or (command in {477, 489} and self.in_channel(target)):
                self.events.line_refused(target, reason, _label(message))
            else:
                self.events.join_refused(self, target, reason)
        await super().on_raw(message)

    def capability(self, name: str) -> bool:
        """Whether the server granted the IRCv3 capability ``name``."""
        return bool(self._capabilities.get(name))

    # IRCv3 capabilities pydle does not ask for by itself. server-time dates each line;
    # batch is needed for labeled-response, which names the line a reply answers.
    async def on_capability_server_time_available(self, value: Any) -> bool:
        return True

    async def on_capability_batch_available(self, value: Any) -> bool:
        return True

    async def on_capability_labeled_response_available(self, value: Any) -> bool:
        return True

    async def on_raw_batch(self, message: Any) -> None:
        """A batch opens or closes: the lines inside it are handled one by one."""

    async def on_raw_ack(self, message: Any) -> None:
        """A labelled command needed no reply."""

    def line_time(self) -> datetime | None:
        """When the server says the line being handled was sent (IRCv3 server-time)."""
        line = _LINE.get()
        stamp = (
            line.tags.get("time") if line is not None and self.capability("server-time") else None
        )
        if not isinstance(stamp, str):
            return None
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            return None
        return when if when.tzinfo is not None else None

    def _echo(self, message: Any) -> bool:
        """Whether the line is one of ours come back (the server relayed it); the owner
        is told."""
        if message.params and _is_person(message.source):
            nick = self._parse_user(message.source)[0]
            if self.is_same_nick(nick, self.nickname):
                self.events.echoed(str(message.params[0]), _label(message))
                return True
        return False

    async def on_raw_privmsg(self, message: Any) -> None:
        self._echo(message)
        # Only people (nick!user@host) talk to the bot: a server's PRIVMSG (InspIRCd's
        # "Raw I/O logging is enabled", a bouncer's status line) is logged, never answered.
        if _is_person(message.source):
            await super().on_raw_privmsg(message)
        elif len(message.params) > 1:
            self.events.told(message.source or "the server", message.params[1])

    async def on_raw_notice(self, message: Any) -> None:
        mine = self._echo(message)
        person = _is_person(message.source)
        if not mine and len(message.params) > 1 and not self.is_channel(message.params[0]):
            self.events.told(message.source or "the server", message.params[1])
        if person:
            await super().on_raw_notice(message)

    async def on_raw_001(self, message: Any) -> None:
        await super().on_raw_001(message)
        # "Welcome to the Network nick!user@host", as most servers (InspIRCd, Solanum) say.
        words = str(message.params[-1]).split() if message.params else []
        if words and "!" in words[-1] and "@" in words[-1]:
            self._own_source = words[-1]

    async def on_raw_join(self, message: Any) -> None:
        if _is_person(message.source):
            nick = self._parse_user(message.source)[0]
            if self.is_same_nick(nick, self.nickname):
                self._own_source = str(message.source)  # as the server relays us now
        await super().on_raw_join(message)

    @property
    def echoes(self) -> bool:
        """Whether the server relays our own lines back to us (IRCv3 echo-message)."""
        return self.capability("echo-message")

    @property
    def labels(self) -> bool:
        """Whether the server names the line each reply answers (IRCv3 labeled-response)."""
        return self.capability("labeled-response")

    def source_bytes(self) -> int:
        """How many bytes the server's ``:nick!user@host `` takes on our relayed lines;
        while unknown, the longest user and host a server allows."""
        user_host = self._own_source.partition("!")[2] or "u" * 10 + "@" + "h" * 63
        return len(f":{self.nickname}!{user_host} ".encode())

    async def on_channel_message(self, target: str, by: str, message: str) -> None:
        await self.events.line("message", target, by, message)

    async def on_private_message(self, target: str, by: str, message: str) -> None:
        await self.events.line("message", by, by, message, private=True)

    async def on_ctcp_version(self, by: str, target: str, contents: str | None) -> None:
        # Not pydle's own answer: it goes out at once, unpaced, and names the library.
        await self.events.ctcp_version(self, by)

    async def on_ctcp_action(self, by: str, target: str, contents: str) -> None:
        private = not self.is_channel(target)
        await self.events.line("action", by if private else target, by, contents, private=private)

    async def on_notice(self, target: str, by: str, message: str) -> None:
        if by and self.is_channel(target) and not self.is_same_nick(by, self.nickname):
            await self.events.channel_event("notice", target, by, message)

    async def on_join(self, channel: str, user: str) -> None:
        await self.events.channel_event("join", channel, user, "")
        if self.is_same_nick(user, self.nickname):
            self.events.channel_joined(self, channel)

    async def on_part(self, channel: str, user: str, message: str | None = None) -> None:
        await self.events.channel_event("part", channel, user, message or "")

    async def on_kick(self, channel: str, target: str, by: str, reason: str | None = None) -> None:
        await self.events.channel_event("kick", channel, by, f"{target} {reason or ''}".strip())
        if self.is_same_nick(target, self.nickname):
            self.events.kicked(self, channel, by, reason or "")

    async def on_raw_quit(self, message: Any) -> None:
        nick = self._parse_user(message.source)[0]
        where = [c for c, info in self.channels.items() if nick in info["users"]]
        await super().on_raw_quit(message)
        for channel in where:
            reason = message.params[0] if message.params else ""
            await self.events.channel_event("quit", channel, nick, reason)
        await self._regain(nick)

    async def on_raw_nick(self, message: Any) -> None:
        old = self._parse_user(message.source)[0]
        new = message.params[0]
        where = [c for c, info in self.channels.items() if old in info["users"]]
        was_me = self.is_same_nick(old, self.nickname)
        await super().on_raw_nick(message)
        if was_me and not self.is_same_nick(old, new):
            logger.info("IRC: now known as %s", new)
        for channel in where:
            await self.events.channel_event("nick", channel, old, new)
        await self._regain(old)

    def identity(self, nick: str) -> str:
        """The strongest identity the server vouches for behind ``nick`` on the line being
        handled: ``account:NAME``, else ``nick!user@host``; empty when the line is not
        from ``nick`` (or no line is being handled)."""
        line = _LINE.get()
        if line is None or not line.source:
            return ""
        source, mask = self._parse_user(line.source)
        if not source or not self.is_same_nick(source, nick):
            return ""
        account = self._account(line, nick)
        if account:
            return f"account:{self.normalize(account)}"
        user, host = mask.get("username"), mask.get("hostname")
        return f"{self.normalize(nick)}!{user}@{host.lower()}" if user and host else ""

    def _account(self, line: Any, nick: str) -> str | None:
        """The services account the server says ``nick`` is logged into, or None."""
        if self._capabilities.get("account-tag"):
            tag = line.tags.get("account")  # on every line of a logged-in user, and only then
            return tag if isinstance(tag, str) else None
        if line.command == "JOIN" and self._capabilities.get("extended-join"):
            account = line.params[1] if len(line.params) > 2 else "*"
            return None if account == "*" else str(account)
        # Tracked only while we share a channel: pydle forgets a user who quits, so a nick
        # taken over afterwards starts without the old account.
        shared = any(nick in info["users"] for info in self.channels.values())
        account = self.users.get(nick, {}).get("account") if shared else None
        return account if isinstance(account, str) and account else None
