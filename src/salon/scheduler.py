"""Schedules that fire exactly once.

The scheduler sleeps until the next due time (or until a schedule is added or cancelled),
turns each due occurrence into a ``ScheduledEvent`` for the agent, and moves the schedule
on. Every occurrence is claimed in the store first (a unique row per schedule and time), so
it fires once even across a restart inside the due window or with several processes on
one database. The claim stays open until the agent has answered (or told its failure).

Each process holds a lease in the store (``keep_lease`` renews it every third of
``lease``); a claim left open by a process whose lease ran out (killed) or was given back
(stopped) is taken over by a living process and answered then, so none is lost and a slow
but living process's claims are never answered twice. Occurrences missed while the bot was
down fire once, at start, when the latest of them is within ``misfire_grace``; older ones
are skipped with a log line. ``watch`` notices schedules other processes create or cancel
(``salon tools call``, another process of the bot): at once through the store's notices
(PostgreSQL's LISTEN/NOTIFY), else by polling every second (SQLite).

``serves`` says which schedules this process fires: a process running some of a Discord
bot's shards leaves a channel of another shard's guild to the process that hears it (and
looks again every ``poll_interval`` while one is due, should that process be down).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from salon.model import Event, FireStatus, Schedule, ScheduledEvent
from salon.tools.schedules import ScheduleStore
from salon.tools.timing import CRON_FIELDS, latest_occurrence, next_occurrence

__all__ = ["Clock", "Scheduler", "SystemClock"]

logger = logging.getLogger(__name__)


class Clock(Protocol):
    def now(self) -> datetime: ...

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        """Return at ``when`` or as soon as ``wake`` is set, whichever comes first."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, when: datetime, wake: asyncio.Event) -> None:
        delay = (when - self.now()).total_seconds()
        if delay <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), delay)


class Sink(Protocol):
    async def __call__(self, event: Event) -> None: ...


class Scheduler:
    def __init__(
        self,
        *,
        bot: str,
        store: ScheduleStore,
        sink: Sink,
        clock: Clock | None = None,
        misfire_grace: timedelta = timedelta(hours=1),
        poll_interval: float = 1.0,
        owner: str | None = None,
        lease: float = 15.0,
        serves: Callable[[Schedule], Awaitable[bool]] | None = None,
    ) -> None:
        self.bot = bot
        self.store = store
        self.sink = sink
        self.clock = clock or SystemClock()
        self.misfire_grace = misfire_grace
        self.poll_interval = poll_interval
        self.owner = (
            owner or uuid.uuid4().hex[:12]
        )  # the process that claims, as the store knows it
        self.lease = lease
        self.serves = serves
        self._wake = asyncio.Event()
        self._resting = asyncio.Condition()
        self.rests = 0

    def changed(self) -> None:
        """A schedule was added or cancelled: look again before sleeping on."""
        self._wake.set()

    async def run(self) -> None:
        """Fire schedules as they come due; first answer what a stopped process left."""
        await self.store.renew_lease(self.bot, self.lease)  # before any claim of ours
        await self._take_over()
        while True:
            self._wake.clear()
            now = self.clock.now()
            active = await self.store.find(self.bot)
            due = [s for s in active if s.next_due is not None and s.next_due <= now]
            mine = [s for s in due if self.serves is None or await self.serves(s)]
            # Earliest first; among equals an order of this process's own, so several
            # processes mostly claim different occurrences instead of racing for each.
            mine.sort(key=lambda s: (s.next_due, random.random()))
            for schedule in mine:
                await self._fire(schedule, now)
            if mine:
                continue
            upcoming = [s.next_due for s in active if s.next_due is not None and s.next_due > now]
            if due:  # another process's: look again soon, in case it is not running
                upcoming.append(now + timedelta(seconds=self.poll_interval))
            await self._rested()
            if upcoming:
                await self.clock.sleep_until(min(upcoming), self._wake)
            else:
                await self._wake.wait()

    async def keep_lease(self) -> None:
        """Renew this process's lease every third of it, and take over what processes
        whose lease ran out left unanswered."""
        while True:
            await asyncio.sleep(self.lease / 3)
            await self.store.renew_lease(self.bot, self.lease)
            await self._take_over()

    async def watch(self) -> None:
        """Wake ``run`` when another process has created or cancelled a schedule."""
        notices = self.store.schedule_notices(self.bot)
        if notices is None:
            await self._poll()
            return
        async for _ in notices:  # the first comes when listening starts: catch up once
            self._wake.set()

    async def _poll(self) -> None:
        last: tuple[int, int] | None = None
        while True:
            signature = await self.store.schedules_signature(self.bot)
            if last is not None and signature != last:
                self._wake.set()
            last = signature
            await asyncio.sleep(self.poll_interval)

    async def _take_over(self) -> None:
        for schedule, due, key in await self.store.take_over_fires(self.bot, self.owner):
            if self.clock.now() - due > self.misfire_grace:
                logger.warning(
                    "schedule #%d: the unanswered occurrence at %s is older than the misfire "
                    "grace; skipped",
                    schedule.id,
                    due.isoformat(),
                )
                await self.store.complete_fire(schedule.id, due, FireStatus.SKIPPED)
                continue
            logger.info(
                "schedule #%d: the occurrence at %s was left unanswered; answering it now",
                schedule.id,
                due.isoformat(),
            )
            # With a key, its answer had begun: the agent asks the platform whether it
            # was shown before answering (salon.agent.dispatch).
            await self.sink(ScheduledEvent(schedule, due, answer_key=key))

    async def _rested(self) -> None:
        async with self._resting:
            self.rests += 1
            self._resting.notify_all()

    async def wait_rests(self, count: int) -> None:
        """Wait until the loop has gone to sleep ``count`` times (for tests and embedders:
        after it, everything due before the sleep has been handled)."""
        async with self._resting:
            await self._resting.wait_for(lambda: self.rests >= count)

    async def _fire(self, schedule: Schedule, now: datetime) -> None:
        if schedule.cron and len(schedule.cron.split()) != CRON_FIELDS:
            # Made before five fields were enforced: a seconds field fires every second.
            logger.warning(
                "schedule #%d: cron %r is not five fields (schedules go to the minute); ended",
                schedule.id,
                schedule.cron,
            )
            await self.store.set_next_due(schedule.id, None)
            return
        if schedule.cron:
            occurrence = latest_occurrence(schedule.cron, schedule.timezone, now)
            following: datetime | None = next_occurrence(schedule.cron, schedule.timezone, now)
        else:
            assert schedule.at is not None  # a schedule is either cron or one-shot
            occurrence, following = schedule.at.astimezone(UTC), None
        if schedule.next_due is not None and schedule.next_due < occurrence:
            logger.info(
                "schedule #%d: occurrences from %s to before %s were missed; firing the latest",
                schedule.id,
                schedule.next_due.isoformat(),
                occurrence.isoformat(),
            )
        if now - occurrence > self.misfire_grace:
            logger.warning(
                "schedule #%d: the occurrence at %s is older than the misfire grace; skipped",
                schedule.id,
                occurrence.isoformat(),
            )
        elif await self.store.claim_fire(schedule.id, occurrence, self.owner):
            logger.info("schedule #%d fires (due %s)", schedule.id, occurrence.isoformat())
            await self.sink(ScheduledEvent(schedule, occurrence))
        await self.store.set_next_due(schedule.id, following)
