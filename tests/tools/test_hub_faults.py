"""MCP servers that die: noticed while idle, restarted; a call cut by it fails clearly or,
for a lookup, is asked again; results carry no secret; hidden arguments stay Salon's."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import replace

from fakes import mcp_server
from mcp import Client, StdioServerParameters

from salon.config import Redactor
from salon.model import ToolCall
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub
from tests.tools.conftest import REPO, in_process, stdio_kit

SECRET = "mcp-s3cret-value-42"


def call(tool: str, **arguments: object) -> ToolCall:
    return ToolCall("c1", tool, dict(arguments))


async def server_pid(hub: ToolHub) -> int:
    return int((await hub.call(call("pid"))).content)


async def test_a_server_that_dies_while_idle_is_restarted_before_the_next_call() -> None:
    kit = replace(stdio_kit(), health_interval=0.2)
    async with ToolHub([kit], backoff_initial=0.05) as hub:
        os.kill(await server_pid(hub), signal.SIGKILL)
        await asyncio.wait_for(hub.wait_connections("kit", 2), 20)  # no call needed
        result = await hub.call(call("echo", text="back"))
    assert (result.content, result.is_error) == ("back", False)


async def test_a_call_cut_by_the_servers_death_fails_clearly_and_the_next_one_works() -> None:
    async with ToolHub([stdio_kit()], backoff_initial=0.05) as hub:
        pid = await server_pid(hub)
        slow = asyncio.create_task(hub.call(call("slow", seconds=30)))
        os.kill(pid, signal.SIGKILL)
        cut = await asyncio.wait_for(slow, 20)
        after = await hub.call(call("echo", text="still here"))
    assert cut.is_error
    assert "restarting server" in cut.content
    assert "may or may not have run" in cut.content  # it has side effects: not run twice
    assert (after.content, after.is_error) == ("still here", False)


async def test_a_lookup_cut_by_the_servers_death_is_asked_again() -> None:
    async with ToolHub([stdio_kit()], backoff_initial=0.05) as hub:
        pid = await server_pid(hub)
        lookup = asyncio.create_task(hub.call(call("lookup_slowly", seconds=1)))
        os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(lookup, 30)
    assert (result.content, result.is_error) == ("looked up in 1.0", False)


async def test_a_secret_the_server_hands_back_is_redacted_at_the_hub() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fakes.mcp_server"],
        cwd=str(REPO),
        env={"SERVICE_TOKEN": SECRET, "PATH": os.environ.get("PATH", "")},
    )

    def connect(on_message: MessageHandler) -> Client:
        return Client(params, message_handler=on_message, cache=None)

    spec = ServerSpec("kit", connect, start_timeout=20)
    async with ToolHub([spec], redact=Redactor(frozenset({SECRET}))) as hub:
        result = await hub.call(call("env", name="SERVICE_TOKEN"))
    assert result.content == "***"


async def test_the_model_cannot_fill_in_what_salon_fills_in() -> None:
    spec = replace(in_process(mcp_server.build()), hidden_arguments=frozenset({"requester_id"}))
    async with ToolHub([spec]) as hub:
        forged = await hub.call(call("whoami", requester_id="admin"))
        filled = await hub.call(call("whoami"), hidden={"requester_id": "alice"})
    assert forged.content == "asked by nobody"
    assert filled.content == "asked by alice"
