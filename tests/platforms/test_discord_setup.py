"""Setting a Discord bot up: what Discord does when the application lacks the Message
Content intent (it closes the gateway with 4014 Disallowed intent(s)), and what the
operator then reads."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import pytest

from fakes.discord_server import DiscordServer
from salon.app import BotApp
from salon.config import Secrets
from salon.errors import PlatformRefused
from salon.llm import FakeProvider
from salon.platforms.discord import DiscordPlatform
from tests.conftest import bot_config
from tests.platforms.conftest import Start

PORTAL = (
    "Discord refused the Message Content intent: enable it in the Developer Portal "
    "under Bot > Privileged Gateway Intents"
)


def discord_app(server: DiscordServer, tmp_path: Path) -> tuple[BotApp, DiscordPlatform]:
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={
            "discord": {
                "token_env": "DISCORD_TOKEN",
                "api_base_url": server.api,
                "gateway_url": server.gateway,
            }
        },
    )
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=Secrets({"DISCORD_TOKEN": "token-123"}),
        provider=FakeProvider(),
    )
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, DiscordPlatform)
    return app, platform


async def test_a_start_without_the_message_content_intent_fails_naming_the_portal_switch(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    """Discord closes the gateway with 4014 after IDENTIFY: the start fails with one line
    naming the switch, after that one IDENTIFY (no retry)."""
    fake_discord.message_content_intent = False
    app, platform = discord_app(fake_discord, tmp_path)
    async with app:
        with pytest.raises(PlatformRefused) as failed:
            await asyncio.wait_for(app.serve(asyncio.Event(), [platform]), 15)
    assert str(failed.value) == PORTAL
    assert fake_discord.identifies == 1
    assert not fake_discord.identified.is_set()  # never READY


async def test_the_intent_turned_off_while_running_ends_the_connection_once(
    fake_discord: DiscordServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """A new session asked for after the switch went off gets 4014 too: the connection
    ends with one error line, and no new client hammers Discord with IDENTIFYs."""
    _app, platform = await start_bot(FakeProvider())
    fake_discord.message_content_intent = False
    fake_discord.invalidate_sessions()  # the RESUME is refused: discord.py identifies anew
    await fake_discord.drop_connections(4000)
    await asyncio.wait_for(platform.given_up.wait(), 15)
    assert fake_discord.identifies == 2
    assert not platform.connected
    assert platform.connection.last_error == PORTAL
    said = [r for r in caplog.records if "Privileged Gateway Intents" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in said] == [(logging.ERROR, None)]


async def test_the_invite_link_with_its_permissions_is_logged_at_start(
    fake_discord: DiscordServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    from salon.platforms.discord import PERMISSIONS

    caplog.set_level(logging.INFO, logger="salon.platforms.discord")
    await start_bot(FakeProvider())
    text = caplog.text
    assert f"client_id=100&scope=bot+applications.commands&permissions={PERMISSIONS.value}" in text
    for needed in (
        "send_messages",
        "read_message_history",
        "attach_files",
        "embed_links",
        "use_application_commands",
        "manage_messages",
        "manage_webhooks",
        "add_reactions",
    ):
        assert getattr(PERMISSIONS, needed)


async def test_salon_run_does_not_restart_a_bot_discord_refused(
    fake_discord: DiscordServer, tmp_path: Path
) -> None:
    """``salon run``: the bot's process ends with the line naming the switch, and its
    supervisor leaves it stopped: a process restarted every minute would IDENTIFY past
    Discord's 1000 a day (and Discord then resets the token)."""
    fake_discord.message_content_intent = False
    root = tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    (root / "shared.yaml").write_text(
        "providers:\n  p: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: m, "
        "api_key_env: P_KEY}\nprovider: p\nrestart_backoff_initial: 0.05\n"
    )
    (root / "bots" / "salon.yaml").write_text(
        f"platforms:\n  discord:\n    api_base_url: '{fake_discord.api}'\n"
        f"    gateway_url: '{fake_discord.gateway}'\n"
    )
    env = {**os.environ, "P_KEY": "k", "DISCORD_TOKEN": "token-123"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "salon", "run", str(root), stderr=PIPE, env=env
    )
    assert proc.stderr is not None
    seen: list[str] = []
    await read_until(proc.stderr, "Privileged Gateway Intents", seen)
    found = await read_until(proc.stderr, r"bot salon exited with code (\d+)(.*)", seen)
    assert "not restarted" in found[2], seen
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(15):
        rest = await proc.stderr.read()
        code = await proc.wait()
    assert code == 0, [*seen, rest.decode()]
    assert fake_discord.identifies == 1
    (said,) = [line for line in seen if "Privileged Gateway Intents" in line]
    assert PORTAL in said


async def read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> re.Match[str]:
    async with asyncio.timeout(30):
        while True:
            raw = await stream.readline()
            assert raw, f"stream ended before {pattern!r}; saw: {seen}"
            seen.append(raw.decode())
            if found := re.search(pattern, seen[-1]):
                return found
