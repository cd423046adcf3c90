"""The SQL store: SQLite (WAL) by default, PostgreSQL when ``database_url`` names one.

SQL is written out, with ``:name`` parameters, and run through ``salon.store._db``;
what differs between the two databases lives in ``_dialects``. Migrations are append-only
functions, each applied once and recorded in ``schema_migrations``; a database newer than
this code is refused rather than guessed at.

``SQLStore`` opens the database and owns the parts that use it, one per concern, each in
its own module: ``chatlog``, ``channels``, ``approvals``, ``schedules`` (with the process
leases), ``limits``, ``traces``, ``health``, ``inbox``, ``notes``, ``delivery``,
``tokens`` and ``sessions`` (the web server's). A consumer takes the part it uses (the
app hands the agent its ``traces``, ``limits``, ``notes``, ``chatlog``, ``delivery`` and
``rooms``); the methods here are the agent's ``Store`` protocol, each handed to its part.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from salon.errors import StoreError
from salon.model import Approval, ChannelRef, FireStatus, Message, RollState, Usage
from salon.store._approvals import ApprovalPart
from salon.store._channels import ChannelPart
from salon.store._chatlog import ChatLogPart
from salon.store._db import Database, DatabaseError
from salon.store._delivery import DeliveryPart
from salon.store._dialects import connect, parse_url
from salon.store._health import HealthPart, InboxPart
from salon.store._limits import LimitPart
from salon.store._notes import NotePart
from salon.store._rooms import RoomPart
from salon.store._schedules import SchedulePart
from salon.store._sessions import SessionPart
from salon.store._tables import MIGRATIONS, migrate
from salon.store._tokens import TokenPart
from salon.store._traces import TracePart
from salon.trace import Trace

__all__ = [
    "MIGRATIONS",
    "ApprovalPart",
    "ChannelPart",
    "ChatLogPart",
    "DeliveryPart",
    "HealthPart",
    "InboxPart",
    "LimitPart",
    "NotePart",
    "RoomPart",
    "SQLStore",
    "SchedulePart",
    "SessionPart",
    "TokenPart",
    "TracePart",
    "sqlite_url",
]


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


class SQLStore:
    """``redact`` is applied to every chat-log line and trace: no configured secret is
    stored. ``password`` completes ``url`` (it never sits in a config file); ``owner``
    names this process in claims, approvals and its lease."""

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        owner: str | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.url = url
        self.owner = owner or uuid.uuid4().hex[:12]
        self._password = password
        self._db: Database | None = None
        self.chatlog = ChatLogPart(self._opened, redact)
        self.channels = ChannelPart(self._opened)
        self.approvals = ApprovalPart(self._opened, self.owner)
        self.schedules = SchedulePart(self._opened, self.owner)
        self.limits = LimitPart(self._opened)
        self.traces = TracePart(self._opened, redact)
        self.health = HealthPart(self._opened)
        self.inbox = InboxPart(self._opened)
        self.notes = NotePart(self._opened)
        self.tokens = TokenPart(self._opened)
        self.delivery = DeliveryPart(self._opened, self.owner)
        self.rooms = RoomPart(self._opened)
        self.sessions = SessionPart(self._opened)

    def _opened(self) -> Database:
        if self._db is None:
            raise StoreError("store is not open")
        return self._db

    @property
    def db(self) -> Database:
        return self._opened()

    @property
    def dialect(self) -> str:
        return self.db.dialect

    async def open(self) -> None:
        url = parse_url(self.url, self._password)
        try:
            db = await connect(url)
        except DatabaseError as exc:
            raise StoreError(f"cannot open the store at {url.render()}: {exc}") from exc
        try:
            async with db.begin() as conn:
                await migrate(conn)
        except BaseException as exc:
            await db.close()
            if isinstance(exc, DatabaseError):
                raise StoreError(f"cannot open the store at {url.render()}: {exc}") from exc
            raise
        self._db = db
        self.chatlog.start(db)

    async def close(self) -> None:
        if self._db is not None:
            await self.chatlog.close()
            await self.limits.close_limits()
            await self._db.close()
            self._db = None

    # The agent's ``Store`` (salon.store.base), each method its part's.

    async def log_message(
        self, bot: str, message: Message, kind: str = "message", *, durable: bool = False
    ) -> None:
        await self.chatlog.log_message(bot, message, kind, durable=durable)

    async def forget_message(self, bot: str, message_id: str) -> None:
        await self.chatlog.forget_message(bot, message_id)

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]:
        return await self.chatlog.chat_history(bot, channel, limit=limit, before_id=before_id)

    async def record_usage(
        self, bot: str, channel_key: str, provider: str, model: str, usage: Usage
    ) -> None:
        await self.channels.record_usage(bot, channel_key, provider, model, usage)

    async def rolling_state(self, bot: str, channel_key: str) -> RollState | None:
        return await self.channels.rolling_state(bot, channel_key)

    async def save_rolling_state(self, bot: str, channel_key: str, state: RollState) -> None:
        await self.channels.save_rolling_state(bot, channel_key, state)

    async def open_approval(
        self, bot: str, channel_key: str, tool: str, arguments: str, requester: str
    ) -> int:
        return await self.approvals.open_approval(bot, channel_key, tool, arguments, requester)

    async def close_approval(self, approval_id: int, status: Approval) -> None:
        await self.approvals.close_approval(approval_id, status)

    async def pending_approvals(self, bot: str) -> list[tuple[int, str, str]]:
        return await self.approvals.pending_approvals(bot)

    async def complete_fire(
        self, schedule_id: int, due: datetime, status: FireStatus = FireStatus.DONE
    ) -> None:
        await self.schedules.complete_fire(schedule_id, due, status)

    async def answering(self, fires: Sequence[tuple[int, datetime]], key: str) -> None:
        await self.schedules.answering(fires, key)

    async def write_traces(self, batch: Sequence[Trace]) -> list[int]:
        return await self.traces.write_traces(batch)

    async def prune_traces(
        self, *, max_age: float, max_bytes: int, now: float | None = None
    ) -> int:
        return await self.traces.prune_traces(max_age=max_age, max_bytes=max_bytes, now=now)
