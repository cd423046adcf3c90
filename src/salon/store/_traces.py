"""The store's part for the operator: traces, cost totals, metrics, health, the inbox.

Bot processes write (traces, heartbeats) and take from the inbox; the web process and
``salon trace`` read. Everything goes through the database, so one reader serves a whole
fleet of bot processes.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from salon.store._dialects import upsert
from salon.store._tables import bot_health, inbox, trace_messages, trace_tools, traces
from salon.store._trace_delta import Keyframes, resolve
from salon.trace import BotHealth, CallTrace, CostRow, InboxEvent, Trace, TraceSummary

__all__ = ["LATENCY_BUCKETS", "TraceMethods"]

LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # seconds
_PRUNE_BATCH = 500
GroupBy = Literal["bot", "channel", "user", "day"]

_SUMMARY = (
    traces.c.id,
    traces.c.bot,
    traces.c.platform,
    traces.c.channel,
    traces.c.started_at,
    traces.c.ended_at,
    traces.c.outcome,
    traces.c.error,
    traces.c.requester,
    traces.c.trigger_id,
    traces.c.model,
    traces.c.input_tokens,
    traces.c.output_tokens,
    traces.c.cache_read_tokens,
    traces.c.cache_write_tokens,
    traces.c.cost,
    traces.c.read_share,
    traces.c.expected_read_share,
    traces.c.cache_break,
    traces.c.first_token_ms,
    traces.c.total_ms,
)


# Activations, then tokens of each kind, then cost: what every total reports.
_TOTALS = (
    sa.func.count(),
    sa.func.sum(traces.c.input_tokens),
    sa.func.sum(traces.c.output_tokens),
    sa.func.sum(traces.c.cache_read_tokens),
    sa.func.sum(traces.c.cache_write_tokens),
    sa.func.sum(traces.c.cost),
)


def _summary(row: Any) -> TraceSummary:
    return TraceSummary(*row[: len(_SUMMARY)])


def _tool_outcome(verdict: str, is_error: bool) -> str:
    if verdict == "deny":
        return "denied"
    if verdict == "cancel":
        return "cancelled"
    return "error" if is_error else "ok"


class TraceMethods:
    """Mixed into ``SQLStore``; needs ``engine`` and ``_redact``."""

    _redact: Callable[[str], str] | None
    _keyframes: Keyframes | None = None  # made on the first write: a mixin has no __init__

    if TYPE_CHECKING:  # SQLStore's

        @property
        def engine(self) -> AsyncEngine: ...

    def _clean(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    def _frames(self) -> Keyframes:
        if self._keyframes is None:
            self._keyframes = Keyframes()
        return self._keyframes

    def _trace_row(
        self, trace: Trace, delta: tuple[int, list[dict[str, Any]]] | None = None
    ) -> dict[str, Any]:
        totals = trace.totals()
        answer_calls = [c for c in trace.calls if c.kind != "plan"]
        first = next((c for c in trace.calls if c.first_token_ms is not None), None)
        prompt = totals["input_tokens"] + totals["cache_read_tokens"]
        prompt += totals["cache_write_tokens"]
        shares = [c.expected_read_share for c in answer_calls if c.expected_read_share is not None]
        broken = next((cause for c in trace.calls if (cause := _cause(c))), None)
        data = trace.body()
        if delta is not None:  # the requests as references to the channel's keyframe
            for call, request in zip(data["calls"], delta[1], strict=True):
                call["request"] = request
        body = self._clean(json.dumps(data, ensure_ascii=False, default=str))
        packed = _packed(body.encode("utf-8"))
        last = trace.calls[-1] if trace.calls else None
        return {
            "bot": trace.bot,
            "platform": trace.platform,
            "channel": trace.channel,
            "started_at": trace.started_at,
            "ended_at": trace.ended_at,
            "outcome": trace.outcome,
            "error": self._clean(trace.error) if trace.error else None,
            "error_kind": trace.error_kind,
            "requester_id": trace.requester.get("id", ""),
            "requester": trace.requester.get("name", ""),
            "trigger_id": trace.triggers[-1]["id"] if trace.triggers else None,
            "model": last.model if last else "",
            "input_tokens": int(totals["input_tokens"]),
            "output_tokens": int(totals["output_tokens"]),
            "cache_read_tokens": int(totals["cache_read_tokens"]),
            "cache_write_tokens": int(totals["cache_write_tokens"]),
            "cost": float(totals["cost"]),
            "read_share": totals["cache_read_tokens"] / prompt if prompt else None,
            "expected_read_share": sum(shares) / len(shares) if shares else None,
            "cache_break": broken,
            "first_token_ms": first.first_token_ms if first else None,
            "total_ms": (trace.ended_at - trace.started_at) * 1000,
            "size": len(packed),
            "body": packed,
            "base_id": delta[0] if delta is not None else None,
        }

    async def write_traces(self, batch: Sequence[Trace]) -> list[int]:
        """Store traces in one transaction; returns their ids."""
        ids: list[int] = []
        frames = self._frames()
        try:
            async with self.engine.begin() as conn:
                for trace in batch:
                    ids.append(await self._insert_trace(conn, trace, frames))
        except BaseException:  # rolled back: the groups' newest traces may be gone
            frames.forget()
            raise
        return ids

    async def _insert_trace(self, conn: AsyncConnection, trace: Trace, frames: Keyframes) -> int:
        delta = frames.delta(trace)
        result = await conn.execute(sa.insert(traces), self._trace_row(trace, delta))
        key = result.inserted_primary_key
        trace_id = int(key[0]) if key else 0
        links = [{"message_id": t["id"], "trace_id": trace_id} for t in trace.triggers]
        if links:
            await conn.execute(sa.insert(trace_messages), links)
        uses = [
            {
                "trace_id": trace_id,
                "bot": trace.bot,
                "tool": t.name,
                "outcome": _tool_outcome(t.verdict, t.is_error),
                "duration_ms": t.duration_ms,
                "started_at": trace.started_at,
            }
            for t in trace.tools
        ]
        if uses:
            await conn.execute(sa.insert(trace_tools), uses)
        frames.wrote(trace, trace_id, delta[0] if delta is not None else None)
        return trace_id

    async def prune_traces(
        self, *, max_age: float, max_bytes: int, now: float | None = None
    ) -> int:
        """Delete traces older than ``max_age`` seconds, then the oldest until the stored
        bodies fit in ``max_bytes``; returns how many went."""
        now = time.time() if now is None else now
        gone = 0
        old = sa.select(traces.c.id).where(traces.c.started_at < now - max_age)
        gone += await self._delete_traces(old)
        while True:
            async with self.engine.connect() as conn:
                total = (await conn.execute(sa.select(sa.func.sum(traces.c.size)))).scalar()
            if not total or total <= max_bytes:
                return gone
            oldest = sa.select(traces.c.id).order_by(traces.c.started_at).limit(_PRUNE_BATCH)
            deleted = await self._delete_traces(oldest, cascade=True)
            if not deleted:
                return gone
            gone += deleted

    async def _delete_traces(self, chosen: sa.Select[Any], *, cascade: bool = False) -> int:
        """Delete the chosen traces, each group (a keyframe and the traces referring to
        it) only whole; with ``cascade``, when no group is wholly chosen, the chosen
        traces' groups go whole."""
        async with self.engine.begin() as conn:
            ids = set((await conn.execute(chosen)).scalars())
            if not ids:
                return 0
            deleted, groups = await _whole_groups(conn, ids)
            if not deleted and cascade:
                deleted = set().union(*groups.values())
            for table, column in (
                (trace_messages, trace_messages.c.trace_id),
                (trace_tools, trace_tools.c.trace_id),
                (traces, traces.c.id),
            ):
                await conn.execute(sa.delete(table).where(column.in_(deleted)))
        self._frames().forget(groups)
        return len(deleted)

    async def list_traces(
        self,
        *,
        bot: str | None = None,
        channel: str | None = None,
        outcome: str | None = None,
        user: str | None = None,
        before_id: int | None = None,
        since: float | None = None,
        limit: int = 50,
    ) -> list[TraceSummary]:
        """The newest traces first, filtered."""
        query = sa.select(*_SUMMARY).order_by(traces.c.started_at.desc(), traces.c.id.desc())
        for column, value in (
            (traces.c.bot, bot),
            (traces.c.channel, channel),
            (traces.c.outcome, outcome),
            (traces.c.requester, user),
        ):
            if value is not None:
                query = query.where(column == value)
        if before_id is not None:
            query = query.where(traces.c.id < before_id)
        if since is not None:
            query = query.where(traces.c.started_at >= since)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query.limit(max(1, min(limit, 1000))))).all()
        return [_summary(r) for r in rows]

    async def get_trace(self, trace_id: int) -> tuple[TraceSummary, dict[str, Any]] | None:
        """A trace's summary and its whole body."""
        query = sa.select(*_SUMMARY, traces.c.base_id, traces.c.body)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query.where(traces.c.id == trace_id))).first()
            base_id = row[-2] if row is not None else None
            earlier: list[Any] = []
            if base_id is not None:  # the group up to this trace, oldest first
                group = sa.or_(
                    traces.c.id == base_id,
                    sa.and_(traces.c.base_id == base_id, traces.c.id < trace_id),
                )
                found = sa.select(traces.c.id, traces.c.body).where(group).order_by(traces.c.id)
                earlier = list((await conn.execute(found)).all())
        if row is None:
            return None
        body = _unpacked(row[-1])
        if base_id is not None:
            body = _resolved(base_id, earlier, body)
        return _summary(row), body

    async def trace_for_message(self, message_id: str) -> int | None:
        """The newest trace a message triggered."""
        query = (
            sa.select(trace_messages.c.trace_id)
            .where(trace_messages.c.message_id == message_id)
            .order_by(trace_messages.c.trace_id.desc())
            .limit(1)
        )
        async with self.engine.connect() as conn:
            found = (await conn.execute(query)).scalar()
        return int(found) if found is not None else None

    async def cost_by(self, by: GroupBy, *, since: float | None = None) -> list[CostRow]:
        """Activations, tokens and cost per bot, channel, user or (UTC) day."""
        c = traces.c
        key: Any = {
            "bot": c.bot,
            "channel": c.channel,
            "user": c.requester,
            "day": _day(self.engine.dialect.name),
        }[by]
        query = sa.select(key.label("key"), *_TOTALS).group_by(key)
        if since is not None:
            query = query.where(c.started_at >= since)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query.order_by(sa.func.sum(c.cost).desc()))).all()
        return [
            CostRow(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]))
            for r in rows
        ]

    async def daily(self, *, bot: str | None = None, days: int = 30) -> list[dict[str, Any]]:
        """Per UTC day: activations, cost, billed and expected cache read shares."""
        c = traces.c
        day = _day(self.engine.dialect.name)
        prompt = c.input_tokens + c.cache_read_tokens + c.cache_write_tokens
        query = sa.select(
            day.label("day"),
            sa.func.count(),
            sa.func.sum(c.cost),
            sa.func.sum(c.cache_read_tokens),
            sa.func.sum(prompt),
            sa.func.avg(c.expected_read_share),
        ).where(c.started_at >= time.time() - days * 86400)
        if bot is not None:
            query = query.where(c.bot == bot)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query.group_by(day).order_by(day))).all()
        return [
            {
                "day": str(r[0]),
                "activations": int(r[1]),
                "cost": float(r[2] or 0),
                "read_share": (r[3] / r[4]) if r[4] else None,
                "expected_read_share": float(r[5]) if r[5] is not None else None,
            }
            for r in rows
        ]

    async def trace_metrics(self) -> dict[str, Any]:
        """Totals for Prometheus: per bot and outcome, per error kind, per tool, latency."""
        c, t = traces.c, trace_tools.c
        by_outcome = sa.select(c.bot, c.outcome, *_TOTALS).group_by(c.bot, c.outcome)
        latency = sa.select(
            c.bot,
            *(
                sa.func.sum(sa.case((c.first_token_ms <= b * 1000, 1), else_=0))
                for b in LATENCY_BUCKETS
            ),
            sa.func.count(c.first_token_ms),
            sa.func.sum(c.first_token_ms),
        ).group_by(c.bot)
        tools = sa.select(t.bot, t.tool, t.outcome, sa.func.count()).group_by(
            t.bot, t.tool, t.outcome
        )
        errors = (
            sa.select(c.bot, c.error_kind, sa.func.count())
            .where(c.outcome == "error")
            .group_by(c.bot, c.error_kind)
        )
        async with self.engine.connect() as conn:
            outcomes = (await conn.execute(by_outcome)).all()
            latencies = (await conn.execute(latency)).all()
            uses = (await conn.execute(tools)).all()
            failures = (await conn.execute(errors)).all()
        return {
            "outcomes": [tuple(r) for r in outcomes],
            "latency": [tuple(r) for r in latencies],
            "tools": [tuple(r) for r in uses],
            "errors": [(r[0], r[1] or "internal", int(r[2])) for r in failures],
        }

    async def beat(self, health: BotHealth) -> None:
        """A bot's heartbeat: replaces what it said before."""
        values = asdict(health)
        values["platforms"] = json.dumps(health.platforms)
        values["tasks"] = json.dumps(health.tasks)
        statement = upsert(self.engine.dialect.name, bot_health, values, ["bot"])
        async with self.engine.begin() as conn:
            await conn.execute(statement)

    async def health_reports(self) -> list[BotHealth]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(sa.select(bot_health))).mappings().all()
        return [
            BotHealth(
                **{
                    **row,
                    "platforms": json.loads(row["platforms"]),
                    "tasks": json.loads(row["tasks"]),
                }
            )
            for row in rows
        ]

    async def enqueue_event(self, bot: str, channel: str, text: str, author: str) -> int:
        row = {
            "bot": bot,
            "channel": channel,
            "text": text,
            "author": author,
            "created_at": time.time(),
        }
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.insert(inbox).values(row))
            key = result.inserted_primary_key
        return int(key[0]) if key else 0

    async def take_events(self, bot: str, owner: str, *, limit: int = 100) -> list[InboxEvent]:
        """Claim waiting events of ``bot``: each is taken by exactly one caller."""
        c = inbox.c
        waiting = (
            sa.select(c.id, c.bot, c.channel, c.text, c.author, c.created_at)
            .where(c.bot == bot, c.taken_at.is_(None))
            .order_by(c.id)
            .limit(limit)
        )
        taken: list[InboxEvent] = []
        async with self.engine.begin() as conn:
            for row in (await conn.execute(waiting)).all():
                claim = (
                    sa.update(inbox)
                    .where(c.id == row.id, c.taken_at.is_(None))
                    .values(taken_at=time.time(), taken_by=owner)
                )
                if (await conn.execute(claim)).rowcount:
                    taken.append(InboxEvent(*row))
        return taken


async def _whole_groups(
    conn: AsyncConnection, ids: set[int]
) -> tuple[set[int], dict[int, set[int]]]:
    """Of ``ids``, those whose group is wholly among them; and every group touched, by
    keyframe id, with all its members."""
    chosen = (
        await conn.execute(sa.select(traces.c.id, traces.c.base_id).where(traces.c.id.in_(ids)))
    ).all()
    keyframes = {base if base is not None else trace_id for trace_id, base in chosen}
    members = sa.select(traces.c.id, traces.c.base_id).where(traces.c.base_id.in_(keyframes))
    groups: dict[int, set[int]] = {k: {k} for k in keyframes}
    for trace_id, base in (await conn.execute(members)).all():
        groups[base].add(trace_id)
    whole = [g for g in groups.values() if g <= ids]
    return set().union(*whole), groups


def _resolved(base_id: int, earlier: Sequence[Any], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its requests whole, from its group's earlier rows (oldest first)."""
    if not earlier or earlier[0][0] != base_id:
        resolve(body, None)  # the keyframe is gone: nothing before the tails can be shown
        return body
    previous: dict[str, Any] | None = None
    for _, packed in earlier:
        current = _unpacked(packed)
        if previous is not None:
            resolve(current, previous)
        previous = current
    resolve(body, previous)
    return body


def _packed(raw: bytes) -> bytes:
    """zlib at level 6, with a window no larger than the body: the default one (32 KiB
    and its tables, about 256 KiB set up per call) cost a referring trace's small body more
    than its JSON. ``zlib.decompress`` reads any window size."""
    window = min(15, max(9, len(raw).bit_length()))
    packer = zlib.compressobj(6, zlib.DEFLATED, window, max(1, window - 7))
    return packer.compress(raw) + packer.flush()


def _unpacked(packed: bytes) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(zlib.decompress(packed).decode("utf-8"))
    return body


def _cause(call: CallTrace) -> str | None:
    """Why the call's cache was broken, if it was (new messages at the end break nothing,
    and a channel's first call since start has nothing to compare with)."""
    if call.divergence is None or call.divergence.cause in ("new messages", "first call"):
        return None
    return call.divergence.cause


def _day(dialect: str) -> Any:
    """The UTC day of ``started_at`` as YYYY-MM-DD."""
    if dialect == "sqlite":
        return sa.func.strftime("%Y-%m-%d", traces.c.started_at, "unixepoch")
    utc = sa.func.timezone("UTC", sa.func.to_timestamp(traces.c.started_at))
    return sa.func.to_char(utc, "YYYY-MM-DD")
