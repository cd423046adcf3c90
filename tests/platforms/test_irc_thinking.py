"""A reasoning model's answer on IRC, against a real miniircd: the answer alone, or under
it (``show: spoiler``) a dot message, which no bot reads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fakes.irc import Human, IrcServer
from salon.app import BotApp
from salon.config import Secrets
from salon.context import is_visible
from salon.llm import FakeProvider, FakeReply
from salon.model import ChannelRef, Message, Participant
from salon.platforms.irc import IrcPlatform
from tests.conftest import ServeApp, bot_config

BOT = "salonbot"
THINKING = ("alice greets me; ", "a greeting back will do")


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


async def said_to_alice(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp, count: int, **config: Any
) -> list[str]:
    irc = {"server": "127.0.0.1", "port": ircd.port, "tls": False, "nick": BOT}
    app = BotApp(
        key="salon",
        config=bot_config(
            data_dir=str(tmp_path / "data"), platforms={"irc": {**irc, "channels": ["#salon"]}},
            **config,
        ),
        root=tmp_path,
        secrets=Secrets({}),
        provider=FakeProvider([FakeReply(("Hello, alice.",), thinking=THINKING)]),
    )  # fmt: skip
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, IrcPlatform)
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.wait_connected(), 15)
    alice = Human("alice", ircd.port)
    await alice.connect()
    try:
        await alice.join("#salon")
        await alice.say("#salon", f"{BOT}: hello")
        await alice.privmsgs_from(BOT, count)
        await app.agent.wait_idle()
        return await alice.privmsgs_from(BOT, count)  # all of them: nothing came after
    finally:
        await alice.close()


async def test_the_thinking_stays_out_of_the_channel_by_default(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    said = await said_to_alice(ircd, tmp_path, serve_app, 1)
    assert said == ["Hello, alice."]


async def test_a_spoiler_is_a_dot_message_no_bot_reads(
    ircd: IrcServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    thinking = {"enabled": True, "show": "spoiler"}
    said = await said_to_alice(ircd, tmp_path, serve_app, 2, thinking=thinking)
    assert said == ["Hello, alice.", ".Salon thought: alice greets me; a greeting back will do"]
    other = Participant("b", BOT, is_bot=True)
    line = Message("1", ChannelRef("irc", "#salon"), other, said[1], datetime.now(UTC))
    assert not is_visible(line, bot_config(name="Other").visibility)
