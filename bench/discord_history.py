"""history_requests_per_activation: REST history requests an activation costs on Discord.

The real discord.py against the loopback fake of Discord (``fakes``), a provider
that answers at once, 200 activations; before each, three people write, one earlier message
is edited and one deleted. The first activation fills the cache (a 450-message fetch is five
requests); the figure is the steady state after it.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import discord
import yarl

from bench.figures import Figure
from fakes.discord_server import DiscordServer
from salon.app import BotApp
from salon.config import BotConfig, Secrets
from salon.llm import FakeProvider

ACTIVATIONS = 200
CHANNEL = "10"
HISTORY = f"GET /channels/{CHANNEL}/messages"


def _config(data_dir: str) -> BotConfig:
    return BotConfig.model_validate(
        {
            "name": "Salon",
            "provider": "fake",
            "providers": {"fake": {"type": "openai", "model": "m"}},
            "data_dir": data_dir,
            "builtin_tools": False,
            "platforms": {"discord": {"token_env": "DISCORD_TOKEN"}},
        }
    )


async def _session(server: DiscordServer, tmp: str) -> tuple[int, int]:
    app = BotApp(
        key="bench",
        config=_config(tmp),
        root=Path(tmp),
        secrets=Secrets({"DISCORD_TOKEN": "token"}),
        provider=FakeProvider(default="noted"),
    )
    people = [server.user(n) for n in ("Alice", "Bob")]
    async with app:
        (platform,) = app.unattended_platforms()
        stop = asyncio.Event()
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.ready.wait(), 30)  # type: ignore[attr-defined]
        earlier: list[dict[str, object]] = []
        after_first = 0
        for i in range(ACTIVATIONS):
            for j in range(3):
                earlier.append(await server.post(CHANNEL, people[j % 2], f"chatter {i}.{j}"))
            if i > 0:
                await server.edit(earlier[-5], f"edited {i}")
                await server.delete(earlier.pop(-6))
            mention = f"<@{server.bot.id}> thoughts on {i}?"
            await server.post(CHANNEL, people[0], mention, mentions=[server.bot])
            await server.wait_bot_messages(CHANNEL, i + 1, within=30)
            if i == 0:
                after_first = server.calls[HISTORY]
        total = server.calls[HISTORY]
        stop.set()
        await serving
    return after_first, total - after_first


async def run() -> list[Figure]:
    server = DiscordServer()
    await server.start()
    saved = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = server.api
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(server.gateway)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            first, steady = await _session(server, tmp)
    finally:
        discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = saved
        await server.stop()
    return [
        Figure("history_requests_first_activation", first, "requests"),
        Figure(
            "history_requests_per_activation", steady / (ACTIVATIONS - 1), "requests", target=0.05
        ),
    ]
