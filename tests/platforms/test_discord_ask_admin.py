"""Policy ``ask_admin`` on Discord: the requester cannot approve their own call; another
member of an authorized role can, or, with no roles listed, only the operator (the owner
of the bot's application)."""

from __future__ import annotations

import asyncio
from typing import Any

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from tests.platforms.conftest import GENERAL, Start
from tests.platforms.test_approvals import danger_server
from tests.tools.conftest import in_process

APPROVE = "salon:approve"
ADMIN_ONLY = {"wipe": {"policy": "ask_admin"}}


async def ask_to_wipe(
    fake_discord: DiscordServer, start_bot: Start, ran: list[str], **config: Any
) -> dict[str, Any]:
    """Bob asks the bot to wipe the cache; the approval prompt, once it can be pressed."""
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "cache"}),)), "Wiped."]
    )
    _, platform = await start_bot(
        provider,
        extra_servers=[in_process(danger_server(ran), "danger")],
        tool_output_visible=False,
        tool_policies=ADMIN_ONLY,
        **config,
    )
    bob = fake_discord.user("Bob")
    await fake_discord.post(
        GENERAL, bob, f"<@{fake_discord.bot.id}> wipe the cache", mentions=[fake_discord.bot]
    )
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    return prompt


async def test_ask_admin_refuses_the_requester_and_takes_another_of_a_role(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    ran: list[str] = []
    bob, carol = fake_discord.user("Bob"), fake_discord.user("Carol")
    fake_discord.roles[bob.id] = ["500"]  # "mods": his own role does not let him approve
    fake_discord.roles[carol.id] = ["500"]
    prompt = await ask_to_wipe(fake_discord, start_bot, ran, authorized_roles=["mods"])
    await fake_discord.click(prompt, bob, APPROVE)
    (refusal,) = await fake_discord.wait_interaction_responses(1)
    assert refusal["data"]["content"] == (
        "Only the bot's operator or someone other than Bob with an authorized role can "
        "approve this (Bob can cancel it)."
    )
    assert refusal["data"]["flags"] == 64  # ephemeral
    assert ran == []
    await fake_discord.click(prompt, carol, APPROVE)
    answered = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert ran == ["cache"]
    assert answered[0]["content"].endswith("Approved by Caz.")


async def test_ask_admin_without_roles_is_for_the_operator_alone(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    ran: list[str] = []
    bob, carol = fake_discord.user("Bob"), fake_discord.user("Carol")
    owner = fake_discord.user("Alice")  # the application's owner, as the fake reports it
    prompt = await ask_to_wipe(fake_discord, start_bot, ran)
    await fake_discord.click(prompt, bob, APPROVE)
    await fake_discord.click(prompt, carol, APPROVE)
    refusals = await fake_discord.wait_interaction_responses(2)
    assert [r["data"]["content"] for r in refusals] == [
        "Only the bot's operator can approve this."
    ] * 2
    assert ran == []
    await fake_discord.click(prompt, owner, APPROVE)
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert ran == ["cache"]
