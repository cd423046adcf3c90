"""Write-behind batching for the chat log.

``add`` returns at once; a writer task commits everything queued in one transaction, so a
busy channel costs one commit per batch instead of one per line. Readers call ``flush``
first, so a read always sees every line logged before it. If the process dies, at most
the lines of one batch (milliseconds' worth) are lost; that is why a line the bot is about
to show is logged ``durable`` (``flush`` before it is shown). The writer is supervised: a
failure is logged and it starts again, the lines it had not written still queued.

A line the database refuses (its data, not the database's state) is dropped alone and
logged; the batch it was in is written line by line. When the database cannot be reached
(or is full, or read-only), the lines wait, in order, and the writer tries again
(sooner when someone flushes) until it is back; the log says how many wait. What waits is
bounded (``max_rows``, ``max_bytes``): past the bound the oldest lines go, counted in the log.
Back-pressure instead (``add`` waiting for the database) would stop the platforms that log
every line they read (IRC, the terminal) for as long as the database is away: their
connections would time out and the bot would go silent, losing those lines anyway and the
answers with them. The newest lines are the ones the bot reads back, so the oldest go.
While the database keeps up, a full queue still makes ``add`` wait for the writer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from itertools import islice
from typing import Any

from salon.store._db import Database, DatabaseError
from salon.store._dialects import refuses_data
from salon.tasks import TaskState, supervise

__all__ = ["MAX_WAITING_BYTES", "MAX_WAITING_ROWS", "BatchWriter"]

logger = logging.getLogger(__name__)

_MAX_BATCH = 2000
MAX_WAITING_ROWS = 100_000  # lines queued at most (past it: back-pressure, or the oldest go)
MAX_WAITING_BYTES = 32 * 1024 * 1024  # and their estimated memory (see _row_bytes)
_ROW_OVERHEAD = 600  # bytes of a queued row besides its texts: the dict, ids and numbers
_RETRY_FIRST = 0.5  # seconds before the writer tries a failing database again, doubling
_RETRY_MAX = 10.0
_REPORT_EVERY = 60.0  # seconds between log lines while lines wait


def _row_bytes(row: dict[str, Any]) -> int:
    return _ROW_OVERHEAD + sum(len(v) for v in row.values() if isinstance(v, str))


class BatchWriter:
    def __init__(
        self,
        db: Database,
        insert: str,
        *,
        max_rows: int = MAX_WAITING_ROWS,
        max_bytes: int = MAX_WAITING_BYTES,
    ) -> None:
        self._db = db
        self._insert = insert
        self._max_rows = max_rows
        self._max_bytes = max_bytes
        self._rows: deque[dict[str, Any]] = deque()
        self._sending: set[int] = set()  # ids of the rows of the batch being committed
        self._bytes = 0
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.state = TaskState("chat-log writer")
        self._failing = False  # the last attempt failed: the lines wait for the database
        self._retry = _RETRY_FIRST
        self._dropped = 0  # lines dropped in this outage
        self._reported = 0.0  # time.monotonic() of the last log line about the waiting lines

    @property
    def waiting(self) -> int:
        """Lines queued and not yet committed."""
        return len(self._rows)

    def start(self) -> None:
        work = supervise("chat-log writer", self._run, state=self.state)
        self._task = asyncio.create_task(work, name="chat-log-writer")

    async def add(self, row: dict[str, Any]) -> None:
        if self._full() and not self._failing:
            await self.flush()  # back-pressure while the database keeps up
        if self._full():
            self._drop_oldest()
        self._rows.append(row)
        self._bytes += _row_bytes(row)
        self._idle.clear()
        if not self._failing:  # else the retry (or a flush) takes it
            self._wake.set()

    def discard(self, bot: str, message_id: str) -> bool:
        """Take back a line not written yet (one that could not be shown after all);
        whether it was still queued."""
        kept: deque[dict[str, Any]] = deque()
        for row in self._rows:
            sending = id(row) in self._sending  # it may be committed already: left alone
            if not sending and row["bot"] == bot and row["message_id"] == message_id:
                self._bytes -= _row_bytes(row)
            else:
                kept.append(row)
        found = len(kept) < len(self._rows)
        self._rows = kept
        return found

    async def flush(self) -> None:
        """Return once everything added so far is committed, or the attempt to commit it
        failed (the lines then wait for the database; a read will fail on its own)."""
        if self._task is None or self._task.done():
            await self._write_all()  # no writer (closing, or never started): do it here
            return
        if not self._rows:  # a batch leaves the queue only once it is committed
            return
        self._idle.clear()
        self._wake.set()
        await self._idle.wait()

    async def close(self) -> None:
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._write_all()
        if self._rows:
            logger.error(
                "closing with %d chat-log lines not written: the database is unreachable",
                len(self._rows),
            )

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._retry if self._failing else None):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            await self._write_all()

    async def _write_all(self) -> None:
        singly = 0  # rows to write one at a time: a batch the database refused had them
        try:
            while self._rows:
                batch = list(islice(self._rows, 1 if singly else _MAX_BATCH))
                self._sending = {id(row) for row in batch}
                try:
                    async with self._db.begin() as conn:
                        await conn.executemany(self._insert, batch)
                except DatabaseError as exc:
                    if not refuses_data(exc):  # unreachable, full, read-only…: they wait
                        self._failed(exc)
                        return
                    if len(batch) > 1:  # some line of the batch: found by writing singly
                        singly = len(batch)
                        continue
                    logger.error("dropped a chat-log line the database refuses: %s", exc)
                singly = max(singly - 1, 0)
                # Only now: a crash in between keeps them queued. The batch is at the front,
                # but the oldest may have been dropped meanwhile.
                while self._rows and id(self._rows[0]) in self._sending:
                    self._bytes -= _row_bytes(self._rows.popleft())
                self._sending = set()
                self._written()
        finally:
            self._sending = set()
            self._idle.set()

    def _full(self) -> bool:
        return len(self._rows) >= self._max_rows or self._bytes >= self._max_bytes

    def _drop_oldest(self) -> None:
        first = self._dropped == 0
        while self._rows and self._full():
            self._bytes -= _row_bytes(self._rows.popleft())
            self._dropped += 1
        now = time.monotonic()
        if first or now - self._reported >= _REPORT_EVERY:
            self._reported = now
            logger.warning(
                "the chat-log lines waiting for the database reached their bound (%d lines or"
                " %d MiB): dropping the oldest (%d so far)",
                self._max_rows,
                self._max_bytes // (1024 * 1024),
                self._dropped,
            )

    def _failed(self, exc: DatabaseError) -> None:
        now = time.monotonic()
        if not self._failing:
            self._failing = True
            self._reported = now
            logger.warning(
                "could not write the chat log (%s): %d chat-log lines wait for the database",
                exc,
                len(self._rows),
                exc_info=True,
            )
        else:
            self._retry = min(self._retry * 2, _RETRY_MAX)
            if now - self._reported >= _REPORT_EVERY:
                self._reported = now
                logger.warning(
                    "%d chat-log lines wait for the database (%s)%s",
                    len(self._rows),
                    exc,
                    f"; dropped the {self._dropped} oldest" if self._dropped else "",
                )

    def _written(self) -> None:
        if not self._failing or self._rows:
            return
        logger.warning(
            "the database is back: the chat-log lines that waited are written%s",
            f"; the {self._dropped} oldest were dropped" if self._dropped else "",
        )
        self._failing, self._retry, self._dropped = False, _RETRY_FIRST, 0
