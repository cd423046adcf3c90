"""The store's parts that pass between a bot process and the operator's side: heartbeats
(``salon.upkeep`` writes them, the web server reads them) and the inbox of events pushed
from outside (the web server queues them, the bot takes them).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, fields

from salon.store._dialects import insert_sql, upsert
from salon.store._part import Part
from salon.trace import BotHealth, InboxEvent

__all__ = ["HealthPart", "InboxPart"]

_HEALTH_COLUMNS = tuple(f.name for f in fields(BotHealth))  # as ``beat`` writes them


class HealthPart(Part):
    async def beat(self, health: BotHealth) -> None:
        """A bot's heartbeat: replaces what it said before."""
        values = asdict(health)
        values["platforms"] = json.dumps(health.platforms)
        values["tasks"] = json.dumps(health.tasks)
        statement = upsert("bot_health", tuple(values), ["bot"])
        async with self.db.begin() as conn:
            await conn.many([(statement, values)])

    async def health_reports(self) -> list[BotHealth]:
        async with self.db.connect() as conn:
            rows = await conn.fetch(f"SELECT {', '.join(_HEALTH_COLUMNS)} FROM bot_health")
        return [
            BotHealth(
                **{
                    **dict(zip(_HEALTH_COLUMNS, row, strict=True)),
                    "platforms": json.loads(row["platforms"]),
                    "tasks": json.loads(row["tasks"]),
                }
            )
            for row in rows
        ]


class InboxPart(Part):
    async def enqueue_event(
        self, bot: str, channel: str, text: str, author: str, *, traceparent: str = ""
    ) -> int:
        """Queue an event; ``traceparent``: the W3C trace context it came with, if any."""
        row = {
            "bot": bot,
            "channel": channel,
            "text": text,
            "author": author,
            "created_at": time.time(),
            "traceparent": traceparent or None,
        }
        async with self.db.begin() as conn:
            key = await conn.fetchval(insert_sql("inbox", tuple(row), " RETURNING id"), row)
        return int(key or 0)

    async def take_events(self, bot: str, owner: str, *, limit: int = 100) -> list[InboxEvent]:
        """Claim waiting events of ``bot``: each is taken by exactly one caller."""
        waiting = (
            "SELECT id, bot, channel, text, author, created_at, traceparent FROM inbox"
            " WHERE bot = :bot AND taken_at IS NULL ORDER BY id LIMIT :limit"
        )
        claim = (
            "UPDATE inbox SET taken_at = :now, taken_by = :owner"
            " WHERE id = :id AND taken_at IS NULL"
        )
        taken: list[InboxEvent] = []
        async with self.db.connect() as conn:
            rows = await conn.fetch(waiting, {"bot": bot, "limit": limit})
        if not rows:  # the usual case: nothing waits, and nothing is locked to see it
            return taken
        async with self.db.begin() as conn:
            for row in rows:
                params = {"now": time.time(), "owner": owner, "id": row[0]}
                if await conn.execute(claim, params):
                    key, bot_, channel, text, author, created_at, traceparent = tuple(row)
                    taken.append(
                        InboxEvent(key, bot_, channel, text, author, created_at, traceparent or "")
                    )
        return taken
