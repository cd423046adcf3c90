"""The store's own SQL layer: parameters, transactions, errors, URLs, and databases that an
earlier Salon (on SQLAlchemy) made."""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from fakes.databases import Database
from salon.errors import StoreError
from salon.model import ChannelRef, Message, Participant, RollState, Usage
from salon.store._db import DatabaseError, _numbered
from salon.store._dialects import in_list, parse_url
from salon.store.sql import SQLStore, sqlite_url

OLD_STORE = Path(__file__).parent / "data" / "salon-v13.db"
ROOM = ChannelRef("memory", "room")


def test_parameters_are_numbered_once_per_name_for_postgres() -> None:
    sql, names = _numbered("SELECT :a, :b WHERE x = :a AND y::text = ':c' AND z = :b_2")
    assert sql == "SELECT $1, $2 WHERE x = $1 AND y::text = ':c' AND z = $3"
    assert names == ("a", "b", "b_2")


def test_in_list_names_each_value_and_matches_nothing_when_empty() -> None:
    params: dict[str, object] = {}
    assert in_list("id", [3, 4], params) == "(:id_0, :id_1)"
    assert params == {"id_0": 3, "id_1": 4}
    assert in_list("id", [], params) == "(NULL)"


@pytest.mark.parametrize(
    ("url", "backend", "where"),
    [
        ("sqlite:///data/salon.db", "sqlite", "data/salon.db"),
        ("sqlite:////abs/salon.db", "sqlite", "/abs/salon.db"),
        ("sqlite+aiosqlite:///:memory:", "sqlite", ":memory:"),
        ("sqlite://", "sqlite", ":memory:"),
        ("postgresql://salon@db:5433/bots", "postgresql", "db"),
        ("postgres://salon@db/bots", "postgresql", "db"),
        ("postgresql+asyncpg://salon@db/bots", "postgresql", "db"),
    ],
)
def test_database_urls_of_both_kinds_and_of_earlier_configs(
    url: str, backend: str, where: str
) -> None:
    parsed = parse_url(url)
    assert parsed.backend == backend
    assert (parsed.path if backend == "sqlite" else parsed.host) == where


def test_a_postgres_url_keeps_its_parts_and_never_shows_the_password() -> None:
    url = parse_url("postgresql://salon@db.internal:5433/bots?host=/run/pg", "s3cret-pw")
    assert (url.username, url.host, url.port, url.database) == (
        "salon",
        "db.internal",
        5433,
        "bots",
    )
    assert url.password == "s3cret-pw"
    assert url.query == {"host": "/run/pg"}
    assert "s3cret-pw" not in url.render()
    assert url.with_database("other").render() == (
        "postgresql://salon:***@db.internal:5433/other?host=/run/pg"
    )
    # asyncpg reads the URL as written (sslmode, socket directories, …)
    tls = parse_url("postgres+asyncpg://salon@db/bots?sslmode=verify-full")
    assert tls.dsn == "postgresql://salon@db/bots?sslmode=verify-full"
    assert tls.with_database("t").dsn == "postgresql://salon@db/t?sslmode=verify-full"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/d", "mysql is not supported"),
        ("not a url", "not a database URL"),
        ("postgresql://u@h:notaport/d", "not a database URL"),
    ],
)
def test_a_bad_database_url_is_one_clear_error(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        parse_url(url)


async def test_a_failed_statement_rolls_its_transaction_back(database: Database) -> None:
    store = await database.open_store()
    try:
        insert = "INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', :key, 1.0)"

        async def first_then_fail() -> None:
            async with store.db.begin() as conn:
                await conn.execute(insert, {"key": "first"})
                await conn.execute("SELECT * FROM no_such_table")

        with pytest.raises(DatabaseError, match=r"no_such_table|does not exist"):
            await first_then_fail()
        async with store.db.begin() as conn:  # the connection is usable, nothing was kept
            await conn.execute(insert, {"key": "second"})
        async with store.db.connect() as conn:
            keys = [r[0] for r in await conn.fetch('SELECT "key" FROM limit_marks')]
        assert keys == ["second"]
    finally:
        await store.close()


async def test_an_exception_in_the_block_rolls_back_too(database: Database) -> None:
    store = await database.open_store()
    try:

        async def write_then_raise() -> None:
            async with store.db.begin() as conn:
                await conn.execute(
                    "INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'k', 1.0)"
                )
                raise RuntimeError("the caller changed its mind")

        with pytest.raises(RuntimeError):
            await write_then_raise()
        assert await store.limits.mark("b", "k") is None
    finally:
        await store.close()


async def test_transactions_of_one_process_take_turns_on_sqlite(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()

    async def bump() -> None:  # read, then write: a lost update if two interleaved
        for _ in range(20):
            async with store.db.begin() as conn:
                now = await conn.fetchval("SELECT until FROM limit_marks WHERE bot = 'b'")
                await asyncio.sleep(0)
                await conn.execute(
                    "INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'n', :v)"
                    ' ON CONFLICT (bot, "key") DO UPDATE SET until = excluded.until',
                    {"v": (now or 0) + 1},
                )

    try:
        await asyncio.gather(bump(), bump(), bump())
        assert await store.limits.mark("b", "n") == 60
    finally:
        await store.close()


async def test_a_write_waits_for_another_process_holding_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    first, second = SQLStore(sqlite_url(path)), SQLStore(sqlite_url(path))
    await first.open()
    await second.open()
    holding, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with first.db.begin() as conn:
            await conn.execute("INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'x', 1)")
            holding.set()
            await release.wait()

    async def read_then_write() -> None:  # on a snapshot older than the other's commit
        async with second.db.begin() as conn:
            seen = await conn.fetchval("SELECT count(*) FROM limit_marks")
            await conn.execute(
                "INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'y', :n)",
                {"n": seen + 1},
            )

    try:
        holder = asyncio.create_task(hold())
        await asyncio.wait_for(holding.wait(), 10)
        waiter = asyncio.create_task(read_then_write())
        done, _ = await asyncio.wait([waiter], timeout=0.3)
        assert not done  # BEGIN IMMEDIATE waits for the other's write lock, then reads
        release.set()
        await asyncio.wait_for(holder, 10)
        await asyncio.wait_for(waiter, 10)
        assert await second.limits.mark("b", "x") == 1.0
        assert await second.limits.mark("b", "y") == 2.0  # it saw the other's row: no lost update
    finally:
        release.set()
        await first.close()
        await second.close()


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as raw:
        rows = raw.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
    return sorted(
        (name, re.sub(r"\s+", " ", sql.replace("( ", "(").replace(" )", ")")).strip())
        for name, sql in rows
    )


async def test_a_store_made_by_an_earlier_salon_reads_back_and_takes_writes(
    tmp_path: Path,
) -> None:
    """``data/salon-v13.db`` was written by Salon at commit 0ff0ddf (the store on SQLAlchemy,
    schema version 13): six chat lines, a schedule, an approval, usage, rolling state, a
    monitored channel, a keyframe and two traces referring to it plus a lone trace, limit
    rows and a mark, a heartbeat and an inbox event."""
    path = tmp_path / "salon.db"
    shutil.copy(OLD_STORE, path)
    store = SQLStore(sqlite_url(path))
    await store.open()
    try:
        history = await store.chat_history("bot", ROOM, limit=10)
        assert [m.text for m in history] == [f"line {i} about lanterns" for i in range(6)]
        assert [m.author.is_bot for m in history[:2]] == [False, True]
        found = await store.chatlog.search_chat("bot", ROOM.key, "lanterns")
        assert found[0].text == "line 5 about lanterns"
        (schedule,) = await store.schedules.find("bot")
        assert (schedule.cron, schedule.prompt, schedule.active) == (
            "0 9 * * *",
            "water the plants",
            True,
        )
        assert [a[2] for a in await store.pending_approvals("bot")] == ["shell"]
        assert await store.channels.usage_totals("bot") == Usage(100, 20, 80, 10)
        state = await store.rolling_state("bot", ROOM.key)
        assert state is not None
        assert state.breakpoint_id == "m2"
        assert await store.channels.monitored("bot") == {ROOM.key}
        summaries = await store.traces.list_traces()
        assert len(summaries) == 4
        for summary in summaries:
            whole = await store.traces.get_trace(summary.id)
            assert whole is not None
            assert "incomplete" not in whole[1]
        assert await store.limits.spent("bot", "user:alice:tokens", 20454) == 40
        assert await store.limits.mark("bot", "pause:memory:room") == 1_767_229_200.0
        assert [h.bot for h in await store.health.health_reports()] == ["bot"]
        assert [e.text for e in await store.inbox.take_events("bot", "me")] == [
            "hello from outside"
        ]
        # and it goes on: new rows get new ids after the old ones
        alice = Participant("a", "Alice")
        when = datetime(2026, 1, 2, tzinfo=UTC)
        await store.log_message("bot", Message("m6", ROOM, alice, "a new line", when))
        assert (await store.chat_history("bot", ROOM, limit=1))[0].text == "a new line"
    finally:
        await store.close()
    new = tmp_path / "new.db"
    made = SQLStore(sqlite_url(new))
    await made.open()
    await made.close()
    assert _schema(new) == _schema(path)  # the same tables and indexes, word for word


async def test_a_write_only_transaction_is_one_trip_to_the_sqlite_thread(tmp_path: Path) -> None:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    trips = 0
    call = store.db.call  # type: ignore[attr-defined]

    async def counted(fn: object) -> object:
        nonlocal trips
        trips += 1
        return await call(fn)

    store.db.call = counted  # type: ignore[attr-defined]
    try:
        await store.save_rolling_state(
            "bot", ROOM.key, RollState(anchor_id="a", breakpoint_id=None, head_id="h")
        )
        await store.record_usage("bot", ROOM.key, "llm", "m", Usage(1, 2, 3, 4))
        assert trips == 0  # an activation's bookkeeping goes with the next trip
        async with store.db.begin() as conn:  # a read waits: BEGIN goes with it, then COMMIT
            assert await conn.fetchval("SELECT count(*) FROM usage_log") == 1
        assert trips == 2
        await store.save_rolling_state(
            "bot", ROOM.key, RollState(anchor_id="a", breakpoint_id=None, head_id="h2")
        )
        async with store.db.begin() as conn:  # a write-only transaction: one trip
            await conn.many([("DELETE FROM usage_log", {})])
        assert trips == 3
        saved = await store.rolling_state("bot", ROOM.key)
        assert saved is not None
        assert saved.head_id == "h2"
    finally:
        await store.close()


async def test_a_deferred_statement_that_fails_fails_its_transaction(database: Database) -> None:
    store = await database.open_store()
    good = "INSERT INTO limit_marks (bot, \"key\", until) VALUES ('b', 'kept?', 1.0)"

    async def write_then_fail() -> None:
        async with store.db.begin() as conn:
            await conn.many([(good, {}), ("INSERT INTO no_such_table VALUES (1)", {})])

    try:
        with pytest.raises(DatabaseError, match=r"no_such_table|does not exist"):
            await write_then_fail()
        assert await store.limits.mark("b", "kept?") is None
    finally:
        await store.close()


async def test_connections_the_server_dropped_are_replaced(pg_database: Database) -> None:
    """A PostgreSQL restart or failover closes the pool's connections: the next use gets a
    new one instead of failing."""
    store = await pg_database.open_store()
    try:
        await store.limits.set_mark("b", "before", 1.0)
        url = parse_url(pg_database.url, pg_database.password)
        admin = await asyncpg.connect(url.with_database("postgres").dsn, password=url.password)
        try:
            dropped = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = $1 AND pid <> pg_backend_pid()",
                url.database,
            )
        finally:
            await admin.close()
        assert dropped >= 1
        assert await store.limits.mark("b", "before") == 1.0
        await store.limits.set_mark("b", "after", 2.0)
        assert await store.limits.mark("b", "after") == 2.0
    finally:
        await store.close()
