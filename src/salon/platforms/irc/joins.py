"""Our channels: joined at each connection, and joined again after a kick or a refused
JOIN (banned, invite only, ...) with a wait that grows while it goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from salon.config import IrcConfig
from salon.platforms.irc.client import Client
from salon.platforms.irc.sending import SEND_ERRORS, Sender

__all__ = ["Joins"]

logger = logging.getLogger(__name__)

_REJOIN_STATES = 1000


class Joins:
    def __init__(
        self,
        config: IrcConfig,
        current: Callable[[], Client | None],
        sender: Sender,
        halt: asyncio.Event,
    ) -> None:
        """``current``: the client of the connection now; ``halt``: set when the platform
        stops (no join is tried after it)."""
        self._config = config
        self._current = current
        self._sender = sender
        self._halt = halt
        self.all_joined = asyncio.Event()  # every channel of the config, this connection
        self._joining: set[str] = set()
        self._rejoins: dict[str, asyncio.Task[None]] = {}
        self._rejoin_state: dict[str, tuple[int, float]] = {}  # channel: (repeats, when)

    async def join_all(self, client: Client) -> None:
        """A new registration: join every channel of the config."""
        self._joining = {c.lower() for c in self._config.channels}
        for channel in self._config.channels:
            await client.join(channel)
        if not self._joining:
            self.all_joined.set()

    @property
    def missing(self) -> str:
        """The channels not joined yet, for the log."""
        return ", ".join(sorted(self._joining))

    def joined(self, client: Client, channel: str) -> None:
        """The server confirmed one of our JOINs (also after a kick)."""
        if client is self._current() and channel.lower() in self._joining:
            self._joining.discard(channel.lower())
            if not self._joining:
                self.all_joined.set()

    def refused(self, client: Client, channel: str, reason: str) -> None:
        if client is not self._current() or self._halt.is_set():
            return
        delay = self._delay(channel)
        logger.warning("IRC: cannot join %s: %s; trying again in %.1fs", channel, reason, delay)
        self._join_later(client, channel, delay)

    def kicked(self, client: Client, channel: str, by: str, reason: str) -> None:
        if client is not self._current() or self._halt.is_set():
            return
        # Come back, but not at once: an operator kicking again and again (or a bot doing
        # it) must not meet a rejoin loop. The wait grows with each kick in a row.
        delay = self._delay(channel)
        logger.warning(
            "IRC: kicked from %s by %s (%s); rejoining in %.1fs", channel, by, reason, delay
        )
        self._join_later(client, channel, delay)

    def cancel(self) -> None:
        """Drop the joins waiting their turn (the next connection joins every channel)."""
        for task in self._rejoins.values():
            task.cancel()
        self._rejoins.clear()

    def _delay(self, channel: str) -> float:
        """The wait before joining ``channel`` again: it doubles with each kick or refusal
        in a row, and starts over once the channel has left the bot alone for a while."""
        key = channel.lower()
        now = time.monotonic()
        repeats, last = self._rejoin_state.get(key, (0, now))
        if now - last > 2 * self._config.rejoin_delay_max:
            repeats = 0
        if len(self._rejoin_state) > _REJOIN_STATES:  # channels we were invited into, ...
            self._rejoin_state.pop(next(iter(self._rejoin_state)))
        self._rejoin_state[key] = (repeats + 1, now)
        initial = self._config.rejoin_delay_initial
        return float(min(initial * 2**repeats, max(self._config.rejoin_delay_max, initial)))

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
        if client is not self._current() or not client.connected or client.in_channel(channel):
            return
        async with self._sender.paced():  # a JOIN counts against the flood limit too
            with contextlib.suppress(*SEND_ERRORS):
                await client.join(channel)
