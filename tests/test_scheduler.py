"""Schedules fire exactly once: cron and one-shot, DST, restarts, two processes, misfires."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from fakes.clock import FakeClock
from fakes.databases import Database
from salon.model import ChannelRef, Event, Participant, Schedule, ScheduledEvent
from salon.scheduler import Scheduler
from salon.store.sql import SQLStore
from salon.tools.timing import next_occurrence

ROOM = ChannelRef("memory", "room")
ALICE = Participant("alice", "Alice")
T0 = datetime(2026, 10, 24, 6, 0, tzinfo=UTC)  # Saturday; Paris leaves summer time on Sunday


@pytest.fixture
async def store(database: Database) -> AsyncIterator[SQLStore]:
    store = await database.open_store()
    yield store
    await store.close()


class Collector:
    """The agent's part: takes events and, given a store, completes each occurrence as
    the agent does once it has answered."""

    def __init__(self, store: SQLStore | None = None) -> None:
        self.events: list[ScheduledEvent] = []
        self.store = store

    async def __call__(self, event: Event) -> None:
        assert isinstance(event, ScheduledEvent)
        self.events.append(event)
        if self.store is not None:
            await self.store.complete_fire(event.schedule.id, event.due)


async def add(
    store: SQLStore,
    *,
    cron: str | None = None,
    at: datetime | None = None,
    tz: str = "UTC",
    now: datetime = T0,
) -> Schedule:
    due = next_occurrence(cron, tz, now) if cron else at
    schedule = Schedule(
        0, "bot", ROOM, "water the plants", tz, cron=cron, at=at, created_by=ALICE, next_due=due
    )
    return await store.schedules.create_schedule(schedule)


class Running:
    """A scheduler in a task, with a handle to step its clock and wait for it to settle."""

    def __init__(self, scheduler: Scheduler, clock: FakeClock) -> None:
        self.scheduler = scheduler
        self.clock = clock
        self.task = asyncio.create_task(scheduler.run())

    async def settled(self) -> None:
        """Wait for the next sleep: everything due until now has been handled."""
        await asyncio.wait_for(self.scheduler.wait_rests(self.scheduler.rests + 1), 5)

    async def advance(self, delta: timedelta) -> None:
        """Move time on; if that reaches the scheduler's wake-up, wait for it to settle."""
        rests = self.scheduler.rests
        until = self.clock.sleeping_until
        await self.clock.advance(delta)
        if until is not None and self.clock.now() >= until:
            await asyncio.wait_for(self.scheduler.wait_rests(rests + 1), 5)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def start(store: SQLStore, clock: FakeClock, sink: Collector) -> Running:
    running = Running(Scheduler(bot="bot", store=store.schedules, sink=sink, clock=clock), clock)
    await asyncio.wait_for(running.scheduler.wait_rests(1), 5)
    return running


async def test_one_shot_fires_once_then_ends(store: SQLStore) -> None:
    sink = Collector()
    schedule = await add(store, at=T0 + timedelta(hours=1))
    running = await start(store, FakeClock(T0), sink)
    assert running.clock.sleeping_until == T0 + timedelta(hours=1)
    await running.advance(timedelta(minutes=59))
    assert sink.events == []
    await running.advance(timedelta(minutes=1))
    await running.advance(timedelta(days=1))
    await running.stop()
    assert [(e.schedule.id, e.due) for e in sink.events] == [(schedule.id, T0 + timedelta(hours=1))]
    assert await store.schedules.find("bot") == []  # a one-shot ends after firing


async def test_cron_keeps_local_time_across_daylight_saving(store: SQLStore) -> None:
    sink = Collector()
    await add(store, cron="0 9 * * *", tz="Europe/Paris")
    running = await start(store, FakeClock(T0), sink)
    for _ in range(3):
        until = running.clock.sleeping_until
        assert until is not None
        await running.advance(until - running.clock.now())
    await running.stop()
    assert [e.due for e in sink.events] == [
        datetime(2026, 10, 24, 7, 0, tzinfo=UTC),  # 09:00 CEST
        datetime(2026, 10, 25, 8, 0, tzinfo=UTC),  # 09:00 CET, the day the clocks go back
        datetime(2026, 10, 26, 8, 0, tzinfo=UTC),
    ]


class ForgetfulStore:
    """Claims and fires, then 'dies' before it can move the schedule on."""

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    async def find(self, bot: str, **kwargs: object) -> list[Schedule]:
        return await self.store.schedules.find(bot)

    async def claim_fire(self, schedule_id: int, due: datetime, owner: str) -> bool:
        return await self.store.schedules.claim_fire(schedule_id, due, owner)

    async def set_next_due(self, schedule_id: int, next_due: datetime | None) -> None:
        raise RuntimeError("process killed")

    async def take_over_fires(
        self, bot: str, owner: str
    ) -> list[tuple[Schedule, datetime, str | None]]:
        return await self.store.schedules.take_over_fires(bot, owner)

    async def complete_fire(self, schedule_id: int, due: datetime, status: str = "done") -> None:
        await self.store.complete_fire(schedule_id, due, status)

    async def renew_lease(self, bot: str, seconds: float) -> None:
        await self.store.schedules.renew_lease(bot, seconds)

    def schedule_notices(self, bot: str) -> None:
        return None


async def test_restart_inside_the_due_window_fires_once(store: SQLStore) -> None:
    due = T0 + timedelta(minutes=5)
    await add(store, at=due)
    first, second = Collector(store), Collector()  # answered, then the process died
    dying = Scheduler(bot="bot", store=ForgetfulStore(store), sink=first, clock=FakeClock(due))
    with pytest.raises(RuntimeError, match="process killed"):
        await dying.run()
    assert len(first.events) == 1
    running = await start(store, FakeClock(due + timedelta(seconds=30)), second)
    await running.stop()
    assert second.events == []
    assert await store.schedules.find("bot") == []


async def test_two_schedulers_on_one_database_fire_once(
    store: SQLStore, database: Database
) -> None:
    other = await database.open_store()  # a second process's own connection
    await add(store, cron="*/10 * * * *")
    clock, sink = FakeClock(T0), Collector()
    one = await start(store, clock, sink)
    two = await start(other, clock, sink)
    for _ in range(2):
        rests = (one.scheduler.rests, two.scheduler.rests)
        await clock.advance(timedelta(minutes=10))
        await asyncio.wait_for(one.scheduler.wait_rests(rests[0] + 1), 5)
        await asyncio.wait_for(two.scheduler.wait_rests(rests[1] + 1), 5)
    await one.stop()
    await two.stop()
    await other.close()
    assert [e.due for e in sink.events] == [T0 + timedelta(minutes=10), T0 + timedelta(minutes=20)]


async def test_misfire_grace(store: SQLStore) -> None:
    recent = await add(store, at=T0 - timedelta(minutes=30), now=T0 - timedelta(hours=3))
    stale = await add(store, at=T0 - timedelta(hours=2), now=T0 - timedelta(hours=3))
    hourly = await add(store, cron="0 * * * *", now=T0 - timedelta(hours=5, minutes=30))
    sink = Collector()
    running = await start(store, FakeClock(T0), sink)
    await running.stop()
    fired = {(e.schedule.id, e.due) for e in sink.events}
    assert fired == {(recent.id, T0 - timedelta(minutes=30)), (hourly.id, T0)}
    assert stale.id not in {e.schedule.id for e in sink.events}
    (left,) = await store.schedules.find("bot")
    assert left.id == hourly.id
    assert left.next_due == T0 + timedelta(hours=1)


async def test_cancel_wakes_the_scheduler_and_nothing_fires(store: SQLStore) -> None:
    schedule = await add(store, at=T0 + timedelta(hours=1))
    sink = Collector()
    running = await start(store, FakeClock(T0), sink)
    assert await store.schedules.cancel_schedule("bot", schedule.id)
    rests = running.scheduler.rests
    running.scheduler.changed()
    await asyncio.wait_for(running.scheduler.wait_rests(rests + 1), 5)
    assert running.clock.sleeping_until is None  # nothing left to sleep for
    await running.stop()
    assert sink.events == []


async def test_an_occurrence_claimed_but_never_answered_fires_again_after_a_restart(
    store: SQLStore,
) -> None:
    due = T0 + timedelta(minutes=5)
    await add(store, at=due)
    first, second = Collector(), Collector()  # the first never answers: killed mid-answer
    dying = Scheduler(bot="bot", store=ForgetfulStore(store), sink=first, clock=FakeClock(due))
    with pytest.raises(RuntimeError, match="process killed"):
        await dying.run()
    running = await start(store, FakeClock(due + timedelta(seconds=30)), second)
    await running.stop()
    assert [e.due for e in second.events] == [due]


async def test_a_schedule_another_process_serves_is_left_to_it_and_looked_at_again(
    store: SQLStore,
) -> None:
    """A process running other Discord shards leaves the schedule alone, without spinning,
    and fires it once it is its own (the other process never came)."""
    sink = Collector(store)
    schedule = await add(store, at=T0)
    theirs = True

    async def serves(_: Schedule) -> bool:
        return not theirs

    clock = FakeClock(T0)
    scheduler = Scheduler(bot="bot", store=store.schedules, sink=sink, clock=clock, serves=serves)
    running = Running(scheduler, clock)
    await asyncio.wait_for(scheduler.wait_rests(1), 5)
    assert clock.sleeping_until == T0 + timedelta(seconds=1)  # looks again in a second
    await running.advance(timedelta(seconds=1))
    assert sink.events == []
    assert scheduler.rests == 2  # one look per second, not a busy loop
    theirs = False
    await running.advance(timedelta(seconds=1))
    await running.stop()
    assert [e.schedule.id for e in sink.events] == [schedule.id]


async def test_a_stored_cron_with_seconds_never_fires_and_ends(store: SQLStore) -> None:
    """Made before five fields were enforced (or written by hand): it would fire every
    second, so the scheduler ends it instead, once, with a log line."""
    sink = Collector(store)
    schedule = await add(store, cron="* * * * * *")
    running = await start(store, FakeClock(T0), sink)
    await running.advance(timedelta(minutes=2))
    await running.stop()
    assert sink.events == []
    assert [s.id for s in await store.schedules.find("bot", active_only=False)] == [schedule.id]
    assert await store.schedules.find("bot") == []
