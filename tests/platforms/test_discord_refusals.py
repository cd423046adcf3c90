"""What Discord refuses reaches Salon as a PlatformError saying what was refused."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fakes.discord_server import DiscordServer
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.model import ApprovalRequest, ChannelRef, Message, Participant
from salon.platforms.discord import DiscordPlatform
from tests.platforms.conftest import GENERAL, Start, ask

HERE = ChannelRef("discord", GENERAL, name="general", guild_id="1")
Call = Callable[[DiscordPlatform, dict[str, Any]], Awaitable[object]]


def _chain(platform: DiscordPlatform, target: dict[str, Any]) -> Awaitable[object]:
    alice = Participant("200", "Alice")
    reply = Message("1", HERE, alice, "about that", target["timestamp"], reply_to_id=target["id"])
    return platform.reply_chain(reply)


def _approval(platform: DiscordPlatform, target: dict[str, Any]) -> Awaitable[object]:
    request = ApprovalRequest("wipe", "wipe", Participant("200", "Alice"), timeout=5)
    return platform.request_approval(HERE, request)


REFUSALS: list[tuple[str, str, Call, str]] = [
    (
        "GET",
        "/channels/10/messages",
        lambda p, m: p.history(HERE, limit=5),
        "Discord refused to read the history of #general: missing permission Read Message History",
    ),
    (
        "GET",
        "/channels/10/messages/pins",
        lambda p, m: p.pinned(HERE),
        "Discord refused to read the pins of #general: missing permission Read Message History",
    ),
    (
        "DELETE",
        "/channels/10/messages/",
        lambda p, m: p.delete_message(HERE, m["id"]),
        "Discord refused to delete a message in #general: missing permission Manage Messages",
    ),
    (
        "PUT",
        "/reactions/",
        lambda p, m: p.react(HERE, m["id"], "\u2705"),
        "Discord refused to react in #general: missing permission Add Reactions",
    ),
    (
        "POST",
        "/channels/10/messages",
        lambda p, m: p.send(HERE, "hello"),
        "Discord refused to post in #general: missing permission Send Messages",
    ),
    (
        "POST",
        "/channels/10/messages",
        _approval,
        "Discord refused to ask for approval in #general: missing permission Send Messages",
    ),
    (
        "GET",
        "/channels/10/messages/",
        _chain,
        "Discord refused to read message {id} in #general: missing permission Read Message History",
    ),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c[3].split(":")[0] for c in REFUSALS])
async def test_a_refusal_says_what_was_refused_and_why(
    fake_discord: DiscordServer, start_bot: Start, case: tuple[str, str, Call, str]
) -> None:
    method, path, call, reason = case
    _, platform = await start_bot(FakeProvider())
    target = await fake_discord.post(GENERAL, fake_discord.user("Alice"), "a message")
    fake_discord.fail_next(method, path, 403, code=50013)
    with pytest.raises(PlatformError) as refused:
        await call(platform, target)
    assert str(refused.value) == reason.format(id=target["id"])


async def test_the_tool_log_falls_back_to_a_plain_message_then_says_why_not(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _, platform = await start_bot(FakeProvider())
    fake_discord.deny(GENERAL, "MANAGE_WEBHOOKS")
    await platform.send_tool_log(HERE, ".Salon>[time]: now")
    (plain,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert plain["content"] == ".Salon>[time]: now"
    fake_discord.deny(GENERAL, "SEND_MESSAGES")
    with pytest.raises(PlatformError) as refused:
        await platform.send_tool_log(HERE, ".Salon>[time]: later")
    assert str(refused.value) == (
        "Discord refused to post the tool log in #general: missing permission Send Messages"
    )


async def test_an_unknown_or_hidden_channel_is_named_in_the_refusal(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _, platform = await start_bot(FakeProvider())
    gone = ChannelRef("discord", "999", name="999")
    with pytest.raises(PlatformError) as unknown:
        await platform.current_users(gone)
    assert str(unknown.value) == "Discord could not reach channel 999: unknown channel"
    fake_discord.deny(GENERAL, "VIEW_CHANNEL")
    with pytest.raises(PlatformError) as hidden:
        await platform.history(HERE, limit=5)
    assert str(hidden.value) == (
        "Discord refused to read the history of #general: missing access "
        "(the bot needs View Channel there)"
    )


async def test_a_failed_history_read_is_told_in_the_channel_in_plain_words(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    await start_bot(FakeProvider())
    fake_discord.fail_next("GET", "/channels/10/messages", 403, code=50013, exact=True)
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hello?")
    (told,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert told["content"] == (
        "\u26a0\ufe0f Salon could not answer: Discord refused to read the history of "
        "#general: missing permission Read Message History"
    )


async def test_losing_the_typing_permission_costs_only_the_indicator(
    fake_discord: DiscordServer, start_bot: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    app, _ = await start_bot(FakeProvider(["one", "two"]))
    fake_discord.fail_next("POST", "/channels/10/typing", 403, times=100, code=50013)
    alice = fake_discord.user("Alice")
    for count, text in enumerate(("first", "second"), 1):
        await ask(fake_discord, GENERAL, alice, text)
        await fake_discord.wait_bot_messages(GENERAL, count)
    await app.agent.wait_idle()
    assert [m["content"] for m in fake_discord.channels[GENERAL] if m["author"].get("bot")] == [
        "one",
        "two",
    ]
    told = [r.getMessage() for r in caplog.records if "typing" in r.getMessage()]
    assert told == [
        "Discord refused to show typing in #general: missing permission "
        "Send Messages; answering without the typing indicator"
    ]
