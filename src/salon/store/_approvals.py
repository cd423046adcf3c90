"""The store's part for approvals: a tool call waiting for a person's yes or no, kept so a
restart (or another process) can close what no one can answer any more. Each names the
process that opened it (``owner``); see ``_schedules`` for the leases that say which
processes live.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from salon.model import Approval
from salon.store._db import Database
from salon.store._dialects import insert_sql
from salon.store._part import Part, execute
from salon.store._schedules import live_owners

__all__ = ["ApprovalPart"]


class ApprovalPart(Part):
    def __init__(self, database: Callable[[], Database], owner: str) -> None:
        super().__init__(database)
        self.owner = owner

    async def open_approval(
        self, bot: str, channel_key: str, tool: str, arguments: str, requester: str
    ) -> int:
        row = {
            "bot": bot,
            "channel": channel_key,
            "tool": tool,
            "arguments": arguments,
            "requester": requester,
            "status": Approval.PENDING,
            "created_at": time.time(),
            "owner": self.owner,
        }
        async with self.db.begin() as conn:
            key = await conn.fetchval(insert_sql("approvals", tuple(row), " RETURNING id"), row)
        return int(key or 0)

    async def close_approval(self, approval_id: int, status: Approval) -> None:
        await execute(
            self.db,
            "UPDATE approvals SET status = :status, decided_at = :now"
            " WHERE id = :id AND status = 'pending'",
            {"status": status, "now": time.time(), "id": approval_id},
        )

    async def pending_approvals(self, bot: str) -> list[tuple[int, str, str]]:
        """(id, channel key, tool) of approvals still open, by any process."""
        query = "SELECT id, channel, tool FROM approvals WHERE bot = :bot AND status = 'pending'"
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"bot": bot})
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    async def stale_approvals(self, bot: str) -> list[tuple[int, str, str]]:
        """(id, channel key, tool) of approvals still pending whose process is gone: no
        one can answer them any more. A living process's own stay open."""
        query = (
            "SELECT id, channel, tool FROM approvals"
            " WHERE bot = :bot AND status = 'pending' AND owner != :owner"
            f" AND owner NOT IN ({live_owners(self.db.dialect)})"
        )
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"bot": bot, "owner": self.owner})
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]
