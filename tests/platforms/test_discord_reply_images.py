"""Images of a reply chain beyond the window: how many chain messages are scanned for them
(``reply_chain_image_max_depth``, bob-bot's ``REPLY_CHAIN_IMAGE_MAX_DEPTH``)."""

from __future__ import annotations

from fakes.discord_server import DiscordServer
from salon.llm import FakeProvider, ImagePart
from tests.platforms.conftest import Start

GENERAL = "10"


async def _ask_down_a_chain_of_pictures(
    fake_discord: DiscordServer, provider: FakeProvider
) -> list[bytes]:
    """Four messages each replying to the one before, each with a picture, pushed out of
    the window; then a question replying to the last. The images the model was shown."""
    alice = fake_discord.user("Alice")
    previous = None
    for n in range(1, 5):
        picture = [(f"p{n}.png", "image/png", b"\x89PNG " + str(n).encode())]
        previous = await fake_discord.post(
            GENERAL, alice, f"picture {n}", files=picture, reply_to=previous
        )
    for n in range(3):
        await fake_discord.post(GENERAL, fake_discord.user("Bob"), f"noise {n}")
    await fake_discord.post(
        GENERAL,
        alice,
        f"<@{fake_discord.bot.id}> which is best?",
        mentions=[fake_discord.bot],
        reply_to=previous,
    )
    await fake_discord.wait_bot_messages(GENERAL, 1)
    parts = [p for m in provider.requests[0].messages for p in m.parts]
    return [p.data for p in parts if isinstance(p, ImagePart)]


async def test_the_nearest_chain_messages_are_scanned_for_images(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["the third"])
    await start_bot(provider, recency_window_messages=2, discord={"reply_chain_image_max_depth": 2})
    images = await _ask_down_a_chain_of_pictures(fake_discord, provider)
    assert images == [b"\x89PNG 3", b"\x89PNG 4"]  # the two nearest the question, in order
    text = "\n".join(m.plain_text for m in provider.requests[0].messages)
    assert "picture 1" in text  # the whole chain is still in context (as text)


async def test_a_depth_of_zero_collects_no_chain_images(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(["no pictures"])
    await start_bot(provider, recency_window_messages=2, discord={"reply_chain_image_max_depth": 0})
    assert await _ask_down_a_chain_of_pictures(fake_discord, provider) == []
    assert "picture 4" in "\n".join(m.plain_text for m in provider.requests[0].messages)
