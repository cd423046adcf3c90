"""What the Matrix adapter keeps in the store between runs, as delivery cursors
(``SQLStore.delivery``): where its sync stopped reading (``next_batch``), so a start goes
on from there and nothing said while the bot was away is lost; and the encrypted rooms it
has told that it does not read them, so each is told once, ever.

Neither may stop the bot: a store that cannot be read or written is logged, and the bot
starts afresh (what was said while it was away is then history, not answered) or tells a
room again at the next start.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from salon.errors import PlatformError
from salon.model import ChannelRef
from salon.platforms.adapter import Cursors

__all__ = ["ENCRYPTED_REFUSAL", "Cursors", "EncryptedRooms", "Kept"]

logger = logging.getLogger(__name__)

ENCRYPTED_REFUSAL = "This room is encrypted, and Salon does not read encrypted rooms."
_ENCRYPTED_KEPT = 1000  # encrypted rooms remembered: a bound
_TELL_QUEUE = 1000  # encrypted rooms waiting to be told: a bound
_TELL_TRIES = 3  # a refusal the homeserver could not take now is tried this often


@dataclass
class Kept:
    """``bot``'s cursors; ``max_age`` is the config's ``catch_up.max_age`` now (0: the bot
    reads nothing back, so it keeps no sync position either)."""

    cursors: Cursors
    bot: str
    max_age: Callable[[], float]
    _failing: bool = field(default=False, init=False)  # logged once until a write succeeds

    async def sync_position(self, me: str) -> str | None:
        """Where ``me``'s sync stopped reading (None: none kept, or catch-up is off)."""
        if self.max_age() <= 0:
            return None
        since = await self.read(f"matrix.sync {me}")
        if since:
            logger.info("Matrix: reading on from where the bot stopped")
        return since or None

    async def keep_sync_position(self, me: str, since: str) -> None:
        if self.max_age() > 0:
            await self.write(f"matrix.sync {me}", since)

    def oldest(self) -> float:
        """Epoch milliseconds: events older are context only, not answered."""
        return (time.time() - self.max_age()) * 1000

    async def read(self, name: str) -> str | None:
        try:
            return await self.cursors.cursor(self.bot, name)
        except Exception as exc:  # the store is away: start without it
            logger.warning("Matrix: could not read %s from the store: %s", name, exc)
            return None

    async def write(self, name: str, value: str) -> None:
        try:
            await self.cursors.save_cursor(self.bot, name, value)
        except Exception as exc:  # the next write tries again
            if not self._failing:
                logger.warning("Matrix: could not keep %s in the store: %s", name, exc)
            self._failing = True
            return
        self._failing = False


class EncryptedRooms:
    """Rooms with ``m.room.encryption``: their events are not read (Salon keeps no crypto
    store), and each is told so in one notice, once ever, by a task of its own (``run``),
    so the sync never waits on it (nor on the rate limits of sending it)."""

    def __init__(
        self, note: Callable[[ChannelRef, str], Awaitable[object]], kept: Kept | None, me: str
    ) -> None:
        self._note = note
        self._kept = kept
        self._name = f"matrix.encrypted {me}"
        self.rooms: list[str] = []  # known encrypted, the newest last
        self._queue: asyncio.Queue[str] = asyncio.Queue(_TELL_QUEUE)

    def __contains__(self, room: str) -> bool:
        return room in self.rooms

    async def load(self) -> None:
        """The rooms told in earlier runs (before the first sync)."""
        value = await self._kept.read(self._name) if self._kept is not None else None
        try:
            found = json.loads(value) if value else []
        except ValueError:
            found = []
        self.rooms = [str(room) for room in found] if isinstance(found, list) else []

    def found(self, room: str) -> None:
        """The sync shows ``room`` encrypted: told once, by ``run``."""
        if room in self.rooms:
            return
        self.rooms.append(room)
        del self.rooms[:-_ENCRYPTED_KEPT]
        logger.warning("Matrix: %s is encrypted; Salon does not read encrypted rooms", room)
        try:
            self._queue.put_nowait(room)
        except asyncio.QueueFull:
            logger.warning("Matrix: too many encrypted rooms at once; %s is not told", room)

    async def run(self) -> None:
        while True:
            room = await self._queue.get()
            await self._tell(room)
            if self._kept is not None:
                await self._kept.write(self._name, json.dumps(self.rooms))

    async def _tell(self, room: str) -> None:
        for tries in range(_TELL_TRIES, 0, -1):
            try:
                await self._note(ChannelRef("matrix", room), ENCRYPTED_REFUSAL)
                return
            except PlatformError as exc:
                if not exc.transient or tries == 1:
                    logger.warning("Matrix: could not tell %s it is not read: %s", room, exc)
                    return
                await asyncio.sleep(exc.retry_after or 5.0)  # what the homeserver asked for
