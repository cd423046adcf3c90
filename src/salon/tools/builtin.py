"""Salon's own tools, as an MCP server.

The agent reaches them in-process through the SDK (no subprocess, no framing); ``salon tools
serve`` offers the same server over stdio to any MCP client. The chat-log tools read the
store; ``channel`` is filled in by Salon with the channel of the activation, so a bot only
ever reads the room it is answering in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from salon.model import ChatLine

__all__ = ["CHANNEL_ARGUMENT", "ChatLogQueries", "build_builtin_server"]

CHANNEL_ARGUMENT = "channel"
_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False)
_MAX_LIMIT = 200


class ChatLogQueries(Protocol):
    """What the chat-log tools need from the store."""

    async def search_chat(
        self,
        bot: str,
        channel_key: str,
        query: str,
        *,
        user: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
    ) -> list[ChatLine]: ...

    async def recent_chat(
        self, bot: str, channel_key: str, *, limit: int = 50, since: datetime | None = None
    ) -> list[ChatLine]: ...

    async def channel_stats(self, bot: str, channel_key: str) -> dict[str, object]: ...


UsersOf = Callable[[str], Awaitable[Sequence[str]]]


def _since(hours: float | None) -> datetime | None:
    return None if hours is None or hours <= 0 else datetime.now(UTC) - timedelta(hours=hours)


def _format(lines: Sequence[ChatLine]) -> str:
    if not lines:
        return "no messages found"
    return "\n".join(_line(ln) for ln in lines)


def _line(line: ChatLine) -> str:
    said = f"* {line.user} {line.text}" if line.kind == "action" else f"<{line.user}> {line.text}"
    return f"[{line.time:%Y-%m-%d %H:%M:%S}] {said}"


def _need_channel(channel: str) -> None:
    if not channel:
        raise ValueError("channel is required (e.g. terminal:local or irc:#salon)")


def build_builtin_server(bot: str, log: ChatLogQueries, users_of: UsersOf) -> MCPServer:
    server = MCPServer("salon", instructions="Salon's built-in tools: time and the chat log.")

    @server.tool(annotations=_READ_ONLY)
    def get_current_time(timezone: str = "UTC") -> str:
        """The current date and time in an IANA timezone such as Europe/Paris."""
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {timezone!r}; use an IANA name") from None
        now = datetime.now(zone)
        return f"{now:%A %Y-%m-%d %H:%M:%S} {timezone} (UTC{now:%z})"

    @server.tool(annotations=_READ_ONLY)
    async def search_chat_logs(
        query: str,
        user: str | None = None,
        hours: float | None = None,
        limit: int = 20,
        channel: str = "",
    ) -> str:
        """Find past messages of this channel containing every word of the query."""
        _need_channel(channel)
        limit = max(1, min(limit, _MAX_LIMIT))
        found = await log.search_chat(
            bot, channel, query, user=user, since=_since(hours), limit=limit
        )
        return _format(found[::-1])

    @server.tool(annotations=_READ_ONLY)
    async def get_recent_messages(
        limit: int = 50, hours: float | None = None, channel: str = ""
    ) -> str:
        """The latest messages of this channel, oldest first."""
        _need_channel(channel)
        limit = max(1, min(limit, _MAX_LIMIT))
        return _format(await log.recent_chat(bot, channel, limit=limit, since=_since(hours)))

    @server.tool(annotations=_READ_ONLY)
    async def get_channel_stats(channel: str = "") -> dict[str, object]:
        """How many messages and people this channel has seen, and who talks most."""
        _need_channel(channel)
        return await log.channel_stats(bot, channel)

    @server.tool(annotations=_READ_ONLY)
    async def get_current_users(channel: str = "") -> str:
        """Who is in this channel right now."""
        _need_channel(channel)
        users = await users_of(channel)
        return ", ".join(users) if users else "nobody is known to be here"

    return server
