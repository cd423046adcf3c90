"""The SQL store: SQLite (WAL) by default, PostgreSQL when ``database_url`` names one.

SQL is written out, with ``:name`` parameters, and run through ``salon.store._db``;
what differs between the two databases lives in ``_dialects``. Migrations are append-only
functions, each applied once and recorded in ``schema_migrations``; a database newer than
this code is refused rather than guessed at.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from salon.errors import StoreError
from salon.model import ChannelRef, ChatLine, Message, Participant, Schedule, Usage
from salon.store._batch import BatchWriter
from salon.store._db import Database, DatabaseError
from salon.store._dialects import (
    chat_search,
    connect,
    insert_ignoring,
    insert_sql,
    parse_url,
    upsert,
)
from salon.store._limits import LimitMethods
from salon.store._processes import ProcessMethods, row_to_schedule
from salon.store._tables import CONVERSATION_KINDS, MIGRATIONS, migrate
from salon.store._traces import TraceMethods
from salon.tasks import TaskState

__all__ = ["MIGRATIONS", "SQLStore", "sqlite_url"]

_CONVERSATION = "kind IN (" + ", ".join(f"'{k}'" for k in CONVERSATION_KINDS) + ")"
_CHAT_LOG_COLUMNS = (
    "bot",
    "channel",
    "message_id",
    "author_id",
    "author_name",
    "author_is_bot",
    "kind",
    "text",
    "created_at",
)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


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
        self._db: Database | None = None
        self._writer: BatchWriter

    @property
    def db(self) -> Database:
        if self._db is None:
            raise StoreError("store is not open")
        return self._db

    @property
    def dialect(self) -> str:
        return self.db.dialect

    async def open(self) -> None:
        url = parse_url(self.url, self._password)
        try:
            db = await connect(url)
        except DatabaseError as exc:
            raise StoreError(f"cannot open the store at {url.render()}: {exc}") from exc
        try:
            async with db.begin() as conn:
                await migrate(conn)
        except BaseException as exc:
            await db.close()
            if isinstance(exc, DatabaseError):
                raise StoreError(f"cannot open the store at {url.render()}: {exc}") from exc
            raise
        self._db = db
        self._writer = BatchWriter(db, insert_sql("chat_log", _CHAT_LOG_COLUMNS))
        self._writer.start()

    async def close(self) -> None:
        if self._db is not None:
            await self._writer.close()
            await self.close_limits()
            await self._db.close()
            self._db = None

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
        if self._writer.discard(bot, message_id):
            return  # still queued (the database was away): it will never be written
        await self._writer.flush()
        await self._execute(
            "DELETE FROM chat_log WHERE bot = :bot AND message_id = :id",
            {"bot": bot, "id": message_id},
        )

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]:
        params: dict[str, Any] = {"bot": bot, "channel": channel.key, "limit": limit}
        before = ""
        if before_id is not None:
            before = (
                " AND id < (SELECT id FROM chat_log WHERE bot = :bot AND channel = :channel"
                " AND message_id = :before)"
            )
            params["before"] = before_id
        query = (
            "SELECT message_id, author_id, author_name, author_is_bot, kind, text, created_at"
            f" FROM chat_log WHERE bot = :bot AND channel = :channel AND {_CONVERSATION}"
            f"{before} ORDER BY id DESC LIMIT :limit"
        )
        await self._writer.flush()
        try:
            async with self.db.connect() as conn:
                rows = await conn.fetch(query, params)
        except DatabaseError as exc:
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
        sql, params = chat_search(
            self.dialect,
            bot=bot,
            channel=channel_key,
            terms=terms,
            user=user,
            since=since,
            limit=limit,
        )
        return await self._lines(sql, params, custom_plan=self.dialect == "postgresql")

    async def recent_chat(
        self, bot: str, channel_key: str, *, limit: int = 50, since: datetime | None = None
    ) -> list[ChatLine]:
        """The newest conversation lines, oldest first."""
        params: dict[str, Any] = {"bot": bot, "channel": channel_key, "limit": limit}
        after = ""
        if since is not None:
            after = " AND created_at >= :since"
            params["since"] = since.timestamp()
        sql = (
            "SELECT created_at, author_name, text, kind FROM chat_log"
            f" WHERE bot = :bot AND channel = :channel AND {_CONVERSATION}{after}"
            " ORDER BY id DESC LIMIT :limit"
        )
        lines = await self._lines(sql, params)
        return lines[::-1]

    async def channel_stats(self, bot: str, channel_key: str) -> dict[str, object]:
        """Counts per person in one statement, so the figures agree with each other."""
        query = (
            "SELECT author_name, count(*), min(created_at), max(created_at) FROM chat_log"
            f" WHERE bot = :bot AND channel = :channel AND {_CONVERSATION}"
            " GROUP BY author_name"
        )
        await self._writer.flush()
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"bot": bot, "channel": channel_key})
        ranked = sorted(rows, key=lambda r: (-int(r[1]), str(r[0])))
        return {
            "messages": sum(int(r[1]) for r in rows),
            "participants": len(rows),
            "first": _iso(min((r[2] for r in rows), default=None)),
            "last": _iso(max((r[3] for r in rows), default=None)),
            "top_posters": {str(r[0]): int(r[1]) for r in ranked[:5]},
        }

    async def _lines(
        self, sql: str, params: dict[str, Any], *, custom_plan: bool = False
    ) -> list[ChatLine]:
        """``custom_plan``: plan for these very words (PostgreSQL), not a plan reused for
        any words, which would walk a whole channel for a rare one."""
        await self._writer.flush()
        try:
            if custom_plan:
                async with self.db.begin() as conn:
                    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
                    rows = await conn.fetch(sql, params)
            else:
                async with self.db.connect() as conn:
                    rows = await conn.fetch(sql, params)
        except DatabaseError as exc:
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
        async with self.db.begin() as conn:
            key = await conn.fetchval(insert_sql("approvals", tuple(row), " RETURNING id"), row)
        return int(key or 0)

    async def close_approval(self, approval_id: int, status: str) -> None:
        await self._execute(
            "UPDATE approvals SET status = :status, decided_at = :now"
            " WHERE id = :id AND status = 'pending'",
            {"status": status, "now": time.time(), "id": approval_id},
        )

    async def pending_approvals(self, bot: str) -> list[tuple[int, str, str]]:
        """(id, channel key, tool) of approvals still open, by any process."""
        query = "SELECT id, channel, tool FROM approvals WHERE bot = :bot AND status = 'pending'"
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"bot": bot})
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
        statement = insert_sql("schedules", tuple(row), " RETURNING id")
        async with self.db.begin() as conn:
            key = await conn.fetchval(statement, row)
            await self._announce_schedules(conn, schedule.bot)
        return replace(schedule, id=int(key or 0))

    async def schedules(
        self, bot: str, *, channel_key: str | None = None, active_only: bool = True
    ) -> list[Schedule]:
        params: dict[str, Any] = {"bot": bot}
        where = "bot = :bot"
        if channel_key is not None:
            where += " AND channel = :channel"
            params["channel"] = channel_key
        if active_only:
            where += " AND active"
        async with self.db.connect() as conn:
            rows = await conn.fetch(f"SELECT * FROM schedules WHERE {where} ORDER BY id", params)
        return [row_to_schedule(row) for row in rows]

    async def cancel_schedule(self, bot: str, schedule_id: int) -> bool:
        statement = (
            "UPDATE schedules SET active = :off, next_due = NULL"
            " WHERE bot = :bot AND id = :id AND active"
        )
        async with self.db.begin() as conn:
            changed = await conn.execute(statement, {"off": False, "bot": bot, "id": schedule_id})
            await self._announce_schedules(conn, bot)
        return bool(changed)

    async def set_next_due(self, schedule_id: int, next_due: datetime | None) -> None:
        """Move a schedule on; ``None`` ends it (a one-shot that fired)."""
        params: dict[str, Any] = {
            "id": schedule_id,
            "due": next_due.timestamp() if next_due else None,
        }
        ending = ""
        if next_due is None:
            ending = ", active = :off"
            params["off"] = False
        await self._execute(f"UPDATE schedules SET next_due = :due{ending} WHERE id = :id", params)

    async def schedules_signature(self, bot: str) -> tuple[int, int]:
        """(newest id, active count) of a bot's schedules: it changes when any process
        creates or cancels one, so a running scheduler can poll it cheaply."""
        query = (
            "SELECT coalesce(max(id), 0), count(*) FILTER (WHERE active)"
            " FROM schedules WHERE bot = :bot"
        )
        async with self.db.connect() as conn:
            (row,) = await conn.fetch(query, {"bot": bot})
        return int(row[0]), int(row[1])

    async def monitored(self, bot: str) -> set[str]:
        """Keys of the channels where the bot reads (and may answer) every message."""
        async with self.db.connect() as conn:
            rows = await conn.fetch(
                "SELECT channel FROM monitored_channels WHERE bot = :bot", {"bot": bot}
            )
        return {r[0] for r in rows}

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool:
        """Add or remove a monitored channel; returns whether anything changed."""
        async with self.db.begin() as conn:
            if not on:
                changed = await conn.execute(
                    "DELETE FROM monitored_channels WHERE bot = :bot AND channel = :channel",
                    {"bot": bot, "channel": channel_key},
                )
                return bool(changed)
            row = {"bot": bot, "channel": channel_key, "added_by": by, "added_at": time.time()}
            changed = await conn.execute(insert_ignoring("monitored_channels", tuple(row)), row)
        return bool(changed)

    async def rolling_state(self, bot: str, channel_key: str) -> dict[str, Any] | None:
        query = (
            "SELECT anchor_id, breakpoint_id, head_id, breakpoint_time, tail_id"
            " FROM rolling_state WHERE bot = :bot AND channel = :channel"
        )
        async with self.db.connect() as conn:
            row = await conn.fetchrow(query, {"bot": bot, "channel": channel_key})
        if row is None:
            return None
        when = row["breakpoint_time"]
        return {
            "anchor_id": row["anchor_id"],
            "breakpoint_id": row["breakpoint_id"],
            "head_id": row["head_id"],
            "breakpoint_time": datetime.fromtimestamp(when, tz=UTC) if when else None,
            "tail_id": row["tail_id"],
        }

    async def save_rolling_state(self, bot: str, channel_key: str, state: dict[str, Any]) -> None:
        when = state.get("breakpoint_time")
        row = {
            "bot": bot,
            "channel": channel_key,
            "anchor_id": state["anchor_id"],
            "breakpoint_id": state["breakpoint_id"],
            "head_id": state["head_id"],
            "breakpoint_time": when.timestamp() if when else None,
            "tail_id": state.get("tail_id"),
        }
        statement = upsert("rolling_state", tuple(row), ["bot", "channel"])
        async with self.db.begin() as conn:
            await conn.many([(statement, row)])

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
        await self._execute(insert_sql("usage_log", tuple(row)), row)

    async def usage_totals(self, bot: str) -> Usage:
        query = (
            "SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
            " coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0)"
            " FROM usage_log WHERE bot = :bot"
        )
        async with self.db.connect() as conn:
            (row,) = await conn.fetch(query, {"bot": bot})
        return Usage(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    async def _execute(self, statement: str, params: dict[str, Any]) -> None:
        try:
            async with self.db.begin() as conn:
                await conn.many([(statement, params)])
        except DatabaseError as exc:
            raise StoreError(f"store write failed: {exc}") from exc


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, tz=UTC).isoformat()


def _row_to_message(row: Any, channel: ChannelRef) -> Message:
    author = Participant(row["author_id"], row["author_name"], is_bot=bool(row["author_is_bot"]))
    created = datetime.fromtimestamp(row["created_at"], tz=UTC)
    text = f"/me {row['text']}" if row["kind"] == "action" else row["text"]
    return Message(row["message_id"], channel, author, text, created)
