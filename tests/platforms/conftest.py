"""Fixtures for the platform tests: the fake Discord and a bot started against it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import discord
import pytest
import yarl

from fakes.discord_server import DiscordServer, FakeUser
from fakes.llm_server import LLMServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider, Provider
from salon.llm.factory import build_provider
from salon.platforms.discord import DiscordPlatform
from tests.conftest import ServeApp, bot_config


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DiscordServer]:
    """The fake Discord. Bots reach it through ``api_base_url`` and ``gateway_url``; the
    patches serve tests that drive discord.py's client directly, and put discord.py's
    process-wide API base back afterwards. A test fails when the bot notified @everyone,
    @here or a role it did not allow (``pings_allowed_everyone``, ``pings_allowed_roles``)."""
    server = DiscordServer()
    await server.start()
    monkeypatch.setattr(discord.http.Route, "BASE", server.api)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway)
    )
    yield server
    unexpected = server.unexpected_pings()  # every test: no @everyone, @here or role ping
    await server.stop()
    assert not unexpected, f"the bot notified what it may not: {unexpected}"


Start = Callable[..., Any]


@pytest.fixture
def start_bot(fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp) -> Start:
    async def start(
        provider: FakeProvider,
        extra_servers: Any = (),
        *,
        key: str = "salon",
        token: str = "token-123",
        secrets: dict[str, str] | None = None,
        **config: Any,
    ) -> tuple[BotApp, DiscordPlatform]:
        """A bot on the fake Discord; ``key`` and ``token`` start a second, different bot;
        ``secrets``: more of its environment."""
        discord_settings = config.pop("discord", {})
        cfg = bot_config(
            data_dir=str(tmp_path / f"data-{key}"),
            platforms={
                "discord": {
                    "token_env": "DISCORD_TOKEN",
                    "api_base_url": fake_discord.api,
                    "gateway_url": fake_discord.gateway,
                    **discord_settings,
                }
            },
            **config,
        )
        app = BotApp(
            key=key,
            config=cfg,
            root=tmp_path,
            secrets=Secrets({"DISCORD_TOKEN": token, **(secrets or {})}),
            provider=provider,
            extra_servers=extra_servers,
        )
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, DiscordPlatform)
        platform.guild_ready_timeout = 0.5  # the fake sends its one guild at once
        await serve_app(app, [platform])
        await asyncio.wait_for(platform.ready.wait(), 15)
        return app, platform

    return start


GENERAL, RANDOM = "10", "11"


def shown(provider: FakeProvider, index: int = -1) -> str:
    """The text of every message of one request, a line each."""
    return "\n".join(m.plain_text for m in provider.requests[index].messages)


async def ask(server: DiscordServer, channel: str, author: FakeUser, text: str) -> dict[str, Any]:
    """``author`` mentions the bot: ``<@bot> text``."""
    return await server.post(channel, author, f"<@{server.bot.id}> {text}", mentions=[server.bot])


def real_provider(llm: LLMServer, vendor: str) -> tuple[Provider, dict[str, Any]]:
    """A provider of the real ``vendor`` SDK talking to the loopback LLM server, and the
    ``providers`` config that names it."""
    base = llm.base_url + ("/v1" if vendor == "openai" else "")
    providers = {
        "test": {
            "type": vendor,
            "model": "m",
            "base_url": base,
            "retries": 0,
            "backoff_initial": 0,
            "api_key_env": "TEST_KEY",
        }
    }
    config = bot_config(providers=providers)
    return build_provider(config, Secrets({"TEST_KEY": "k-test"})), providers
