"""The SQLite store: migrations, WAL, chat log, usage."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from salon.errors import StoreError
from salon.model import ChannelRef, Message, Participant, Usage
from salon.store.sqlite import MIGRATIONS, SQLStore, schema_migrations, sqlite_url

ROOM = ChannelRef("terminal", "local")
ALICE = Participant("a", "Alice")


def line(i: int, text: str) -> Message:
    return Message(f"m{i}", ROOM, ALICE, text, datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC))


async def test_migrations_run_once_and_wal_is_on(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "s.db")
    for _ in range(2):
        store = SQLStore(url)
        await store.open()
        async with store.engine.connect() as conn:
            versions = (await conn.execute(sa.select(schema_migrations.c.version))).scalars().all()
            mode = (await conn.execute(sa.text("PRAGMA journal_mode"))).scalar()
        await store.close()
        assert versions == [v for v, _ in MIGRATIONS]
        assert mode == "wal"


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "s.db")
    store = SQLStore(url)
    await store.open()
    async with store.engine.begin() as conn:
        await conn.execute(sa.insert(schema_migrations).values(version=999, applied_at=0.0))
    await store.close()
    with pytest.raises(StoreError, match="newer than this Salon"):
        await SQLStore(url).open()


async def test_chat_log_round_trip_per_bot_and_channel(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    for i in range(5):
        await store.log_message("bot1", line(i, f"text {i}"))
    await store.log_message("bot2", line(9, "other bot"))
    await store.log_message("bot1", line(10, "alice joined"), kind="join")
    recent = await store.chat_history("bot1", ROOM, limit=3)
    assert [m.text for m in recent] == ["text 2", "text 3", "text 4"]
    assert recent[0].author == ALICE
    assert recent[0].created_at == datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC)
    older = await store.chat_history("bot1", ROOM, limit=10, before_id="m2")
    assert [m.id for m in older] == ["m0", "m1"]
    await store.close()


async def test_usage_totals(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    await store.record_usage("b", "k", "p", "m", Usage(10, 2, 100, 5))
    await store.record_usage("b", "k", "p", "m", Usage(1, 1, 0, 0))
    assert await store.usage_totals("b") == Usage(11, 3, 100, 5)
    await store.close()


async def test_full_text_search_filters_and_order(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    bob = Participant("b", "Bob")
    lines = [
        (ALICE, "the staging database is down"),
        (bob, "database backups ran fine"),
        (ALICE, 'she said "quotes" and OR NOT near'),
        (bob, "staging again: database slow"),
    ]
    for i, (who, text) in enumerate(lines):
        message = Message(f"m{i}", ROOM, who, text, datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC))
        await store.log_message("bot1", message)
    both = await store.search_chat("bot1", ROOM.key, "staging database")
    assert [ln.text for ln in both] == [
        "staging again: database slow",
        "the staging database is down",
    ]
    by_bob = await store.search_chat("bot1", ROOM.key, "database", user="BOB")
    assert [ln.user for ln in by_bob] == ["Bob", "Bob"]
    recent = await store.search_chat(
        "bot1", ROOM.key, "database", since=datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC)
    )
    assert len(recent) == 1
    tricky = await store.search_chat("bot1", ROOM.key, '"quotes" OR NOT')
    assert [ln.text for ln in tricky] == ['she said "quotes" and OR NOT near']
    assert await store.search_chat("bot1", "irc:#elsewhere", "database") == []
    await store.close()
