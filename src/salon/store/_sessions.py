"""The web server's sessions (``salon.web.sessions``): one row per session signed in,
deleted when it signs out (or every row: "sign out everywhere"), so that every web server
on the store ends a session at once. The id alone opens nothing: the cookie that names it
is signed with the activity key.
"""

from __future__ import annotations

from salon.store._dialects import insert_sql
from salon.store._part import Part

__all__ = ["SessionPart"]

_INSERT = insert_sql("web_sessions", ("id", "created_at", "expires_at"))
_PRUNE = "DELETE FROM web_sessions WHERE expires_at <= :now"


class SessionPart(Part):
    async def open_session(self, session: str, *, now: float, expires_at: float) -> None:
        """Record a session begun at ``now``; the expired ones go (they open nothing)."""
        row = {"id": session, "created_at": now, "expires_at": expires_at}
        async with self.db.begin() as conn:
            await conn.many([(_PRUNE, {"now": now}), (_INSERT, row)])

    async def live_sessions(self, *, now: float, limit: int = 10_000) -> set[str]:
        """The ids of the sessions not ended and not expired at ``now``, the newest
        ``limit`` of them."""
        async with self.db.connect() as conn:
            rows = await conn.fetch(
                "SELECT id FROM web_sessions WHERE expires_at > :now "
                "ORDER BY expires_at DESC LIMIT :limit",
                {"now": now, "limit": limit},
            )
        return {str(row[0]) for row in rows}

    async def end_session(self, session: str) -> int:
        """Sign one session out; how many rows there were (0 or 1)."""
        async with self.db.begin() as conn:
            return await conn.execute("DELETE FROM web_sessions WHERE id = :id", {"id": session})

    async def end_all_sessions(self) -> int:
        """Sign every session out; how many there were."""
        async with self.db.begin() as conn:
            return await conn.execute("DELETE FROM web_sessions")
