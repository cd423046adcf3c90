"""What the bot shows on Discord besides text: tools' files as attachments in embeds (a
sprite's directions linked), and a job's progress as one message edited as it goes."""

from __future__ import annotations

from fakes.discord_server import DiscordServer
from fakes.discord_wire import SUPPRESS_NOTIFICATIONS
from fakes.vendors.images import tiny_png
from salon.llm import FakeProvider
from salon.model import Attachment, ChannelRef
from tests.platforms.conftest import GENERAL, Start

HERE = ChannelRef("discord", GENERAL)
POSTS = f"POST /channels/{GENERAL}/messages"
DIRECTIONS = ["south", "south-east", "east", "north-east", "north", "north-west", "west"]


def sprite(direction: str, shade: int) -> Attachment:
    data = tiny_png(2, 2, shade)
    return Attachment(
        f"knight-{direction}.png",
        "image/png",
        len(data),
        url=f"https://cdn.example/knight/{direction}.png",
        data=data,
        label=direction,
    )


async def test_a_sprites_directions_are_attachments_in_linked_embeds(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _app, platform = await start_bot(FakeProvider())
    files = [sprite(d, i) for i, d in enumerate(DIRECTIONS)]
    sent = await platform.send(HERE, "(generate_sprite: knight)", files=files, note=True)
    message = fake_discord.channels[GENERAL][-1]
    assert message["id"] == sent.id
    assert [a["filename"] for a in message["attachments"]] == [f.filename for f in files]
    assert [a["content_type"] for a in message["attachments"]] == ["image/png"] * 7
    assert fake_discord.files[message["attachments"][2]["id"]] == files[2].data
    embeds = message["embeds"]
    assert [(e["title"], e["url"]) for e in embeds] == [(f.label, f.url) for f in files]
    assert [e["image"]["url"] for e in embeds] == [a["url"] for a in message["attachments"]]
    links = embeds[0]["description"].split(" · ")
    assert links[0] == "[south](https://cdn.example/knight/south.png)"
    assert len(links) == 7
    assert message["flags"] & SUPPRESS_NOTIFICATIONS  # a note: nobody is pinged by it


async def test_more_than_ten_files_take_more_messages_and_links_need_no_upload(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _app, platform = await start_bot(FakeProvider())
    files = [sprite(f"frame{i}", i) for i in range(11)]
    linked = Attachment("far.png", "image/png", 0, url="https://cdn.example/far.png", label="far")
    await platform.send(HERE, "(animate: knight)", files=[*files, linked], note=True)
    first, second = fake_discord.channels[GENERAL][-2:]
    assert (len(first["attachments"]), len(first["embeds"])) == (10, 10)
    assert first["content"] == "(animate: knight)"
    assert [a["filename"] for a in second["attachments"]] == ["knight-frame10.png"]
    assert second["embeds"][1]["image"]["url"] == "https://cdn.example/far.png"
    assert second["content"] == ""


async def test_progress_is_one_silent_message_edited_to_its_end(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _app, platform = await start_bot(FakeProvider(), discord={"progress_interval": 0.05})
    before = fake_discord.calls[POSTS]
    for step in range(1, 6):
        await platform.progress(HERE, "job-1", f"⏳ generate_image: step {step}/5")
    await platform.progress(HERE, "job-1", "✅ generate_image: done in 3 s", done=True)
    await platform.progress(HERE, "job-1", "⏳ late report", done=True)  # after the end: nothing
    assert fake_discord.calls[POSTS] == before + 1
    message = fake_discord.channels[GENERAL][-1]
    assert message["content"] == "✅ generate_image: done in 3 s"
    assert message["flags"] & SUPPRESS_NOTIFICATIONS
    edits = fake_discord.calls[f"PATCH /channels/{GENERAL}/messages/{message['id']}"]
    assert 1 <= edits <= 2  # reports in between are folded, not each an edit


async def test_a_file_whose_name_an_embed_cannot_link_is_attached_without_one(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    _app, platform = await start_bot(FakeProvider())
    data = tiny_png(2, 2, 9)
    odd = Attachment("my castle é.png", "image/png", len(data), data=data, label="castle")
    await platform.send(HERE, "(draw: castle)", files=[odd, sprite("south", 1)], note=True)
    message = fake_discord.channels[GENERAL][-1]
    assert [a["filename"] for a in message["attachments"]] == [odd.filename, "knight-south.png"]
    assert [e["title"] for e in message["embeds"]] == ["south"]


async def test_a_tools_images_are_not_downloaded_again_as_vision_input(
    fake_discord: DiscordServer, start_bot: Start
) -> None:
    from salon.llm import ImagePart

    provider = FakeProvider(["a fine knight"])
    _app, platform = await start_bot(provider)
    await platform.send(HERE, "(generate_sprite: knight)", files=[sprite("south", 3)], note=True)
    alice = fake_discord.user("Alice")
    await fake_discord.post(
        GENERAL, alice, f"<@{fake_discord.bot.id}> how is it?", mentions=[fake_discord.bot]
    )
    await fake_discord.wait_bot_messages(GENERAL, 2)
    assert fake_discord.calls["GET /attachments"] == 0  # Salon's notes are never read back
    parts = [p for m in provider.requests[0].messages for p in m.parts]
    assert not [p for p in parts if isinstance(p, ImagePart)]
