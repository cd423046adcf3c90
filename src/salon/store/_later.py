"""Writes nobody waits for (an activation's usage row, its channel's rolling state), held
to go with the database's next trip instead of a trip of their own.

On SQLite every trip to the worker thread costs about 100 µs of CPU, more than such a
write itself: what is held goes, in a transaction of its own, at the start of whatever
trip comes next (so this process reads what it wrote), or by itself within ``DELAY``
seconds when none comes, and at close. A failure of held statements is logged; they are
lost, and the trip they went with is not failed by them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

__all__ = ["DELAY", "Held", "Statements"]

logger = logging.getLogger(__name__)

Statements = Sequence[tuple[str, Mapping[str, Any] | Sequence[Mapping[str, Any]]]]

DELAY = 0.5  # seconds a held write waits for a trip to go with
LIMIT = 500  # statements held at most: more are written at once


class Held:
    """Statements waiting for a trip; ``write`` commits some in a transaction of their own."""

    def __init__(
        self, write: Callable[[Statements], Awaitable[None]], *, delay: float = DELAY
    ) -> None:
        self._write = write
        self._delay = delay
        self._held: list[tuple[str, Any]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.idle = asyncio.Event()  # set while nothing is held or being written
        self.idle.set()

    def __bool__(self) -> bool:
        return bool(self._held)

    def add(self, statements: Statements) -> None:
        self._held.extend(statements)
        self.idle.clear()
        if len(self._held) >= LIMIT:
            self._start()
        elif self._timer is None and self._task is None:
            self._timer = asyncio.get_running_loop().call_later(self._delay, self._start)

    def take(self) -> list[tuple[str, Any]]:
        """What is held, now the caller's to write."""
        held, self._held = self._held, []
        if self._task is None:
            self.idle.set()  # the caller writes them in its trip
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return held

    def _start(self) -> None:
        if self._timer is not None:  # at the bound before the delay ran out
            self._timer.cancel()
            self._timer = None
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flushing())

    async def _flushing(self) -> None:
        try:
            await self._flush()
        finally:
            self._task = None
            if not self._held:
                self.idle.set()

    async def _flush(self) -> None:
        try:
            while self._held:
                await self._write(self.take())
        except Exception:
            logger.exception("could not write the store's held statements; they are lost")

    @property
    def pending(self) -> bool:
        """Whether anything is held or being written."""
        return bool(self._held) or self._task is not None

    async def close(self) -> None:
        """Write what is held (after a flush under way): before the database closes, or
        where a read must see it and no trip carries it (PostgreSQL)."""
        if self._task is not None:
            await self._task
        await self._flush()
