"""A tool server's question on Discord: buttons for a yes/no or a choice, a modal for a
form; only the requester may answer; no answer in time declines and takes the buttons off."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from tests.platforms.conftest import Start
from tests.tools.test_elicitation import asking_server
from tests.tools.test_mcp_http import LoopbackServer, http_spec

__all__ = ["asking_server"]  # the fixture used

GENERAL = "10"


def buttons(message: dict[str, Any]) -> dict[str, str]:
    return {c["label"]: c["custom_id"] for row in message["components"] for c in row["components"]}


def results(provider: FakeProvider) -> list[str]:
    parts = [p for m in provider.requests[1].messages for p in m.parts if hasattr(p, "result")]
    return [p.result.content for p in parts]


async def ask(
    fake_discord: DiscordServer,
    start_bot: Start,
    server: LoopbackServer,
    call: ToolCall,
    **config: Any,
) -> tuple[FakeProvider, dict[str, Any]]:
    spec = replace(http_spec("kit", server.url), elicitation=True)
    provider = FakeProvider([FakeReply(calls=(call,)), "Done."])
    _, platform = await start_bot(
        provider,
        extra_servers=[spec],
        default_tool_policy="allow",
        tool_output_visible=False,
        **config,
    )
    alice = fake_discord.user("Alice")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> go", mentions=[fake_discord.bot]
    )
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await asyncio.wait_for(platform.wait_questions(1), 10)
    return provider, prompt


async def test_a_yes_or_no_is_two_buttons_only_the_requester_may_press(
    fake_discord: DiscordServer, start_bot: Start, asking_server: LoopbackServer
) -> None:
    call = ToolCall("c1", "confirm", {"what": "wipe"})
    provider, prompt = await ask(fake_discord, start_bot, asking_server, call)
    assert prompt["content"] == "Alice: kit asks: Really wipe?"
    assert list(buttons(prompt)) == ["Yes", "No", "Decline"]
    await fake_discord.click(prompt, fake_discord.user("Bob"), buttons(prompt)["Yes"])
    (refusal,) = await fake_discord.wait_interaction_responses(1)
    assert (refusal["data"]["content"], refusal["data"]["flags"]) == (
        "Only Alice can answer this.",
        64,  # ephemeral
    )
    await fake_discord.click(prompt, fake_discord.user("Alice"), buttons(prompt)["No"])
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert results(provider) == ["wipe: no"]
    (asked, _) = fake_discord.channels[GENERAL][-2:]
    assert asked["content"] == "Alice: kit asks: Really wipe?\nno by Alice."
    assert asked["components"] == []


async def test_a_form_is_a_modal_with_the_defaults_filled_in(
    fake_discord: DiscordServer, start_bot: Start, asking_server: LoopbackServer
) -> None:
    provider, prompt = await ask(fake_discord, start_bot, asking_server, ToolCall("c1", "book", {}))
    assert list(buttons(prompt)) == ["Answer", "Decline"]
    alice = fake_discord.user("Alice")
    await fake_discord.click(prompt, alice, buttons(prompt)["Answer"])
    await fake_discord.wait_interaction_responses(1)
    (_, modal) = fake_discord.modals[0]
    inputs = {c["custom_id"]: c for row in modal["components"] for c in row["components"]}
    assert [c["label"] for c in inputs.values()] == ["Day", "Guests", "Room", "Confirm"]
    assert inputs["salon:field:guests"]["value"] == "2"
    assert inputs["salon:field:room"]["placeholder"] == "small, large"
    await fake_discord.submit_modal(
        0, alice, {"salon:field:day": "friday", "salon:field:guests": "lots"}
    )
    said = await fake_discord.wait_interaction_responses(2)
    assert (said[1]["data"]["content"], said[1]["data"]["flags"]) == (
        "Guests needs a whole number; press Answer to try again.",
        64,
    )
    await fake_discord.click(prompt, alice, buttons(prompt)["Answer"])
    await fake_discord.wait_interaction_responses(3)
    await fake_discord.submit_modal(
        1, alice, {"salon:field:day": "friday", "salon:field:confirm": "no"}
    )
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert results(provider) == [
        'booked {"day":"friday","guests":2,"room":"small","confirm":false}'
    ]


async def test_a_question_nobody_answers_is_declined_and_loses_its_buttons(
    fake_discord: DiscordServer, start_bot: Start, asking_server: LoopbackServer
) -> None:
    call = ToolCall("c1", "confirm", {"what": "wipe"})
    provider, prompt = await ask(fake_discord, start_bot, asking_server, call, approval_timeout=0.5)
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert results(provider) == ["wipe: declined"]
    await fake_discord.wait_calls(f"PATCH /channels/{GENERAL}/messages/{prompt['id']}", 1)
    asked = next(m for m in fake_discord.channels[GENERAL] if m["id"] == prompt["id"])
    assert asked["components"] == []
    assert asked["content"].endswith("No answer in time: declined.")
