"""A native tool set served over MCP (``salon tools serve``) is a correct MCP server: it
advertises only tools, names itself Salon with the package's version, and answers what it
does not have with the JSON-RPC codes the MCP spec gives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types
import pytest
from mcp import Client
from mcp.client.client import ConnectMode
from mcp.shared.exceptions import MCPError

from salon import __version__
from salon.tools.mcp_serve import to_mcp_server
from salon.tools.native import ToolSet

MODES = ["legacy", "auto"]  # the 2025 handshake and the 2026 protocol


def greeter(name: str = "salon") -> ToolSet:
    tools = ToolSet(name, instructions="greets")

    @tools.tool()
    def hello(who: str) -> str:
        """Greet someone."""
        return f"hello {who}"

    return tools


@pytest.mark.parametrize("mode", MODES)
async def test_only_tools_are_advertised_and_the_server_names_itself(mode: ConnectMode) -> None:
    async with Client(to_mcp_server(greeter()), cache=None, mode=mode) as client:
        capabilities = client.session.server_capabilities
        info = client.session.server_info
    assert capabilities is not None
    assert capabilities.tools is not None
    assert (capabilities.prompts, capabilities.resources) == (None, None)
    assert info is not None
    assert (info.name, info.version) == ("salon", __version__)


async def test_an_integration_is_named_after_salon_and_itself() -> None:
    async with Client(to_mcp_server(greeter("weather")), cache=None, mode="legacy") as client:
        info = client.session.server_info
    assert info is not None
    assert (info.name, info.version) == ("salon-weather", __version__)


def _requests(client: Client) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "prompts/get": lambda: client.get_prompt("nope"),
        "prompts/list": client.list_prompts,
        "resources/read": lambda: client.read_resource("file:///nope"),
        "resources/list": client.list_resources,
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "method", ["prompts/get", "prompts/list", "resources/read", "resources/list"]
)
async def test_prompts_and_resources_are_methods_it_does_not_have(
    mode: ConnectMode, method: str
) -> None:
    async with Client(to_mcp_server(greeter()), cache=None, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await _requests(client)[method]()
    assert raised.value.code == mcp_types.METHOD_NOT_FOUND


@pytest.mark.parametrize("mode", MODES)
async def test_an_unknown_tool_is_invalid_params(mode: ConnectMode) -> None:
    async with Client(to_mcp_server(greeter()), cache=None, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("nope", {})
        known = await client.call_tool("hello", {"who": "you"})
    assert raised.value.code == mcp_types.INVALID_PARAMS
    assert "nope" in raised.value.message
    assert (known.is_error, known.structured_content) == (False, {"result": "hello you"})
