"""OAuth for remote MCP servers: the operator authorizes once (the link, a loopback
redirect), the tokens are kept sealed in the store, a bot uses and refreshes them, and
``--revoke`` forgets them. Against the SDK's own authorization-server pieces on loopback
(fakes/oauth_server.py): discovery, dynamic client registration, PKCE, refresh."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn

from fakes.oauth_server import FakeAuthorizationServer, build
from salon.config import Secrets
from salon.model import ToolCall
from salon.store.sql import SQLStore, sqlite_url
from salon.tools.hub import ToolHub
from salon.tools.mcp_auth import KEY_ENV, SealedStorage, Sealer, authorize
from salon.tools.servers import configured_specs
from salon.tools_cli import auth_server
from tests.conftest import bot_config

KEY = "a long random string for the tests' tokens"


class Guarded:
    def __init__(self, url: str, authority: FakeAuthorizationServer) -> None:
        self.url, self.authority = url, authority


@pytest.fixture
async def guarded() -> AsyncIterator[Guarded]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    authority = FakeAuthorizationServer()
    app = build(base, authority).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    started = asyncio.Event()
    startup = server.startup

    async def up(sockets: Any = None) -> None:
        await startup(sockets)
        started.set()

    server.startup = up  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await asyncio.wait_for(started.wait(), 10)
    yield Guarded(f"{base}/mcp", authority)
    server.should_exit = True
    await asyncio.wait_for(task, 10)
    sock.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLStore]:
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    yield store
    await store.close()


def config(guarded: Guarded) -> Any:
    return bot_config(mcp_servers={"guarded": {"url": guarded.url, "oauth": {}}})


async def operator_authorizes(store: SQLStore, guarded: Guarded, key: str = KEY) -> list[str]:
    """What ``salon tools auth guarded`` does, the link opened as a browser would."""
    links: list[str] = []
    opened: list[asyncio.Task[httpx2.Response]] = []

    async def show(link: str) -> None:
        links.append(link)

        async def browse() -> httpx2.Response:
            async with httpx2.AsyncClient(follow_redirects=True) as browser:
                return await browser.get(link)

        opened.append(asyncio.create_task(browse()))

    storage = SealedStorage(store.tokens, "salon", "guarded", Sealer(key))
    await authorize("guarded", guarded.url, storage, scope=None, port=0, show=show, within=10)
    (page,) = await asyncio.gather(*opened)
    assert page.text == "Salon is authorized. You can close this page."
    return links


async def call_echo(store: SQLStore, guarded: Guarded, key: str = KEY) -> str:
    specs = configured_specs(config(guarded), Secrets({KEY_ENV: key}), store.tokens, "salon")
    specs = [s.__class__(**{**s.__dict__, "start_timeout": 5}) for s in specs]
    async with ToolHub(specs) as hub:
        failed = hub.failed_servers()
        if failed:  # what salon tools list and the health page show
            return failed["guarded"]
        result = await hub.call(ToolCall("c1", "echo", {"text": "hello"}))
    return result.content


async def test_one_authorization_then_the_bot_calls_with_sealed_stored_tokens(
    store: SQLStore, guarded: Guarded
) -> None:
    (link,) = await operator_authorizes(store, guarded)
    assert "code_challenge_method=S256" in link  # PKCE
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in link
    assert len(guarded.authority.clients) == 1  # registered itself (dynamic registration)
    (access,) = guarded.authority.access
    sealed = await store.tokens.get("salon", "guarded", "tokens")
    assert sealed is not None
    assert access.encode() not in sealed  # encrypted at rest
    assert await call_echo(store, guarded) == "hello"
    assert guarded.authority.issued == {"authorization_code": 1}


async def test_a_token_near_its_expiry_is_refreshed_before_it_is_used(
    store: SQLStore, guarded: Guarded
) -> None:
    guarded.authority.token_lifetime = 30  # within the minute before expiry it is renewed
    await operator_authorizes(store, guarded)
    guarded.authority.token_lifetime = 3600
    assert await call_echo(store, guarded) == "hello"
    assert guarded.authority.issued == {"authorization_code": 1, "refresh_token": 1}
    assert await call_echo(store, guarded) == "hello"  # the refreshed token was kept
    assert guarded.authority.issued == {"authorization_code": 1, "refresh_token": 1}


async def test_without_authorization_the_call_says_how_to_authorize(
    store: SQLStore, guarded: Guarded
) -> None:
    content = await call_echo(store, guarded)
    assert content == (
        "MCP server guarded is not authorized: the operator runs salon tools auth guarded"
    )


async def test_revoke_forgets_the_tokens(store: SQLStore, guarded: Guarded, tmp_path: Path) -> None:
    await operator_authorizes(store, guarded)
    said: list[str] = []
    other = SQLStore(sqlite_url(tmp_path / "salon.db"))
    code = await auth_server(
        "salon", config(guarded), other, Secrets({}), "guarded", revoke=True, out=said.append
    )
    assert (code, said) == (0, ["guarded: tokens forgotten"])
    assert await store.tokens.get("salon", "guarded", "tokens") is None
    assert "not authorized" in await call_echo(store, guarded)


async def test_tokens_sealed_under_another_key_are_not_read(
    store: SQLStore, guarded: Guarded
) -> None:
    await operator_authorizes(store, guarded)
    content = await call_echo(store, guarded, key="another key")
    assert f"cannot be read with this {KEY_ENV}" in content


async def test_salon_tools_auth_prints_the_link_and_keeps_the_tokens(
    guarded: Guarded, tmp_path: Path
) -> None:
    said: list[str] = []
    opened: list[asyncio.Task[httpx2.Response]] = []

    async def browse(link: str) -> httpx2.Response:
        async with httpx2.AsyncClient(follow_redirects=True) as browser:
            return await browser.get(link)

    def out(line: str) -> None:
        said.append(line)
        if line.startswith("Open this link"):
            opened.append(asyncio.create_task(browse(line.splitlines()[1])))

    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    no_key = await auth_server("salon", config(guarded), store, Secrets({}), "guarded", out=out)
    assert (no_key, said) == (
        2,
        [f"error: set {KEY_ENV} (a long random string: the key the tokens are kept under)"],
    )
    said.clear()
    secrets = Secrets({KEY_ENV: KEY})
    code = await auth_server("salon", config(guarded), store, secrets, "guarded", out=out)
    assert code == 0, said
    assert said[0].startswith("Open this link to authorize Salon at guarded:\nhttp://127.0.0.1:")
    assert said[1] == "guarded: authorized; the tokens are kept (sealed) in the store"
    await asyncio.gather(*opened)
    await store.open()
    try:
        assert await call_echo(store, guarded) == "hello"
    finally:
        await store.close()


async def test_tokens_the_server_stopped_accepting_fail_the_call_saying_not_authorized(
    store: SQLStore, guarded: Guarded
) -> None:
    await operator_authorizes(store, guarded)
    specs = configured_specs(config(guarded), Secrets({KEY_ENV: KEY}), store.tokens, "salon")
    async with ToolHub(specs) as hub:
        assert (await hub.call(ToolCall("c1", "echo", {"text": "hi"}))).content == "hi"
        guarded.authority.access.clear()  # revoked at the authorization server
        guarded.authority.refresh.clear()
        result = await hub.call(ToolCall("c2", "echo", {"text": "hi"}))
    assert result.is_error
    assert "not authorized: the operator runs salon tools auth guarded" in result.content


def test_an_oauth_server_needs_the_token_key_and_its_client_secret_from_the_environment() -> None:
    from salon.config.secrets import resolve_secrets
    from salon.errors import ConfigError, ConfigProblem

    server = {
        "url": "https://mcp.example/mcp",
        "oauth": {"client_id": "salon", "client_secret_env": "TRACKER_SECRET"},
    }
    bot = bot_config(mcp_servers={"tracker": server})

    def locate(key_path: str, reason: str) -> ConfigProblem:
        return ConfigProblem("bot.yaml", key_path, reason)

    with pytest.raises(ConfigError) as caught:
        resolve_secrets(bot, {}, locate, tools_only=True)
    assert [(p.key_path, p.reason) for p in caught.value.problems] == [
        (
            "mcp_servers.tracker.oauth",
            f"environment variable {KEY_ENV} is not set (required secret)",
        ),
        (
            "mcp_servers.tracker.oauth.client_secret_env",
            "environment variable TRACKER_SECRET is not set (required secret)",
        ),
    ]
    environ = {KEY_ENV: "a long key", "TRACKER_SECRET": "s3cret"}
    secrets = resolve_secrets(bot, environ, locate, tools_only=True)
    assert (secrets.get(KEY_ENV), secrets.get("TRACKER_SECRET")) == ("a long key", "s3cret")
    assert secrets.redactor()("a long key s3cret") == "*** ***"


async def test_salon_tools_auth_says_in_one_line_why_a_server_was_not_authorized(
    tmp_path: Path,
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = closed.getsockname()[1]
    bot = bot_config(mcp_servers={"t": {"url": f"http://127.0.0.1:{port}/mcp", "oauth": {}}})
    said: list[str] = []
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    code = await auth_server("salon", bot, store, Secrets({KEY_ENV: KEY}), "t", out=said.append)
    closed.close()
    assert (code, said) == (1, ["error: t was not authorized: All connection attempts failed"])
