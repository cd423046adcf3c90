"""A reasoning model's answer on Discord, through the fake Discord and the real discord.py:
the answer alone, or under it (``show: spoiler``) a silent line of subtext in a spoiler."""

from __future__ import annotations

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, FakeReply
from tests.platforms.conftest import GENERAL, Start, ask

SILENT = 1 << 12  # SUPPRESS_NOTIFICATIONS: how Salon marks its own notes
THINKING = ("Alice wants a greeting. ", "A short one will do.")


def mine(server: DiscordServer) -> list[dict[str, object]]:
    return [m for m in server.channels[GENERAL] if m["author"]["id"] == server.bot.id]


async def test_the_thinking_stays_out_of_the_channel_by_default(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    app, _ = await start_bot(FakeProvider([FakeReply(("Hello!",), thinking=THINKING)]))
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hi")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    await app.agent.wait_idle()
    assert [m["content"] for m in mine(fake_discord)] == ["Hello!"]


async def test_a_spoiler_is_silent_subtext_under_the_answer(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider([FakeReply(("Hello!",), thinking=THINKING)])
    app, _ = await start_bot(provider, thinking={"enabled": True, "show": "spoiler"})
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hi")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    await app.agent.wait_idle()
    answer, note = mine(fake_discord)
    assert answer["content"] == "Hello!"
    assert note["content"] == "-# ||Alice wants a greeting. A short one will do.||"
    assert int(str(note["flags"])) & SILENT
