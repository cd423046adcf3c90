"""`salon tools call --channel`: a channel key of a platform the bot has, or a clear error;
`salon tools serve`: the built-ins for an outside MCP client."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from salon.app import database_url
from salon.cli import main
from salon.config import load_config_dir
from salon.model import ChannelRef, Message, Participant
from salon.store.sql import SQLStore
from tests.conftest import WriteConfig

REPO = Path(__file__).resolve().parents[2]
SHARED = """\
providers:
  p: {type: openai, model: m, base_url: "http://127.0.0.1:9/v1"}
provider: p
"""

IRC = """\
platforms:
  irc: {server: 127.0.0.1, port: 6667, tls: false, nick: salonbot, channels: ["#salon"]}
"""


async def log_line(root: Path, channel: ChannelRef, text: str) -> None:
    store = SQLStore(database_url(root, load_config_dir(root).bots["bot"]))
    await store.open()
    try:
        author = Participant("irc:alice", "alice")
        message = Message("m1", channel, author, text, datetime.now(UTC))
        await store.log_message("bot", message, durable=True)
    finally:
        await store.close()


def call(root: Path, channel: str) -> int:
    return main(["tools", "call", str(root), "get_recent_messages", "{}", "--channel", channel])


def test_an_irc_channel_key_finds_its_lines(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_config(SHARED, bot=IRC)
    asyncio.run(log_line(root, ChannelRef("irc", "#salon"), "hello from irc"))
    assert call(root, "irc:#salon") == 0
    assert "hello from irc" in capsys.readouterr().out
    assert call(root, "irc:#Salon") == 0  # IRC channel names ignore case, as the adapter does
    assert "hello from irc" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("bot_yaml", "channel", "expected"),
    [
        (IRC, "#salon", "error: --channel '#salon' is not a channel key: write irc:#salon"),
        (
            "platforms: {discord: {}}\n",
            "123456",
            "error: --channel '123456' is not a channel key: write discord:123456",
        ),
        ("", "local", "error: --channel 'local' is not a channel key: write terminal:local"),
        (
            "",
            "irc:#salon",
            "error: --channel 'irc:#salon': this bot has no irc platform; "
            "write a channel key: terminal:local",
        ),
        (
            IRC,
            "general",
            "error: --channel 'general' is not a channel key; "
            "write one of: terminal:local, irc:#salon",
        ),
        (
            "platforms: {discord: {}}\n",
            "discord:general",
            "error: --channel 'discord:general': a Discord channel key is discord:<channel id>, "
            "the id in digits",
        ),
        ("", "terminal:other", "error: --channel 'terminal:other': write terminal:local"),
    ],
)
def test_a_wrong_channel_is_one_line_naming_the_key(
    write_config: WriteConfig,
    capsys: pytest.CaptureFixture[str],
    bot_yaml: str,
    channel: str,
    expected: str,
) -> None:
    root = write_config(SHARED, bot=bot_yaml)
    assert call(root, channel) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [expected]
    assert captured.out == ""


async def test_salon_tools_serve_offers_the_builtins_over_stdio(write_config: WriteConfig) -> None:
    """The native built-ins, wrapped for an outside MCP client: listing, results, errors."""
    root = write_config(SHARED, bot=IRC)
    await log_line(root, ChannelRef("irc", "#salon"), "hello from irc")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "salon", "tools", "serve", str(root)],
        env=dict(os.environ),
        cwd=str(REPO),
    )
    async with Client(params, cache=None) as client:
        listed = {t.name: t for t in (await asyncio.wait_for(client.list_tools(), 20)).tools}
        recent = await asyncio.wait_for(
            client.call_tool("get_recent_messages", {"channel": "irc:#salon"}), 20
        )
        wrong = await asyncio.wait_for(
            client.call_tool("get_current_time", {"timezone": "Nowhere/Else"}), 20
        )
    assert "channel" in listed["get_recent_messages"].input_schema["properties"]
    notes = listed["get_current_time"].annotations
    assert notes is not None
    assert notes.read_only_hint is True
    assert recent.structured_content is not None
    assert "hello from irc" in recent.structured_content["result"]
    assert wrong.is_error
    (text,) = wrong.content
    assert isinstance(text, TextContent)
    assert text.text.startswith("Error executing tool get_current_time: ")
