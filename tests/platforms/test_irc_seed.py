"""Terrarium on IRC (a real miniircd): .ping and .help answered by the bot itself, and the
channel's topic and network in the system prompt."""

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
from tests.conftest import ServeApp, bot_config

BOT = "salonbot"
Start = Any


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def people() -> AsyncIterator[list[Human]]:
    joined: list[Human] = []
    yield joined
    for person in joined:
        await person.close()


@pytest.fixture
def start_bot(ircd: IrcServer, tmp_path: Path, serve_app: ServeApp) -> Start:
    async def start(provider: FakeProvider, *, irc: Any = None, **config: Any) -> IrcPlatform:
        settings = {
            "server": "127.0.0.1",
            "port": ircd.port,
            "tls": False,
            "nick": BOT,
            "channels": ["#salon"],
            "commands": [".terrarium", "!ask"],
            "flood_burst": 50,
            **(irc or {}),
        }
        cfg = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": settings}, **config)
        app = BotApp(key="salon", config=cfg, root=tmp_path, secrets=Secrets({}), provider=provider)
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, IrcPlatform)
        await serve_app(app, [platform])
        await asyncio.wait_for(platform.wait_connected(), 15)
        return platform

    return start


async def human(ircd: IrcServer, people: list[Human], nick: str = "alice") -> Human:
    person = Human(nick, ircd.port)
    people.append(person)
    await person.connect()
    await person.join("#salon")
    return person


async def test_ping_and_help_are_answered_without_the_model(
    ircd: IrcServer, start_bot: Start, people: list[Human]
) -> None:
    provider = FakeProvider()
    await start_bot(provider, irc={"dot_commands": True})
    alice = await human(ircd, people)
    await alice.say("#salon", ".ping")
    assert await alice.privmsgs_from(BOT, 1) == ["alice: pong"]
    await alice.say("#salon", ".help")
    (listing,) = (await alice.privmsgs_from(BOT, 2))[1:]
    assert listing == "alice: .ping, .help [command], .terrarium <question>, !ask <question>"
    await alice.say("#salon", ".help ping")
    (one,) = (await alice.privmsgs_from(BOT, 3))[2:]
    assert one == "alice: .ping: pong, if the bot is here"
    await alice.say(BOT, ".ping")
    await alice.expect(rf"^:{BOT}!\S+ PRIVMSG alice :pong$")
    assert provider.requests == []


async def test_without_dot_commands_a_ping_is_a_dot_message_no_bot_reads(
    ircd: IrcServer, start_bot: Start, people: list[Human]
) -> None:
    provider = FakeProvider(["hello"])
    await start_bot(provider)
    alice = await human(ircd, people)
    await alice.say("#salon", ".ping")
    await alice.say("#salon", f"{BOT}: hi")
    assert await alice.privmsgs_from(BOT, 1) == ["hello"]
    assert provider.requests[0].messages[-1].plain_text == f"alice: {BOT}: hi"


async def test_the_system_prompt_names_the_network_the_channel_and_its_topic(
    ircd: IrcServer, start_bot: Start, people: list[Human]
) -> None:
    provider = FakeProvider(["hi"])
    prompt = "On {{server}} in {{channel}} ({{topic}}) with {{users}}."
    await start_bot(provider, system_prompt=prompt)
    alice = await human(ircd, people)
    await alice.send("TOPIC #salon :plants and bots")
    await alice.expect(r" TOPIC #salon :plants and bots$")
    await alice.say("#salon", f"{BOT}: hi")
    assert await alice.privmsgs_from(BOT, 1) == ["hi"]
    # miniircd names no NETWORK: the server's address stands for it.
    assert provider.requests[0].system == (
        f"On 127.0.0.1 in #salon (plants and bots) with alice, {BOT}."
    )
