"""Writes nobody waits for (an activation's usage row, its channel's rolling state) go with
the store's next trip, or by themselves soon after: never lost by a close, never failing
or breaking the transaction they travel with."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.databases import Database
from salon.model import ChannelRef, RollState, Usage
from salon.store.sql import SQLStore, sqlite_url

ROOM = ChannelRef("memory", "room")
STATE = RollState(anchor_id="a", breakpoint_id=None, head_id="h")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLStore]:
    opened = SQLStore(sqlite_url(tmp_path / "s.db"))
    await opened.open()
    yield opened
    await opened.close()


def usage_rows(path: Path) -> int:
    """Rows another process reads: what is committed."""
    with sqlite3.connect(path) as other:
        return int(other.execute("SELECT count(*) FROM usage_log").fetchone()[0])


async def test_held_writes_are_read_back_by_this_process_at_once(database: Database) -> None:
    store = await database.open_store()
    try:
        await store.record_usage("bot", ROOM.key, "llm", "m", Usage(1, 2, 3, 4))
        await store.save_rolling_state("bot", ROOM.key, STATE)
        assert (await store.channels.usage_totals("bot")).input_tokens == 1
        assert await store.rolling_state("bot", ROOM.key) == STATE
    finally:
        await store.close()


async def test_held_writes_are_committed_by_themselves_when_no_trip_comes(
    store: SQLStore, tmp_path: Path
) -> None:
    await store.record_usage("bot", ROOM.key, "llm", "m", Usage(1, 2, 3, 4))
    assert usage_rows(tmp_path / "s.db") == 0
    await asyncio.wait_for(store.db.held.idle.wait(), 10)  # type: ignore[attr-defined]
    assert usage_rows(tmp_path / "s.db") == 1


async def test_held_writes_are_committed_at_close(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    await store.record_usage("bot", ROOM.key, "llm", "m", Usage(1, 2, 3, 4))
    await store.close()
    assert usage_rows(tmp_path / "s.db") == 1


async def test_a_held_write_made_inside_a_transaction_waits_for_its_end(store: SQLStore) -> None:
    # The connection is shared: a held write sent in the middle of another transaction
    # would have begun inside it, or rolled it back.
    async with store.db.begin() as conn:
        await conn.fetchval("SELECT count(*) FROM usage_log")
        await store.record_usage("bot", ROOM.key, "llm", "m", Usage(1, 2, 3, 4))
        await conn.execute("DELETE FROM rolling_state")
        await conn.many(
            [("INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'k', 1)", {})]
        )
    async with store.db.connect() as conn:
        assert await conn.fetchval("SELECT count(*) FROM limit_marks") == 1
        assert await conn.fetchval("SELECT count(*) FROM usage_log") == 1


async def test_a_failing_held_write_is_logged_and_spares_the_trip_it_goes_with(
    store: SQLStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.db.write_later([("INSERT INTO no_such_table VALUES (1)", {})])
    await store.record_usage("bot", ROOM.key, "llm", "m", Usage(1, 2, 3, 4))
    with caplog.at_level(logging.ERROR):
        async with store.db.begin() as conn:
            await conn.many(
                [("INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'k', 1)", {})]
            )
    assert "held statements; they are lost" in caplog.text
    async with store.db.connect() as conn:
        assert await conn.fetchval("SELECT count(*) FROM limit_marks") == 1
        assert await conn.fetchval("SELECT count(*) FROM usage_log") == 0  # lost with it
