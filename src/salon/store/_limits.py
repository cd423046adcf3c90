"""The store's part for limits and budgets (``salon.store.limits`` says what each does).

What an activation took is appended as event rows (a request, a cooldown's start, what was
spent on each budget), queued and written in batches a few milliseconds later (a read and
the store's close write them first); counts are read back as the newest request times and
sums per UTC day. Rows older than any window or day that can still matter are deleted now
and then. Marks (a pause, a refusal already said) are one row per key.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from salon.errors import StoreError
from salon.store._db import Database, DatabaseError
from salon.store._dialects import insert_sql
from salon.store._part import Part
from salon.store.limits import Admission, Settlement

__all__ = ["LimitPart"]

logger = logging.getLogger(__name__)

_KEEP_SECONDS = 8 * 86400  # longer than the longest rate window (7 days) and a UTC day
_PRUNE_EVERY = 1000  # records between deletions of old rows
_LINGER = 0.05  # seconds queued rows wait for others to join them
_DAY = 86400.0
_INSERT = insert_sql("limit_events", ("bot", "key", "at", "amount"))


class LimitPart(Part):
    def __init__(self, database: Callable[[], Database]) -> None:
        super().__init__(database)
        self._limits_lock: asyncio.Lock | None = None
        self._limit_records = 0
        # What record() was given, turned into rows only when written: an answer allocates
        # nothing that outlives it but this entry.
        self._limit_queue: list[tuple[str, Admission, Sequence[Settlement]]] | None = None
        self._limit_flush: asyncio.Task[None] | None = None

    async def record(
        self, bot: str, admission: Admission, settlements: Sequence[Settlement]
    ) -> None:
        """Queue the rows; they are written together within ``_LINGER`` seconds (a busy bot
        writes once per batch, not once per answer) and before any read or close."""
        if self._limit_queue is None:
            self._limit_queue = []
        self._limit_queue.append((bot, admission, settlements))
        self._limit_records += 1
        if self._limit_flush is None or self._limit_flush.done():
            self._limit_flush = asyncio.create_task(self._flush_later(), name="limits-writer")

    async def flush_limits(self) -> None:
        """Write every queued row now (before a read, and when the store closes)."""
        if self._limits_lock is None:
            self._limits_lock = asyncio.Lock()
        async with self._limits_lock:
            queued, self._limit_queue = self._limit_queue or [], []
            rows = [row for entry in queued for row in _rows(*entry)]
            prune = self._limit_records >= _PRUNE_EVERY
            if prune:
                self._limit_records = 0
            if not rows and not prune:
                return
            try:
                statements: list[tuple[str, Any]] = [(_INSERT, rows)]
                if prune:
                    old = {"before": time.time() - _KEEP_SECONDS}
                    statements.append(("DELETE FROM limit_events WHERE at < :before", old))
                async with self.db.begin() as conn:
                    await conn.many(statements)
            except DatabaseError as exc:
                self._limit_queue = queued + self._limit_queue  # kept for the next try
                raise StoreError(f"cannot record limits: {exc}") from exc

    async def close_limits(self) -> None:
        """Stop waiting to write and write what is queued (the store is closing)."""
        if self._limit_flush is not None:
            self._limit_flush.cancel()
            await asyncio.gather(self._limit_flush, return_exceptions=True)
            self._limit_flush = None
        await self.flush_limits()

    async def _flush_later(self) -> None:
        await asyncio.sleep(_LINGER)
        try:
            await self.flush_limits()
        except StoreError:
            logger.exception("limits not written yet; trying again with the next answer")

    async def rate_events(self, bot: str, key: str, since: float, limit: int) -> list[float]:
        await self.flush_limits()
        query = (
            'SELECT at FROM limit_events WHERE bot = :bot AND "key" = :key AND at > :since'
            " ORDER BY at DESC LIMIT :limit"
        )
        params = {"bot": bot, "key": key, "since": since, "limit": limit}
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return sorted(float(r[0]) for r in rows)

    async def spent(self, bot: str, key: str, day: int) -> float:
        await self.flush_limits()
        query = (
            "SELECT coalesce(sum(amount), 0.0) FROM limit_events"
            ' WHERE bot = :bot AND "key" = :key AND at >= :start AND at < :end'
        )
        params = {"bot": bot, "key": key, "start": day * _DAY, "end": (day + 1) * _DAY}
        async with self.db.connect() as conn:
            return float(await conn.fetchval(query, params) or 0.0)

    async def set_mark(self, bot: str, key: str, until: float) -> None:
        if self._limits_lock is None:
            self._limits_lock = asyncio.Lock()
        row = {"bot": bot, "key": key, "until": until}
        # One process's writes in turn: an update-or-insert must not race its twin.
        async with self._limits_lock, self.db.begin() as conn:
            moved = await conn.execute(
                'UPDATE limit_marks SET until = :until WHERE bot = :bot AND "key" = :key', row
            )
            if not moved:
                await conn.execute(insert_sql("limit_marks", ("bot", "key", "until")), row)

    async def mark(self, bot: str, key: str) -> float | None:
        query = 'SELECT until FROM limit_marks WHERE bot = :bot AND "key" = :key'
        async with self.db.connect() as conn:
            value = await conn.fetchval(query, {"bot": bot, "key": key})
        return float(value) if value is not None else None


def _rows(
    bot: str, admission: Admission, settlements: Sequence[Settlement]
) -> list[dict[str, Any]]:
    at = admission.now  # spend counts on the day the activation was admitted
    rows = [
        {"bot": bot, "key": key, "at": at, "amount": 1.0}
        for key in (admission.rate_key, admission.cooldown_key)
        if key is not None
    ]
    rows += [
        {"bot": bot, "key": item.key, "at": at, "amount": item.spent}
        for item in settlements
        if item.spent
    ]
    return rows
