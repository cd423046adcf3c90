"""Who the bot's messages notify: Discord's ``allowed_mentions`` on every path (answers,
approval prompts and their edits, the tool log's webhook, interaction answers), against the
fake Discord, which parses mentions the way Discord documents. The model writes the text
and the tool arguments, so ``@everyone``, ``@here`` and ``<@&role>`` in them must notify
nobody unless the config lists them (every test here and elsewhere also fails on an
unexpected ping: see the ``fake_discord`` fixture)."""

from __future__ import annotations

import asyncio

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from tests.platforms.conftest import GENERAL, Start, ask

MODS, ADMINS = "500", "501"


def nobody_but_people(server: DiscordServer) -> None:
    shouting = [p for p in server.pings if p.everyone or p.roles]
    assert shouting == []


async def test_an_answer_notifies_only_the_people_it_names(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider([f"@everyone @here <@&{MODS}> look, @Alice"]))
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "shout")
    (reply,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()
    assert reply["content"] == f"@everyone @here <@&{MODS}> look, <@{alice.id}>"
    (ping,) = [p for p in fake_discord.pings if p.message_id == reply["id"]]
    assert (ping.users, ping.roles, ping.everyone) == (frozenset({alice.id}), frozenset(), False)
    assert reply["mention_everyone"] is False
    assert reply["mention_roles"] == []


async def test_tool_arguments_notify_nobody_in_prompts_edits_and_the_tool_log(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    wipe = FakeReply(calls=(ToolCall("c1", "wipe", {"target": f"@everyone <@&{MODS}>"}),))
    provider = FakeProvider([wipe, "Wiped.", wipe])
    app, platform = await start_bot(
        provider, extra_servers=[in_process(danger_server(ran), "danger")], approval_timeout=1
    )
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "wipe")
    (prompt,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert f"@everyone <@&{MODS}>" in prompt["content"]
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_discord.click(prompt, alice, "salon:approve")  # the prompt is edited (type 7)
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    assert ran == [f"@everyone <@&{MODS}>"]
    (log,) = fake_discord.webhook_posts
    assert "allowed_mentions" in log  # said, not left to the route's default
    await ask(fake_discord, GENERAL, alice, "again")  # nobody answers: the prompt is edited
    await fake_discord.wait_bot_messages(GENERAL, 4)
    await app.agent.wait_idle()
    routes = {p.route for p in fake_discord.pings}
    assert {"message", "interaction", "webhook", "edit"} <= routes, fake_discord.pings
    nobody_but_people(fake_discord)


async def test_roles_the_config_lists_are_notified_on_every_path_and_no_others(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    fake_discord.role_names[ADMINS] = "admins"
    fake_discord.pings_allowed_roles = {MODS}
    loud = f"<@&{MODS}> <@&{ADMINS}> @everyone @here"
    wipe = FakeReply(calls=(ToolCall("c1", "wipe", {"target": loud}),))
    provider = FakeProvider([wipe, f"{loud} done", "asked"])
    app, _ = await start_bot(
        provider,
        extra_servers=[in_process(danger_server([]), "danger")],
        tool_policies={"wipe": {"policy": "allow"}},
        discord={"mentions": {"roles": [MODS]}},
    )
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "wipe")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()
    await fake_discord.command(GENERAL, alice, "ask", question=loud)
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    by_route = {p.route: p for p in fake_discord.pings if loud in p.content}
    assert set(by_route) == {"message", "webhook", "interaction"}
    for ping in by_route.values():
        assert (ping.roles, ping.everyone) == (frozenset({MODS}), False), ping
