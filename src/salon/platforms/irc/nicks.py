"""Who the bot is on the network: its nick (refused ones, the server's NICKLEN, taking its
own back from a fallback) and its services login (SASL)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from salon.config import IrcConfig
from salon.platforms.irc.client import Client
from salon.platforms.irc.sending import SEND_ERRORS, Sender

__all__ = ["Nicks"]

logger = logging.getLogger(__name__)

_REGAIN_INTERVAL = 60.0  # seconds between asking for our own nick back


class Nicks:
    def __init__(
        self, config: IrcConfig, current: Callable[[], Client | None], sender: Sender
    ) -> None:
        """``current``: the client of the connection now."""
        self._config = config
        self._current = current
        self._sender = sender
        self.nicklen: int | None = None  # the server's NICKLEN, once it said it

    def registered(self, client: Client) -> None:
        """Registration is done: keep the server's NICKLEN for the next connection's nicks."""
        self.nicklen = client.nicklen or self.nicklen

    async def regain(self, client: Client) -> None:
        """On a fallback nick, ask for our own now and then: its holder may have left
        unseen (the client also asks at once when it sees the holder quit or rename)."""
        while True:
            await asyncio.sleep(_REGAIN_INTERVAL)  # a timer, not a wait for an event
            if not client.is_same_nick(client.nickname, self._config.nick):
                async with self._sender.paced():
                    with contextlib.suppress(*SEND_ERRORS):
                        await client.set_nickname(self._config.nick)

    def refused(self, client: Client, nick: str, reason: str) -> None:
        if client is not self._current():
            return
        if client.registered:  # asking for our own nick back: routine, not news
            logger.info("IRC: nick %s refused: %s; keeping %s", nick, reason, client.nickname)
        else:
            logger.warning("IRC: nick %s refused: %s", nick, reason)

    async def none_left(self, client: Client) -> None:
        if client is not self._current():
            return
        logger.error(
            "IRC: every nick was refused on %s (see above); reconnecting with backoff",
            self._config.server,
        )
        with contextlib.suppress(Exception):
            await client.quit("no free nick")

    def check_sasl(self, client: Client) -> None:
        """At registration: say so when SASL is configured and the server never offered it."""
        wants_sasl = self._config.sasl_username or self._config.sasl_mechanism == "EXTERNAL"
        if wants_sasl and not client.sasl_tried:
            logger.error("IRC: SASL is configured but %s does not offer it", self._config.server)

    def logged_in(self, account: str) -> None:
        logger.info("IRC: logged in as %s", account)

    def sasl_failed(self, mechanism: str, reason: str) -> None:
        # The password never: the account name and the server's words only.
        who = self._config.sasl_username or "the TLS certificate"
        logger.error("IRC: SASL %s as %s failed: %s; going on unidentified", mechanism, who, reason)
