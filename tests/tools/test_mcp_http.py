"""The hub's MCP client over streamable HTTP, against SDK servers as the ecosystem runs them:
it names itself, a call the server refused as an unknown session (the server restarted) is
sent again on a new session, and a refused credential says "authorization" with the
server's name."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace

import pytest
import uvicorn
from starlette.types import ASGIApp

from fakes import mcp_server
from salon import __version__
from salon.config import Secrets
from salon.model import ToolCall
from salon.tools import mcp_link
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub
from salon.tools.mcp_link import open_http
from salon.tools.servers import configured_specs
from tests.conftest import bot_config
from tests.tools.conftest import REPO


def call(tool: str, **arguments: object) -> ToolCall:
    return ToolCall("c1", tool, dict(arguments))


class LoopbackServer:
    """An ASGI app served on one 127.0.0.1 port, which can be stopped and started again
    (a restart: a new app, so every session the old one held is gone)."""

    def __init__(self, make_app: Callable[[], ASGIApp]) -> None:
        self._make_app = make_app
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        config = uvicorn.Config(self._make_app(), log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        started = asyncio.Event()
        original = self._server.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await original(sockets)
            started.set()

        self._server.startup = startup  # type: ignore[method-assign]
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        await asyncio.wait_for(started.wait(), 10)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.wait_for(self._task, 10)
        self._server = self._task = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@pytest.fixture
async def session_server() -> AsyncIterator[LoopbackServer]:
    """The test server as a 2025-era server: sessions, lost when it restarts."""
    server = LoopbackServer(
        lambda: mcp_server.handshake_only(mcp_server.build().streamable_http_app())
    )
    await server.start()
    yield server
    await server.stop()


TOKENS = {"good": [mcp_server.TOOLS_SCOPE], "weak": []}  # "weak" may not call tools


@pytest.fixture
async def guarded_server() -> AsyncIterator[tuple[LoopbackServer, dict[str, list[str]]]]:
    """The test server behind bearer tokens; the tokens it knows can be changed."""
    tokens = dict(TOKENS)
    server = LoopbackServer(lambda: mcp_server.build(tokens).streamable_http_app())
    await server.start()
    yield server, tokens
    await server.stop()


def http_spec(name: str, url: str, headers: Mapping[str, str] | None = None) -> ServerSpec:
    def connect(on_message: MessageHandler) -> object:
        return open_http(url, dict(headers or {}), on_message)

    return ServerSpec(name, connect, start_timeout=5, health_interval=3600)  # type: ignore[arg-type]


async def test_the_client_names_itself_salon_with_its_version(
    session_server: LoopbackServer,
) -> None:
    async with ToolHub([http_spec("kit", session_server.url)]) as hub:
        result = await hub.call(call("client_info"))
    assert (result.content, result.is_error) == (f"salon {__version__}", False)


async def test_a_configured_stdio_server_is_told_salon_too() -> None:
    server = {"command": sys.executable, "args": ["-m", "fakes.mcp_server"], "cwd": str(REPO)}
    (spec,) = configured_specs(bot_config(mcp_servers={"kit": server}), Secrets({}))
    async with ToolHub([replace(spec, start_timeout=20)]) as hub:
        result = await hub.call(call("client_info"))
    assert (result.content, result.is_error) == (f"salon {__version__}", False)


async def test_a_call_the_restarted_server_refused_as_an_unknown_session_runs_on_a_new_one(
    session_server: LoopbackServer,
) -> None:
    async with ToolHub([http_spec("kit", session_server.url)], backoff_initial=0.05) as hub:
        first = await hub.call(call("slow", seconds=0))
        await session_server.restart()
        # `slow` has side effects as far as Salon knows: only a call that never ran is sent twice
        second = await hub.call(call("slow", seconds=0))
        assert (first.content, first.is_error) == ("slept 0.0", False)
        assert (second.content, second.is_error) == ("slept 0.0", False)
        await asyncio.wait_for(hub.wait_connections("kit", 2), 10)  # on a new session


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("wrong", "authorization failed (HTTP 401"),
        ("weak", "authorization failed (HTTP 403"),
    ],
)
async def test_a_refused_credential_says_authorization_with_the_servers_name(
    guarded_server: tuple[LoopbackServer, dict[str, list[str]]],
    caplog: pytest.LogCaptureFixture,
    token: str,
    expected: str,
) -> None:
    server, _tokens = guarded_server
    headers = {"Authorization": f"Bearer {token}"}
    async with ToolHub([http_spec("docs", server.url, headers)]) as hub:
        failed = hub.failed_servers()
    assert failed["docs"].startswith(expected), failed
    logged = [r.getMessage() for r in caplog.records if r.name == "salon.tools.hub"]
    assert f"tool server docs is not available: {expected}" in "\n".join(logged)
    assert all(token not in line for line in logged)


async def test_a_credential_revoked_while_connected_fails_the_call_naming_the_server(
    guarded_server: tuple[LoopbackServer, dict[str, list[str]]],
) -> None:
    server, tokens = guarded_server
    headers = {"Authorization": "Bearer good"}
    async with ToolHub([http_spec("docs", server.url, headers)]) as hub:
        allowed = await hub.call(call("echo", text="x"))
        del tokens["good"]
        refused = await hub.call(call("echo", text="x"))
    assert (allowed.content, allowed.is_error) == ("x", False)
    assert refused.is_error
    assert refused.content.startswith(
        "echo was refused by MCP server docs: authorization failed (HTTP 401"
    ), refused.content
    assert "may or may not" not in refused.content


def patient_spec(url: str) -> ServerSpec:
    """A server a call would wait for long (``start_timeout``) if it waited for it at all."""
    return replace(http_spec("kit", url), start_timeout=600)


async def test_a_call_refused_a_connection_right_after_an_answer_was_not_run(
    session_server: LoopbackServer,
) -> None:
    async with ToolHub([patient_spec(session_server.url)], backoff_initial=0.05) as hub:
        answered = await hub.call(call("echo", text="x"))
        await session_server.stop()
        async with asyncio.timeout(20):  # far below start_timeout: it did not wait for it
            refused = await hub.call(call("slow", seconds=0))  # heard from just now: no ping
            again = await hub.call(call("slow", seconds=0))  # the server still down
    assert (answered.content, answered.is_error) == ("x", False)
    for result in (refused, again):
        assert result.is_error
        assert "slow was not run" in result.content, result.content
        assert "may or may not" not in result.content
        assert "All connection attempts failed" in result.content


async def test_a_call_to_a_remote_server_found_down_fails_at_once(
    session_server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_link, "_FRESH", 0.0)  # as if the server had been idle for long
    async with ToolHub([patient_spec(session_server.url)], backoff_initial=0.05) as hub:
        await hub.call(call("echo", text="x"))
        await session_server.stop()
        async with asyncio.timeout(20):
            result = await hub.call(call("slow", seconds=0))
    assert result.is_error
    assert result.content.startswith("MCP server kit had stopped"), result.content
    assert result.content.endswith("slow was not run")


async def test_a_call_after_the_server_came_back_runs(session_server: LoopbackServer) -> None:
    async with ToolHub([patient_spec(session_server.url)], backoff_initial=0.05) as hub:
        await hub.call(call("echo", text="x"))
        await session_server.stop()
        down = await asyncio.wait_for(hub.call(call("slow", seconds=0)), 20)
        await session_server.start()
        await asyncio.wait_for(hub.wait_connections("kit", 2), 20)
        back = await hub.call(call("slow", seconds=0))
    assert down.is_error
    assert (back.content, back.is_error) == ("slept 0.0", False)
