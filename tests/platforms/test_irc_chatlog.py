"""The chat-log tools on IRC: another channel by name (only one the bot is in and the asker
could read there) and the kinds of lines (messages, joins, parts, quits)."""

from __future__ import annotations

import asyncio

from fakes.irc import IrcServer
from salon.llm import FakeProvider
from salon.model import ToolCall
from salon.tools.caller import Caller
from tests.platforms.test_irc import Start, _close_people, human, ircd, start_bot

__all__ = ["_close_people", "ircd", "start_bot"]  # the fixtures of test_irc


def _asked_by(nick: str, channel: str = "irc:#salon") -> Caller:
    asked = {"channel": channel, "requester_id": f"irc:{nick}", "requester_name": nick}
    return Caller.from_arguments(asked)


async def test_another_channel_is_read_only_for_someone_who_could_read_it(
    ircd: IrcServer, start_bot: Start
) -> None:
    app, platform = await start_bot(FakeProvider([]), channels=["#salon", "#dev"])
    alice = await human(ircd, "alice")
    await alice.join("#dev")
    bob = await human(ircd, "bob")
    await bob.join("#dev")
    await bob.say("#dev", "the release is on tuesday")
    await bob.send("PART #dev :bye")
    await asyncio.wait_for(platform.wait_seen("part", "bob"), 10)
    await alice.join("#secret")  # a channel the bot is not in

    def recent(**arguments: object) -> ToolCall:
        return ToolCall("r", "get_recent_messages", arguments)

    read = await app.hub.call(recent(in_channel="#dev"), caller=_asked_by("alice"))
    assert not read.is_error, read.content
    assert "<bob> the release is on tuesday" in read.content
    refused = await app.hub.call(recent(in_channel="#dev"), caller=_asked_by("bob"))
    assert refused.is_error
    assert refused.content.endswith(
        "#dev cannot be read from here: the bot is not in it, or you could not read it yourself"
    )
    assert "tuesday" not in refused.content
    secret = await app.hub.call(recent(in_channel="#secret"), caller=_asked_by("alice"))
    assert secret.is_error
    elsewhere = await app.hub.call(recent(in_channel="discord:123"), caller=_asked_by("alice"))
    assert elsewhere.content.endswith("only channels of irc can be read from here")
    found = await app.hub.call(
        ToolCall("s", "search_chat_logs", {"query": "release", "in_channel": "irc:#dev"}),
        caller=_asked_by("alice"),
    )
    assert "<bob> the release is on tuesday" in found.content
    await alice.close()
    await bob.close()


async def test_joins_parts_and_quits_are_read_when_asked_for(
    ircd: IrcServer, start_bot: Start
) -> None:
    app, platform = await start_bot(FakeProvider([]))
    alice = await human(ircd, "alice")
    bob = await human(ircd, "bob")
    await bob.say("#salon", "hello all")
    await bob.send("PART #salon :lunch")
    await asyncio.wait_for(platform.wait_seen("part", "bob"), 10)
    await bob.join("#salon")
    await bob.send("QUIT :gone home")
    await asyncio.wait_for(platform.wait_seen("quit", "bob"), 10)

    async def recent(**arguments: object) -> str:
        result = await app.hub.call(
            ToolCall("r", "get_recent_messages", arguments), caller=_asked_by("alice")
        )
        assert not result.is_error, result.content
        return result.content

    said = [line.split("] ", 1)[1] for line in (await recent()).splitlines()]
    assert said == ["<bob> hello all"]  # messages only, by default
    moves = [
        line.split("] ", 1)[1]
        for line in (await recent(types=["joins", "parts", "quits"])).splitlines()
    ]
    assert moves[-3:] == ["<- bob left (lunch)", "-> bob joined", "<- bob quit (gone home)"]
    everything = await recent(types=["messages", "parts"])
    assert "<bob> hello all" in everything
    assert "bob left (lunch)" in everything
    assert "joined" not in everything
    await alice.close()
