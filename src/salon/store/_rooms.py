"""The store's part for rooms several bots share: who takes the turn to answer a message
nobody addressed (``salon.agent.pipeline.turns``).

A turn is a row per (channel, message, slot): a bot takes a slot with an INSERT that does
nothing when the slot is taken, so two processes, on one machine or several, never both
get it. A turn is ``claimed`` until its answer ends (``done``); a claim not done by its
``expires_at`` (on the database's clock: the bot crashed while answering) may be taken
over by another bot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from salon.store._db import Database
from salon.store._dialects import db_now, insert_ignoring, upsert
from salon.store._part import Part, execute

__all__ = ["RoomPart", "Standing", "TurnHolder"]

_KEEP_SECONDS = 86_400.0  # turns older than a day are deleted
_PRUNE_EVERY = 500  # claims between two prunings
_DECIDER = -1  # the slot of the room's one decision about a message
_PROFILE = "room.profile"  # a bot's name and description, among the delivery cursors
_SELF = "room.self:"  # + platform: who the bot is there, among the delivery cursors


@dataclass(frozen=True, slots=True)
class Standing:
    """A bot's turns in a channel over the last day: how many, and when the last began."""

    bot: str
    turns: int
    last: float


@dataclass(frozen=True, slots=True)
class TurnHolder:
    bot: str
    slot: int
    done: bool
    expired: bool


class RoomPart(Part):
    def __init__(self, database: Callable[[], Database]) -> None:
        super().__init__(database)
        self._claims = 0

    async def present(self, channel: str, *, since: float) -> dict[str, float]:
        """Bots that read ``channel`` since ``since`` (their delivery marks), with when each
        last answered there within a day, by its traces (0: not)."""
        query = (
            "SELECT m.bot, (SELECT max(t.started_at) FROM traces AS t WHERE t.bot = m.bot"
            " AND t.channel = m.channel AND t.outcome = 'answered' AND t.started_at >= :day)"
            " FROM channel_marks AS m WHERE m.channel = :channel AND m.last_at >= :since"
        )
        params = {"channel": channel, "since": since, "day": time.time() - _KEEP_SECONDS}
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return {str(row[0]): float(row[1] or 0.0) for row in rows}

    async def standings(self, channel: str) -> list[Standing]:
        query = (
            "SELECT bot, count(*), max(claimed_at) FROM room_turns"
            " WHERE channel = :channel AND claimed_at >= :since AND slot >= 0 GROUP BY bot"
        )
        params = {"channel": channel, "since": time.time() - _KEEP_SECONDS}
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return [Standing(str(r[0]), int(r[1]), float(r[2])) for r in rows]

    async def claim(
        self, channel: str, message_id: str, bot: str, *, slots: int, ttl: float
    ) -> int | None:
        """A free slot of the message's turn, now ``bot``'s, or one whose claim expired;
        None when every slot is taken."""
        columns = ("channel", "message_id", "slot", "bot", "status", "claimed_at", "expires_at")
        take = insert_ignoring("room_turns", columns)
        over = (
            "UPDATE room_turns SET bot = :bot, claimed_at = :claimed_at,"
            " expires_at = :expires_at WHERE channel = :channel AND message_id = :message_id"
            f" AND slot = :slot AND status = 'claimed' AND expires_at < {db_now(self.db.dialect)}"
        )
        now = time.time()
        row: dict[str, Any] = {
            "channel": channel,
            "message_id": message_id,
            "bot": bot,
            "status": "claimed",
            "claimed_at": now,
            "expires_at": now + ttl,
        }
        async with self.db.begin() as conn:
            for slot in range(slots):
                if await conn.execute(take, row | {"slot": slot}):
                    break
                if await conn.execute(over, row | {"slot": slot}):
                    break
            else:
                return None
        await self._prune_now_and_then()
        return slot

    async def line_key(self, channel: str, digest: str, *, since: float) -> str:
        """The turn key of a line known by its content (``digest``: IRC's ids are each
        bot's own): the newest key of lines alike when a bot took it since ``since`` (it
        is this line, seen by another bot), else the next."""
        query = (
            "SELECT message_id, max(claimed_at) FROM room_turns WHERE channel = :channel"
            " AND message_id LIKE :prefix GROUP BY message_id"
        )
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"channel": channel, "prefix": f"{digest}:%"})
        newest, at = 0, 0.0
        for row in rows:
            number = int(str(row[0]).rpartition(":")[2])
            if number > newest:
                newest, at = number, float(row[1])
        return f"{digest}:{newest if newest and at >= since else newest + 1}"

    async def finish(self, channel: str, message_id: str, slot: int) -> None:
        statement = (
            "UPDATE room_turns SET status = 'done' WHERE channel = :channel"
            " AND message_id = :message_id AND slot = :slot"
        )
        await execute(
            self.db, statement, {"channel": channel, "message_id": message_id, "slot": slot}
        )

    async def holders(self, channel: str, message_id: str) -> list[TurnHolder]:
        query = (
            "SELECT bot, slot, status,"
            f" CASE WHEN expires_at < {db_now(self.db.dialect)} THEN 1 ELSE 0 END"
            " FROM room_turns WHERE channel = :channel AND message_id = :message_id"
            " AND slot >= 0 ORDER BY slot"
        )
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"channel": channel, "message_id": message_id})
        return [
            TurnHolder(str(r[0]), int(r[1]), r[2] == "done", bool(r[3]) and r[2] != "done")
            for r in rows
        ]

    # -- the shared decision (slot -1: who decides, and what) --------------------------------

    async def decide(self, channel: str, message_id: str, bot: str, *, ttl: float) -> bool:
        """Whether ``bot`` makes the room's one decision about this message (once, ever)."""
        columns = ("channel", "message_id", "slot", "bot", "status", "claimed_at", "expires_at")
        now = time.time()
        row = {
            "channel": channel,
            "message_id": message_id,
            "slot": _DECIDER,
            "bot": bot,
            "status": "deciding",
            "claimed_at": now,
            "expires_at": now + ttl,
        }
        async with self.db.begin() as conn:
            return bool(await conn.execute(insert_ignoring("room_turns", columns), row))

    async def set_decision(self, channel: str, message_id: str, chosen: str) -> None:
        """The decision: a bot's key, or ``""`` for nobody."""
        statement = (
            "UPDATE room_turns SET status = :status WHERE channel = :channel"
            " AND message_id = :message_id AND slot = :slot"
        )
        params = {
            "status": f"decided:{chosen}",
            "channel": channel,
            "message_id": message_id,
            "slot": _DECIDER,
        }
        await execute(self.db, statement, params)

    async def decision(self, channel: str, message_id: str) -> tuple[str, str] | None:
        """(who decided, the bot chosen or "") once decided; None before."""
        query = (
            "SELECT bot, status FROM room_turns WHERE channel = :channel"
            " AND message_id = :message_id AND slot = :slot"
        )
        params = {"channel": channel, "message_id": message_id, "slot": _DECIDER}
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        if not rows or not str(rows[0][1]).startswith("decided:"):
            return None
        return str(rows[0][0]), str(rows[0][1]).removeprefix("decided:")

    async def save_profile(self, bot: str, name: str, description: str) -> None:
        """How the room's decision names and describes ``bot``."""
        columns = ("bot", "name", "value", "updated_at")
        statement = upsert("delivery_cursors", columns, ["bot", "name"])
        params = {
            "bot": bot,
            "name": _PROFILE,
            "value": f"{name}\t{description}",
            "updated_at": time.time(),
        }
        await execute(self.db, statement, params)

    async def profiles(self, bots: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Bot key -> (name, description) of those that saved one."""
        if not bots:
            return {}
        names = ", ".join(f":b{i}" for i in range(len(bots)))
        params: dict[str, Any] = {f"b{i}": bot for i, bot in enumerate(bots)} | {"p": _PROFILE}
        query = f"SELECT bot, value FROM delivery_cursors WHERE name = :p AND bot IN ({names})"
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        found = {}
        for row in rows:
            name, _, description = str(row[1]).partition("\t")
            found[str(row[0])] = (name, description)
        return found

    # -- who the room's bots are on each platform ---------------------------------------------

    async def save_self(self, bot: str, platform: str, participant_id: str, name: str) -> None:
        """Who ``bot`` is on ``platform``, for platforms that do not mark bots (IRC)."""
        columns = ("bot", "name", "value", "updated_at")
        statement = upsert("delivery_cursors", columns, ["bot", "name"])
        params = {
            "bot": bot,
            "name": _SELF + platform,
            "value": f"{participant_id}\t{name}",
            "updated_at": time.time(),
        }
        await execute(self.db, statement, params)

    async def selves(self, platform: str) -> dict[str, str]:
        """Participant id -> name of every bot of this store on ``platform``."""
        query = "SELECT value FROM delivery_cursors WHERE name = :name"
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"name": _SELF + platform})
        return dict(str(row[0]).split("\t", 1) for row in rows if "\t" in str(row[0]))

    async def _prune_now_and_then(self) -> None:
        self._claims += 1
        if self._claims % _PRUNE_EVERY:
            return
        await execute(
            self.db,
            "DELETE FROM room_turns WHERE claimed_at < :before",
            {"before": time.time() - _KEEP_SECONDS},
        )
