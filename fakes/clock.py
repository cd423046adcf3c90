"""A clock the test moves by hand; the scheduler sleeps on it without real waiting."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self._now = now
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    @property
    def sleeping_until(self) -> datetime | None:
        """The earliest time someone sleeps until, if anyone sleeps."""
        waiting = [when for when, future in self._sleepers if not future.done()]
        return min(waiting) if waiting else None

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        if self._now >= when:
            return
        alarm: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (when, alarm)
        self._sleepers.append(entry)
        woken = asyncio.create_task(wake.wait())
        try:
            await asyncio.wait({alarm, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._sleepers.remove(entry)
            woken.cancel()
            await asyncio.gather(woken, return_exceptions=True)

    async def advance(self, delta: timedelta) -> None:
        self._now += delta
        for when, alarm in list(self._sleepers):
            if when <= self._now and not alarm.done():
                alarm.set_result(None)
