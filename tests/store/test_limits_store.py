"""The store's record of limits: requests, cooldowns' starts and spend as events; marks."""

from __future__ import annotations

import time

import pytest

from fakes.databases import Database
from salon.errors import StoreError
from salon.store.limits import Admission, Settlement

DAY = int(time.time() // 86400) - 1  # yesterday: old rows (8 days) are pruned
NOON = DAY * 86400.0 + 43200


async def test_records_read_back_by_window_and_day(database: Database) -> None:
    store = await database.open_store()
    try:
        for offset in (0.0, 10.0, 20.0):
            admission = Admission(
                now=NOON + offset,
                day=DAY,
                rate_key="rate:alice",
                rate_limit=5,
                rate_window=3600,
                cooldown_key="cooldown:c",
                cooldown=30,
            )
            await store.limits.record("bot", admission, [Settlement("user:alice:tokens", 50, 40)])
        yesterday = Admission(now=NOON - 86400, day=DAY - 1)
        await store.limits.record("bot", yesterday, [Settlement("user:alice:tokens", 0, 7)])
        assert await store.limits.rate_events("bot", "rate:alice", NOON + 5, 5) == [
            NOON + 10,
            NOON + 20,
        ]
        assert await store.limits.rate_events("bot", "rate:alice", NOON - 1, 2) == [
            NOON + 10,
            NOON + 20,
        ]
        assert await store.limits.rate_events("bot", "cooldown:c", NOON, 1) == [NOON + 20]
        assert await store.limits.spent("bot", "user:alice:tokens", DAY) == 120
        assert await store.limits.spent("bot", "user:alice:tokens", DAY - 1) == 7
        assert await store.limits.spent("other", "user:alice:tokens", DAY) == 0
        assert await store.limits.mark("bot", "told:x") is None
        await store.limits.set_mark("bot", "told:x", NOON)
        await store.limits.set_mark("bot", "told:x", NOON + 60)
        assert await store.limits.mark("bot", "told:x") == NOON + 60
    finally:
        await store.close()


async def test_rows_older_than_eight_days_are_pruned(database: Database) -> None:
    store = await database.open_store()
    try:
        old = time.time() - 9 * 86400
        await store.limits.record("bot", Admission(now=old, day=int(old // 86400)), [])
        for _ in range(1000):  # the first record prunes, and every thousandth after
            await store.limits.record(
                "bot", Admission(now=old, day=0, rate_key="r", rate_limit=1), []
            )
        assert await store.limits.rate_events("bot", "r", 0, 10_000) == []
    finally:
        await store.close()


async def test_rows_that_could_not_be_written_are_written_with_the_next(
    database: Database,
) -> None:
    store = await database.open_store()
    try:
        admission = Admission(now=NOON, day=DAY, rate_key="rate:alice", rate_limit=5)
        await store.limits.record("bot", admission, [Settlement("user:alice:tokens", 0, 40)])
        async with store.db.begin() as conn:  # the table away: the write fails
            await conn.execute("ALTER TABLE limit_events RENAME TO limit_events_away")
        with pytest.raises(StoreError):
            await store.limits.flush_limits()
        async with store.db.begin() as conn:
            await conn.execute("ALTER TABLE limit_events_away RENAME TO limit_events")
        await store.limits.record("bot", admission, [Settlement("user:alice:tokens", 0, 2)])
        assert await store.limits.spent("bot", "user:alice:tokens", DAY) == 42
        assert await store.limits.rate_events("bot", "rate:alice", NOON - 1, 5) == [NOON, NOON]
    finally:
        await store.close()
