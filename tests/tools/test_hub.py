"""ToolHub against real MCP servers: mcp-server-time, our own over stdio and HTTP."""

from __future__ import annotations

import asyncio

from mcp import Client, StdioServerParameters

from fakes import mcp_server
from salon.model import ToolCall
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub
from tests.tools.conftest import MCP_SERVER_TIME, in_process, stdio_kit


def call(tool: str, **arguments: object) -> ToolCall:
    return ToolCall("c1", tool, dict(arguments))


async def test_mcp_server_time_over_stdio() -> None:
    params = StdioServerParameters(command=str(MCP_SERVER_TIME))

    def connect(on_message: MessageHandler) -> Client:
        return Client(params, message_handler=on_message, cache=None)

    async with ToolHub([ServerSpec("time", connect, start_timeout=20)]) as hub:
        assert {s.name for s in hub.specs()} >= {"get_current_time", "convert_time"}
        result = await hub.call(call("get_current_time", timezone="Asia/Tokyo"))
    assert not result.is_error
    assert '"timezone": "Asia/Tokyo"' in result.content


async def test_own_server_over_stdio_with_annotations() -> None:
    async with ToolHub([stdio_kit()]) as hub:
        echo = hub.get("echo")
        assert echo is not None
        assert echo.read_only is True
        crash = hub.get("crash")
        assert crash is not None
        assert crash.destructive is True
        result = await hub.call(call("echo", text="ab", times=3))
    assert (result.content, result.is_error) == ("ababab", False)


async def test_own_server_over_streamable_http(http_kit_url: str) -> None:
    def connect(on_message: MessageHandler) -> Client:
        return Client(http_kit_url, message_handler=on_message, cache=None)

    async with ToolHub([ServerSpec("web", connect)]) as hub:
        result = await hub.call(call("echo", text="over http"))
    assert result.content == "over http"


async def test_invalid_arguments_become_an_error_result() -> None:
    async with ToolHub([in_process(mcp_server.build())]) as hub:
        wrong_type = await hub.call(call("echo", text=5))
        missing = await hub.call(call("echo"))
        unknown = await hub.call(call("no_such_tool"))
    assert wrong_type.is_error
    assert "text: 5 is not of type 'string'" in wrong_type.content
    assert missing.is_error
    assert "'text' is a required property" in missing.content
    assert unknown.is_error
    assert "unknown tool 'no_such_tool'" in unknown.content


async def test_server_killed_mid_call_is_restarted() -> None:
    async with ToolHub([stdio_kit()], backoff_initial=0.01) as hub:
        first_pid = (await hub.call(call("pid"))).content
        crashed = await hub.call(call("crash"))
        assert crashed.is_error
        assert "restarting server" in crashed.content
        after = await hub.call(call("pid"))
    assert not after.is_error
    assert after.content != first_pid


async def test_hung_server_times_out_and_is_restarted() -> None:
    async with ToolHub([stdio_kit(timeout=0.5)], backoff_initial=0.01) as hub:
        first_pid = (await hub.call(call("pid"))).content
        hung = await hub.call(call("slow", seconds=30))
        assert hung.is_error
        assert "timed out" in hung.content
        after = await hub.call(call("pid"))
    assert after.content != first_pid


async def test_tool_list_changes_are_followed() -> None:
    async with ToolHub([in_process(mcp_server.build())]) as hub:
        changed = asyncio.Event()
        hub.changed = changed.set
        assert hub.get("fresh") is None
        await hub.call(call("grow", name="fresh"))
        await asyncio.wait_for(changed.wait(), 5)
        result = await hub.call(call("fresh"))
    assert result.content == "I am fresh"


async def test_a_server_that_cannot_start_is_reported_and_skipped() -> None:
    params = StdioServerParameters(command="/nonexistent/mcp-server")

    def connect(on_message: MessageHandler) -> Client:
        return Client(params, message_handler=on_message, cache=None)

    broken = ServerSpec("broken", connect, start_timeout=5)
    async with ToolHub([broken, in_process(mcp_server.build())]) as hub:
        assert set(hub.failed_servers()) == {"broken"}
        assert "No such file" in hub.failed_servers()["broken"]
        assert (await hub.call(call("echo", text="still here"))).content == "still here"


async def test_clashing_names_are_prefixed_by_server() -> None:
    specs = [in_process(mcp_server.build(), "one"), in_process(mcp_server.build(), "two")]
    async with ToolHub(specs) as hub:
        names = {s.name for s in hub.specs()}
        assert {"one_echo", "two_echo"} <= names
        assert "echo" not in names
        assert (await hub.call(call("two_echo", text="x"))).content == "x"
