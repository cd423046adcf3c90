"""/activity on Discord: an ephemeral short-lived link for authorized roles only, that
signs its holder in to the real web server."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx2

from fakes.discord_server import DiscordServer
from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.platforms.discord import DiscordPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.conftest import ServeApp, bot_config
from tests.web.conftest import ACTIVITY_KEY, serving, write_fleet

GENERAL = "10"
MODS = "500"  # the fake guild's role "mods"


async def start(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp, **config: Any
) -> BotApp:
    cfg = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={"discord": {"token_env": "DISCORD_TOKEN"}},
        **config,
    )
    secrets = Secrets({"DISCORD_TOKEN": "token-123", "SALON_ACTIVITY_KEY": ACTIVITY_KEY})
    app = BotApp(key="salon", config=cfg, root=tmp_path, secrets=secrets, provider=FakeProvider())
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, DiscordPlatform)
    platform.guild_ready_timeout = 0.5
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.ready.wait(), 15)
    return app


async def test_an_authorized_member_gets_a_link_that_signs_in(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    root = write_fleet(tmp_path / "site")
    (tmp_path / "site" / "data").mkdir()
    store = SQLStore(sqlite_url(tmp_path / "site" / "data" / "salon.db"))
    await store.open()
    try:
        async with serving(root, store) as (_, url):
            web = {"public_url": url, "link_minutes": 5}
            await start(fake_discord, tmp_path, serve_app, web=web, authorized_roles=["mods"])
            alice = fake_discord.user("Alice")
            fake_discord.roles[alice.id] = [MODS]
            await fake_discord.command(GENERAL, alice, "activity")
            (answer,) = await fake_discord.wait_interaction_responses(1)
            assert answer["data"]["flags"] == 64  # ephemeral: only Alice sees it
            text = answer["data"]["content"]
            assert "5 minutes" in text
            assert ACTIVITY_KEY not in text
            link = re.search(r"(http://\S+/activity\?token=\S+)", text)
            assert link is not None
            async with httpx2.AsyncClient() as client:
                assert (await client.get(f"{url}/activity")).status_code == 401
                assert (await client.get(link[1])).status_code == 200
                assert (await client.get(f"{url}/activity")).status_code == 200
    finally:
        await store.close()


async def test_a_member_without_an_authorized_role_gets_no_link(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    web = {"public_url": "http://127.0.0.1:9"}
    await start(fake_discord, tmp_path, serve_app, web=web, authorized_roles=["mods"])
    await fake_discord.command(GENERAL, fake_discord.user("Bob"), "activity")
    (answer,) = await fake_discord.wait_interaction_responses(1)
    assert answer["data"]["flags"] == 64
    assert answer["data"]["content"] == (
        "Only members of the authorized roles can open the activity page."
    )
    assert "token=" not in answer["data"]["content"]


async def test_without_a_public_url_the_answer_says_what_to_set(
    fake_discord: DiscordServer, tmp_path: Path, serve_app: ServeApp
) -> None:
    await start(fake_discord, tmp_path, serve_app, authorized_roles=["mods"])
    alice = fake_discord.user("Alice")
    fake_discord.roles[alice.id] = [MODS]
    await fake_discord.command(GENERAL, alice, "activity")
    (answer,) = await fake_discord.wait_interaction_responses(1)
    assert "set web.public_url" in answer["data"]["content"]
