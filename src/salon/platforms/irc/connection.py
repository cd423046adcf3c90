"""The connection to the IRC server and its supervision: one pydle client at a time,
replaced with backoff when the server goes away (pydle's own reconnect is off: the
policy is ours). ``Connection`` is the client's owner: what the client tells
(``ClientEvents``) goes to the part of the platform concerned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from salon.config import IrcConfig, Secrets
from salon.errors import PlatformError
from salon.platforms.irc.client import Client
from salon.platforms.irc.ctcp import Ctcp
from salon.platforms.irc.incoming import Incoming
from salon.platforms.irc.joins import Joins
from salon.platforms.irc.nicks import Nicks
from salon.platforms.irc.sending import Sender

__all__ = ["Connection"]

logger = logging.getLogger(__name__)


class Connection:
    def __init__(
        self,
        *,
        config: IrcConfig,
        secrets: Secrets,
        halt: asyncio.Event,
        sender: Sender,
        joins: Joins,
        nicks: Nicks,
        ctcp: Ctcp,
        incoming: Incoming,
    ) -> None:
        """``halt``: set when the platform stops (Python 3.11 can swallow a cancel)."""
        self._config = config
        self._secrets = secrets
        self._halt = halt
        self._sender = sender
        self._joins = joins
        self._nicks = nicks
        self._ctcp = ctcp
        self._incoming = incoming
        self.client: Client | None = None  # the client of the connection now
        self.connections = 0  # the connections that got as far as joining
        self.connected = asyncio.Event()
        self._registered = asyncio.Event()
        self._lost = asyncio.Event()
        self._joined = asyncio.Event()

    def require(self) -> Client:
        client = self.client
        if client is None or not client.connected:
            raise PlatformError("not connected to IRC")
        return client

    async def wait_lost(self) -> None:
        """Return once the connection is down (at once if it is down already)."""
        client = self.client
        if client is not None and client.connected:
            await self._lost.wait()

    async def wait_next(self) -> None:
        """Wait for the next successful connection (``connections`` counts them)."""
        self._joined.clear()
        await self._joined.wait()

    async def quit(self, reason: str) -> None:
        """Say goodbye to the server, if connected."""
        client = self.client
        if client is not None and client.connected:
            await client.quit(reason)

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None and client.connected:
            with contextlib.suppress(Exception):
                await client.disconnect(expected=True)

    async def stay_connected(self) -> None:
        delay = self._config.reconnect_backoff_initial
        while not self._halt.is_set():
            for event in (self._lost, self._registered, self._joins.all_joined):
                event.clear()
            client = self._new_client()
            self.client = client
            try:
                if await self._session(client):
                    delay = self._config.reconnect_backoff_initial
            except (OSError, TimeoutError) as exc:
                logger.warning(
                    "IRC: cannot connect to %s:%d: %s", self._config.server, self._config.port, exc
                )
            finally:
                self.connected.clear()
                with contextlib.suppress(Exception):
                    await client.disconnect(expected=True)
            if self._halt.is_set():
                return
            logger.info("IRC: reconnecting in %.1fs", delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._halt.wait()
            delay = min(max(delay * 2, 0.1), self._config.reconnect_backoff_max)

    async def _session(self, client: Client) -> bool:
        """One connection, until it drops; whether it got as far as being registered."""
        config = self._config
        async with asyncio.timeout(config.connect_timeout):
            await client.connect(
                config.server,
                config.port,
                tls=config.tls,
                tls_verify=config.tls_verify,
                password=self._secrets.get(config.password_env),
            )
        try:
            async with asyncio.timeout(config.register_timeout):
                if not await self._unless_lost(self._registered):
                    return False
        except TimeoutError:
            logger.warning("IRC: no welcome from the server within %.0fs", config.register_timeout)
            return False
        try:
            async with asyncio.timeout(config.join_timeout):
                if not await self._unless_lost(self._joins.all_joined):
                    return True
        except TimeoutError:
            missing = self._joins.missing
            logger.warning("IRC: could not join %s within %.0fs", missing, config.join_timeout)
        self._ready(client)
        regain = asyncio.create_task(self._nicks.regain(client))
        try:
            await self._unless_lost(self._lost)  # until the connection drops, or stop()
        finally:
            regain.cancel()
            await asyncio.gather(regain, return_exceptions=True)
        return True

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
        config = self._config
        kwargs: dict[str, Any] = {
            "fallback_nicknames": config.fallback_nicks,
            "username": config.username,
            "realname": config.realname,
        }
        if config.sasl_mechanism == "EXTERNAL":
            kwargs["sasl_mechanism"] = "EXTERNAL"
        elif config.sasl_username:
            kwargs["sasl_username"] = config.sasl_username
            kwargs["sasl_password"] = self._secrets.get(config.sasl_password_env)
        if config.tls_client_cert:
            kwargs["tls_client_cert"] = config.tls_client_cert
            kwargs["tls_client_cert_key"] = config.tls_client_key
        return Client(self, config.nick, nicklen=self._nicks.nicklen, **kwargs)

    def _ready(self, client: Client) -> None:
        self.connections += 1
        self._nicks.registered(client)
        joined = ", ".join(sorted(client.channels)) or "no channels"
        logger.info("IRC: connected as %s, joined %s", client.nickname, joined)
        self.connected.set()
        self._joined.set()

    # What the client tells (``ClientEvents``), in the order the server sent it.

    async def client_connected(self, client: Client) -> None:
        if client is not self.client:
            return
        self._nicks.check_sasl(client)
        self._registered.set()
        await self._joins.join_all(client)

    def client_disconnected(self, client: Client, expected: bool) -> None:
        if client is self.client:
            if not expected:
                logger.warning("IRC: connection lost")
            self._lost.set()
            self._sender.drop_unconfirmed("the IRC connection was lost")
            self._joins.cancel()  # the next connection joins every channel anew

    def channel_joined(self, client: Client, channel: str) -> None:
        self._joins.joined(client, channel)

    async def line(
        self, kind: str, target: str, nick: str, text: str, *, private: bool = False
    ) -> None:
        await self._incoming.line(kind, target, nick, text, private=private)

    async def channel_event(self, kind: str, target: str, nick: str, text: str) -> None:
        await self._incoming.channel_event(kind, target, nick, text)

    def told(self, source: str, text: str) -> None:
        self._incoming.told(source, text)

    def echoed(self, target: str, label: str | None) -> None:
        self._sender.confirm(target, None, label)

    def line_refused(self, target: str, reason: str, label: str | None) -> None:
        logger.warning("IRC refused a line in %s: %s", target, reason)
        self._sender.confirm(target, reason or "refused", label)

    def join_refused(self, client: Client, channel: str, reason: str) -> None:
        self._joins.refused(client, channel, reason)

    def kicked(self, client: Client, channel: str, by: str, reason: str) -> None:
        self._joins.kicked(client, channel, by, reason)

    async def ctcp_version(self, client: Client, by: str) -> None:
        await self._ctcp.version(client, by)

    def nick_refused(self, client: Client, nick: str, reason: str) -> None:
        self._nicks.refused(client, nick, reason)

    async def no_nick(self, client: Client) -> None:
        await self._nicks.none_left(client)

    def logged_in(self, client: Client, account: str) -> None:
        self._nicks.logged_in(account)

    def sasl_failed(self, client: Client, mechanism: str, reason: str) -> None:
        self._nicks.sasl_failed(mechanism, reason)
