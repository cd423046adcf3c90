"""The store's part for what is kept per channel: the channels a bot monitors, the rolling
context's state, and the tokens each answer used.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from salon.model import RollState, Usage
from salon.store._dialects import insert_ignoring, insert_sql, upsert
from salon.store._part import Part

__all__ = ["ChannelPart"]


class ChannelPart(Part):
    async def monitored(self, bot: str) -> set[str]:
        """Keys of the channels where the bot reads (and may answer) every message."""
        async with self.db.connect() as conn:
            rows = await conn.fetch(
                "SELECT channel FROM monitored_channels WHERE bot = :bot", {"bot": bot}
            )
        return {r[0] for r in rows}

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool:
        """Add or remove a monitored channel; returns whether anything changed."""
        async with self.db.begin() as conn:
            if not on:
                changed = await conn.execute(
                    "DELETE FROM monitored_channels WHERE bot = :bot AND channel = :channel",
                    {"bot": bot, "channel": channel_key},
                )
                return bool(changed)
            row = {"bot": bot, "channel": channel_key, "added_by": by, "added_at": time.time()}
            changed = await conn.execute(insert_ignoring("monitored_channels", tuple(row)), row)
        return bool(changed)

    async def rolling_state(self, bot: str, channel_key: str) -> RollState | None:
        query = (
            "SELECT anchor_id, breakpoint_id, head_id, breakpoint_time, tail_id"
            " FROM rolling_state WHERE bot = :bot AND channel = :channel"
        )
        async with self.db.connect() as conn:
            row = await conn.fetchrow(query, {"bot": bot, "channel": channel_key})
        if row is None:
            return None
        when = row["breakpoint_time"]
        return RollState(
            anchor_id=row["anchor_id"],
            breakpoint_id=row["breakpoint_id"],
            head_id=row["head_id"],
            breakpoint_time=datetime.fromtimestamp(when, tz=UTC) if when else None,
            tail_id=row["tail_id"],
        )

    async def save_rolling_state(self, bot: str, channel_key: str, state: RollState) -> None:
        when = state.breakpoint_time
        row = {
            "bot": bot,
            "channel": channel_key,
            "anchor_id": state.anchor_id,
            "breakpoint_id": state.breakpoint_id,
            "head_id": state.head_id,
            "breakpoint_time": when.timestamp() if when else None,
            "tail_id": state.tail_id,
        }
        statement = upsert("rolling_state", tuple(row), ["bot", "channel"])
        # Written with the store's next trip (this process reads it from then on): an
        # activation's bookkeeping costs no trip of its own; a crash may lose the last.
        self.db.write_later([(statement, row)])

    async def record_usage(
        self, bot: str, channel_key: str, provider: str, model: str, usage: Usage
    ) -> None:
        row = {
            "bot": bot,
            "channel": channel_key,
            "provider": provider,
            "model": model,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "created_at": time.time(),
        }
        self.db.write_later([(insert_sql("usage_log", tuple(row)), row)])

    async def usage_totals(self, bot: str) -> Usage:
        query = (
            "SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),"
            " coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0),"
            " coalesce(sum(reasoning_tokens), 0)"
            " FROM usage_log WHERE bot = :bot"
        )
        async with self.db.connect() as conn:
            (row,) = await conn.fetch(query, {"bot": bot})
        return Usage(*(int(value) for value in row))
