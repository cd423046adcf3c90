"""The SQL store: SQLAlchemy 2 async Core; SQLite (WAL) by default.

Migrations are append-only functions, each applied once and recorded in
``schema_migrations``; a database newer than this code is refused rather than guessed at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from salon.errors import StoreError
from salon.model import ChannelRef, Message, Participant, Usage

__all__ = ["SQLStore", "sqlite_url"]

metadata = sa.MetaData()

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", sa.Float, nullable=False),
)

chat_log = sa.Table(
    "chat_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("message_id", sa.String, nullable=False),
    sa.Column("author_id", sa.String, nullable=False),
    sa.Column("author_name", sa.String, nullable=False),
    sa.Column("author_is_bot", sa.Boolean, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_chat_log_bot_channel_id", "bot", "channel", "id"),
    sa.Index("ix_chat_log_channel_time", "channel", "created_at"),
)

usage_log = sa.Table(
    "usage_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("bot", sa.String, nullable=False),
    sa.Column("channel", sa.String, nullable=False),
    sa.Column("provider", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("output_tokens", sa.Integer, nullable=False),
    sa.Column("cache_read_tokens", sa.Integer, nullable=False),
    sa.Column("cache_write_tokens", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)


def _m1_chat_log_and_usage(conn: Connection) -> None:
    chat_log.create(conn)
    usage_log.create(conn)


MIGRATIONS: list[tuple[int, Callable[[Connection], None]]] = [
    (1, _m1_chat_log_and_usage),
]


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


class SQLStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self._engine: AsyncEngine | None = None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise StoreError("store is not open")
        return self._engine

    async def open(self) -> None:
        engine = create_async_engine(self.url)
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(_migrate)
        except (SQLAlchemyError, StoreError) as exc:
            await engine.dispose()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open the store: {exc}") from exc
        self._engine = engine

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def log_message(self, bot: str, message: Message, kind: str = "message") -> None:
        row = {
            "bot": bot,
            "channel": message.channel.key,
            "message_id": message.id,
            "author_id": message.author.id,
            "author_name": message.author.name,
            "author_is_bot": message.author.is_bot,
            "kind": kind,
            "text": message.text,
            "created_at": message.created_at.timestamp(),
        }
        await self._execute(sa.insert(chat_log).values(row))

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]:
        query = (
            sa.select(chat_log)
            .where(chat_log.c.bot == bot, chat_log.c.channel == channel.key)
            .where(chat_log.c.kind == "message")
            .order_by(chat_log.c.id.desc())
            .limit(limit)
        )
        if before_id is not None:
            anchor = (
                sa.select(chat_log.c.id)
                .where(chat_log.c.bot == bot, chat_log.c.channel == channel.key)
                .where(chat_log.c.message_id == before_id)
                .scalar_subquery()
            )
            query = query.where(chat_log.c.id < anchor)
        try:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read the chat log: {exc}") from exc
        return [_row_to_message(row, channel) for row in reversed(rows)]

    async def record_usage(
        self, bot: str, channel_key: str, provider: str, model: str, usage: Usage
    ) -> None:
        row = {
            "bot": bot,
            "channel": channel_key,
            "provider": provider,
            "model": model,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "created_at": time.time(),
        }
        await self._execute(sa.insert(usage_log).values(row))

    async def usage_totals(self, bot: str) -> Usage:
        cols = usage_log.c
        query = sa.select(
            sa.func.coalesce(sa.func.sum(cols.input_tokens), 0),
            sa.func.coalesce(sa.func.sum(cols.output_tokens), 0),
            sa.func.coalesce(sa.func.sum(cols.cache_read_tokens), 0),
            sa.func.coalesce(sa.func.sum(cols.cache_write_tokens), 0),
        ).where(cols.bot == bot)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).one()
        return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    async def _execute(self, statement: sa.Executable) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(statement)
        except SQLAlchemyError as exc:
            raise StoreError(f"store write failed: {exc}") from exc


def _migrate(conn: Connection) -> None:
    schema_migrations.create(conn, checkfirst=True)
    done = set(conn.execute(sa.select(schema_migrations.c.version)).scalars())
    newest = max(v for v, _ in MIGRATIONS)
    if done and max(done) > newest:
        raise StoreError(f"database schema v{max(done)} is newer than this Salon (v{newest})")
    for version, apply in MIGRATIONS:
        if version in done:
            continue
        apply(conn)
        conn.execute(sa.insert(schema_migrations).values(version=version, applied_at=time.time()))


def _row_to_message(row: Any, channel: ChannelRef) -> Message:
    author = Participant(row.author_id, row.author_name, is_bot=row.author_is_bot)
    created = datetime.fromtimestamp(row.created_at, tz=UTC)
    return Message(row.message_id, channel, author, row.text, created)
