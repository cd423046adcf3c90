"""CTCP: VERSION is answered with our own text, rarely and never at the expense of other
lines; every other request is left unanswered (``/me`` ACTIONs are lines people write)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from salon.config import IrcConfig
from salon.platforms.irc.client import Client
from salon.platforms.irc.lines import no_ctcp
from salon.platforms.irc.sending import Sender

__all__ = ["Ctcp"]

logger = logging.getLogger(__name__)

_CTCP_INTERVAL = 60.0  # seconds between two CTCP answers to the same person
_CTCP_ASKERS = 256  # people remembered for that


class Ctcp:
    def __init__(
        self, config: IrcConfig, current: Callable[[], Client | None], sender: Sender
    ) -> None:
        """``current``: the client of the connection now."""
        self._config = config
        self._current = current
        self._sender = sender
        self._answered: dict[str, float] = {}  # nick: when we last answered a CTCP

    async def version(self, client: Client, by: str) -> None:
        """Answer VERSION with our own text: once a minute per person, and only when the
        flood limit has a line to spare right now (never delaying an answer), else not."""
        text = no_ctcp(self._config.ctcp_version).strip()
        if not text or client is not self._current() or not client.connected:
            return
        now = time.monotonic()
        key = by.lower()
        if now - self._answered.get(key, -_CTCP_INTERVAL) < _CTCP_INTERVAL:
            return
        self._answered.pop(key, None)
        self._answered[key] = now
        while len(self._answered) > _CTCP_ASKERS:
            self._answered.pop(next(iter(self._answered)))
        if not await self._sender.spare_line(client, "NOTICE", by, f"\x01VERSION {text}\x01"):
            logger.debug("IRC: CTCP VERSION from %s left unanswered (busy)", by)
