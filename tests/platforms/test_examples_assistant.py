"""The personal assistant (``examples/personal-assistant``, seed 002) on the fakes: the real
discord.py against the fake Discord, the OpenAI SDK against the loopback LLM server as
OpenRouter, the test MCP server over stdio, and the web server's trigger endpoint."""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer, Scripted
from salon.app import BotApp
from salon.config import load_config_dir
from salon.model import ToolSpec
from salon.platforms.discord import DiscordPlatform
from salon.sockets import bind
from salon.tools.policy import decide
from salon.web.app import build_app
from salon.web.server import WebServer
from tests.conftest import ServeApp
from tests.platforms.conftest import GENERAL, RANDOM, ask
from tests.platforms.test_examples import EXAMPLES, copy_example, serve_example

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "personal-assistant"
SECRETS = {"DISCORD_TOKEN": "token-123", "OPENROUTER_API_KEY": "or-k3y-test"}
TRIGGER_TOKEN = "trg-7kQ2mVx9"
# The filesystem MCP server's tools (@modelcontextprotocol/server-filesystem), by whether
# they can write.
READS = [
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
]
WRITES = ["write_file", "edit_file", "create_directory", "move_file"]


def _on_fakes(llm: LLMServer) -> dict[str, Any]:
    def edit(data: dict[str, Any]) -> None:
        data["providers"]["openrouter"]["base_url"] = llm.base_url + "/v1"
        data["providers"]["openrouter"]["retries"] = 0
        notes = data["mcp_servers"]["notes"]  # the test server instead of npx, same rules
        notes.update(command=sys.executable, args=["-m", "fakes.mcp_server"], cwd=str(REPO))

    return {"bots/assistant.yaml": edit}


@pytest.fixture
async def assistant(
    fake_discord: DiscordServer, llm_server: LLMServer, serve_app: ServeApp, tmp_path: Path
) -> BotApp:
    root = copy_example(EXAMPLE, tmp_path, _on_fakes(llm_server))
    return await serve_example(root, "assistant", serve_app, SECRETS)


def _bot_posts(server: DiscordServer, channel: str) -> list[dict[str, Any]]:
    return [m for m in server.channels[channel] if m["author"]["id"] == server.bot.id]


async def test_a_monitored_channel_is_read_without_a_mention_and_answered_by_paragraph(
    fake_discord: DiscordServer, llm_server: LLMServer, assistant: BotApp
) -> None:
    llm_server.queue("Milk and eggs are on the list.\n\nThe bin goes out on Tuesday.")
    alice = fake_discord.user("Alice")
    await fake_discord.command(RANDOM, alice, "monitor")
    await fake_discord.wait_interaction_responses(1)
    await fake_discord.post(RANDOM, alice, "what's left for this week?")
    first, second = await fake_discord.wait_bot_messages(RANDOM, 2)
    assert first["content"] == "Milk and eggs are on the list."
    assert second["content"] == "The bin goes out on Tuesday."
    (request,) = llm_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "anthropic/claude-sonnet-4.5"
    assert request.headers["authorization"] == "Bearer or-k3y-test"
    assert request.headers["x-title"] == "Salon personal assistant"


async def test_a_writing_mcp_tool_waits_for_the_approve_button(
    fake_discord: DiscordServer, llm_server: LLMServer, assistant: BotApp
) -> None:
    llm_server.queue(
        Scripted(tool_calls=[("call_1", "work", {"seconds": 0})]), "Saved to your notes."
    )
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "save the shopping list")
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert "wants to run work" in prompt["content"]
    buttons = {
        c["label"]: c["custom_id"] for row in prompt["components"] for c in row["components"]
    }
    assert sorted(buttons) == ["Approve", "Cancel"]
    assert len(llm_server.requests) == 1  # nothing runs before the answer
    platform = assistant.platforms["discord"]
    assert isinstance(platform, DiscordPlatform)
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, alice, buttons["Approve"])

    def answered() -> bool:
        return any(
            m["content"] == "Saved to your notes." for m in _bot_posts(fake_discord, GENERAL)
        )

    async with asyncio.timeout(15), fake_discord.sent:
        await fake_discord.sent.wait_for(answered)
    assert "worked 0" in str(llm_server.requests[1].body["messages"])
    (shown,) = fake_discord.webhook_posts  # the call and its result, through the webhook
    assert shown["username"] == "Assistant"
    assert shown["content"].startswith(".Assistant>[work]:")


def test_every_tool_of_the_notes_server_that_can_write_asks_first() -> None:
    """Whatever the server's annotations say: the server's policy asks, and only the
    reading tools are allowed by name."""
    config = load_config_dir(EXAMPLES / EXAMPLE).bots["assistant"]

    def policy(name: str, read_only: bool) -> str:
        spec = ToolSpec(name, "notes", name, "", {}, read_only=read_only)
        return decide(spec, {}, config)

    assert {name: policy(name, read_only=True) for name in WRITES} == dict.fromkeys(WRITES, "ask")
    assert {name: policy(name, read_only=False) for name in READS} == dict.fromkeys(READS, "allow")
    assert policy("a_tool_added_later", read_only=True) == "ask"


async def test_a_reminder_is_set_without_a_button(
    fake_discord: DiscordServer, llm_server: LLMServer, assistant: BotApp
) -> None:
    when = {"when": "0 9 * * 1", "prompt": "Remind Alice to water the plants."}
    llm_server.queue(
        Scripted(tool_calls=[("call_1", "schedule_create", when)]), "Every Monday at nine."
    )
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "remind me every monday")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "Every Monday at nine."
    assert not answer["components"]
    (schedule,) = await assistant.store.schedules.find("assistant")
    assert schedule.prompt == "Remind Alice to water the plants."
    assert schedule.timezone == "Europe/London"


async def test_events_are_answered_one_at_a_time(
    fake_discord: DiscordServer, llm_server: LLMServer, assistant: BotApp
) -> None:
    """``max_concurrent_activations: 1``: while one answer is being written, a question
    in another channel waits; it is asked of the model once the first answer is out."""
    gate = asyncio.Event()
    llm_server.queue(Scripted(text="First.", pause_before_chunk=0, resume=gate), "Second.")
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    await ask(fake_discord, GENERAL, alice, "one")
    await asyncio.wait_for(llm_server.received.wait(), 15)
    llm_server.received.clear()
    await ask(fake_discord, RANDOM, bob, "two")
    with pytest.raises(TimeoutError):  # with answers side by side it would come at once
        await asyncio.wait_for(llm_server.received.wait(), 2)
    gate.set()
    (second,) = await fake_discord.wait_bot_messages(RANDOM, 1)
    assert second["content"] == "Second."
    assert [m["content"] for m in _bot_posts(fake_discord, GENERAL)] == ["First."]


def _readme_curl() -> tuple[str, dict[str, str], str]:
    """The path, headers and body of the README's ``curl`` command."""
    text = (EXAMPLES / EXAMPLE / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"^curl .*?(?<!\\)\n", text, flags=re.S | re.M)
    words = shlex.split(command.replace("\\\n", " "))
    url = words[words.index("-X") + 2]
    headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
    return url, headers, words[words.index("-d") + 1]


@pytest.fixture
async def web(assistant: BotApp) -> AsyncIterator[str]:
    configs = load_config_dir(assistant.root)
    app = build_app(
        store=assistant.store,
        configs=configs,
        settings=configs.bots["assistant"].web,
        environ={"SALON_TRIGGER_TOKEN": TRIGGER_TOKEN},
    )
    server = WebServer(app, bind("127.0.0.1", 0))
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 10)
        yield server.url
    finally:
        server.stop()
        await asyncio.wait_for(task, 10)
        server.close()


async def test_an_event_posted_as_the_readme_shows_is_answered_in_its_channel(
    fake_discord: DiscordServer, llm_server: LLMServer, web: str
) -> None:
    llm_server.queue("The backup disk is full: I can clear the old snapshots.")
    url, headers, body = _readme_curl()
    assert url.startswith("http://127.0.0.1:8787/bots/assistant/events")
    headers["Authorization"] = headers["Authorization"].replace(
        "$SALON_TRIGGER_TOKEN", TRIGGER_TOKEN
    )
    body = body.replace("123456789012345678", GENERAL)  # the README's channel: ours
    async with httpx2.AsyncClient(timeout=10) as client:
        response = await client.post(
            url.replace("http://127.0.0.1:8787", web), headers=headers, content=body
        )
    assert response.status_code == 202, response.text
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "The backup disk is full: I can clear the old snapshots."
    asked = str(llm_server.requests[0].body["messages"])
    assert "The nightly backup failed on disk full." in asked
    assert "backup" in asked


async def test_a_tag_outside_a_monitored_channel_reads_the_last_hour_only(
    fake_discord: DiscordServer, llm_server: LLMServer, assistant: BotApp
) -> None:
    """002: "100 messages or 1 hour, whichever is smaller", for a tag too."""
    llm_server.queue("Tuesday.")
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    fake_discord.clock_offset = -2 * 3600.0  # two hours ago
    await fake_discord.post(GENERAL, bob, "PLUGH the bins went out on Monday")
    fake_discord.clock_offset = -1800.0  # half an hour ago
    await fake_discord.post(GENERAL, bob, "the recycling goes on Tuesday now")
    fake_discord.clock_offset = 0.0
    await ask(fake_discord, GENERAL, alice, "when does the recycling go out?")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "Tuesday."
    asked = str(llm_server.requests[0].body["messages"])
    assert "the recycling goes on Tuesday now" in asked
    assert "PLUGH" not in asked
