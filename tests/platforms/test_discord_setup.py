"""Setting a Discord bot up: what Discord does when the application lacks the Message
Content intent (it closes the gateway with 4014 Disallowed intent(s)), and what the
operator then reads."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from fakes.discord_server import DiscordServer
from salon.app import BotApp
from salon.config import Secrets
from salon.errors import PlatformError
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
        with pytest.raises(PlatformError) as failed:
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
