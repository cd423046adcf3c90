"""Sessions of the activity page and the configurator, and how they end.

A session cookie names a session (``salon.web.links.session_token``); the session is live
while the store lists it (``store.sessions``): signing in adds it, signing out deletes it,
"sign out everywhere" deletes them all, and every web server on the store sees that.

Each server keeps the ids it last read for ``CACHE_SECONDS``, so a page polled every few
seconds costs a store read once in a while, not one per request (static files need no
session at all). A session ended by another server stays open here at most that long. A
cookie whose session is missing from the ids read is refused without a read, unless the
session began after that read (``SKEW_SECONDS`` allow for the clocks of servers on other
machines): then the ids are read again, so a session begun on another server works here
at once.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections.abc import Callable

from salon.store.sql import SessionPart

__all__ = ["CACHE_SECONDS", "Sessions"]

CACHE_SECONDS = 5.0
SKEW_SECONDS = 5.0
MAX_LIVE = 10_000  # sessions read at once: the newest (a sign-in is a person, rate-limited)


class Sessions:
    def __init__(self, part: SessionPart, now: Callable[[], float]) -> None:
        self.part = part
        self.now = now
        self._live: set[str] = set()
        self._read_at = -math.inf
        self._lock: asyncio.Lock | None = None

    async def begin(self, seconds: float) -> str:
        """A new session, live for ``seconds``; its id."""
        session = secrets.token_urlsafe(16)
        now = self.now()
        await self.part.open_session(session, now=now, expires_at=now + seconds)
        self._live.add(session)
        return session

    async def live(self, session: str, *, began: float) -> bool:
        """Whether ``session`` (begun at ``began``) has not been ended; StoreError when the
        store cannot say."""
        now = self.now()
        fresh = now - self._read_at < CACHE_SECONDS
        if fresh and (session in self._live or self._read_at > began + SKEW_SECONDS):
            return session in self._live
        await self._read(now)
        return session in self._live

    async def _read(self, asked: float) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._read_at > asked:
                return  # read by another request meanwhile
            now = self.now()
            self._live = await self.part.live_sessions(now=now, limit=MAX_LIVE)
            self._read_at = now

    async def end(self, session: str) -> None:
        await self.part.end_session(session)
        self._live.discard(session)

    async def end_all(self) -> None:
        await self.part.end_all_sessions()
        self._live.clear()
        self._read_at = self.now()
