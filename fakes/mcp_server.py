"""A small MCP server for tests, run over stdio or streamable HTTP.

python -m fakes.mcp_server            # stdio
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)


def build() -> MCPServer:
    server = MCPServer("testkit")

    @server.tool(annotations=READ_ONLY)
    def echo(text: str, times: int = 1) -> str:
        """Repeat the text."""
        return text * times

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    async def work(seconds: float, ctx: Context) -> str:
        """Say it has started (a progress report), then take its time (side effects)."""
        await ctx.report_progress(0, 1, "started")
        await asyncio.sleep(seconds)
        return f"worked {seconds}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def crash() -> str:
        """End the server process at once."""
        os._exit(3)

    @server.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool(annotations=READ_ONLY)
    async def lookup_slowly(seconds: float) -> str:
        """A lookup that takes its time (no side effects)."""
        await asyncio.sleep(seconds)
        return f"looked up in {seconds}"

    @server.tool(annotations=READ_ONLY)
    def env(name: str) -> str:
        """A variable of the server's environment."""
        return os.environ.get(name, "")

    @server.tool(annotations=READ_ONLY)
    def whoami(requester_id: str = "") -> str:
        """Who Salon says is asking."""
        return f"asked by {requester_id or 'nobody'}"

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool called `name` and announce the change."""

        def extra() -> str:
            return f"I am {name}"

        server.add_tool(extra, name=name, description=f"added at run time: {name}")
        await ctx.notify_tools_changed()
        return f"added {name}"

    return server


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        build().run("streamable-http", port=int(sys.argv[2]))
    else:
        build().run("stdio")
