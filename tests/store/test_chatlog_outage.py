"""The chat log while its database is unreachable: lines logged meanwhile wait, in order and
within a bound, and are written once the database is back (PostgreSQL behind a relay the
test takes down, so the store sees a stopped server: connections reset, then refused)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from fakes.databases import Database
from fakes.tcp_proxy import TcpProxy
from salon.model import ChannelRef, Message, Participant
from salon.store._batch import BatchWriter
from salon.store._db import open_postgres
from salon.store._dialects import DatabaseURL, connect, insert_sql, parse_url
from salon.store.sql import SQLStore

ROOM = ChannelRef("memory", "room")
ALICE = Participant("alice", "Alice")


def _line(n: int) -> Message:
    return Message(str(n), ROOM, ALICE, f"line {n}", datetime.now(UTC))


@pytest.fixture
async def relayed(pg_database: Database) -> AsyncIterator[tuple[TcpProxy, DatabaseURL]]:
    """A relay to the test database, and the database's URL through it."""
    url = parse_url(pg_database.url, pg_database.password)
    assert url.host is not None
    assert url.port is not None
    async with TcpProxy(url.host, url.port) as proxy:
        through = f"postgresql://{url.username}@127.0.0.1:{proxy.port}/{url.database}"
        yield proxy, parse_url(through, pg_database.password)


async def _texts(url: DatabaseURL, table: str = "chat_log") -> list[str]:
    direct = await asyncpg.connect(url.dsn, password=url.password)
    try:
        rows = await direct.fetch(f"SELECT text FROM {table} ORDER BY id")
    finally:
        await direct.close()
    return [row[0] for row in rows]


async def test_lines_logged_while_the_database_is_down_are_written_when_it_is_back(
    relayed: tuple[TcpProxy, DatabaseURL], caplog: pytest.LogCaptureFixture
) -> None:
    proxy, url = relayed
    store = SQLStore(url.render(), password=url.password)
    await store.open()
    try:
        await store.log_message("b", _line(0), durable=True)
        await proxy.down()
        with caplog.at_level(logging.WARNING, logger="salon.store._batch"):
            for n in range(1, 51):
                await store.log_message("b", _line(n))
            await store.chatlog.flush()  # returns: the attempt failed, the lines wait
        assert "50 chat-log lines wait for the database" in caplog.text
        await proxy.up()
        history = await store.chat_history("b", ROOM, limit=100)
        assert [m.text for m in history] == [f"line {n}" for n in range(51)]
    finally:
        await store.close()


async def test_waiting_lines_are_written_without_a_read_once_the_database_is_back(
    relayed: tuple[TcpProxy, DatabaseURL],
) -> None:
    proxy, url = relayed
    store = SQLStore(url.render(), password=url.password)
    await store.open()
    try:
        await proxy.down()
        for n in range(10):
            await store.log_message("b", _line(n))
        await store.chatlog.flush()
        await proxy.up()
        # The writer tries again on its own; what it wrote is seen only in the database,
        # which tells nobody: asked until it holds the lines.
        async with asyncio.timeout(15):
            while len(await _texts(url)) < 10:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert await _texts(url) == [f"line {n}" for n in range(10)]
    finally:
        await store.close()


async def test_past_the_bound_the_oldest_waiting_lines_go_and_are_counted_in_the_log(
    relayed: tuple[TcpProxy, DatabaseURL], caplog: pytest.LogCaptureFixture
) -> None:
    """Down for long, the waiting lines keep within the bound: the oldest go first (the
    newest are what the bot reads back), and the log says how many went."""
    proxy, url = relayed
    store = SQLStore(url.render(), password=url.password)
    await store.open()  # makes the tables
    await store.close()
    db = await open_postgres(url.dsn, password=url.password)
    columns = ("bot", "channel", "message_id", "author_id", "author_name", "author_is_bot")
    insert = insert_sql("chat_log", (*columns, "kind", "text", "created_at"))
    writer = BatchWriter(db, insert, max_rows=100)
    writer.start()
    try:
        await proxy.down()
        with caplog.at_level(logging.WARNING, logger="salon.store._batch"):
            for n in range(150):
                await writer.add(_row(n))
            await writer.flush()
            assert writer.waiting == 100
            assert "dropping the oldest" in caplog.text
            await proxy.up()
            await writer.flush()
        assert writer.waiting == 0
        assert "the 50 oldest were dropped" in caplog.text
        assert await _texts(url) == [f"line {n}" for n in range(50, 150)]
    finally:
        await writer.close()
        await db.close()


def _row(n: int) -> dict[str, object]:
    return {
        "bot": "b",
        "channel": ROOM.key,
        "message_id": str(n),
        "author_id": ALICE.id,
        "author_name": ALICE.name,
        "author_is_bot": False,
        "kind": "message",
        "text": f"line {n}",
        "created_at": float(n),
    }


async def test_a_line_taken_back_while_it_waits_is_never_written(
    relayed: tuple[TcpProxy, DatabaseURL],
) -> None:
    """A line the bot could not show is taken back: still waiting, it leaves the queue."""
    proxy, url = relayed
    store = SQLStore(url.render(), password=url.password)
    await store.open()
    try:
        await proxy.down()
        for n in range(3):
            await store.log_message("b", _line(n), durable=True)
        await store.forget_message("b", "1")
        await proxy.up()
        history = await store.chat_history("b", ROOM, limit=10)
        assert [m.text for m in history] == ["line 0", "line 2"]
    finally:
        await store.close()


async def test_a_line_the_database_refuses_goes_alone_and_the_rest_are_written(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """The database is up but refuses one line (here a NOT NULL column left empty): only
    that line is dropped, and said; the lines around it are written, not held forever."""
    store = await database.open_store()
    await store.close()
    url = parse_url(database.url, database.password)
    db = await connect(url)
    columns = ("bot", "channel", "message_id", "author_id", "author_name", "author_is_bot")
    insert = insert_sql("chat_log", (*columns, "kind", "text", "created_at"))
    writer = BatchWriter(db, insert)
    writer.start()
    try:
        with caplog.at_level(logging.WARNING, logger="salon.store._batch"):
            for n in range(5):
                await writer.add({**_row(n), "text": None} if n == 2 else _row(n))
            await writer.flush()
        assert writer.waiting == 0
        assert "dropped a chat-log line the database refuses" in caplog.text
        async with db.connect() as conn:
            rows = await conn.fetch("SELECT text FROM chat_log ORDER BY id")
        assert [row[0] for row in rows] == ["line 0", "line 1", "line 3", "line 4"]
    finally:
        await writer.close()
        await db.close()
