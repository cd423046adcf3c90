"""What Salon holds to reach an OAuth-protected MCP server (``salon.tools.mcp_auth``): per
bot and server, its tokens and its client registration, each sealed (encrypted) before it
comes here. The store never sees them in the clear.
"""

from __future__ import annotations

import time

from salon.store._dialects import upsert
from salon.store._part import Part, execute

__all__ = ["TokenPart"]

_COLUMNS = ("bot", "server", "kind", "sealed", "updated_at")


class TokenPart(Part):
    async def get(self, bot: str, server: str, kind: str) -> bytes | None:
        """The sealed ``kind`` (``tokens`` or ``client``) kept for ``server``, or None."""
        async with self.db.connect() as conn:
            found = await conn.fetchval(
                "SELECT sealed FROM mcp_tokens WHERE bot = :bot AND server = :server "
                "AND kind = :kind",
                {"bot": bot, "server": server, "kind": kind},
            )
        return bytes(found) if found is not None else None

    async def put(self, bot: str, server: str, kind: str, sealed: bytes) -> None:
        row = {
            "bot": bot,
            "server": server,
            "kind": kind,
            "sealed": sealed,
            "updated_at": time.time(),
        }
        await execute(self.db, upsert("mcp_tokens", _COLUMNS, ["bot", "server", "kind"]), row)

    async def forget(self, bot: str, server: str, kind: str | None = None) -> int:
        """Drop everything kept for ``server`` (or only its ``kind``, one person's tokens
        say); how many rows there were."""
        params = {"bot": bot, "server": server}
        sql = "DELETE FROM mcp_tokens WHERE bot = :bot AND server = :server"
        if kind is not None:
            sql, params = sql + " AND kind = :kind", {**params, "kind": kind}
        async with self.db.begin() as conn:
            return await conn.execute(sql, params)
