"""A schedule firing in a guild channel answers with that guild's config: the channel it
was stored under is a bare key (``discord:10``), and the agent completes it from the
platform before resolving the config, so the guild's layer applies and a pinned ``.config``
may link the guild's own channels, as for a message asked there."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from fakes.discord_server import DiscordServer
from fakes.discord_wire import GUILD_ID
from salon.app import BotApp
from salon.config import ChannelConfigs, Secrets
from salon.llm import FakeProvider
from salon.model import ChannelRef, Participant, Schedule
from salon.platforms.discord import DiscordPlatform
from tests.conftest import ServeApp, bot_config
from tests.platforms.conftest import GENERAL, RANDOM, shown

GUILD_PROMPT = "GUILD-LAYER you speak for the test guild"
WARNING = "\u26a0\ufe0f"


async def guild_bot(
    fake: DiscordServer, tmp_path: Path, serve_app: ServeApp, provider: FakeProvider
) -> BotApp:
    """A bot on the fake Discord whose layer for the fake's guild (``guilds/1.yaml``) sets
    its own system prompt (the bot's own layer, which would win over it, sets none)."""
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={
            "discord": {
                "token_env": "DISCORD_TOKEN",
                "api_base_url": fake.api,
                "gateway_url": fake.gateway,
            }
        },
    )
    configs = ChannelConfigs(
        config,
        shared={},
        bot=config.model_dump(exclude_unset=True),
        guilds={GUILD_ID: {"system_prompt": GUILD_PROMPT}},
    )
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({"DISCORD_TOKEN": "token-123"}),
        provider=provider,
        channel_configs=configs,
    )
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, DiscordPlatform)
    platform.guild_ready_timeout = 0.5  # the fake sends its one guild at once
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.ready.wait(), 15)
    return app


async def fire_now(app: BotApp, fake: DiscordServer, channel: str, prompt: str) -> None:
    """A one-shot schedule due now in ``channel``, stored under its key as the tool does;
    returns once the bot answered there."""
    before = len([m for m in fake.channels[channel] if m["author"]["id"] == fake.bot.id])
    now = datetime.now(UTC)
    alice = fake.user("Alice")  # the fake guild's owner: reads every channel
    await app.store.schedules.create_schedule(
        Schedule(
            0,
            "salon",
            ChannelRef.from_key(f"discord:{channel}"),
            prompt,
            "UTC",
            at=now,
            created_by=Participant(alice.id, "Alice"),
            next_due=now,
        )
    )
    app.scheduler.changed()
    await fake.wait_bot_messages(channel, before + 1)


async def test_a_scheduled_answer_takes_the_guilds_config_layer(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    provider = FakeProvider(["Watering now."])
    app = await guild_bot(fake_discord, tmp_path, serve_app, provider)
    await fire_now(app, fake_discord, GENERAL, "water the plants")
    (request,) = provider.requests
    assert GUILD_PROMPT in request.system
    assert "water the plants" in shown(provider)


async def test_a_pinned_config_linking_the_guilds_channel_applies_to_a_schedule(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    alice = fake_discord.user("Alice")
    await fake_discord.post(RANDOM, alice, "SAME-GUILD random talk")
    pin = await fake_discord.post(GENERAL, alice, f".config\n---\nlinks:\n  - channel: {RANDOM}")
    await fake_discord.pin(pin)
    provider = FakeProvider(["Summary."])
    app = await guild_bot(fake_discord, tmp_path, serve_app, provider)
    await fire_now(app, fake_discord, GENERAL, "sum up the other channel")
    assert "reactions" not in pin  # not flagged as another server's channel
    (request,) = provider.requests
    assert "SAME-GUILD random talk" in request.system + shown(provider)


async def test_an_event_from_outside_takes_the_guilds_config_layer(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    provider = FakeProvider(["Congratulations."])
    app = await guild_bot(fake_discord, tmp_path, serve_app, provider)
    await app.store.inbox.enqueue_event("salon", f"discord:{GENERAL}", "deploy 42 done", "CI")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    (request,) = provider.requests
    assert GUILD_PROMPT in request.system
    assert shown(provider).endswith("CI: deploy 42 done")
