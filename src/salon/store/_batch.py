"""Write-behind batching for the chat log.

``add`` returns at once; a writer task commits everything queued in one transaction, so a
busy channel costs one commit per batch instead of one per line. Readers call ``flush``
first, so a read always sees every line logged before it. If the process dies, at most
the lines of one batch (milliseconds' worth) are lost; that is why a line the bot is about
to show is logged ``durable`` (``flush`` before it is shown). The writer is supervised: a
failure is logged and it starts again, the lines it had not written still queued.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from salon.store._db import Database, DatabaseError
from salon.tasks import TaskState, supervise

__all__ = ["BatchWriter"]

logger = logging.getLogger(__name__)

_MAX_BATCH = 2000
_MAX_QUEUED = 100_000  # past this, `add` waits for the writer (back-pressure, not memory)


class BatchWriter:
    def __init__(self, db: Database, insert: str) -> None:
        self._db = db
        self._insert = insert
        self._rows: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.state = TaskState("chat-log writer")

    def start(self) -> None:
        work = supervise("chat-log writer", self._run, state=self.state)
        self._task = asyncio.create_task(work, name="chat-log-writer")

    async def add(self, row: dict[str, Any]) -> None:
        if len(self._rows) >= _MAX_QUEUED:
            await self.flush()
        self._rows.append(row)
        self._idle.clear()
        self._wake.set()

    async def flush(self) -> None:
        """Return once everything added so far is committed (or failed and was logged)."""
        if self._task is None or self._task.done():
            await self._write_all()  # no writer (closing, or never started): do it here
            return
        await self._idle.wait()

    async def close(self) -> None:
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._write_all()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._write_all()

    async def _write_all(self) -> None:
        while self._rows:
            batch = self._rows[:_MAX_BATCH]
            try:
                async with self._db.begin() as conn:
                    await conn.executemany(self._insert, batch)
            except DatabaseError:
                logger.exception("could not write %d chat-log lines", len(batch))
            del self._rows[: len(batch)]  # only now: a crash in between keeps them queued
        self._idle.set()
