"""The store's part for limits and budgets (``salon.store.limits`` says what each does).

Writes of one process go one at a time (an asyncio lock), each in one transaction, so an
update-or-insert of a row never races its twin.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from salon.errors import StoreError
from salon.store._tables import limit_events, limit_marks, limit_spend
from salon.store.limits import Admission, Settlement

__all__ = ["LimitMethods"]


class LimitMethods:
    """Mixed into ``SQLStore``; needs ``engine``."""

    if TYPE_CHECKING:  # SQLStore's

        @property
        def engine(self) -> AsyncEngine: ...

    _limits_lock: asyncio.Lock | None = None

    async def record(
        self, bot: str, admission: Admission, settlements: Sequence[Settlement]
    ) -> None:
        if self._limits_lock is None:
            self._limits_lock = asyncio.Lock()
        async with self._limits_lock:
            try:
                async with self.engine.begin() as conn:
                    await _record(conn, bot, admission, settlements)
            except SQLAlchemyError as exc:
                raise StoreError(f"cannot record limits: {exc}") from exc

    async def rate_events(self, bot: str, key: str, since: float, limit: int) -> list[float]:
        c = limit_events.c
        query = (
            sa.select(c.at)
            .where(c.bot == bot, c.key == key, c.at > since)
            .order_by(c.at.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return sorted(float(at) for at in (await conn.execute(query)).scalars())

    async def set_mark(self, bot: str, key: str, until: float) -> None:
        if self._limits_lock is None:
            self._limits_lock = asyncio.Lock()
        async with self._limits_lock, self.engine.begin() as conn:
            await _put_mark(conn, bot, key, until)

    async def mark(self, bot: str, key: str) -> float | None:
        c = limit_marks.c
        query = sa.select(c.until).where(c.bot == bot, c.key == key)
        async with self.engine.connect() as conn:
            value = (await conn.execute(query)).scalar()
        return float(value) if value is not None else None

    async def spent(self, bot: str, key: str, day: int) -> float:
        c = limit_spend.c
        query = sa.select(c.spent).where(c.bot == bot, c.key == key, c.day == day)
        async with self.engine.connect() as conn:
            value = (await conn.execute(query)).scalar()
        return float(value) if value is not None else 0.0


async def _record(
    conn: AsyncConnection, bot: str, admission: Admission, settlements: Sequence[Settlement]
) -> None:
    if admission.rate_key is not None:
        c = limit_events.c
        since = admission.now - admission.rate_window
        await conn.execute(
            sa.delete(limit_events).where(c.bot == bot, c.key == admission.rate_key, c.at <= since)
        )
        row = {"bot": bot, "key": admission.rate_key, "at": admission.now}
        await conn.execute(sa.insert(limit_events).values(row))
    if admission.cooldown_key is not None:
        until = admission.now + admission.cooldown
        await _put_mark(conn, bot, admission.cooldown_key, until)
    s = limit_spend.c
    for item in settlements:
        where = (s.bot == bot, s.key == item.key, s.day == admission.day)
        moved = await conn.execute(
            sa.update(limit_spend).where(*where).values(spent=s.spent + item.spent)
        )
        if not moved.rowcount:
            row = {"bot": bot, "key": item.key, "day": admission.day, "spent": item.spent}
            await conn.execute(sa.insert(limit_spend).values(row))


async def _put_mark(conn: AsyncConnection, bot: str, key: str, until: float) -> None:
    c = limit_marks.c
    moved = await conn.execute(
        sa.update(limit_marks).where(c.bot == bot, c.key == key).values(until=until)
    )
    if not moved.rowcount:
        await conn.execute(sa.insert(limit_marks).values(bot=bot, key=key, until=until))
