"""Delivery on IRC (miniircd): an answer a stop cut off is answered at the next start, or,
when its first line was shown, closed with one line; never repeated whole. (IRC has no
read-back of a gap: see docs/CONFIGURATION.md, "Delivery per platform".)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.irc import IrcServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.llm.base import Provider
from salon.platforms.irc import IrcPlatform
from tests.conftest import bot_config
from tests.platforms.test_discord_catch_up import Hanging
from tests.platforms.test_irc import BOT, _close_people, human  # noqa: F401 - closes humans

WAIT = 20.0


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


class Running:
    def __init__(self, server: IrcServer, root: Path, provider: Provider, **config: object) -> None:
        settings = {
            "server": "127.0.0.1",
            "port": server.port,
            "tls": False,
            "nick": BOT,
            "channels": ["#salon"],
            "flood_burst": 50,
            "reconnect_backoff_initial": 0.05,
        }
        cfg = bot_config(data_dir=str(root / "data"), platforms={"irc": settings}, **config)
        self.app = BotApp(
            key="salon", config=cfg, root=root, secrets=Secrets({}), provider=provider
        )
        self.until = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.app.__aenter__()
        (platform,) = self.app.unattended_platforms()
        assert isinstance(platform, IrcPlatform)
        self.task = asyncio.create_task(self.app.serve(self.until, [platform]))
        await asyncio.wait_for(platform.wait_connected(), WAIT)

    async def stop(self) -> None:
        self.until.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, WAIT)
        await self.app.__aexit__(None, None, None)


async def test_an_answer_cut_before_it_showed_is_answered_at_the_next_start(
    ircd: IrcServer, tmp_path: Path
) -> None:
    hanging = Hanging("")
    first = Running(ircd, tmp_path, hanging, shutdown_grace=0.2)
    await first.start()
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: a long question")
    await asyncio.wait_for(hanging.writing.wait(), WAIT)
    await first.stop()

    again = Running(ircd, tmp_path, FakeProvider(["The whole answer."]))
    await again.start()
    said = await alice.privmsgs_from(BOT, 1)
    await again.stop()
    assert said == ["The whole answer."]


async def test_an_answer_cut_after_its_first_line_is_closed_not_repeated(
    ircd: IrcServer, tmp_path: Path
) -> None:
    hanging = Hanging("The first paragraph.\n\n")
    first = Running(ircd, tmp_path, hanging, shutdown_grace=0.2)
    await first.start()
    alice = await human(ircd)
    await alice.say("#salon", f"{BOT}: a long question")
    assert await alice.privmsgs_from(BOT, 1) == ["The first paragraph."]
    await first.stop()

    provider = FakeProvider(["must not come"])
    again = Running(ircd, tmp_path, provider)
    await again.start()
    _, closing = await alice.privmsgs_from(BOT, 2)
    await again.app.agent.wait_idle()
    await again.stop()
    assert "cut off" in closing
    assert provider.requests == []
