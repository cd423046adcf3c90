"""The store's part for schedules, and what several processes of one bot share for them:
leases, claims of occurrences, and notices of new schedules.

Each process holds a lease in ``processes``, renewed on the database's clock. A claim or an
approval names the process that made it; another process takes over only what a process
whose lease ran out (or that stopped and gave its lease back) left open, so a slow but
living process never has its work answered twice. On PostgreSQL a new or cancelled schedule
is announced with NOTIFY in the transaction that wrote it; SQLite has no such channel and
is polled (``salon.scheduler.Scheduler.watch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from salon.errors import StoreError
from salon.model import ChannelRef, FireStatus, Participant, Schedule
from salon.store._db import Connection, Database, DatabaseError
from salon.store._dialects import db_now, insert_ignoring, insert_sql, upsert
from salon.store._part import Part, execute

__all__ = ["SCHEDULES_CHANNEL", "SchedulePart", "live_owners", "row_to_schedule"]

SCHEDULES_CHANNEL = "salon_schedules"  # NOTIFY channel; the payload is the bot's name
_LISTEN_CHECK = 30.0  # seconds between checks that the listening connection still lives
_CHECK_TIMEOUT = 10.0


class SchedulePart(Part):
    """Schedules, the claims on their occurrences, and this process's lease (``owner``),
    which the scheduler holds while it claims and which says its claims (and approvals)
    are still being answered."""

    def __init__(self, database: Callable[[], Database], owner: str) -> None:
        super().__init__(database)
        self.owner = owner

    @property
    def _dialect(self) -> str:
        return self.db.dialect

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

    async def find(
        self, bot: str, *, channel_key: str | None = None, active_only: bool = True
    ) -> list[Schedule]:
        """A bot's schedules (of one channel), oldest first."""
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
        await execute(
            self.db, f"UPDATE schedules SET next_due = :due{ending} WHERE id = :id", params
        )

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

    async def renew_lease(self, bot: str, seconds: float) -> None:
        """Hold (or take) this process's lease for ``seconds`` more."""
        values = {
            "owner": self.owner,
            "bot": bot,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": time.time(),
            "seconds": float(seconds),
        }
        columns = ("owner", "bot", "host", "pid", "started_at", "lease_until")
        until = {"lease_until": f"{db_now(self._dialect)} + :seconds"}
        statement = upsert("processes", columns, ["owner"], update=["lease_until"], values=until)
        async with self.db.begin() as conn:
            await conn.many([(statement, values)])

    async def release_lease(self) -> None:
        """A clean stop: what this process left open may be taken over at once."""
        async with self.db.begin() as conn:
            await conn.many([("DELETE FROM processes WHERE owner = :owner", {"owner": self.owner})])

    async def claim_fire(self, schedule_id: int, due: datetime, owner: str) -> bool:
        """Claim one occurrence; exactly one caller, in any process, ever gets True. The
        claim stays open until ``complete_fire``."""
        row = {
            "schedule_id": schedule_id,
            "due": int(due.timestamp()),
            "fired_at": time.time(),
            "owner": owner,
            "status": FireStatus.CLAIMED,
        }
        async with self.db.begin() as conn:
            changed = await conn.execute(insert_ignoring("schedule_fires", tuple(row)), row)
        return bool(changed)

    async def complete_fire(
        self, schedule_id: int, due: datetime, status: FireStatus = FireStatus.DONE
    ) -> None:
        """The occurrence's activation has ended (``done``: answered or its failure told;
        ``dropped``: it could not be delivered; ``skipped``: too late)."""
        params = {
            "status": status,
            "now": time.time(),
            "id": schedule_id,
            "due": int(due.timestamp()),
        }
        try:
            async with self.db.begin() as conn:
                done = (
                    "UPDATE schedule_fires SET status = :status, completed_at = :now"
                    " WHERE schedule_id = :id AND due = :due"
                )
                await conn.many([(done, params)])
        except DatabaseError as exc:
            raise StoreError(f"store write failed: {exc}") from exc

    async def answering(self, fires: Sequence[tuple[int, datetime]], key: str) -> None:
        """The first message of these occurrences' answer is about to go out under ``key``:
        committed before it is sent, so whoever takes a claim over can ask for it."""
        params = [{"key": key, "id": i, "due": int(due.timestamp())} for i, due in fires]
        statement = (
            "UPDATE schedule_fires SET answer_key = :key"
            " WHERE schedule_id = :id AND due = :due AND status = 'claimed'"
        )
        try:
            async with self.db.begin() as conn:
                await conn.many([(statement, p) for p in params])
        except DatabaseError as exc:
            raise StoreError(f"store write failed: {exc}") from exc

    async def take_over_fires(
        self, bot: str, owner: str
    ) -> list[tuple[Schedule, datetime, str | None]]:
        """Claims of ``bot`` left open by processes whose lease is gone, now ``owner``'s,
        with the key their answer's first message went out under, if it was sent: each
        occurrence is answered again unless that message is found, so none is lost to a
        crash or a stop, and one already shown is not shown twice."""
        query = (
            "SELECT s.*, f.due AS fire_due, f.owner AS fire_owner, f.answer_key AS fire_key"
            " FROM schedules AS s JOIN schedule_fires AS f ON f.schedule_id = s.id"
            " WHERE s.bot = :bot AND f.status = 'claimed' AND f.owner != :owner"
            f" AND f.owner NOT IN ({live_owners(self._dialect)})"
            " ORDER BY f.due"
        )
        move = (
            "UPDATE schedule_fires SET owner = :owner WHERE schedule_id = :id AND due = :due"
            " AND owner = :was AND status = 'claimed'"
        )
        taken: list[tuple[Schedule, datetime, str | None]] = []
        async with self.db.begin() as conn:
            for row in await conn.fetch(query, {"bot": bot, "owner": owner}):
                due = row["fire_due"]
                params = {"owner": owner, "id": row["id"], "due": due, "was": row["fire_owner"]}
                if await conn.execute(move, params):
                    when = datetime.fromtimestamp(due, UTC)
                    taken.append((row_to_schedule(row), when, row["fire_key"]))
        return taken

    async def _announce_schedules(self, conn: Connection, bot: str) -> None:
        """Within the writing transaction: listeners hear of it when it commits."""
        if self._dialect == "postgresql":
            await conn.fetch(
                "SELECT pg_notify(:channel, :bot)", {"channel": SCHEDULES_CHANNEL, "bot": bot}
            )

    def schedule_notices(self, bot: str) -> AsyncIterator[None] | None:
        """On PostgreSQL: an iterator that yields once when it starts listening (anything
        made before was missed) and then whenever a schedule of ``bot`` is created or
        cancelled, by any process. None on SQLite: poll ``schedules_signature``."""
        if self._dialect != "postgresql":
            return None
        return self._listen(bot)

    async def _listen(self, bot: str) -> AsyncIterator[None]:
        heard: asyncio.Queue[None] = asyncio.Queue(maxsize=1)
        lost = asyncio.Event()

        def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            if payload == bot and heard.empty():
                heard.put_nowait(None)

        def on_lost(_conn: Any) -> None:
            lost.set()
            if heard.empty():
                heard.put_nowait(None)  # wakes the wait, which then sees `lost`

        async with self.db.listening() as driver:
            await driver.add_listener(SCHEDULES_CHANNEL, on_notify)
            driver.add_termination_listener(on_lost)
            try:
                yield
                while True:
                    await _next_notice(driver, heard, lost)
                    yield
            finally:
                with contextlib.suppress(Exception):  # the connection may be gone already
                    await driver.remove_listener(SCHEDULES_CHANNEL, on_notify)


async def _next_notice(driver: Any, heard: asyncio.Queue[None], lost: asyncio.Event) -> None:
    """Wait for a notice; check now and then that the connection still lives (a dead one
    hears nothing, silently)."""
    while True:
        try:
            async with asyncio.timeout(_LISTEN_CHECK):
                await heard.get()
        except TimeoutError:
            pass
        else:
            if not lost.is_set():
                return
        if lost.is_set() or driver.is_closed():
            raise StoreError("the connection listening for new schedules was lost")
        try:
            async with asyncio.timeout(_CHECK_TIMEOUT):
                await driver.execute("SELECT 1")
        except (TimeoutError, OSError) as exc:
            lost_reason = "the connection listening for new schedules stopped answering"
            raise StoreError(lost_reason) from exc


def live_owners(dialect: str) -> str:
    """A subquery: the owners of the processes whose lease has not run out."""
    return f"SELECT owner FROM processes WHERE lease_until > {db_now(dialect)}"


def row_to_schedule(row: Any) -> Schedule:
    zone = ZoneInfo(row["timezone"])
    at, next_due = row["at"], row["next_due"]
    return Schedule(
        id=int(row["id"]),
        bot=row["bot"],
        channel=ChannelRef.from_key(row["channel"]),
        prompt=row["prompt"],
        timezone=row["timezone"],
        cron=row["cron"],
        at=datetime.fromtimestamp(at, tz=zone) if at is not None else None,
        created_by=Participant(
            row["created_by_id"], row["created_by_name"], identity=row["created_by_identity"]
        ),
        next_due=datetime.fromtimestamp(next_due, tz=UTC) if next_due else None,
        active=bool(row["active"]),
    )
