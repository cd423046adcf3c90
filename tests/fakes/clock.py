"""A clock the test moves by hand; the scheduler sleeps on it without real waiting."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self._now = now
        self._moved = asyncio.Condition()
        self.sleeping_until: datetime | None = None

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        waker = asyncio.create_task(wake.wait())
        try:
            async with self._moved:
                self.sleeping_until = when
                self._moved.notify_all()
                while self._now < when and not wake.is_set():
                    mover = asyncio.create_task(self._moved.wait())
                    await asyncio.wait({mover, waker}, return_when=asyncio.FIRST_COMPLETED)
                    if not mover.done():
                        mover.cancel()
                        # Condition.wait re-acquires the lock even when cancelled.
                        await asyncio.gather(mover, return_exceptions=True)
        finally:
            self.sleeping_until = None
            waker.cancel()
            await asyncio.gather(waker, return_exceptions=True)

    async def advance(self, delta: timedelta) -> None:
        async with self._moved:
            self._now += delta
            self._moved.notify_all()

    async def wait_asleep(self, within: float = 5.0) -> datetime:
        """Wait until the scheduler sleeps on this clock; return until when."""
        async with asyncio.timeout(within), self._moved:
            await self._moved.wait_for(lambda: self.sleeping_until is not None)
        assert self.sleeping_until is not None
        return self.sleeping_until
