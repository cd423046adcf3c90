"""Failures told honestly: once the answer is out, a failure of the bookkeeping after it
(the store gone mid-activation) is logged and traced, never told as "could not answer"; a
failure before anything was shown is told in one line that names no address and no path."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator

import pytest

from fakes.databases import Database
from fakes.tcp_proxy import TcpProxy
from salon.agent import Agent
from salon.agent.recording.traces import TraceWriter
from salon.config import Secrets, TracesConfig
from salon.errors import ProviderError
from salon.llm import FakeProvider, FakeReply, ProviderTraits
from salon.llm.factory import build_provider
from salon.model import ChannelRef, Message, Participant, Tag
from salon.platforms.memory import MemoryPlatform
from salon.store._dialects import parse_url
from salon.store.sql import SQLStore
from tests.agent.conftest import StartAgent
from tests.conftest import bot_config

ALICE = Participant("alice", "Alice")


class _StoreGoesWithTheAnswer(MemoryPlatform):
    """The database stops right after the bot's answer is shown."""

    def __init__(self, proxy: TcpProxy) -> None:
        super().__init__(bot_name="Salon")
        self._proxy = proxy

    async def send(self, channel: ChannelRef, text: str, **kwargs: object) -> Message:
        message = await super().send(channel, text, **kwargs)  # type: ignore[arg-type]
        if Tag.NOTE not in message.tags:
            await self._proxy.down()
        return message


@pytest.fixture
async def relayed(pg_database: Database) -> AsyncIterator[tuple[TcpProxy, SQLStore]]:
    """A store on PostgreSQL through a relay the test can take down."""
    url = parse_url(pg_database.url, pg_database.password)
    assert url.host is not None
    assert url.port is not None
    async with TcpProxy(url.host, url.port) as proxy:
        through = f"postgresql://{url.username}@127.0.0.1:{proxy.port}/{url.database}"
        store = SQLStore(through, password=pg_database.password)
        await store.open()
        try:
            yield proxy, store
        finally:
            await proxy.up()  # for the store to close cleanly
            await store.close()


async def _serve(agent: Agent, platform: MemoryPlatform) -> asyncio.Task[None]:
    await platform.start(agent.submit)
    return asyncio.create_task(agent.run())


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_store_failure_after_the_answer_is_shown_is_logged_not_told(
    relayed: tuple[TcpProxy, SQLStore], caplog: pytest.LogCaptureFixture
) -> None:
    proxy, store = relayed
    platform = _StoreGoesWithTheAnswer(proxy)
    provider = FakeProvider(["Here is your answer."])
    provider.traits = ProviderTraits(prefix_cache=True)  # its rolling state is stored after
    traces = TraceWriter(store=store, settings=TracesConfig(), prices={})
    agent = Agent(
        bot="salon",
        config=bot_config(),
        provider=provider,
        platforms={platform.name: platform},
        store=store,
        traces=traces,
    )
    task = await _serve(agent, platform)
    try:
        with caplog.at_level(logging.ERROR):
            await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
            await agent.wait_idle()
            # The rolling state is written behind the answer (a held write): its failure
            # is the store's log line, and nothing of it reaches the channel.
            async with asyncio.timeout(10):
                await store.db.held.idle.wait()  # type: ignore[attr-defined]
    finally:
        await _stop(task)
    assert [m.text for m in platform.sent] == ["Here is your answer."]
    assert "held statements; they are lost" in caplog.text
    assert "Connect call failed" in caplog.text  # the log keeps the whole story
    assert agent.last_answer_at is not None
    await proxy.up()
    writing = asyncio.create_task(traces.run())
    try:
        async with asyncio.timeout(10):
            await traces.flush()
    finally:
        await _stop(writing)
    (trace,) = await store.traces.list_traces(bot="salon")
    assert trace.outcome == "answered"


async def test_a_store_failure_before_anything_was_shown_is_told_without_the_address(
    relayed: tuple[TcpProxy, SQLStore],
) -> None:
    proxy, store = relayed
    platform = MemoryPlatform(bot_name="Salon")
    provider = FakeProvider(["never shown"])
    provider.traits = ProviderTraits(prefix_cache=True)  # the room reads its rolling state
    agent = Agent(
        bot="salon",
        config=bot_config(),
        provider=provider,
        platforms={platform.name: platform},
        store=store,
    )
    task = await _serve(agent, platform)
    try:
        await proxy.down()
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
        await agent.wait_idle()
    finally:
        await _stop(task)
    (told,) = platform.sent
    assert Tag.NOTE in told.tags
    assert told.text.startswith("⚠️ Salon could not answer: ")
    assert "127.0.0.1" not in told.text
    assert str(proxy.port) not in told.text


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_an_unreachable_model_server_is_told_without_its_address(
    start_agent: StartAgent,
) -> None:
    port = _closed_port()
    providers = {
        "test": {
            "type": "openai",
            "model": "m",
            "base_url": f"http://127.0.0.1:{port}/v1",
            "retries": 0,
            "backoff_initial": 0,
            "api_key_env": "TEST_KEY",
        }
    }
    provider = build_provider(bot_config(providers=providers), Secrets({"TEST_KEY": "k-test"}))
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    (told,) = platform.sent
    assert told.text.startswith("⚠️ Salon could not answer: ")
    assert "cannot reach the server" in told.text
    assert "127.0.0.1" not in told.text
    assert str(port) not in told.text


async def test_a_failure_naming_a_file_is_told_without_its_path(
    start_agent: StartAgent,
) -> None:
    error = ProviderError("fake: cannot read /etc/salon/keys/vendor.key: permission denied")
    agent, platform = await start_agent(FakeProvider([FakeReply(error=error)]))
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "hello")
    await agent.wait_idle()
    (told,) = platform.sent
    assert "/etc/salon" not in told.text
    assert "vendor.key" not in told.text
    assert "permission denied" in told.text
