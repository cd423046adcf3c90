"""The sprite orchestrator's process-isolated variant (``examples/sprite-orchestrator/
isolated``): PixelLab and GreyNoise each run as ``salon tools serve --only NAME``, a child
MCP server over stdio, as seed 000 ran them; the sprite reaches Discord the same way."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import yaml

import salon
from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer
from tests.conftest import ServeApp
from tests.platforms.conftest import GENERAL, ask
from tests.platforms.test_examples import Vendors, _start, vendors

__all__ = ["vendors"]  # the fixture of test_examples

SOURCE = str(Path(salon.__file__).resolve().parents[1])  # this Salon, for the child processes


def _isolated_on_fakes(llm: LLMServer, vendors: Vendors, root: Path) -> Any:
    weather, _, pixel = vendors

    def patch(data: dict[str, Any]) -> None:
        data["providers"]["grok"]["base_url"] = llm.base_url + "/v1"
        data["providers"]["grok"]["retries"] = 0
        data["integrations"]["weather"]["base_url"] = weather.base_url
        for name, server in data["mcp_servers"].items():
            # the same command, with this interpreter and source, and the copy's path
            assert server["args"][:3] == ["tools", "serve", "tools"]
            server["command"] = sys.executable
            server["args"] = ["-m", "salon", "tools", "serve", str(root / "tools"), "--only", name]
            server["env"] = {"PYTHONPATH": SOURCE}
        settings = root / "tools" / "bots" / "vendors.yaml"
        vendors_config = yaml.safe_load(settings.read_text(encoding="utf-8"))
        pixellab = vendors_config["integrations"]["pixellab"]
        pixellab |= {"base_url": pixel.base_url, "poll_interval": 0.01}
        vendors_config["integrations"]["greynoise"]["base_url"] = llm.base_url  # never asked
        settings.write_text(yaml.safe_dump(vendors_config), encoding="utf-8")

    return patch


async def test_pixellab_in_its_own_process_posts_the_sprite(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    plan = {"use_tool": True, "tool": "generate_sprite", "args": {"description": "a knight"}}
    llm_server.queue(json.dumps(plan), "Behold, the knight of four winds.")
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    root = tmp_path / "sprite-orchestrator" / "isolated"
    patch = _isolated_on_fakes(llm_server, vendors, root)
    app, _ = await _start(
        "sprite-orchestrator/isolated",
        "sprite",
        tmp_path,
        serve_app=serve_app,
        secrets=secrets,
        patch=patch,
    )
    await asyncio.wait_for(app.hub.wait_connections("pixellab", 1), 30)
    sprite_tool = app.hub.get("generate_sprite")
    assert sprite_tool is not None
    assert sprite_tool.server == "pixellab"
    assert set(app.config.mcp_servers) == {"pixellab", "greynoise"}  # child processes...
    assert set(app.config.integrations.configured()) == {"weather"}  # ...not in-process sets
    assert app.hub.get("greynoise_ip_address") is not None
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "make me a knight sprite")
    said = "Behold, the knight of four winds."

    def answered() -> bool:
        return any(m["content"] == said for m in fake_discord.channels[GENERAL])

    async with asyncio.timeout(30), fake_discord.sent:
        await fake_discord.sent.wait_for(answered)
    sprite = next(m for m in fake_discord.channels[GENERAL] if m["attachments"])
    assert [e["title"] for e in sprite["embeds"]] == ["south", "west", "east", "north"]
    assert [e["url"] for e in sprite["embeds"]] == [
        f"{vendors[2].base_url}/files/char-1-{d}.png" for d in ("south", "west", "east", "north")
    ]
    created = vendors[2].seen("/v2/create-character")[0]
    assert created.headers["authorization"] == "Bearer px-test-key"  # through env_from
