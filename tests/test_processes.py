"""Several processes of one bot on one store: leases decide whose claims and approvals may
be taken over; a schedule made by one process wakes the others."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from fakes.clock import FakeClock
from fakes.databases import Database
from salon.model import ChannelRef, Event, Participant, Schedule, ScheduledEvent
from salon.scheduler import Scheduler
from salon.store.sql import SQLStore

ROOM = ChannelRef("memory", "room")
ALICE = Participant("alice", "Alice")
T0 = datetime(2026, 10, 24, 6, 0, tzinfo=UTC)


def one_shot(at: datetime) -> Schedule:
    return Schedule(0, "bot", ROOM, "water the plants", "UTC", at=at, created_by=ALICE, next_due=at)


class Inbox:
    """A process's agent: keeps the events; answers (completes) them only if told to."""

    def __init__(self, store: SQLStore | None = None) -> None:
        self.store = store
        self.events: list[ScheduledEvent] = []
        self.arrived = asyncio.Condition()

    async def __call__(self, event: Event) -> None:
        assert isinstance(event, ScheduledEvent)
        if self.store is not None:
            await self.store.complete_fire(event.schedule.id, event.due)
        async with self.arrived:
            self.events.append(event)
            self.arrived.notify_all()

    async def wait(self, count: int, within: float = 10) -> list[ScheduledEvent]:
        async with asyncio.timeout(within), self.arrived:
            await self.arrived.wait_for(lambda: len(self.events) >= count)
        return self.events


async def stores(database: Database, *owners: str) -> AsyncIterator[SQLStore]:
    for owner in owners:
        yield await database.open_store(owner=owner)


async def test_only_a_dead_processs_claims_are_taken_over(database: Database) -> None:
    one, two = [s async for s in stores(database, "one", "two")]
    made = await one.schedules.create_schedule(one_shot(T0))
    await one.schedules.renew_lease("bot", 60)
    await two.schedules.renew_lease("bot", 60)
    assert await one.schedules.claim_fire(made.id, T0, "one")
    assert not await two.schedules.claim_fire(made.id, T0, "two")  # one claim per occurrence
    assert (
        await two.schedules.take_over_fires("bot", "two") == []
    )  # one lives: its claim stays its own
    await one.schedules.renew_lease("bot", -1)  # its lease ran out: it was killed
    (taken,) = await two.schedules.take_over_fires("bot", "two")
    assert taken[0].id == made.id
    assert taken[1] == T0
    assert await one.schedules.take_over_fires("bot", "one") == []  # two lives now, and holds it
    for store in (one, two):
        await store.close()


async def test_a_claim_taken_over_carries_the_key_its_answer_began_under(
    database: Database,
) -> None:
    one, two = [s async for s in stores(database, "one", "two")]
    began, quiet = (
        await one.schedules.create_schedule(one_shot(T0)),
        await one.schedules.create_schedule(one_shot(T0)),
    )
    await one.schedules.renew_lease("bot", 60)
    for made in (began, quiet):
        assert await one.schedules.claim_fire(made.id, T0, "one")
    await one.answering([(began.id, T0)], "k1")  # its first message goes out next
    await one.schedules.renew_lease("bot", -1)
    taken = await two.schedules.take_over_fires("bot", "two")
    assert sorted((s.id, key) for s, _, key in taken) == [(began.id, "k1"), (quiet.id, None)]
    for store in (one, two):
        await store.close()


async def test_approvals_of_a_living_process_are_not_stale(database: Database) -> None:
    one, two = [s async for s in stores(database, "one", "two")]
    await one.schedules.renew_lease("bot", 60)
    asked = await one.open_approval("bot", "memory:room", "wipe", "{}", "alice")
    assert await two.approvals.stale_approvals("bot") == []
    assert await one.approvals.stale_approvals("bot") == []  # its own, too
    await one.schedules.release_lease()  # a clean stop
    assert await two.approvals.stale_approvals("bot") == [(asked, "memory:room", "wipe")]
    for store in (one, two):
        await store.close()


async def test_a_running_process_answers_what_a_killed_one_claimed(database: Database) -> None:
    clock = FakeClock(T0)
    killed_store, living_store = [s async for s in stores(database, "killed", "living")]
    made = await killed_store.schedules.create_schedule(one_shot(T0))
    killed_inbox = Inbox()  # claims, never answers: killed mid-answer
    killed = Scheduler(
        bot="bot",
        store=killed_store.schedules,
        sink=killed_inbox,
        clock=clock,
        owner="killed",
        lease=0.5,
    )
    running = asyncio.create_task(killed.run())
    await killed_inbox.wait(1)
    running.cancel()  # the process is gone; its lease is not given back
    await asyncio.gather(running, return_exceptions=True)

    living_inbox = Inbox(living_store)
    living = Scheduler(
        bot="bot",
        store=living_store.schedules,
        sink=living_inbox,
        clock=clock,
        owner="living",
        lease=0.5,
    )
    tasks = [asyncio.create_task(living.run()), asyncio.create_task(living.keep_lease())]
    await asyncio.wait_for(living.wait_rests(1), 5)
    assert living_inbox.events == []  # the killed process's lease still runs
    (answered,) = await living_inbox.wait(1)  # within a lease, by keep_lease
    assert (answered.schedule.id, answered.due) == (made.id, T0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for store in (killed_store, living_store):
        await store.close()


async def test_a_schedule_made_elsewhere_wakes_a_listening_process(pg_database: Database) -> None:
    """PostgreSQL's NOTIFY, not polling: the poll interval is an hour."""
    clock = FakeClock(T0)
    mine, other = [s async for s in stores(pg_database, "mine", "other")]
    inbox = Inbox(mine)
    scheduler = Scheduler(
        bot="bot", store=mine.schedules, sink=inbox, clock=clock, poll_interval=3600
    )
    tasks = [asyncio.create_task(scheduler.run()), asyncio.create_task(scheduler.watch())]
    await asyncio.wait_for(scheduler.wait_rests(1), 5)
    await other.schedules.create_schedule(one_shot(T0))  # due now: only a wake-up is missing
    (fired,) = await inbox.wait(1, within=5)
    assert fired.due == T0
    await other.schedules.create_schedule(
        Schedule(0, "another-bot", ROOM, "x", "UTC", at=T0, created_by=ALICE, next_due=T0)
    )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert len(inbox.events) == 1
    for store in (mine, other):
        await store.close()


async def test_sqlite_is_polled(database: Database) -> None:
    store = await database.open_store()
    notices = store.schedules.schedule_notices("bot")
    if database.kind == "sqlite":
        assert notices is None
    else:
        assert notices is not None
        await anext(notices)  # listening
        await notices.aclose()
    await store.close()
