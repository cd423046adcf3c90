"""Keywords on IRC, against a real miniircd on 127.0.0.1: the same words as anywhere, and
after the bot's command prefix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fakes.irc import Human, IrcServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.platforms.irc import IrcPlatform
from tests.agent.pipeline_kit import weather_server
from tests.conftest import ServeApp, bot_config
from tests.tools.conftest import in_process

BOT = "salonbot"


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


async def start(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp, provider: FakeProvider, **config: Any
) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    settings = {
        "server": "127.0.0.1",
        "port": ircd.port,
        "tls": False,
        "nick": BOT,
        "channels": ["#salon"],
        "commands": ["!ask"],
        "flood_burst": 50,
    }
    cfg = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": settings}, **config)
    app = BotApp(
        key="salon",
        config=cfg,
        root=tmp_path,
        secrets=Secrets({}),
        provider=provider,
        extra_servers=[in_process(weather_server(calls))],
    )
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, IrcPlatform)
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.wait_connected(), 15)
    return calls


async def test_a_keyword_reaches_its_tool_on_irc_without_the_model(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    provider = FakeProvider([], default="the model was asked")
    keywords = {"weather": {"tool": "get_weather"}, "help": {"internal": True}}
    calls = await start(ircd, tmp_path, serve_app, provider, keywords=keywords)
    alice = Human("alice", ircd.port)
    await alice.connect()
    try:
        await alice.join("#salon")
        await alice.say("#salon", "!weather Seattle")
        (said,) = await alice.privmsgs_from(BOT, 1)
        assert said == "Seattle: 12 C, rain"
        await alice.say("#salon", "!ask !weather Oslo")  # after the command prefix too
        said = (await alice.privmsgs_from(BOT, 2))[1]
        assert said == "Oslo: 12 C, rain"
        await alice.say("#salon", f"{BOT}: !help")
        await alice.expect(r"!weather: calls get_weather")
    finally:
        await alice.close()
    assert [c["location"] for c in calls] == ["Seattle", "Oslo"]
    assert provider.requests == []


async def test_final_pass_on_irc_asks_the_model_once(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    provider = FakeProvider(["Bring a coat, Seattle is rainy."])
    keywords = {"weather": {"tool": "get_weather", "final_pass": True}}
    await start(ircd, tmp_path, serve_app, provider, keywords=keywords)
    alice = Human("alice", ircd.port)
    await alice.connect()
    try:
        await alice.join("#salon")
        await alice.say("#salon", "!weather Seattle")
        (said,) = await alice.privmsgs_from(BOT, 1)
    finally:
        await alice.close()
    assert said == "Bring a coat, Seattle is rainy."
    assert len(provider.requests) == 1
    assert "Seattle: 12 C, rain" in str(provider.requests[0].messages)
