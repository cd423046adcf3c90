"""The store's part for the chat log: what the terminal and IRC (which keep no history)
saw and said, written behind in batches (``_batch``) and read back by the platforms and the
chat-log tools. Every read flushes the writer first, so it sees every line logged before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from salon.errors import StoreError
from salon.model import ChannelRef, ChatLine, Message, Participant
from salon.store._batch import BatchWriter
from salon.store._db import Database, DatabaseError
from salon.store._dialects import chat_search, in_list, insert_sql
from salon.store._part import Part, execute
from salon.store._tables import CONVERSATION_KINDS
from salon.tasks import TaskState

__all__ = ["ChatLogPart"]

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


class ChatLogPart(Part):
    """``redact`` is applied to every line: no configured secret is stored."""

    def __init__(
        self, database: Callable[[], Database], redact: Callable[[str], str] | None = None
    ) -> None:
        super().__init__(database)
        self._redact = redact
        self._writer: BatchWriter

    def start(self, db: Database) -> None:
        """The store opened ``db``: start the writer."""
        self._writer = BatchWriter(db, insert_sql("chat_log", _CHAT_LOG_COLUMNS))
        self._writer.start()

    async def close(self) -> None:
        """Write what is queued and stop the writer (the store is closing)."""
        await self._writer.close()

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
        await execute(
            self.db,
            "DELETE FROM chat_log WHERE bot = :bot AND message_id = :id",
            {"bot": bot, "id": message_id},
        )

    async def logged(self, bot: str, channel: ChannelRef, message_id: str) -> bool:
        """Whether the chat log holds this message of the channel."""
        await self._writer.flush()
        query = (
            "SELECT id FROM chat_log WHERE bot = :bot AND channel = :channel"
            " AND message_id = :id LIMIT 1"
        )
        params = {"bot": bot, "channel": channel.key, "id": message_id}
        async with self.db.connect() as conn:
            return await conn.fetchval(query, params) is not None

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
            self.db.dialect,
            bot=bot,
            channel=channel_key,
            terms=terms,
            user=user,
            since=since,
            limit=limit,
        )
        return await self._lines(sql, params, custom_plan=self.db.dialect == "postgresql")

    async def recent_chat(
        self,
        bot: str,
        channel_key: str,
        *,
        limit: int = 50,
        since: datetime | None = None,
        kinds: Sequence[str] = CONVERSATION_KINDS,
    ) -> list[ChatLine]:
        """The newest lines of these kinds (the conversation by default), oldest first."""
        params: dict[str, Any] = {"bot": bot, "channel": channel_key, "limit": limit}
        of_kinds = "kind IN " + in_list("kind", list(kinds), params)
        after = ""
        if since is not None:
            after = " AND created_at >= :since"
            params["since"] = since.timestamp()
        sql = (
            "SELECT created_at, author_name, text, kind FROM chat_log"
            f" WHERE bot = :bot AND channel = :channel AND {of_kinds}{after}"
            " ORDER BY id DESC LIMIT :limit"
        )
        lines = await self._lines(sql, params)
        return lines[::-1]

    async def channel_log(self, bot: str, channel_key: str, *, limit: int) -> list[ChatLine]:
        """The newest lines of every kind but Salon's notes (joins, parts, quits, nick
        changes and notices with the conversation), oldest first."""
        params: dict[str, Any] = {"bot": bot, "channel": channel_key, "limit": limit}
        sql = (
            "SELECT created_at, author_name, text, kind FROM chat_log"
            " WHERE bot = :bot AND channel = :channel AND kind <> 'note'"
            " ORDER BY id DESC LIMIT :limit"
        )
        return (await self._lines(sql, params))[::-1]

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


def _iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, tz=UTC).isoformat()


def _row_to_message(row: Any, channel: ChannelRef) -> Message:
    author = Participant(row["author_id"], row["author_name"], is_bot=bool(row["author_is_bot"]))
    created = datetime.fromtimestamp(row["created_at"], tz=UTC)
    text = f"/me {row['text']}" if row["kind"] == "action" else row["text"]
    return Message(row["message_id"], channel, author, text, created)
