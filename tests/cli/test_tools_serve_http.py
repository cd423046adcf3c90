"""`salon tools serve --http`: the built-ins over streamable HTTP for other MCP clients, on
loopback, behind a bearer token, refusing a Host header of another name (DNS rebinding)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from salon import __version__
from tests.conftest import WriteConfig

REPO = Path(__file__).resolve().parents[2]
SHARED = """\
providers:
  p: {type: openai, model: m, base_url: "http://127.0.0.1:9/v1"}
provider: p
"""
TOKEN = "s3cret-for-tests"
TOKEN_ENV = "SALON_TEST_MCP_TOKEN"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def start(root: Path, *extra: str) -> tuple[asyncio.subprocess.Process, str]:
    """`salon tools serve --http 127.0.0.1:0`, and the URL it says it serves at."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "salon", "tools", "serve", str(root), "--http", "127.0.0.1:0", *extra),
        env={**os.environ, TOKEN_ENV: TOKEN},
        cwd=str(REPO),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(30):
        while True:
            line = (await process.stderr.readline()).decode()
            if not line:
                raise AssertionError(f"serve ended without a URL: {seen}")
            seen.append(line)
            found = re.search(r"http://\S+/mcp", line)
            if found:
                return process, found.group(0)


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        await asyncio.wait_for(process.wait(), 10)


@pytest.fixture
async def served(write_config: WriteConfig) -> AsyncIterator[str]:
    process, url = await start(write_config(SHARED, bot=""), "--token-env", TOKEN_ENV)
    yield url
    await stop(process)


async def test_an_mcp_client_with_the_token_lists_and_calls_the_builtins(served: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        create_mcp_http_client(headers=headers) as http,  # the SDK leaves it to its owner
        Client(streamable_http_client(served, http_client=http), cache=None) as session,
    ):
        info = session.session.server_info
        listed = {t.name for t in (await asyncio.wait_for(session.list_tools(), 20)).tools}
        now = await asyncio.wait_for(session.call_tool("get_current_time", {"timezone": "UTC"}), 20)
    assert info is not None
    assert (info.name, info.version) == ("salon", __version__)
    assert {"get_current_time", "get_recent_messages"} <= listed
    assert not now.is_error


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN])
async def test_a_request_without_the_token_is_refused_with_401(
    served: str, authorization: str | None
) -> None:
    headers = dict(ACCEPT) | ({"Authorization": authorization} if authorization else {})
    async with httpx2.AsyncClient(timeout=20) as http:
        response = await http.post(served, json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert TOKEN not in response.text


async def test_a_host_header_of_another_name_is_refused(served: str) -> None:
    port = httpx2.URL(served).port
    headers = dict(ACCEPT) | {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(timeout=20) as http:
        rebound = await http.post(
            served, json=INITIALIZE, headers=headers | {"Host": f"attacker.example:{port}"}
        )
        direct = await http.post(served, json=INITIALIZE, headers=headers)
    assert rebound.status_code == 421
    assert direct.status_code == 200


async def test_a_token_variable_that_is_not_set_is_one_line(write_config: WriteConfig) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "salon", "tools", "serve", str(write_config(SHARED, bot=""))),
        *("--http", "127.0.0.1:0", "--token-env", "SALON_TEST_NOT_SET"),
        env={k: v for k, v in os.environ.items() if k != "SALON_TEST_NOT_SET"},
        cwd=str(REPO),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert err.decode().splitlines() == [
        "error: --token-env SALON_TEST_NOT_SET: the variable is not set"
    ]
