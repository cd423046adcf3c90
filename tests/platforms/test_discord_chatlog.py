"""The chat-log tools on Discord read the channel through Discord, which keeps its history:
Salon's own log holds only the terminal's and IRC's lines, and reading it here would tell
the model that a busy channel is empty."""

from __future__ import annotations

import json

import pytest

from fakes.discord_server import DiscordServer
from salon.cli import main
from salon.llm import FakeProvider, FakeReply, ToolResultPart
from salon.model import ToolCall
from salon.tools import chatlog
from salon.tools.caller import Caller
from tests.conftest import WriteConfig
from tests.platforms.conftest import GENERAL, Start, ask

KEY = f"discord:{GENERAL}"


async def test_the_chat_log_tools_read_a_busy_channel_through_discord(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    calls = (
        ToolCall("s", "get_channel_stats", {}),
        ToolCall("r", "get_recent_messages", {"limit": 3}),
        ToolCall("f", "search_chat_logs", {"query": "staging database"}),
    )
    provider = FakeProvider([FakeReply(calls=calls), "It has been busy."])
    await start_bot(provider, default_tool_policy="allow")
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    await fake_discord.post(GENERAL, alice, "the deploy broke the staging database")
    for n in range(24):
        await fake_discord.post(GENERAL, bob if n % 3 else alice, f"chatter {n}")
    await ask(fake_discord, GENERAL, alice, "how busy is this channel?")
    await fake_discord.wait_bot_messages(GENERAL, 1)

    stats, recent, found = (
        part.result
        for part in provider.requests[1].messages[-1].parts
        if isinstance(part, ToolResultPart)
    )
    assert not stats.is_error, stats.content
    counted = json.loads(stats.content)
    assert counted["messages"] == 26  # every message of the channel, the question too
    assert counted["participants"] == 2
    assert counted["top_posters"] == {"Bob": 16, "Alice": 10}
    assert counted["counted"] == "the whole channel"
    assert "no messages" not in recent.content
    assert recent.content.splitlines()[-1].endswith("<Alice> @Salon how busy is this channel?")
    assert "<Alice> the deploy broke the staging database" in found.content


async def test_counts_of_a_long_channel_say_how_far_they_read(
    fake_discord: DiscordServer, start_bot: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chatlog, "PLATFORM_SCAN", 10)
    app, _ = await start_bot(FakeProvider())
    for n in range(15):
        await fake_discord.post(GENERAL, fake_discord.user("Alice"), f"chatter {n}")
    stats = await app.hub.call(
        ToolCall("s", "get_channel_stats", {}), caller=Caller.from_arguments({"channel": KEY})
    )
    counted = json.loads(stats.content)
    assert counted["messages"] == 10
    assert counted["counted"] == "the newest 10 messages only (discord keeps more)"


async def test_a_channel_the_bot_may_not_read_is_an_error_not_an_empty_one(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider())
    await fake_discord.post(GENERAL, fake_discord.user("Alice"), "a secret plan")
    fake_discord.deny(GENERAL, "READ_MESSAGE_HISTORY")
    recent = await app.hub.call(
        ToolCall("r", "get_recent_messages", {}), caller=Caller.from_arguments({"channel": KEY})
    )
    assert recent.is_error
    assert recent.content.splitlines() == [
        "Error executing tool get_recent_messages: discord gave no messages of this channel: "
        "the bot may lack the permission to read its history, or the channel is empty"
    ]
    fake_discord.deny(GENERAL, "VIEW_CHANNEL")
    stats = await app.hub.call(
        ToolCall("s", "get_channel_stats", {}), caller=Caller.from_arguments({"channel": KEY})
    )
    assert stats.content.splitlines() == [
        "Error executing tool get_channel_stats: Discord refused to read the history of "
        "#general: missing access (the bot needs View Channel there)"
    ]


def test_without_a_connection_to_discord_the_tools_say_so(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    """``salon tools call`` runs no Discord client: the log it has holds nothing of Discord."""
    shared = "providers:\n  p: {type: openai, model: m, base_url: 'http://127.0.0.1:9/v1'}\n"
    root = write_config(shared + "provider: p\n", bot="platforms: {discord: {}}\n")
    args = ["tools", "call", str(root), "get_channel_stats", "{}", "--channel", "discord:10"]
    assert main(args) == 1
    said = capsys.readouterr().out
    assert "messages" not in said
    assert "discord:10: this process is not connected to discord" in said
