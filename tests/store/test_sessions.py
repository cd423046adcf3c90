"""The web server's sessions in the store: every web server on the store sees them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fakes.databases import Database
from salon.store.sql import SQLStore


@pytest.fixture
async def store(database: Database) -> AsyncIterator[SQLStore]:
    store = await database.open_store()
    yield store
    await store.close()


async def test_a_session_lives_until_it_is_ended_or_expires(store: SQLStore) -> None:
    sessions = store.sessions
    await sessions.open_session("one", now=1000.0, expires_at=2000.0)
    await sessions.open_session("two", now=1000.0, expires_at=1500.0)
    assert await sessions.live_sessions(now=1000.0) == {"one", "two"}
    assert await sessions.live_sessions(now=1600.0) == {"one"}
    assert await sessions.end_session("one") == 1
    assert await sessions.end_session("one") == 0
    assert await sessions.live_sessions(now=1000.0) == {"two"}


async def test_ending_every_session_ends_them_all(store: SQLStore) -> None:
    for name in ("a", "b", "c"):
        await store.sessions.open_session(name, now=1000.0, expires_at=2000.0)
    assert await store.sessions.end_all_sessions() == 3
    assert await store.sessions.live_sessions(now=1000.0) == set()


async def test_opening_a_session_forgets_expired_ones(store: SQLStore) -> None:
    await store.sessions.open_session("old", now=1000.0, expires_at=1500.0)
    await store.sessions.open_session("new", now=1600.0, expires_at=4000.0)
    assert await store.sessions.end_all_sessions() == 1  # "old" was gone already
