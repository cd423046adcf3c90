"""The store's part for limits and budgets (``salon.store.limits`` says what each does).

Each operation is one transaction that starts by updating the bot's lock row: SQLite then
holds its write lock and PostgreSQL the row's lock until the commit, so concurrent
admissions, in one process or several, are taken one after another and counted exactly.
An asyncio lock in front keeps one process's activations from queueing on the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncTransaction

from salon.errors import StoreError
from salon.store._tables import limit_events, limit_marks, limit_spend
from salon.store.limits import Admission, Refusal, Settlement

__all__ = ["LimitMethods"]

_LOCK_KEY = "#lock"


class LimitMethods:
    """Mixed into ``SQLStore``; needs ``engine``."""

    if TYPE_CHECKING:  # SQLStore's

        @property
        def engine(self) -> AsyncEngine: ...

    _limits_lock: asyncio.Lock | None = None
    _lock_rows: set[str] | None = None

    async def admit(self, bot: str, admission: Admission) -> Refusal | None:
        async with self._locked(bot) as conn:
            refusal = await _refusal(conn, bot, admission)
            if refusal is None:
                await _take(conn, bot, admission)
            return refusal

    async def settle(self, bot: str, day: int, settlements: Sequence[Settlement]) -> None:
        c = limit_spend.c
        async with self._locked(bot) as conn:
            for item in settlements:
                moved = await conn.execute(
                    sa.update(limit_spend)
                    .where(c.bot == bot, c.key == item.key, c.day == day)
                    .values(spent=c.spent + item.spent, held=c.held - item.held)
                )
                if not moved.rowcount:  # spent without a hold (a refused request's gate)
                    row = {"bot": bot, "key": item.key, "day": day, "spent": item.spent}
                    await conn.execute(sa.insert(limit_spend).values(**row, held=0.0))

    async def set_mark(self, bot: str, key: str, until: float, now: float) -> bool:
        async with self._locked(bot) as conn:
            current = await _mark(conn, bot, key)
            if current is not None and current > now:
                return False
            await _put_mark(conn, bot, key, until, exists=current is not None)
            return True

    async def mark(self, bot: str, key: str) -> float | None:
        async with self.engine.connect() as conn:
            return await _mark(conn, bot, key)

    async def spent(self, bot: str, key: str, day: int) -> tuple[float, float]:
        c = limit_spend.c
        query = sa.select(c.spent, c.held).where(c.bot == bot, c.key == key, c.day == day)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return (float(row[0]), float(row[1])) if row else (0.0, 0.0)

    def _locked(self, bot: str) -> _Locked:
        if self._limits_lock is None:
            self._limits_lock = asyncio.Lock()
            self._lock_rows = set()
        assert self._lock_rows is not None
        return _Locked(self.engine, self._limits_lock, self._lock_rows, bot)


class _Locked:
    """``async with``: the process's lock, then a transaction holding the bot's lock row."""

    def __init__(self, engine: AsyncEngine, lock: asyncio.Lock, rows: set[str], bot: str) -> None:
        self._engine, self._lock, self._rows, self._bot = engine, lock, rows, bot
        self._begin: AsyncTransaction | None = None
        self._conn: AsyncConnection | None = None

    async def __aenter__(self) -> AsyncConnection:
        await self._lock.acquire()
        try:
            if self._bot not in self._rows:
                await self._lock_row()
            self._conn = await self._engine.connect()
            self._begin = await self._conn.begin()
            c = limit_marks.c
            await self._conn.execute(
                sa.update(limit_marks)
                .where(c.bot == self._bot, c.key == _LOCK_KEY)
                .values(until=c.until + 1)
            )
        except BaseException:
            await self._release()
            raise
        return self._conn

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if self._begin is not None:
                if exc_type is None:
                    await self._begin.commit()
                else:
                    await self._begin.rollback()
        except SQLAlchemyError as error:
            raise StoreError(f"limits: {error}") from error
        finally:
            await self._release()

    async def _release(self) -> None:
        try:
            if self._conn is not None:
                await self._conn.close()
        finally:
            self._conn = self._begin = None
            self._lock.release()

    async def _lock_row(self) -> None:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    sa.insert(limit_marks).values(bot=self._bot, key=_LOCK_KEY, until=0.0)
                )
        except IntegrityError:
            pass  # made by another process or an earlier run
        self._rows.add(self._bot)


async def _refusal(conn: AsyncConnection, bot: str, admission: Admission) -> Refusal | None:
    if admission.cooldown_key is not None:
        until = await _mark(conn, bot, admission.cooldown_key)
        if until is not None and until > admission.now:
            return Refusal("cooldown", admission.cooldown_key, until)
    if admission.rate_key is not None:
        refusal = await _rate_refusal(conn, bot, admission)
        if refusal is not None:
            return refusal
    for charge in admission.charges:
        c = limit_spend.c
        query = sa.select(c.spent + c.held).where(
            c.bot == bot, c.key == charge.key, c.day == admission.day
        )
        used = (await conn.execute(query)).scalar()
        if used is not None and used >= charge.limit:
            return Refusal("budget", charge.key, (admission.day + 1) * 86400.0)
    return None


async def _rate_refusal(conn: AsyncConnection, bot: str, admission: Admission) -> Refusal | None:
    assert admission.rate_key is not None
    c = limit_events.c
    since = admission.now - admission.rate_window
    scope = (c.bot == bot, c.key == admission.rate_key)
    await conn.execute(sa.delete(limit_events).where(*scope, c.at <= since))
    query = sa.select(c.at).where(*scope).order_by(c.at.desc()).limit(admission.rate_limit)
    recent = list((await conn.execute(query)).scalars())
    if len(recent) < admission.rate_limit:
        return None
    # The request that frees a place is the oldest of the newest ``rate_limit``.
    return Refusal("rate", admission.rate_key, min(recent) + admission.rate_window)


async def _take(conn: AsyncConnection, bot: str, admission: Admission) -> None:
    if admission.rate_key is not None:
        await conn.execute(
            sa.insert(limit_events).values(bot=bot, key=admission.rate_key, at=admission.now)
        )
    if admission.cooldown_key is not None:
        current = await _mark(conn, bot, admission.cooldown_key)
        until = admission.now + admission.cooldown
        await _put_mark(conn, bot, admission.cooldown_key, until, exists=current is not None)
    c = limit_spend.c
    for charge in admission.charges:
        where = (c.bot == bot, c.key == charge.key, c.day == admission.day)
        moved = await conn.execute(
            sa.update(limit_spend).where(*where).values(held=c.held + charge.amount)
        )
        if not moved.rowcount:
            await conn.execute(
                sa.insert(limit_spend).values(
                    bot=bot, key=charge.key, day=admission.day, spent=0.0, held=charge.amount
                )
            )


async def _mark(conn: AsyncConnection, bot: str, key: str) -> float | None:
    c = limit_marks.c
    value = (await conn.execute(sa.select(c.until).where(c.bot == bot, c.key == key))).scalar()
    return float(value) if value is not None else None


async def _put_mark(
    conn: AsyncConnection, bot: str, key: str, until: float, *, exists: bool
) -> None:
    c = limit_marks.c
    if exists:
        await conn.execute(
            sa.update(limit_marks).where(c.bot == bot, c.key == key).values(until=until)
        )
    else:
        await conn.execute(sa.insert(limit_marks).values(bot=bot, key=key, until=until))
