from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import uvicorn
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

from fakes import mcp_server
from salon.tools.hub import MessageHandler, ServerSpec

REPO = Path(__file__).resolve().parents[2]
MCP_SERVER_TIME = Path(sys.executable).parent / "mcp-server-time"


def stdio_kit(name: str = "kit", *, timeout: float = 10.0) -> ServerSpec:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fakes.mcp_server"], cwd=str(REPO)
    )

    def connect(on_message: MessageHandler) -> Client:
        return Client(params, message_handler=on_message, cache=None)

    return ServerSpec(name=name, connect=connect, timeout=timeout, start_timeout=20)


def in_process(server: MCPServer, name: str = "mem", *, timeout: float = 10.0) -> ServerSpec:
    def connect(on_message: MessageHandler) -> Client:
        return Client(server, message_handler=on_message, cache=None)

    return ServerSpec(name=name, connect=connect, timeout=timeout)


@pytest.fixture
async def http_kit_url() -> AsyncIterator[str]:
    """The test MCP server over streamable HTTP on 127.0.0.1, in this event loop."""
    app = mcp_server.build().streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    await asyncio.wait_for(task, 10)
    sock.close()


Spec = Callable[..., ServerSpec]
