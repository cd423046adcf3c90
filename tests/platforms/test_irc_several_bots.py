"""Three bots of one deployment on IRC (a real miniircd), sharing one store, in a channel
where they answer what nobody addressed (``reply_on_random: 1``): a line nobody addressed
is answered by one of them, never piled on; a line addressed to one bot is that bot's
alone. The unaddressed lines are from a real room (#ubuntu, irc-disentanglement corpus,
Kummerfeld et al. 2019, CC BY 4.0)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.irc import Human, IrcServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.platforms.irc import IrcPlatform
from tests.conftest import ServeApp, bot_config
from tests.platforms.test_discord_several_bots import room_lines

NICKS = {"salon": "Salon", "muse": "Muse", "sage": "Sage"}
BOT_LINE = re.compile(r"^:(Salon|Muse|Sage)!\S+ PRIVMSG #salon :")


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def alice(ircd: IrcServer) -> AsyncIterator[Human]:
    person = Human("alice", ircd.port)
    await person.connect()
    await person.join("#salon")
    yield person
    await person.close()


async def three_bots(ircd: IrcServer, tmp_path: Path, serve_app: ServeApp) -> list[BotApp]:
    apps = []
    for key, nick in NICKS.items():
        settings = {
            "server": "127.0.0.1",
            "port": ircd.port,
            "tls": False,
            "nick": nick,
            "channels": ["#salon"],
            "flood_burst": 50,
        }
        config = bot_config(
            name=nick,
            data_dir=str(tmp_path / f"data-{key}"),
            database_url=f"sqlite:///{tmp_path / 'shared.db'}",
            reply_on_random=1,  # every line nobody addressed is one a bot would answer
            room={"stagger": 0.05},
            platforms={"irc": settings},
        )
        provider = FakeProvider(default=f"{nick} speaking.")
        app = BotApp(key=key, config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, IrcPlatform)
        await serve_app(app, [platform])
        await asyncio.wait_for(platform.wait_connected(), 15)
        apps.append(app)
    return apps


def speakers(person: Human, after: int) -> list[str]:
    """Who said each bot line in #salon that ``person`` saw from its line ``after`` on."""
    return [found[1] for line in person.lines[after:] if (found := BOT_LINE.match(line))]


async def settle(person: Human, apps: list[BotApp], count: int, *, after: int) -> None:
    """Until ``person`` has seen ``count`` bot lines from its line ``after`` on, and every
    bot is idle (a pile-on would add more)."""
    for _ in range(count):
        await person.expect(BOT_LINE.pattern, after=after)
        after = next(n for n, ln in enumerate(person.lines) if n >= after and BOT_LINE.match(ln))
        after += 1
    for app in apps:
        await app.agent.wait_idle()


async def each_judged(apps: list[BotApp], count: int) -> None:
    """Until every bot has judged ``count`` lines: a line reaches the three bots over three
    connections, so one may still be on its way when the first answer is seen."""
    async with asyncio.timeout(10):
        while any(app.agent.stats.activations < count for app in apps):  # noqa: ASYNC110 - three connections, no shared event
            await asyncio.sleep(0.02)
    for app in apps:
        await app.agent.wait_idle()


async def test_an_unaddressed_line_is_answered_by_one_bot_of_three(
    ircd: IrcServer, alice: Human, tmp_path: Path, serve_app: ServeApp
) -> None:
    apps = await three_bots(ircd, tmp_path, serve_app)
    start = len(alice.lines)
    for number, line in enumerate(room_lines(12), 1):
        await alice.say("#salon", line)
        await settle(alice, apps, number, after=start)
        # a bot answering another bot's line would be one too many here or at the next
        assert len(speakers(alice, start)) == number, (line, speakers(alice, start))
    said = speakers(alice, start)
    assert set(said) == set(NICKS.values()), said  # least recently spoken first: in turns


async def test_a_line_addressed_to_one_bot_is_its_alone(
    ircd: IrcServer, alice: Human, tmp_path: Path, serve_app: ServeApp
) -> None:
    apps = await three_bots(ircd, tmp_path, serve_app)
    first, last = room_lines(2)
    start = len(alice.lines)
    await alice.say("#salon", first)  # each bot has seen a line: the others know its nick
    await settle(alice, apps, 1, after=start)
    await each_judged(apps, 1)
    await alice.say("#salon", "Muse: what do you think?")
    await settle(alice, apps, 2, after=start)
    # The server relayed Muse's answer to the others before this line: had one of them
    # taken it for a person's, its answer would be one line too many.
    await alice.say("#salon", last)
    await settle(alice, apps, 3, after=start)
    said = speakers(alice, start)
    assert len(said) == 3, said
    assert said[1] == "Muse"
