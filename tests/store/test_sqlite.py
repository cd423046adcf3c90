"""The SQL store on SQLite and PostgreSQL: migrations, chat log, usage, search."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fakes.databases import Database
from salon.errors import StoreError
from salon.model import ChannelRef, Message, Participant, RollState, Usage
from salon.store.sql import MIGRATIONS, SQLStore, sqlite_url

ROOM = ChannelRef("terminal", "local")
ALICE = Participant("a", "Alice")


def line(i: int, text: str) -> Message:
    return Message(f"m{i}", ROOM, ALICE, text, datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC))


async def test_migrations_run_once(database: Database) -> None:
    for _ in range(2):
        store = await database.open_store()
        async with store.db.connect() as conn:
            versions = [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")]
        await store.close()
        assert sorted(versions) == [v for v, _ in MIGRATIONS]


async def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    async with store.db.connect() as conn:
        mode = await conn.fetchval("PRAGMA journal_mode")
    await store.close()
    assert mode == "wal"


async def test_a_newer_schema_is_refused(database: Database) -> None:
    store = await database.open_store()
    async with store.db.begin() as conn:
        await conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)")
    await store.close()
    with pytest.raises(StoreError, match="newer than this Salon"):
        await database.open_store()


async def test_chat_log_round_trip_per_bot_and_channel(database: Database) -> None:
    store = await database.open_store()
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
    await store.forget_message("bot1", "m4")
    assert [m.id for m in await store.chat_history("bot1", ROOM, limit=2)] == ["m2", "m3"]
    await store.close()


async def test_usage_totals(database: Database) -> None:
    store = await database.open_store()
    await store.record_usage("b", "k", "p", "m", Usage(10, 2, 100, 5))
    await store.record_usage("b", "k", "p", "m", Usage(1, 1, 0, 0))
    assert await store.channels.usage_totals("b") == Usage(11, 3, 100, 5)
    await store.close()


async def test_reasoning_tokens_are_kept_with_their_usage_row(database: Database) -> None:
    store = await database.open_store()
    await store.record_usage("b", "k", "p", "m", Usage(10, 900, reasoning_tokens=850))
    await store.record_usage("b", "k", "p", "m", Usage(1, 1))
    assert await store.channels.usage_totals("b") == Usage(11, 901, reasoning_tokens=850)
    await store.close()


async def test_full_text_search_filters_and_order(database: Database) -> None:
    store = await database.open_store()
    bob = Participant("b", "Bob")
    lines = [
        (ALICE, "the staging database is down"),
        (bob, "database backups ran fine"),
        (ALICE, 'she said "quotes" and OR NOT near'),
        (bob, "staging again: database slow"),
        (bob, "Databases are plural, stagings too"),
    ]
    for i, (who, text) in enumerate(lines):
        message = Message(f"m{i}", ROOM, who, text, datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC))
        await store.log_message("bot1", message)
    both = await store.chatlog.search_chat("bot1", ROOM.key, "Staging DATABASE")
    assert [ln.text for ln in both] == [
        "staging again: database slow",
        "the staging database is down",
    ]
    by_bob = await store.chatlog.search_chat("bot1", ROOM.key, "database", user="BOB")
    assert [ln.user for ln in by_bob] == ["Bob", "Bob"]
    recent = await store.chatlog.search_chat(
        "bot1", ROOM.key, "database", since=datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC)
    )
    assert len(recent) == 1
    tricky = await store.chatlog.search_chat("bot1", ROOM.key, '"quotes" OR NOT')
    assert [ln.text for ln in tricky] == ['she said "quotes" and OR NOT near']
    anywhere = await store.chatlog.search_chat("bot1", ROOM.key, "down the")  # words, in any order
    assert [ln.text for ln in anywhere] == ["the staging database is down"]
    assert await store.chatlog.search_chat("bot1", "irc:#elsewhere", "database") == []
    assert await store.chatlog.search_chat("bot1", ROOM.key, "...") == []
    await store.close()


async def test_rolling_state_and_monitored_channels_are_written_twice_safely(
    database: Database,
) -> None:
    one, two = await database.open_store(), await database.open_store()
    state = RollState(anchor_id="a", breakpoint_id=None, head_id="h")
    # A process's rolling state is committed with its next trip (here, each one's read).
    await one.save_rolling_state("b", "k", state)
    assert await one.rolling_state("b", "k") == state
    await two.save_rolling_state("b", "k", replace(state, head_id="h2"))
    assert await two.rolling_state("b", "k") is not None
    saved = await one.rolling_state("b", "k")
    assert saved is not None
    assert saved.head_id == "h2"
    assert await one.channels.set_monitored("b", "irc:#x", True)
    assert not await two.channels.set_monitored("b", "irc:#x", True)
    assert await one.channels.monitored("b") == {"irc:#x"}
    await one.close()
    await two.close()


async def test_no_password_in_the_error_when_the_server_refuses(pg_database: Database) -> None:
    wrong = Database(pg_database.kind, pg_database.url, "not-the-password-31337")
    with pytest.raises(StoreError, match="cannot open the store at") as refused:
        await wrong.open_store()
    assert "not-the-password-31337" not in str(refused.value)
