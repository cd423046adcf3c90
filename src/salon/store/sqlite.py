"""The SQL store: SQLAlchemy 2 async Core; SQLite (WAL) by default, PostgreSQL (asyncpg)
when ``database_url`` names one.

Migrations are append-only functions, each applied once and recorded in
``schema_migrations``; a database newer than this code is refused rather than guessed at.
The same migrations build both databases; what differs lives in ``_dialects``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from salon.errors import StoreError
from salon.model import ChannelRef, ChatLine, Message, Participant, Schedule, Usage
from salon.store._batch import BatchWriter
from salon.store._dialects import chat_search, insert_ignoring, store_url, upsert
from salon.store._limits import LimitMethods
from salon.store._processes import ProcessMethods, row_to_schedule
from salon.store._tables import (
    CONVERSATION_KINDS,
    MIGRATIONS,
    approvals,
    chat_log,
    migrate,
    monitored_channels,
    rolling_state,
    schedules,
    schema_migrations,
    usage_log,
)
from salon.store._traces import TraceMethods
from salon.tasks import TaskState

__all__ = ["MIGRATIONS", "SQLStore", "schema_migrations", "sqlite_url"]


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


class SQLStore(TraceMethods, ProcessMethods, LimitMethods):
    """``redact`` is applied to every chat-log line: no configured secret is stored.
    ``password`` completes ``url`` (it never sits in a config file); ``owner`` names this
    process in claims, approvals and its lease."""

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        owner: str | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.url = url
        self.owner = owner or uuid.uuid4().hex[:12]
        self._password = password
        self._redact = redact
        self._engine: AsyncEngine | None = None
        self._writer: BatchWriter

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise StoreError("store is not open")
        return self._engine

    async def open(self) -> None:
        url = store_url(self.url, self._password)
        if url.get_backend_name() == "postgresql":
            # pre_ping: a connection the server dropped (a restart, a failover) is replaced
            engine = create_async_engine(url, pool_pre_ping=True, pool_size=8)
        else:
            engine = create_async_engine(url)
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(migrate)
        except (SQLAlchemyError, StoreError, OSError) as exc:
            await engine.dispose()
            if isinstance(exc, StoreError):
                raise
            where = url.render_as_string(hide_password=True)
            raise StoreError(f"cannot open the store at {where}: {_first_line(exc)}") from exc
        self._engine = engine
        self._writer = BatchWriter(engine, chat_log)
        self._writer.start()

    async def close(self) -> None:
        if self._engine is not None:
            await self._writer.close()
            await self.close_limits()
            await self._engine.dispose()
            self._engine = None

    @property
    def writer_state(self) -> TaskState:
        """The chat-log writer's supervision state (for health)."""
        return self._writer.state

    async def flush(self) -> None:
        """Wait until every chat-log line logged so far is committed."""
        await self._writer.flush()

    async def log_message(
        self, bot: str, message: Message, kind: str = "message", *, durable: bool = False
    ) -> None:
        """Queue one line; it is committed within milliseconds, before any read sees it.
        ``durable``: committed (after every line queued before it) when this returns."""
        row = {
            "bot": bot,
            "channel": message.channel.key,
            "message_id": message.id,
            "author_id": message.author.id,
            "author_name": message.author.name,
            "author_is_bot": message.author.is_bot,
            "kind": kind,
            "text": self._redact(message.text) if self._redact else message.text,
            "created_at": message.created_at.timestamp(),
        }
        await self._writer.add(row)
        if durable:
            await self._writer.flush()

    async def forget_message(self, bot: str, message_id: str) -> None:
        """Remove a logged line (one that could not be shown after all)."""
        await self._writer.flush()
        table = chat_log
        await self._execute(
            sa.delete(table).where(table.c.bot == bot, table.c.message_id == message_id)
        )

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]:
        query = (
            sa.select(chat_log)
            .where(chat_log.c.bot == bot, chat_log.c.channel == channel.key)
            .where(chat_log.c.kind.in_(CONVERSATION_KINDS))
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
        await self._writer.flush()
        try:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read the chat log: {exc}") from exc
        return [_row_to_message(row, channel) for row in reversed(rows)]

    async def search_chat(
        self,
        bot: str,
        channel_key: str,
        query: str,
        *,
        user: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
    ) -> list[ChatLine]:
        """Lines matching every word of ``query``, newest first."""
        terms = [t for t in query.split() if t]
        if not terms:
            return []
        await self._writer.flush()
        dialect = self.engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            search = chat_search(
                dialect,
                bot=bot,
                channel=channel_key,
                terms=terms,
                user=user,
                since=since,
                limit=limit,
            )
            return await self._lines(search, custom_plan=dialect == "postgresql")
        c = chat_log.c
        statement = self._line_query(bot, channel_key, user, since).limit(limit)
        for term in terms:
            statement = statement.where(c.text.ilike(f"%{_escape_like(term)}%", escape="\\"))
        return await self._lines(statement)

    async def recent_chat(
        self, bot: str, channel_key: str, *, limit: int = 50, since: datetime | None = None
    ) -> list[ChatLine]:
        """The newest conversation lines, oldest first."""
        lines = await self._lines(self._line_query(bot, channel_key, None, since).limit(limit))
        return lines[::-1]

    async def channel_stats(self, bot: str, channel_key: str) -> dict[str, object]:
        """Counts per person in one statement, so the figures agree with each other."""
        c = chat_log.c
        query = (
            sa.select(
                c.author_name, sa.func.count(), sa.func.min(c.created_at), sa.func.max(c.created_at)
            )
            .where(c.bot == bot, c.channel == channel_key, c.kind.in_(CONVERSATION_KINDS))
            .group_by(c.author_name)
        )
        await self._writer.flush()
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        ranked = sorted(rows, key=lambda r: (-int(r[1]), str(r[0])))
        return {
            "messages": sum(int(r[1]) for r in rows),
            "participants": len(rows),
            "first": _iso(min((r[2] for r in rows), default=None)),
            "last": _iso(max((r[3] for r in rows), default=None)),
            "top_posters": {str(r[0]): int(r[1]) for r in ranked[:5]},
        }

    def _line_query(
        self, bot: str, channel_key: str, user: str | None, since: datetime | None
    ) -> sa.Select[Any]:
        c = chat_log.c
        statement = (
            sa.select(c.created_at, c.author_name, c.text, c.kind)
            .where(c.bot == bot, c.channel == channel_key, c.kind.in_(CONVERSATION_KINDS))
            .order_by(c.id.desc())
        )
        if user:
            statement = statement.where(sa.func.lower(c.author_name) == user.lower())
        if since is not None:
            statement = statement.where(c.created_at >= since.timestamp())
        return statement

    async def _lines(
        self, statement: sa.Executable, *, custom_plan: bool = False
    ) -> list[ChatLine]:
        """``custom_plan``: plan for these very words (PostgreSQL), not a plan reused for
        any words, which would walk a whole channel for a rare one."""
        await self._writer.flush()
        try:
            async with self.engine.begin() as conn:
                if custom_plan:
                    await conn.execute(sa.text("SET LOCAL plan_cache_mode = force_custom_plan"))
                rows = (await conn.execute(statement)).all()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read the chat log: {exc}") from exc
        return [ChatLine(datetime.fromtimestamp(r[0], tz=UTC), r[1], r[2], r[3]) for r in rows]

    async def open_approval(
        self, bot: str, channel_key: str, tool: str, arguments: str, requester: str
    ) -> int:
        row = {
            "bot": bot,
            "channel": channel_key,
            "tool": tool,
            "arguments": arguments,
            "requester": requester,
            "status": "pending",
            "created_at": time.time(),
            "owner": self.owner,
        }
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.insert(approvals).values(row))
            key = result.inserted_primary_key
        return int(key[0]) if key else 0

    async def close_approval(self, approval_id: int, status: str) -> None:
        statement = (
            sa.update(approvals)
            .where(approvals.c.id == approval_id, approvals.c.status == "pending")
            .values(status=status, decided_at=time.time())
        )
        await self._execute(statement)

    async def pending_approvals(self, bot: str) -> list[tuple[int, str, str]]:
        """(id, channel key, tool) of approvals still open, by any process."""
        query = sa.select(approvals.c.id, approvals.c.channel, approvals.c.tool).where(
            approvals.c.bot == bot, approvals.c.status == "pending"
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def create_schedule(self, schedule: Schedule) -> Schedule:
        row = {
            "bot": schedule.bot,
            "channel": schedule.channel.key,
            "cron": schedule.cron,
            "at": schedule.at.timestamp() if schedule.at else None,
            "timezone": schedule.timezone,
            "prompt": schedule.prompt,
            "created_by_id": schedule.created_by.id,
            "created_by_name": schedule.created_by.name,
            "created_by_identity": schedule.created_by.identity,
            "created_at": time.time(),
            "next_due": schedule.next_due.timestamp() if schedule.next_due else None,
            "active": True,
        }
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.insert(schedules).values(row))
            key = result.inserted_primary_key
            await self._announce_schedules(conn, schedule.bot)
        return replace(schedule, id=int(key[0]) if key else 0)

    async def schedules(
        self, bot: str, *, channel_key: str | None = None, active_only: bool = True
    ) -> list[Schedule]:
        query = sa.select(schedules).where(schedules.c.bot == bot).order_by(schedules.c.id)
        if channel_key is not None:
            query = query.where(schedules.c.channel == channel_key)
        if active_only:
            query = query.where(schedules.c.active.is_(True))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [row_to_schedule(row) for row in rows]

    async def cancel_schedule(self, bot: str, schedule_id: int) -> bool:
        statement = (
            sa.update(schedules)
            .where(schedules.c.bot == bot, schedules.c.id == schedule_id)
            .where(schedules.c.active.is_(True))
            .values(active=False, next_due=None)
        )
        async with self.engine.begin() as conn:
            result = await conn.execute(statement)
            await self._announce_schedules(conn, bot)
        return bool(result.rowcount)

    async def set_next_due(self, schedule_id: int, next_due: datetime | None) -> None:
        """Move a schedule on; ``None`` ends it (a one-shot that fired)."""
        values: dict[str, object] = {"next_due": next_due.timestamp() if next_due else None}
        if next_due is None:
            values["active"] = False
        await self._execute(
            sa.update(schedules).where(schedules.c.id == schedule_id).values(values)
        )

    async def schedules_signature(self, bot: str) -> tuple[int, int]:
        """(newest id, active count) of a bot's schedules: it changes when any process
        creates or cancels one, so a running scheduler can poll it cheaply."""
        c = schedules.c
        query = sa.select(
            sa.func.coalesce(sa.func.max(c.id), 0),
            sa.func.count().filter(c.active.is_(True)),
        ).where(c.bot == bot)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).one()
        return int(row[0]), int(row[1])

    async def monitored(self, bot: str) -> set[str]:
        """Keys of the channels where the bot reads (and may answer) every message."""
        query = sa.select(monitored_channels.c.channel).where(monitored_channels.c.bot == bot)
        async with self.engine.connect() as conn:
            return set((await conn.execute(query)).scalars())

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool:
        """Add or remove a monitored channel; returns whether anything changed."""
        table = monitored_channels
        async with self.engine.begin() as conn:
            if not on:
                result = await conn.execute(
                    sa.delete(table).where(table.c.bot == bot, table.c.channel == channel_key)
                )
                return bool(result.rowcount)
            row = {"bot": bot, "channel": channel_key, "added_by": by, "added_at": time.time()}
            result = await conn.execute(insert_ignoring(self.engine.dialect.name, table), row)
        return bool(result.rowcount)

    async def rolling_state(self, bot: str, channel_key: str) -> dict[str, Any] | None:
        table = rolling_state
        query = sa.select(table).where(table.c.bot == bot, table.c.channel == channel_key)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        when = row.breakpoint_time
        return {
            "anchor_id": row.anchor_id,
            "breakpoint_id": row.breakpoint_id,
            "head_id": row.head_id,
            "breakpoint_time": datetime.fromtimestamp(when, tz=UTC) if when else None,
            "tail_id": row.tail_id,
        }

    async def save_rolling_state(self, bot: str, channel_key: str, state: dict[str, Any]) -> None:
        table = rolling_state
        when = state.get("breakpoint_time")
        values = {
            "anchor_id": state["anchor_id"],
            "breakpoint_id": state["breakpoint_id"],
            "head_id": state["head_id"],
            "breakpoint_time": when.timestamp() if when else None,
            "tail_id": state.get("tail_id"),
        }
        row = {"bot": bot, "channel": channel_key, **values}
        statement = upsert(self.engine.dialect.name, table, row, ["bot", "channel"])
        async with self.engine.begin() as conn:
            await conn.execute(statement)

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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, tz=UTC).isoformat()


def _row_to_message(row: Any, channel: ChannelRef) -> Message:
    author = Participant(row.author_id, row.author_name, is_bot=row.author_is_bot)
    created = datetime.fromtimestamp(row.created_at, tz=UTC)
    text = f"/me {row.text}" if row.kind == "action" else row.text
    return Message(row.message_id, channel, author, text, created)
