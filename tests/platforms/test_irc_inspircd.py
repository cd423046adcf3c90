"""IRC against Debian's InspIRCd 3 as networks run it: flood control with fakelag, channel
modes and bans, IRCv3. miniircd (tests/platforms/test_irc.py) stays the fast default."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.platforms.irc import IrcPlatform
from tests.conftest import ServeApp, bot_config
from tests.fakes.inspircd import SERVER_NAME, InspIRCd, require_inspircd
from tests.fakes.irc import Human

BOT = "salonbot"


@pytest.fixture
async def inspircd() -> AsyncIterator[InspIRCd]:
    require_inspircd()
    server = InspIRCd()
    await server.start()
    yield server
    await server.stop()
    server.cleanup()


class People:
    """The test's people on the server (on its unthrottled port), closed after the test."""

    def __init__(self, server: InspIRCd) -> None:
        self.server = server
        self.all: list[Human] = []

    async def join(self, nick: str = "alice", channel: str | None = "#salon") -> Human:
        person = Human(nick, self.server.people_port)
        self.all.append(person)
        await person.connect()
        if channel:
            await person.join(channel)
        return person


@pytest.fixture
async def people(inspircd: InspIRCd) -> AsyncIterator[People]:
    crowd = People(inspircd)
    yield crowd
    for person in crowd.all:
        await person.close()


Start = Callable[..., Awaitable[tuple[BotApp, IrcPlatform]]]


@pytest.fixture
def start_bot(inspircd: InspIRCd, tmp_path: Path, serve_app: ServeApp) -> Start:
    """Start a bot on the server's throttled port; ``irc`` overrides its IRC settings."""

    async def start(provider: FakeProvider, **irc: Any) -> tuple[BotApp, IrcPlatform]:
        settings = {
            "server": "127.0.0.1",
            "port": inspircd.port,
            "tls": False,
            "nick": BOT,
            "fallback_nicks": [f"{BOT}_"],
            "channels": ["#salon"],
            "reconnect_backoff_initial": 0.05,
            **irc,
        }
        config = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": settings})
        app = BotApp(
            key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider
        )
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, IrcPlatform)
        await serve_app(app, [platform])
        await asyncio.wait_for(platform.wait_connected(), 20)
        return app, platform

    return start


async def test_a_server_privmsg_is_logged_not_answered(
    inspircd: InspIRCd,
    people: People,
    start_bot: Start,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # On connect InspIRCd tells every client, in a PRIVMSG from the server itself, that
    # raw I/O is logged. It is not a person: the model never sees it, nobody is answered.
    caplog.set_level(logging.INFO, "salon.platforms")
    provider = FakeProvider(["for alice"])
    await start_bot(provider)
    alice = await people.join()
    await alice.say("#salon", f"{BOT}: hello")
    assert await alice.privmsgs_from(BOT, 1) == ["for alice"]
    assert len(provider.requests) == 1
    assert "Raw I/O" not in provider.requests[0].messages[-1].plain_text
    assert f"PRIVMSG {SERVER_NAME} " not in inspircd.raw_log
    said = [r.getMessage() for r in caplog.records if r.name.startswith("salon.platforms")]
    assert any(f"{SERVER_NAME} says: *** Raw I/O logging" in line for line in said)


async def test_model_text_never_becomes_a_ctcp(
    inspircd: InspIRCd, people: People, start_bot: Start
) -> None:
    provider = FakeProvider(
        ["\x01VERSION\x01", "take \x01DCC SEND evil.exe 2130706433 4444 10\x01 this", "/me waves"]
    )
    await start_bot(provider)
    alice = await people.join()
    for n in range(3):
        await alice.say("#salon", f"{BOT}: {n}")
        await alice.privmsgs_from(BOT, n + 1)
    said = await alice.privmsgs_from(BOT, 3)
    assert said == [
        "VERSION",
        "take DCC SEND evil.exe 2130706433 4444 10 this",
        "\x01ACTION waves\x01",
    ]


@pytest.mark.parametrize(
    "case", [(BOT, "#salon", 480), ("a" * 30, "#" + "c" * 63, 400)], ids=["480", "long-names"]
)
async def test_no_word_is_lost_to_the_servers_line_limit(
    people: People, start_bot: Start, case: tuple[str, str, int]
) -> None:
    # The server relays ":nick!user@host PRIVMSG #chan :text" in at most 512 bytes: what
    # the bot's own prefix takes, the text cannot.
    nick, channel, max_line_bytes = case
    answer = " ".join(f"word{n}" for n in range(300))
    provider = FakeProvider([answer])
    await start_bot(provider, nick=nick, channels=[channel], max_line_bytes=max_line_bytes)
    alice = await people.join(channel=channel)
    await alice.say(channel, f"{nick}: talk")
    lines = await alice.privmsgs_from(nick, 4)
    async with asyncio.timeout(15):
        while " ".join(lines).split()[-1:] != ["word299"] and len(lines) < 10:
            lines = await alice.privmsgs_from(nick, len(lines) + 1)
    assert " ".join(lines) == answer
