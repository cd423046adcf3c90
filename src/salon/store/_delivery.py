"""The store's part for delivery: what the bot last saw in each channel, the answers it
owes, and platforms' own read positions (a Matrix sync token).

A **mark** is the newest message the bot was handed in a channel, with when it last
answered there: after a gap (a restart, a new gateway session) the bot reads each channel
where it could have been addressed from its mark on (``salon.agent.delivery``). Marks are
written behind, in batches.

An **owed** row is an activation that began to answer messages: written (committed) when it
starts, deleted when it ends, so one a stop or a crash cut off is still there at the next
start. It names the process that owes it, as a schedule's claim does, and holds the message
itself, so the next process can answer it without asking the platform. ``answer_key`` is
the key its answer's first message went out under (``salon.agent.answerkey``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from salon.errors import StoreError
from salon.model import Attachment, ChannelMark, ChannelRef, Message, OwedAnswer, Participant, Tag
from salon.store._db import Database, DatabaseError
from salon.store._dialects import upsert
from salon.store._part import Part, execute
from salon.store._schedules import live_owners

__all__ = ["DeliveryPart", "message_from_json", "message_to_json"]


class DeliveryPart(Part):
    def __init__(self, database: Callable[[], Database], owner: str) -> None:
        super().__init__(database)
        self.owner = owner

    # -- marks -------------------------------------------------------------------------

    async def save_marks(self, bot: str, marks: Sequence[ChannelMark]) -> None:
        """Upsert marks; a channel's answered time only moves forward."""
        await self._many(_mark_rows(bot, marks))

    async def marks(
        self, bot: str, platform: str, *, answered_since: float, limit: int
    ) -> list[ChannelMark]:
        """The channels of ``platform`` where the bot could have been addressed: answered in
        since ``answered_since``, direct, or monitored; the most recently answered first."""
        query = (
            "SELECT channel, direct, monitored, last_id, last_at, answered_at"
            " FROM channel_marks WHERE bot = :bot AND channel LIKE :platform"
            " AND (answered_at >= :since OR direct OR monitored)"
            " ORDER BY answered_at DESC, last_at DESC LIMIT :limit"
        )
        params = {"bot": bot, "platform": f"{platform}:%", "since": answered_since, "limit": limit}
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return [_row_to_mark(row) for row in rows]

    # -- what is owed ------------------------------------------------------------------

    async def owe(
        self, bot: str, messages: Sequence[Message], marks: Sequence[ChannelMark] = ()
    ) -> None:
        """These messages are being answered by this process, and their channels' marks
        are where they are now (committed together on return)."""
        columns = ("bot", "platform", "message_id", "channel", "body", "owner", "started_at")
        statement = upsert("owed_answers", columns, ["bot", "platform", "message_id"])
        now = time.time()
        rows = [
            (
                statement,
                {
                    "bot": bot,
                    "platform": m.channel.platform,
                    "message_id": m.id,
                    "channel": m.channel.key,
                    "body": message_to_json(m),
                    "owner": self.owner,
                    "started_at": now,
                },
            )
            for m in messages
        ]
        await self._many(rows + _mark_rows(bot, marks))

    async def owe_key(self, bot: str, messages: Sequence[Message], key: str) -> None:
        """The first message of their answer goes out under ``key`` next."""
        statement = (
            "UPDATE owed_answers SET answer_key = :key"
            " WHERE bot = :bot AND platform = :platform AND message_id = :id"
        )
        rows = [
            (statement, {"key": key, "bot": bot, "platform": m.channel.platform, "id": m.id})
            for m in messages
        ]
        await self._many(rows)

    async def settle(
        self, bot: str, messages: Sequence[Message], marks: Sequence[ChannelMark] = ()
    ) -> None:
        """Their activation ended (answered, stopped by a step, or its failure told); their
        channels' marks are where they are now (committed together)."""
        statement = (
            "DELETE FROM owed_answers WHERE bot = :bot AND platform = :platform"
            " AND message_id = :id"
        )
        rows = [
            (statement, {"bot": bot, "platform": m.channel.platform, "id": m.id}) for m in messages
        ]
        await self._many(rows + _mark_rows(bot, marks))

    async def owed_ids(self, bot: str) -> set[str]:
        """Ids of every message ``bot`` owes an answer, whichever process owes it."""
        query = "SELECT message_id FROM owed_answers WHERE bot = :bot"
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"bot": bot})
        return {str(row[0]) for row in rows}

    async def take_over(self, bot: str, platforms: Sequence[str]) -> list[OwedAnswer]:
        """Owed answers of ``bot`` on ``platforms`` left by processes whose lease is gone,
        now this process's, oldest first."""
        if not platforms:
            return []
        names = ", ".join(f":p{i}" for i in range(len(platforms)))
        params: dict[str, Any] = {"bot": bot, "owner": self.owner}
        params |= {f"p{i}": name for i, name in enumerate(platforms)}
        query = (
            "SELECT platform, message_id, body, owner, answer_key, started_at"
            f" FROM owed_answers WHERE bot = :bot AND platform IN ({names})"
            f" AND owner != :owner AND owner NOT IN ({live_owners(self.db.dialect)})"
            " ORDER BY started_at"
        )
        move = (
            "UPDATE owed_answers SET owner = :owner WHERE bot = :bot AND platform = :platform"
            " AND message_id = :id AND owner = :was"
        )
        taken: list[OwedAnswer] = []
        async with self.db.begin() as conn:
            for row in await conn.fetch(query, params):
                step = {"owner": self.owner, "bot": bot, "platform": row["platform"]}
                step |= {"id": row["message_id"], "was": row["owner"]}
                if await conn.execute(move, step):
                    message = message_from_json(row["body"])
                    taken.append(OwedAnswer(message, row["answer_key"], row["started_at"]))
        return taken

    # -- a platform's own read position ------------------------------------------------

    async def cursor(self, bot: str, name: str) -> str | None:
        """A position a platform keeps between runs (Matrix: its sync token)."""
        query = "SELECT value FROM delivery_cursors WHERE bot = :bot AND name = :name"
        async with self.db.connect() as conn:
            found = await conn.fetchval(query, {"bot": bot, "name": name})
        return None if found is None else str(found)

    async def save_cursor(self, bot: str, name: str, value: str) -> None:
        columns = ("bot", "name", "value", "updated_at")
        statement = upsert("delivery_cursors", columns, ["bot", "name"])
        params = {"bot": bot, "name": name, "value": value, "updated_at": time.time()}
        await execute(self.db, statement, params)

    async def _many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        if not rows:
            return
        try:
            async with self.db.begin() as conn:
                await conn.many(rows)
        except DatabaseError as exc:
            raise StoreError(f"store write failed: {exc}") from exc


def _mark_rows(bot: str, marks: Sequence[ChannelMark]) -> list[tuple[str, dict[str, Any]]]:
    columns = ("bot", "channel", "direct", "monitored", "last_id", "last_at", "answered_at")
    moving = ["direct", "monitored", "last_id", "last_at"]
    statement = upsert("channel_marks", columns, ["bot", "channel"], update=moving)
    statement += (
        ", answered_at = CASE WHEN excluded.answered_at > channel_marks.answered_at"
        " THEN excluded.answered_at ELSE channel_marks.answered_at END"
    )
    return [
        (
            statement,
            {
                "bot": bot,
                "channel": mark.channel.key,
                "direct": mark.channel.is_direct,
                "monitored": mark.monitored,
                "last_id": mark.last_id,
                "last_at": mark.last_at,
                "answered_at": mark.answered_at,
            },
        )
        for mark in marks
    ]


def _row_to_mark(row: Any) -> ChannelMark:
    channel = ChannelRef.from_key(row["channel"])
    if row["direct"]:
        channel = ChannelRef(channel.platform, channel.id, name=channel.id, is_direct=True)
    return ChannelMark(
        channel,
        row["last_id"],
        float(row["last_at"]),
        float(row["answered_at"]),
        bool(row["monitored"]),
    )


def _person(p: Participant) -> dict[str, Any]:
    return {"id": p.id, "name": p.name, "bot": p.is_bot, "roles": p.roles, "as": p.identity}


def _person_from(d: dict[str, Any]) -> Participant:
    roles = tuple(d.get("roles", ()))
    return Participant(d["id"], d["name"], bool(d["bot"]), roles=roles, identity=d.get("as", ""))


def message_to_json(message: Message) -> str:
    """What an owed answer needs of its message to be answered by another process (files
    by their link only)."""
    c = message.channel
    body = {
        "id": message.id,
        "channel": [c.platform, c.id, c.name, c.is_direct, c.guild_id, c.parent_id],
        "workspace": c.workspace_id,
        "author": _person(message.author),
        "text": message.text,
        "at": message.created_at.timestamp(),
        "mentions": [_person(p) for p in message.mentions],
        "reply_to": [message.reply_to_id, message.reply_to_author_id],
        "files": [[a.filename, a.content_type, a.size, a.url] for a in message.attachments],
        "tags": sorted(message.tags),
    }
    return json.dumps(body, separators=(",", ":"))


def message_from_json(text: str) -> Message:
    body = json.loads(text)
    platform, channel_id, name, direct, guild, parent = body["channel"]
    channel = ChannelRef(
        platform, channel_id, name, direct, guild, parent, workspace_id=body.get("workspace")
    )
    reply_to, reply_author = body["reply_to"]
    return Message(
        body["id"],
        channel,
        _person_from(body["author"]),
        body["text"],
        datetime.fromtimestamp(body["at"], UTC),
        mentions=tuple(_person_from(p) for p in body["mentions"]),
        reply_to_id=reply_to,
        reply_to_author_id=reply_author,
        attachments=tuple(Attachment(f, t, s, url=u) for f, t, s, u in body["files"]),
        tags=frozenset(Tag(t) for t in body["tags"]),
    )
