"""Connections to the model's server are kept and reused, as the real servers keep them
(HTTP/1.1 keep-alive), and Salon copes with what that brings: a connection the server
closed while it sat idle, an answer the caller stopped reading halfway; and a bot that
stops closes its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import Provider
from salon.platforms.memory import MemoryPlatform
from tests.agent.test_traces import ask, running
from tests.conftest import bot_config
from tests.llm._vendors import (
    SECRETS,
    VENDORS,
    collect,
    provider_for,
    request,
    settings_for,
    text_of,
)


@asynccontextmanager
async def kept(vendor: str, keep_alive: float = 5.0) -> AsyncIterator[tuple[LLMServer, Provider]]:
    """A server that keeps connections, and a provider of ``vendor`` on it (closed after)."""
    async with LLMServer(keep_alive=keep_alive) as server:
        provider = provider_for(server, vendor)
        try:
            yield server, provider
        finally:
            await provider.aclose()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_one_connection_carries_the_requests_one_after_the_other(vendor: str) -> None:
    async with kept(vendor) as (server, provider):
        for n in range(3):
            server.queue(f"answer {n}")
            assert text_of(await collect(provider)) == f"answer {n}"
    assert len(server.requests) == 3
    assert server.connections == 1


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_connection_the_server_closed_while_idle_is_not_an_error(vendor: str) -> None:
    # A request can meet the server's close on the way (it is sent before the client has
    # read the close): that one is retried on a new connection, as any request that failed
    # before an answer began.
    async with kept(vendor, keep_alive=1.0) as (server, provider):
        server.queue("first")
        assert text_of(await collect(provider)) == "first"
        await asyncio.wait_for(server.idle_closed.wait(), 10)
        server.queue("second")
        assert text_of(await collect(provider)) == "second"
    assert server.connections >= 2  # the second answer came on a new one


@pytest.mark.parametrize("vendor", VENDORS)
async def test_an_answer_left_halfway_does_not_spoil_the_next_request(vendor: str) -> None:
    async with kept(vendor) as (server, provider):
        server.queue(Scripted(chunks=["one ", "two ", "three"]))
        async for _ in provider.stream(request()):
            break  # the caller stops reading (a deadline, a stop)
        server.queue("whole")
        assert text_of(await collect(provider)) == "whole"
    assert len(server.requests) == 2


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stopped_bot_leaves_no_connection_to_the_models_server(
    vendor: str, tmp_path: Path
) -> None:
    async with LLMServer() as server:
        providers = {"test": settings_for(server, vendor)}
        config = bot_config(data_dir=str(tmp_path / "data"), provider="test", providers=providers)
        app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets(SECRETS))
        platform = MemoryPlatform(bot_name="Salon")
        server.queue("Hello, Alice.")
        async with running(app, platform):
            await ask(app, platform, "hi", 1)
            assert [m.text for m in platform.sent] == ["Hello, Alice."]
            assert server.connections >= 1  # one at least, kept open until the stop
        await server.wait_no_connections()
