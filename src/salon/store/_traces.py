"""The store's part for traces: what each activation saw, sent, cost and did.

Bot processes write them; the web process and ``salon trace`` read them, with cost totals
and metrics. Everything goes through the database, so one reader serves a whole fleet of
bot processes.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Literal

import msgspec

from salon.model import clean_text
from salon.store._db import Connection, Database
from salon.store._dialects import in_list, insert_sql, utc_day
from salon.store._part import Part
from salon.store._trace_delta import Keyframes, resolve
from salon.trace import CallTrace, CostRow, Trace, TraceSummary

__all__ = ["LATENCY_BUCKETS", "TracePart"]

LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)  # seconds
_PRUNE_BATCH = 500
GroupBy = Literal["bot", "channel", "user", "day"]

# A summary is the first columns of a row, in the order of its fields.
_SUMMARY_COLUMNS = tuple(f.name for f in fields(TraceSummary))
_SUMMARY = ", ".join(_SUMMARY_COLUMNS)

# Activations, then tokens of each kind, then cost, then the cache writes found wasted:
# what every total reports.
_TOTALS = (
    "count(*), sum(input_tokens), sum(output_tokens), sum(cache_read_tokens),"
    " sum(cache_write_tokens), sum(cost), sum(cache_write_wasted_tokens)"
)

# A body's JSON: msgspec's encoder took 4.5 µs a trace where json took 40 (BENCHMARKS.md,
# trace_store); zlib level 3 packed it in three quarters of level 6's time, 3 % larger.
_ENCODER = msgspec.json.Encoder(enc_hook=str)
_DECODER = msgspec.json.Decoder()
_LEVEL = 3

_INSERT_LINK = insert_sql("trace_messages", ("message_id", "trace_id"))
_INSERT_TOOL = insert_sql(
    "trace_tools", ("trace_id", "bot", "tool", "outcome", "duration_ms", "started_at")
)


def _summary(row: Any) -> TraceSummary:
    return TraceSummary(*tuple(row)[: len(_SUMMARY_COLUMNS)])


def _tool_outcome(verdict: str, is_error: bool) -> str:
    if verdict == "deny":
        return "denied"
    if verdict == "cancel":
        return "cancelled"
    return "error" if is_error else "ok"


class TracePart(Part):
    """``redact`` is applied to every stored body and error: no configured secret is kept."""

    def __init__(
        self, database: Callable[[], Database], redact: Callable[[str], str] | None = None
    ) -> None:
        super().__init__(database)
        self._redact = redact
        self._keyframes = Keyframes()

    def _clean(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

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
        packed = _packed(self._encoded(data))
        last = trace.calls[-1] if trace.calls else None
        return {
            "bot": trace.bot,
            "platform": trace.platform,
            "channel": trace.channel,
            "started_at": trace.started_at,
            "ended_at": trace.ended_at,
            "outcome": trace.outcome,
            "error": clean_text(self._clean(trace.error)) if trace.error else None,
            "error_kind": trace.error_kind,
            "requester_id": trace.requester.get("id", ""),
            "requester": trace.requester.get("name", ""),
            "trigger_id": trace.triggers[-1]["id"] if trace.triggers else None,
            "model": last.model if last else "",
            "input_tokens": int(totals["input_tokens"]),
            "output_tokens": int(totals["output_tokens"]),
            "cache_read_tokens": int(totals["cache_read_tokens"]),
            "cache_write_tokens": int(totals["cache_write_tokens"]),
            "reasoning_tokens": int(totals["reasoning_tokens"]),
            "cache_write_wasted_tokens": int(totals["cache_write_wasted_tokens"]),
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

    def _encoded(self, data: dict[str, Any]) -> bytes:
        """``data`` as redacted UTF-8 JSON. A text msgspec refuses (a lone surrogate) goes
        through ``json``, which writes it, and ``_utf8``."""
        try:
            raw = _ENCODER.encode(data)
        except (TypeError, ValueError, msgspec.EncodeError):  # UnicodeEncodeError included
            return _utf8(self._clean(json.dumps(data, ensure_ascii=False, default=str)))
        if self._redact is None:
            return raw
        return self._redact(raw.decode("utf-8")).encode("utf-8")

    async def write_traces(self, batch: Sequence[Trace]) -> list[int]:
        """Store traces in one transaction; returns their ids."""
        ids: list[int] = []
        frames = self._keyframes
        try:
            async with self.db.begin() as conn:
                for trace in batch:
                    ids.append(await self._insert_trace(conn, trace, frames))
        except BaseException:  # rolled back: the groups' newest traces may be gone
            frames.forget()
            raise
        return ids

    async def _insert_trace(self, conn: Connection, trace: Trace, frames: Keyframes) -> int:
        delta = frames.delta(trace)
        row = self._trace_row(trace, delta)
        trace_id = int(
            await conn.fetchval(insert_sql("traces", tuple(row), " RETURNING id"), row) or 0
        )
        links = [{"message_id": t["id"], "trace_id": trace_id} for t in trace.triggers]
        if trace.activation:  # its log lines' id finds it too (salon trace show <id>)
            links.append({"message_id": f"activation:{trace.activation}", "trace_id": trace_id})
        uses = [
            {
                "trace_id": trace_id,
                "bot": trace.bot,
                "tool": clean_text(t.name),
                "outcome": _tool_outcome(t.verdict, t.is_error),
                "duration_ms": t.duration_ms,
                "started_at": trace.started_at,
            }
            for t in trace.tools
        ]
        await conn.many([(_INSERT_LINK, links), (_INSERT_TOOL, uses)])
        frames.wrote(trace, trace_id, delta[0] if delta is not None else None)
        return trace_id

    async def prune_traces(
        self, *, max_age: float, max_bytes: int, now: float | None = None
    ) -> int:
        """Delete traces older than ``max_age`` seconds, then the oldest until the stored
        bodies fit in ``max_bytes``; returns how many went."""
        now = time.time() if now is None else now
        gone = 0
        old = "SELECT id FROM traces WHERE started_at < :before"
        gone += await self._delete_traces(old, {"before": now - max_age})
        while True:
            async with self.db.connect() as conn:
                total = await conn.fetchval("SELECT sum(size) FROM traces")
            if not total or total <= max_bytes:
                return gone
            oldest = "SELECT id FROM traces ORDER BY started_at LIMIT :limit"
            deleted = await self._delete_traces(oldest, {"limit": _PRUNE_BATCH}, cascade=True)
            if not deleted:
                return gone
            gone += deleted

    async def forget_requester(self, person_id: str, *, bot: str | None = None) -> int:
        """Delete the traces of every activation ``person_id`` asked for (of ``bot``, or of
        every bot), and with each the rest of its group: a trace may be stored as a
        difference from an earlier one of its channel. Returns how many went."""
        chosen = "SELECT id FROM traces WHERE requester_id = :who"
        params: dict[str, Any] = {"who": person_id}
        if bot is not None:
            chosen += " AND bot = :bot"
            params["bot"] = bot
        return await self._delete_traces(chosen, params, whole_groups=True)

    async def _delete_traces(
        self,
        chosen: str,
        params: dict[str, Any],
        *,
        cascade: bool = False,
        whole_groups: bool = False,
    ) -> int:
        """Delete the chosen traces, each group (a keyframe and the traces referring to
        it) only whole; with ``cascade``, when no group is wholly chosen, the chosen
        traces' groups go whole; with ``whole_groups``, every chosen trace's group goes."""
        async with self.db.begin() as conn:
            ids = {int(r[0]) for r in await conn.fetch(chosen, params)}
            if not ids:
                return 0
            deleted, groups = await _whole_groups(conn, ids)
            if whole_groups or (not deleted and cascade):
                deleted = set().union(*groups.values())
            for table, column in (
                ("trace_messages", "trace_id"),
                ("trace_tools", "trace_id"),
                ("traces", "id"),
            ):
                for chunk in _chunks(sorted(deleted)):
                    which: dict[str, Any] = {}
                    listed = in_list("id", chunk, which)
                    await conn.execute(f"DELETE FROM {table} WHERE {column} IN {listed}", which)
        self._keyframes.forget(groups)
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
        filters: list[str] = []
        params: dict[str, Any] = {"limit": max(1, min(limit, 1000))}
        for column, value in (
            ("bot", bot),
            ("channel", channel),
            ("outcome", outcome),
            ("requester", user),
        ):
            if value is not None:
                filters.append(f"{column} = :{column}")
                params[column] = value
        if before_id is not None:
            filters.append("id < :before_id")
            params["before_id"] = before_id
        if since is not None:
            filters.append("started_at >= :since")
            params["since"] = since
        where = f" WHERE {' AND '.join(filters)}" if filters else ""
        query = (
            f"SELECT {_SUMMARY} FROM traces{where} ORDER BY started_at DESC, id DESC LIMIT :limit"
        )
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return [_summary(r) for r in rows]

    async def get_trace(self, trace_id: int) -> tuple[TraceSummary, dict[str, Any]] | None:
        """A trace's summary and its whole body."""
        query = f"SELECT {_SUMMARY}, base_id, body FROM traces WHERE id = :id"
        async with self.db.connect() as conn:
            row = await conn.fetchrow(query, {"id": trace_id})
            base_id = row[-2] if row is not None else None
            earlier: list[Any] = []
            if base_id is not None:  # the group up to this trace, oldest first
                found = (
                    "SELECT id, body FROM traces"
                    " WHERE id = :base OR (base_id = :base AND id < :id) ORDER BY id"
                )
                earlier = list(await conn.fetch(found, {"base": base_id, "id": trace_id}))
        if row is None:
            return None
        body = _unpacked(row[-1])
        if base_id is not None:
            body = _resolved(base_id, earlier, body)
        return _summary(row), body

    async def answered(self, bot: str, platform: str, message_id: str) -> bool:
        """Whether an activation of ``bot`` that the message triggered has ended (answered,
        stopped by a step, or its failure told: anything but cut by a stop), as its stored
        trace says."""
        query = (
            "SELECT t.id FROM trace_messages AS m JOIN traces AS t ON t.id = m.trace_id"
            " WHERE m.message_id = :id AND t.bot = :bot AND t.platform = :platform"
            " AND t.outcome != 'cancelled' LIMIT 1"
        )
        params = {"id": message_id, "bot": bot, "platform": platform}
        async with self.db.connect() as conn:
            return await conn.fetchval(query, params) is not None

    async def trace_for_message(self, message_id: str) -> int | None:
        """The newest trace a message triggered."""
        query = (
            "SELECT trace_id FROM trace_messages WHERE message_id = :id"
            " ORDER BY trace_id DESC LIMIT 1"
        )
        async with self.db.connect() as conn:
            found = await conn.fetchval(query, {"id": message_id})
        return int(found) if found is not None else None

    async def cost_by(self, by: GroupBy, *, since: float | None = None) -> list[CostRow]:
        """Activations, tokens and cost per bot, channel, user or (UTC) day."""
        key = {
            "bot": "bot",
            "channel": "channel",
            "user": "requester",
            "day": utc_day(self.db.dialect, "started_at"),
        }[by]
        params: dict[str, Any] = {}
        where = ""
        if since is not None:
            where = " WHERE started_at >= :since"
            params["since"] = since
        query = (
            f"SELECT {key} AS group_key, {_TOTALS} FROM traces{where}"
            f" GROUP BY {key} ORDER BY sum(cost) DESC"
        )
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return [
            CostRow(
                str(r[0]),
                int(r[1]),
                int(r[2]),
                int(r[3]),
                int(r[4]),
                int(r[5]),
                float(r[6]),
                int(r[7] or 0),
            )
            for r in rows
        ]

    async def daily(self, *, bot: str | None = None, days: int = 30) -> list[dict[str, Any]]:
        """Per UTC day: activations, cost, billed and expected cache read shares, cache
        writes found wasted."""
        day = utc_day(self.db.dialect, "started_at")
        params: dict[str, Any] = {"since": time.time() - days * 86400}
        where = "started_at >= :since"
        if bot is not None:
            where += " AND bot = :bot"
            params["bot"] = bot
        query = (
            f"SELECT {day} AS day, count(*), sum(cost), sum(cache_read_tokens),"
            " sum(input_tokens + cache_read_tokens + cache_write_tokens),"
            " avg(expected_read_share), sum(cache_write_wasted_tokens)"
            f" FROM traces WHERE {where}"
            f" GROUP BY {day} ORDER BY {day}"
        )
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, params)
        return [
            {
                "day": str(r[0]),
                "activations": int(r[1]),
                "cost": float(r[2] or 0),
                "read_share": (r[3] / r[4]) if r[4] else None,
                "expected_read_share": float(r[5]) if r[5] is not None else None,
                "wasted": int(r[6] or 0),
            }
            for r in rows
        ]

    async def recent_answers(
        self, bot: str, *, since: float, channels: int, answers: int
    ) -> dict[str, list[tuple[Any, ...]]]:
        """For the cache alarm (salon.cache_alarm): the last ``answers`` answered
        activations that sent a prompt, oldest first, of each of ``bot``'s ``channels``
        channels most recently active since ``since``: (id, cache read tokens, prompt
        tokens, cost, cache break, started at) each."""
        active = (
            "SELECT channel FROM traces WHERE bot = :bot AND started_at >= :since"
            " GROUP BY channel ORDER BY max(started_at) DESC LIMIT :channels"
        )
        last = (
            "SELECT id, cache_read_tokens,"
            " input_tokens + cache_read_tokens + cache_write_tokens, cost, cache_break,"
            " started_at FROM traces WHERE bot = :bot AND channel = :channel"
            " AND outcome = 'answered'"
            " AND input_tokens + cache_read_tokens + cache_write_tokens > 0"
            " ORDER BY started_at DESC, id DESC LIMIT :answers"
        )
        found: dict[str, list[tuple[Any, ...]]] = {}
        params: dict[str, Any] = {"bot": bot, "since": since, "channels": channels}
        async with self.db.connect() as conn:
            for (channel,) in await conn.fetch(active, params):
                rows = await conn.fetch(last, {"bot": bot, "channel": channel, "answers": answers})
                found[str(channel)] = [tuple(r) for r in reversed(rows)]
        return found

    async def trace_metrics(self) -> dict[str, Any]:
        """Totals for Prometheus: per bot and outcome, per error kind, per tool, latency."""
        by_outcome = f"SELECT bot, outcome, {_TOTALS} FROM traces GROUP BY bot, outcome"
        buckets = ", ".join(
            f"sum(CASE WHEN first_token_ms <= {b * 1000:g} THEN 1 ELSE 0 END)"
            for b in LATENCY_BUCKETS
        )
        latency = (
            f"SELECT bot, {buckets}, count(first_token_ms), sum(first_token_ms)"
            " FROM traces GROUP BY bot"
        )
        tools = "SELECT bot, tool, outcome, count(*) FROM trace_tools GROUP BY bot, tool, outcome"
        errors = (
            "SELECT bot, error_kind, count(*) FROM traces WHERE outcome = 'error'"
            " GROUP BY bot, error_kind"
        )
        async with self.db.connect() as conn:
            outcomes = await conn.fetch(by_outcome)
            latencies = await conn.fetch(latency)
            uses = await conn.fetch(tools)
            failures = await conn.fetch(errors)
        return {
            "outcomes": [tuple(r) for r in outcomes],
            "latency": [tuple(r) for r in latencies],
            "tools": [tuple(r) for r in uses],
            "errors": [(r[0], r[1] or "internal", int(r[2])) for r in failures],
        }


async def _pairs(conn: Connection, column: str, values: set[int]) -> list[tuple[int, Any]]:
    """(id, base_id) of the traces whose ``column`` is among ``values``."""
    found: list[tuple[int, Any]] = []
    for chunk in _chunks(sorted(values)):
        params: dict[str, Any] = {}
        listed = in_list("v", chunk, params)
        query = f"SELECT id, base_id FROM traces WHERE {column} IN {listed}"
        found += [(int(r[0]), r[1]) for r in await conn.fetch(query, params)]
    return found


def _chunks(values: list[int], size: int = 500) -> list[list[int]]:
    """Lists short enough for one statement's parameters on either database."""
    return [values[i : i + size] for i in range(0, len(values), size)]


async def _whole_groups(conn: Connection, ids: set[int]) -> tuple[set[int], dict[int, set[int]]]:
    """Of ``ids``, those whose group is wholly among them; and every group touched, by
    keyframe id, with all its members."""
    chosen = await _pairs(conn, "id", ids)
    keyframes = {base if base is not None else trace_id for trace_id, base in chosen}
    groups: dict[int, set[int]] = {k: {k} for k in keyframes}
    for trace_id, base in await _pairs(conn, "base_id", keyframes):
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


def _utf8(body: str) -> bytes:
    """``body`` in UTF-8; a lone surrogate (no encoder takes it) as U+FFFD, so a trace that
    holds one is stored rather than lost with the rest of its batch."""
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(body).encode("utf-8")


def _packed(raw: bytes, level: int = _LEVEL) -> bytes:
    """zlib at ``level``, with a window no larger than the body: the default one (32 KiB
    and its tables, about 256 KiB set up per call) cost a referring trace's small body more
    than its JSON. ``zlib.decompress`` reads any window size."""
    window = min(15, max(9, len(raw).bit_length()))
    packer = zlib.compressobj(level, zlib.DEFLATED, window, max(1, window - 7))
    return packer.compress(raw) + packer.flush()


def _unpacked(packed: bytes) -> dict[str, Any]:
    """A stored body, whichever encoder wrote it: rows from before msgspec are json's, the
    same JSON but for a ``NaN`` or ``Infinity`` json wrote, which only json reads back."""
    raw = zlib.decompress(packed)
    try:
        body: dict[str, Any] = _DECODER.decode(raw)
    except msgspec.DecodeError:
        body = json.loads(raw.decode("utf-8"))
    return body


def _cause(call: CallTrace) -> str | None:
    """Why the call's cache was broken, if it was (new messages at the end break nothing,
    and a channel's first call since start has nothing to compare with)."""
    if call.divergence is None or call.divergence.cause in ("new messages", "first call"):
        return None
    return call.divergence.cause
