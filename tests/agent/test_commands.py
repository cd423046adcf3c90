"""m commands and the bot-to-bot ping-loop limit, on the memory platform."""

from __future__ import annotations

import logging

import pytest

from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.model import Participant
from tests.agent.conftest import StartAgent

ALICE = Participant("alice", "Alice")
ROBO = Participant("robo", "Robo", is_bot=True)


async def test_m_continue_activates_and_is_removed(start_agent: StartAgent) -> None:
    provider = FakeProvider(["and they lived happily."])
    agent, platform = await start_agent(provider)
    dm = platform.channel("dm", is_direct=True)
    platform.add(dm, ALICE, "tell me a story")
    platform.add(dm, platform.self_participant, "Once upon a time")
    command = await platform.post(dm, ALICE, "m continue")
    await agent.wait_idle()
    assert platform.deleted == [command.id]
    seen = [(m.role, m.plain_text) for m in provider.requests[0].messages]
    assert seen == [("user", "Alice: tell me a story"), ("assistant", "Once upon a time")]


async def test_other_m_words_do_nothing(start_agent: StartAgent) -> None:
    provider = FakeProvider()
    agent, platform = await start_agent(provider)
    await platform.post(platform.channel("dm", is_direct=True), ALICE, "m dance")
    await platform.post(platform.channel("room"), ALICE, "m stop")
    await agent.wait_idle()
    assert provider.requests == []
    await platform.post(
        platform.channel("room"), ALICE, "@Salon m continue", mentions=[platform.self_participant]
    )
    await agent.wait_idle()
    assert len(provider.requests) == 1


async def test_m_continue_needs_no_mention_in_a_channel(start_agent: StartAgent) -> None:
    """Seed 003: "m continue" activates a completion without a tag or a reply."""
    provider = FakeProvider(["And so it went on."])
    agent, platform = await start_agent(provider)
    room = platform.channel("room")
    await platform.post(room, ALICE, "m continue")
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["And so it went on."]


async def test_undeletable_command_is_logged_once(
    start_agent: StartAgent, caplog: pytest.LogCaptureFixture
) -> None:
    agent, platform = await start_agent(FakeProvider())
    platform.fail_deletes = [PlatformError("no Manage Messages"), PlatformError("still no")]
    dm = platform.channel("dm", is_direct=True)
    caplog.set_level(logging.WARNING, logger="salon.agent.loop")
    for _ in range(2):
        await platform.post(dm, ALICE, "m continue")
        await agent.wait_idle()
    warnings = [r for r in caplog.records if "cannot delete m commands" in r.getMessage()]
    assert len(warnings) == 1
    assert len(platform.sent) == 2  # it still answered both times


async def test_bots_stop_pinging_each_other(start_agent: StartAgent) -> None:
    provider = FakeProvider(["hello Robo"])
    agent, platform = await start_agent(provider, allow_bot_interactions=True)
    room = platform.channel("room")
    me = platform.self_participant
    platform.add(room, ALICE, "you two, talk")
    await platform.post(room, ROBO, "@Salon hi", mentions=[me])
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["hello Robo"]
    await platform.post(room, ROBO, "@Salon and again", mentions=[me])
    await agent.wait_idle()
    assert len(provider.requests) == 1  # Robo, Salon, Robo: three bot messages in a row
    last = platform.messages(room)[-1]
    assert last.reactions == ("\U0001f501",)


def test_an_m_command_after_a_mention_of_a_name_with_spaces_is_one() -> None:
    from salon.context import m_command

    assert m_command("@Salon Bot m continue") == "continue"
    assert m_command("@Salon m continue") == "continue"
    assert m_command("m continue") == "continue"
    assert m_command("please m continue now") is None
