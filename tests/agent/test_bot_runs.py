"""A run of bot messages, whichever bots wrote them, is cut at ``room.max_bot_run``
(default ``max_bot_reply_chain_depth``) with 🔁 instead of an answer."""

from __future__ import annotations

from salon.llm import FakeProvider
from salon.model import Participant
from tests.agent.conftest import StartAgent

ROBO, ECHO = Participant("r", "Robo", is_bot=True), Participant("e", "Echo", is_bot=True)
LOOP = "\U0001f501"


async def test_a_run_of_other_bots_is_cut_at_max_bot_run(start_agent: StartAgent) -> None:
    agent, platform = await start_agent(
        FakeProvider(["never"]), allow_bot_interactions=True, room={"max_bot_run": 2}
    )
    room = platform.channel("room")
    me = platform.self_participant
    platform.add(room, ROBO, "robo here")
    asked = await platform.post(room, ECHO, "@Salon what now?", mentions=[me])
    await agent.wait_idle()
    assert platform.sent == []
    assert (asked.id, LOOP) in platform.reactions


async def test_under_the_default_the_same_run_is_answered(start_agent: StartAgent) -> None:
    agent, platform = await start_agent(FakeProvider(["An answer."]), allow_bot_interactions=True)
    room = platform.channel("room")
    me = platform.self_participant
    platform.add(room, ROBO, "robo here")
    await platform.post(room, ECHO, "@Salon what now?", mentions=[me])
    await agent.wait_idle()
    assert [m.text for m in platform.sent] == ["An answer."]
