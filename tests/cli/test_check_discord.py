"""``salon check --live`` for a Discord bot, against the fake Discord: who the token is,
whether the application has the Message Content intent, and the invite link."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer
from salon.config import Secrets
from salon.platforms.discord import PERMISSIONS
from salon.platforms.discord.check import live_check
from tests.conftest import bot_config

TOKEN = "discord-token-Hq7yP2wX"
PORTAL = (
    "Discord refused the Message Content intent: enable it in the Developer Portal "
    "under Bot > Privileged Gateway Intents"
)


@pytest.fixture
async def fake_discord() -> AsyncIterator[DiscordServer]:
    server = DiscordServer()
    await server.start()
    yield server
    await server.stop()


def invite(server: DiscordServer) -> str:
    return (
        f"https://discord.com/oauth2/authorize?client_id={server.bot.id}"
        f"&scope=bot+applications.commands&permissions={PERMISSIONS.value}"
    )


async def check(server: DiscordServer) -> tuple[list[str], bool]:
    config = bot_config(platforms={"discord": {"api_base_url": server.api}})
    return await live_check(config, Secrets({"DISCORD_TOKEN": TOKEN}))


async def test_a_good_token_says_who_it_is_the_intent_and_the_invite_link(
    fake_discord: DiscordServer,
) -> None:
    lines, ok = await check(fake_discord)
    assert ok
    assert (
        lines[0] == "live: discord: the token is the bot Salon (id 100), application Salon (id 100)"
    )
    assert lines[1] == "live: discord: the Message Content intent is on"
    assert lines[2].startswith(
        f"live: discord: invite it with {invite(fake_discord)} (it asks for "
    )
    assert lines[2].endswith(
        "(it asks for Add Reactions, View Channels, Send Messages, Manage Messages, Embed "
        "Links, Attach Files, Read Message History, Manage Webhooks, Use Application Commands)"
    )
    assert len(lines) == 3
    assert fake_discord.log == ["GET /users/@me", "GET /oauth2/applications/@me"]


async def test_an_application_without_the_intent_is_told_where_the_switch_is(
    fake_discord: DiscordServer,
) -> None:
    fake_discord.message_content_intent = False
    lines, ok = await check(fake_discord)
    assert not ok
    assert lines[1] == f"live: discord: {PORTAL} (the bot cannot connect without it)"
    assert lines[2].startswith(f"live: discord: invite it with {invite(fake_discord)}")


async def test_a_refused_token_is_one_line(fake_discord: DiscordServer) -> None:
    fake_discord.fail_next("GET", "/users/@me", status=401)
    lines, ok = await check(fake_discord)
    assert not ok
    assert lines == [
        "live: discord: Discord refused the token in DISCORD_TOKEN (the Developer Portal's "
        "Bot page makes a new one: Reset Token)"
    ]


async def test_salon_check_live_prints_the_discord_lines(
    fake_discord: DiscordServer, llm_server: LLMServer, tmp_path: Path
) -> None:
    """The command itself: the Discord lines come after the provider's; an application
    without the intent makes it exit 1; the token is never printed."""
    root = tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    (root / "shared.yaml").write_text(
        f"providers:\n  p: {{type: openai, base_url: '{llm_server.base_url}/v1', model: m, "
        "api_key_env: P_KEY, retries: 0}\nprovider: p\n"
    )
    (root / "bots" / "salon.yaml").write_text(
        f"platforms:\n  discord:\n    api_base_url: '{fake_discord.api}'\n"
    )
    fake_discord.message_content_intent = False
    llm_server.queue("ok")
    env = {**os.environ, "P_KEY": "k", "DISCORD_TOKEN": TOKEN}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "check",
        str(root),
        "--live",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 1, err.decode()
    lines = [line for line in out.decode().splitlines() if line.startswith("live: discord:")]
    assert lines[0].startswith("live: discord: the token is the bot Salon (id 100)")
    assert lines[1] == f"live: discord: {PORTAL} (the bot cannot connect without it)"
    assert lines[2].startswith(f"live: discord: invite it with {invite(fake_discord)}")
    assert TOKEN not in out.decode() + err.decode()
