"""``/generate`` on Discord: the comfyui integration against the ComfyUI fake, its progress
as one edited message, its image as an attachment."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fakes.discord_server import DiscordServer
from fakes.discord_wire import EPHEMERAL
from fakes.vendors.comfyui import ComfyUIFake, RunPlan
from fakes.vendors.images import tiny_png
from salon.llm import FakeProvider
from salon.platforms.discord import DiscordPlatform
from tests.platforms.conftest import GENERAL, Start

WORKFLOW = Path(__file__).parents[1] / "integrations" / "workflow.json"


@pytest.fixture
async def comfyui() -> AsyncIterator[ComfyUIFake]:
    async with ComfyUIFake() as fake:
        yield fake


async def _bot_with_comfyui(
    start_bot: Start, comfyui: ComfyUIFake, tmp_path: Path, **config: Any
) -> DiscordPlatform:
    shutil.copy(WORKFLOW, tmp_path / "workflow.json")
    integration = {"base_url": comfyui.base_url, "workflow": "workflow.json"}
    _app, platform = await start_bot(
        FakeProvider(),
        integrations={"comfyui": integration},
        discord={"progress_interval": 0.05},
        **config,
    )
    return platform


def _with(server: DiscordServer, text: str) -> list[dict[str, Any]]:
    return [m for m in server.channels[GENERAL] if text in m["content"]]


async def test_generate_shows_progress_in_one_message_and_posts_the_image(
    fake_discord: DiscordServer, start_bot: Start, comfyui: ComfyUIFake, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    comfyui.plan = RunPlan(gate=gate)
    await _bot_with_comfyui(
        start_bot, comfyui, tmp_path, tool_policies={"generate_image": {"policy": "allow"}}
    )
    assert "generate" in [c["name"] for c in fake_discord.commands]
    alice = fake_discord.user("Alice")
    await fake_discord.command(GENERAL, alice, "generate", prompt="a castle", seed=7)
    (ack,) = await fake_discord.wait_interaction_responses(1)
    assert ack["type"] == 4
    assert ack["data"]["flags"] & EPHEMERAL
    async with asyncio.timeout(10), fake_discord.sent:  # the run waits at its first step
        await fake_discord.sent.wait_for(lambda: bool(_with(fake_discord, "⏳ generate_image")))
    gate.set()
    async with asyncio.timeout(10), fake_discord.sent:
        await fake_discord.sent.wait_for(lambda: bool(_with(fake_discord, "(generate_image")))
    progress_notes = [m for m in _with(fake_discord, "generate_image: ") if m["content"][0] != "("]
    (progress,) = progress_notes  # one message, edited
    assert progress["content"].startswith("✅ generate_image: done in ")
    (shown,) = _with(fake_discord, "(generate_image")
    assert shown["content"] == "(generate_image: prompt: a castle, seed: 7)"
    (attachment,) = shown["attachments"]
    assert attachment["content_type"] == "image/png"
    assert fake_discord.files[attachment["id"]] == tiny_png(4, 4, 40)
    assert shown["embeds"][0]["image"]["url"] == attachment["url"]
    queued = next(r for r in comfyui.requests if r.path == "/prompt")
    assert queued.body["prompt"]["6"]["inputs"]["text"] == "a castle"
    assert queued.body["prompt"]["3"]["inputs"]["seed"] == 7
    original = await _original(fake_discord, "Done")
    assert original["content"] == "Done: the image is in the channel."


async def test_generate_says_why_when_comfyui_fails(
    fake_discord: DiscordServer, start_bot: Start, comfyui: ComfyUIFake, tmp_path: Path
) -> None:
    comfyui.plan = RunPlan(error={"node_type": "KSampler", "exception_message": "out of memory"})
    await _bot_with_comfyui(
        start_bot, comfyui, tmp_path, tool_policies={"generate_image": {"policy": "allow"}}
    )
    await fake_discord.command(GENERAL, fake_discord.user("Bob"), "generate", prompt="a castle")
    original = await _original(fake_discord, "Not generated")
    assert original["content"].startswith("Not generated: ")
    assert "out of memory" in original["content"]
    assert not any(m["attachments"] for m in fake_discord.channels[GENERAL])


async def test_generate_is_not_offered_without_comfyui(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    await start_bot(FakeProvider())
    assert "generate" not in [c["name"] for c in fake_discord.commands]


async def _original(server: DiscordServer, starting: str) -> dict[str, Any]:
    """The (ephemeral) answer to the command once it was edited to say how it went."""

    def edited() -> dict[str, Any] | None:
        return next(
            (m for m in server._ephemeral.values() if m["content"].startswith(starting)), None
        )

    async with asyncio.timeout(20), server.sent:
        await server.sent.wait_for(lambda: edited() is not None)
    found = edited()
    assert found is not None
    return found


async def test_generate_asks_who_used_it_under_the_ask_policy(
    fake_discord: DiscordServer, start_bot: Start, comfyui: ComfyUIFake, tmp_path: Path
) -> None:
    platform = await _bot_with_comfyui(start_bot, comfyui, tmp_path)  # policy: ask
    alice = fake_discord.user("Alice")
    await fake_discord.command(GENERAL, alice, "generate", prompt="a castle")
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert "wants to run generate_image (prompt: a castle)" in prompt["content"]
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, alice, "salon:cancel")
    original = await _original(fake_discord, "Not generated")
    assert original["content"] == "Not generated: the approval was refused or timed out."
    assert not [r for r in comfyui.requests if r.path == "/prompt"]
