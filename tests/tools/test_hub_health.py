"""The health check of MCP servers: any answer proves a server alive (servers built with
the pinned SDK answer ping with "Method not found"), and no check cuts a call short."""

from __future__ import annotations

import asyncio
import sys

import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from salon.config import Secrets
from salon.model import ToolCall
from salon.tools.hub import CallContext, MessageHandler, ServerSpec, ToolHub
from salon.tools.mcp_link import McpServerLink
from salon.tools.servers import configured_specs
from tests.conftest import bot_config
from tests.tools.conftest import MCP_SERVER_TIME, REPO, stdio_kit

KIT = StdioServerParameters(command=sys.executable, args=["-m", "fakes.mcp_server"])
TIME = StdioServerParameters(command=str(MCP_SERVER_TIME))


def kit_from_config(health_interval: float) -> ServerSpec:
    """Our test server as a bot's config has it, with its health interval."""
    server = {
        "command": sys.executable,
        "args": ["-m", "fakes.mcp_server"],
        "cwd": str(REPO),
        "health_interval": health_interval,
        "start_timeout": 20,
    }
    (spec,) = configured_specs(bot_config(mcp_servers={"kit": server}), Secrets({}))
    return spec


@pytest.mark.parametrize("params", [KIT, TIME], ids=["testkit", "mcp-server-time"])
async def test_servers_of_the_pinned_sdk_answer_ping_with_method_not_found(
    params: StdioServerParameters,
) -> None:
    """The premise: such a server is alive and answering, yet refuses ping."""
    async with Client(params, cache=None) as client:
        with pytest.raises(MCPError) as refused:
            await client.session.send_ping()
    assert refused.value.code == mcp_types.METHOD_NOT_FOUND


async def test_a_call_longer_than_the_health_interval_completes() -> None:
    async with ToolHub([kit_from_config(health_interval=0.1)]) as hub:
        before = await hub.call(ToolCall("c1", "pid", {}))
        slow = await hub.call(ToolCall("c2", "slow", {"seconds": 1.5}))
        after = await hub.call(ToolCall("c3", "pid", {}))
    assert (slow.content, slow.is_error) == ("slept 1.5", False)
    assert after.content == before.content  # the same server process all along


async def test_a_healthy_idle_server_is_left_alone() -> None:
    def connect(on_message: MessageHandler) -> Client:
        return Client(TIME, message_handler=on_message, cache=None)

    spec = ServerSpec("time", connect, start_timeout=20, health_interval=0.05)
    link = McpServerLink(spec, lambda: None, (0.05, 1.0))
    running = asyncio.create_task(link.run())
    try:
        await asyncio.wait_for(link.wait_checks(5), 20)
        assert (link.connections, link.last_error) == (1, None)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_restart_waits_for_the_calls_in_flight() -> None:
    started = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    link = McpServerLink(stdio_kit(), lambda: None, (0.05, 1))
    running = asyncio.create_task(link.run())
    try:
        await asyncio.wait_for(link.ready.wait(), 20)
        context = CallContext(progress, None, "")
        call = asyncio.create_task(link.call("c1", "work", {"seconds": 1.0}, context))
        await asyncio.wait_for(started.wait(), 10)  # the server has the call
        link.restart(link.client)  # asked for while the call runs: it is not cut short
        result = await asyncio.wait_for(call, 10)
        await asyncio.wait_for(link.wait_connections(2), 20)  # then the restart happens
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert (result.content, result.is_error) == ("worked 1.0", False)
