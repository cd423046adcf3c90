"""Discord's gateway delivers events at least once: a MESSAGE_CREATE may come again (around
a RESUME), and a message answered once is never answered again, also by the next process
of the bot."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fakes.discord_server import DiscordServer
from salon.app import CONFIGURED, BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.llm.base import Provider
from salon.platforms.discord import DiscordPlatform
from tests.conftest import bot_config
from tests.platforms.conftest import GENERAL, RANDOM, Start, ask


def said(server: DiscordServer, channel: str) -> list[str]:
    return [m["content"] for m in server.channels[channel] if m["author"]["id"] == server.bot.id]


async def test_a_message_delivered_twice_is_answered_once(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["Answer one.", "Answer two.", "Elsewhere."])
    app, _ = await start_bot(provider)
    alice = fake_discord.user("Alice")
    question = await ask(fake_discord, GENERAL, alice, "hello?")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await fake_discord.redeliver(question)
    # Events come in order: once a later message elsewhere is answered, the repeat was seen.
    await ask(fake_discord, RANDOM, alice, "and here?")
    await fake_discord.wait_bot_messages(RANDOM, 1)
    await app.agent.wait_idle()
    assert said(fake_discord, GENERAL) == ["Answer one."]
    assert said(fake_discord, RANDOM) == ["Answer two."]


def make_app(fake: DiscordServer, tmp_path: Path, provider: Provider, **settings: Any) -> BotApp:
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={
            "discord": {
                "token_env": "DISCORD_TOKEN",
                "api_base_url": fake.api,
                "gateway_url": fake.gateway,
            }
        },
        **settings,
    )
    return BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({"DISCORD_TOKEN": "token-123"}),
        provider=provider,
    )


async def serve_until(app: BotApp, stop: asyncio.Event, grace: float | None = CONFIGURED) -> Any:
    """Serve the app's Discord until ``stop``; answers get ``grace`` seconds then."""
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, DiscordPlatform)
    platform.guild_ready_timeout = 0.5
    serving = asyncio.create_task(app.serve(stop, [platform], grace=grace))
    await asyncio.wait_for(platform.ready.wait(), 15)
    return serving


async def test_a_message_answered_before_a_restart_is_not_answered_after_it(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    alice = fake_discord.user("Alice")
    first = make_app(fake_discord, tmp_path, FakeProvider(["Answer one."]))
    stop = asyncio.Event()
    async with first:
        serving = await serve_until(first, stop)
        question = await ask(fake_discord, GENERAL, alice, "hello?")
        await fake_discord.wait_bot_messages(GENERAL, 1)
        await first.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 15)

    provider = FakeProvider(["Answer two.", "Elsewhere."])
    again = make_app(fake_discord, tmp_path, provider)
    stop = asyncio.Event()
    async with again:
        serving = await serve_until(again, stop)
        await fake_discord.redeliver(question)
        await ask(fake_discord, RANDOM, alice, "and here?")
        await fake_discord.wait_bot_messages(RANDOM, 1)
        await again.agent.wait_idle()
        stop.set()
        await asyncio.wait_for(serving, 15)
    assert said(fake_discord, GENERAL) == ["Answer one."]
    assert said(fake_discord, RANDOM) == ["Answer two."]
    assert len(provider.requests) == 1
