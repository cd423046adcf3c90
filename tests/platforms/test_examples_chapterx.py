"""ChapterX (``examples/chapterx``, seed 003) on the fakes: two bots, each its own
discord.py client on the fake Discord, both on the Anthropic SDK against the loopback LLM
server; Muse in prefill mode, Echo in chat mode, in a server whose id has layers."""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from fakes.discord_server import DiscordServer, FakeUser
from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.app import BotApp
from tests.conftest import ServeApp
from tests.platforms.test_examples import EXAMPLES, copy_example, serve_example

GUILD, GENERAL, LORE = "900000000000000001", "900000000000000010", "900000000000000011"
MUSE_MODEL, ECHO_MODEL = "claude-opus-4-5", "claude-sonnet-5-5"
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "MUSE_DISCORD_TOKEN": "token-muse",
    "ECHO_DISCORD_TOKEN": "token-echo",
}
LOOP = "\U0001f501"
CALL = (
    '<function_calls>\n<invoke name="get_current_time">\n'
    '<parameter name="timezone">UTC</parameter>\n</invoke>\n'
)


class Models:
    """Each bot's model answers from its own script (the bots run side by side)."""

    def __init__(self, llm: LLMServer) -> None:
        self.replies: dict[str, deque[Scripted]] = {MUSE_MODEL: deque(), ECHO_MODEL: deque()}
        self.defaults = {MUSE_MODEL: "…", ECHO_MODEL: "…"}
        llm.respond = self._respond
        self.llm = llm

    def _respond(self, request: Recorded) -> Scripted:
        model = request.body["model"]
        queued = self.replies[model]
        return queued.popleft() if queued else Scripted(text=self.defaults[model])

    def requests(self, model: str) -> list[dict[str, Any]]:
        return [r.body for r in self.llm.requests if r.body["model"] == model]


@pytest.fixture
def bots(fake_discord: DiscordServer) -> tuple[FakeUser, FakeUser]:
    """The two applications' bot users, and the server that has the example's layers."""
    muse, echo = FakeUser("300", "Muse", bot=True), FakeUser("400", "Echo", bot=True)
    for token, user in (("token-muse", muse), ("token-echo", echo)):
        fake_discord.tokens[token] = user
        fake_discord.people.append(user)
    fake_discord.add_guild(GUILD, "Lighthouse", {GENERAL: "general", LORE: "lore"})
    return muse, echo


async def _start_both(
    llm: LLMServer, serve_app: ServeApp, tmp_path: Path
) -> tuple[BotApp, BotApp, Models]:
    def on_fakes(data: dict[str, Any]) -> None:
        data["providers"]["claude"].update(base_url=llm.base_url, retries=0)

    root = copy_example("chapterx", tmp_path, {"shared.yaml": on_fakes})
    models = Models(llm)
    muse = await serve_example(root, "muse", serve_app, SECRETS)
    echo = await serve_example(root, "echo", serve_app, SECRETS)
    return muse, echo, models


async def _wait(server: DiscordServer, check: Any, within: float = 15) -> None:
    async with asyncio.timeout(within), server.sent:
        await server.sent.wait_for(check)


def _said(server: DiscordServer, channel: str, author: FakeUser) -> list[str]:
    return [m["content"] for m in server.channels[channel] if m["author"]["id"] == author.id]


def _text(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


async def test_muse_continues_the_transcript_with_its_layers_and_shows_tools_by_webhook(
    fake_discord: DiscordServer,
    bots: tuple[FakeUser, FakeUser],
    llm_server: LLMServer,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    muse_user, _ = bots
    _, _, models = await _start_both(llm_server, serve_app, tmp_path)
    models.replies[MUSE_MODEL].extend(
        [Scripted(text=CALL), Scripted(text=" The lamp was lit at dusk, as every night.")]
    )
    alice = fake_discord.user("Alice")
    await fake_discord.post(LORE, alice, "The dragon sleeps under the lighthouse.")
    await fake_discord.post(
        GENERAL, alice, f"<@{muse_user.id}> tell us a story", mentions=[muse_user]
    )
    await _wait(fake_discord, lambda: len(_said(fake_discord, GENERAL, muse_user)) == 1)
    assert _said(fake_discord, GENERAL, muse_user) == ["The lamp was lit at dusk, as every night."]
    first, _ = models.requests(MUSE_MODEL)
    assert "The system is in CLI simulation mode." in _text(first["system"])
    opening = first["messages"][0]
    assert opening["role"] == "user"
    tools, command = opening["content"]  # the ephemeral tool list, then the seed's command
    assert tools["text"].startswith("You can use tools.")
    assert command == {"type": "text", "text": "<cmd>cat untitled.txt</cmd>"}
    transcript = _text(first["messages"][1:])
    assert first["messages"][-1]["role"] == "assistant"
    assert transcript.rstrip('"}]').endswith("Muse:")
    assert "In this server I keep the tales of the lighthouse." in transcript  # bot-guild layer
    assert "I keep the server's stories" not in transcript  # the bot layer's, replaced
    assert "The dragon sleeps under the lighthouse." in transcript  # #lore, linked
    assert "\nAlice:" in first["stop_sequences"]
    assert first["max_tokens"] == 600  # the guild layer
    (shown,) = fake_discord.webhook_posts  # the tool call and its result, through a webhook
    assert shown["username"] == "Muse"
    assert shown["content"].startswith(".Muse>[get_current_time]: timezone: UTC\n.Muse<[")


async def test_echo_answers_in_chat_turns_and_a_pinned_config_changes_it_there(
    fake_discord: DiscordServer,
    bots: tuple[FakeUser, FakeUser],
    llm_server: LLMServer,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    muse, echo = bots
    _, _, models = await _start_both(llm_server, serve_app, tmp_path)
    models.replies[ECHO_MODEL].extend([Scripted(text="Hello!"), Scripted(text="Hi again.")])
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, muse, "The keeper wakes.")  # a bot's run of messages
    await fake_discord.post(GENERAL, muse, "The storm comes.")
    await fake_discord.post(GENERAL, alice, f"<@{echo.id}> hello", mentions=[echo])
    await _wait(fake_discord, lambda: _said(fake_discord, GENERAL, echo) == ["Hello!"])
    (first,) = models.requests(ECHO_MODEL)
    said = "".join(b["text"] for m in first["messages"] for b in m["content"] if "text" in b)
    assert "Muse: The keeper wakes. The storm comes.\n" in said  # bot_run_join: space
    assert "You are Echo, a curious regular" in _text(first["system"])
    assert first["messages"][-1]["role"] == "user"
    assert first["max_tokens"] == 600  # the guild layer
    config = _readme_block(".config Echo")
    pinned = await fake_discord.post(GENERAL, alice, config)
    await fake_discord.pin(pinned, alice)
    await fake_discord.post(GENERAL, alice, f"<@{echo.id}> again", mentions=[echo])
    await _wait(fake_discord, lambda: len(_said(fake_discord, GENERAL, echo)) == 2)
    second = models.requests(ECHO_MODEL)[1]
    assert second["max_tokens"] == 300
    assert "In this channel you answer in one sentence." in _text(second["system"])


async def test_two_bots_pinging_each_other_stop_at_the_chain_limit(
    fake_discord: DiscordServer,
    bots: tuple[FakeUser, FakeUser],
    llm_server: LLMServer,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    muse_user, echo = bots
    _, _, models = await _start_both(llm_server, serve_app, tmp_path)
    models.defaults = {MUSE_MODEL: " @Echo what do you think?", ECHO_MODEL: "@Muse I agree."}
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, echo, "Echo here.")  # so Muse knows whom @Echo means
    await fake_discord.post(GENERAL, alice, f"<@{muse_user.id}> start us off", mentions=[muse_user])

    def looped() -> bool:
        return any(
            r["emoji"]["name"] == LOOP
            for m in fake_discord.channels[GENERAL]
            for r in m.get("reactions", [])
        )

    await _wait(fake_discord, looped)
    authors = [m["author"]["username"] for m in fake_discord.channels[GENERAL]]
    # After Alice, three bot messages in a row; the fourth is a 🔁 instead of an answer.
    assert authors == ["Echo", "alice", "Muse", "Echo", "Muse"]
    last = fake_discord.channels[GENERAL][-1]
    assert [r["emoji"]["name"] for r in last["reactions"]] == [LOOP]
    assert f"<@{echo.id}>" in fake_discord.channels[GENERAL][2]["content"]  # a real ping


def _readme_block(start: str) -> str:
    """The README's code block that starts with ``start``."""
    text = (EXAMPLES / "chapterx" / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", text, flags=re.S | re.M)
    (block,) = [b for b in blocks if b.startswith(start)]
    return str(block).rstrip("\n")


async def test_history_from_a_historian_splices_another_channel_and_from_others_is_ignored(
    fake_discord: DiscordServer,
    bots: tuple[FakeUser, FakeUser],
    llm_server: LLMServer,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """The README's ``.history``, in the test server's channels (no layers there)."""
    muse, _ = bots
    general, random = "10", "11"
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    fake_discord.role_names["700"] = "Historian"
    fake_discord.roles[alice.id] = ["700"]
    _, _, models = await _start_both(llm_server, serve_app, tmp_path)
    first = await fake_discord.post(random, alice, "Chapter one: the keeper wakes.")
    last = await fake_discord.post(random, alice, "Chapter two: the storm.")
    await fake_discord.post(random, alice, "An aside nobody spliced.")
    await fake_discord.post(general, bob, "old chatter")
    template = _readme_block(".history Muse")
    links = re.findall(r"https://discord\.com/channels/\S+", template)
    history = template.replace(links[0], fake_discord.link(first))
    history = history.replace(links[1], fake_discord.link(last))

    async def ask_muse(count: int) -> str:
        await fake_discord.post(general, alice, f"<@{muse.id}> go on", mentions=[muse])
        await _wait(fake_discord, lambda: len(_said(fake_discord, general, muse)) == count)
        return _text(models.requests(MUSE_MODEL)[-1]["messages"])

    await fake_discord.post(general, bob, history)  # Bob is no historian: ignored
    ignored = await ask_muse(1)
    assert "old chatter" in ignored
    assert "Chapter one" not in ignored
    await fake_discord.post(general, alice, history)
    spliced = await ask_muse(2)
    assert "Chapter one: the keeper wakes." in spliced
    assert "Chapter two: the storm." in spliced
    assert "old chatter" not in spliced
    assert "An aside nobody spliced." not in spliced
