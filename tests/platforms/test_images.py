"""The image window the adapters load the model's images through."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from salon.model import Attachment, ChannelRef, Message, Participant, Tag
from salon.platforms.images import ImageWindow, read_at_most

CHANNEL = ChannelRef("test", "room")
ALICE = Participant("u1", "alice")


def message(index: int, *files: Attachment, tags: frozenset[Tag] = frozenset()) -> Message:
    when = datetime(2025, 1, 1, 12, index, tzinfo=UTC)
    return Message(f"m{index}", CHANNEL, ALICE, "look", when, attachments=files, tags=tags)


def image(name: str, size: int = 10) -> Attachment:
    return Attachment(name, "image/png", size, url=f"https://files.example/{name}")


class Host:
    """Serves every image but those named ``missing``; counts what was fetched."""

    def __init__(self, *missing: str) -> None:
        self.missing = set(missing)
        self.fetched: list[str] = []

    async def fetch(self, file: Attachment) -> bytes | None:
        self.fetched.append(file.filename)
        return None if file.filename in self.missing else file.filename.encode()


def loaded(messages: list[Message]) -> list[str]:
    return [f.filename for m in messages for f in m.attachments if f.data is not None]


async def test_the_newest_images_within_the_budget_are_loaded() -> None:
    host = Host()
    window = ImageWindow(host.fetch, wanted=lambda f: f.size <= 100)
    messages = [message(1, image("old.png")), message(2, image("big.png", 500), image("new.png"))]
    out = await window.load(messages, budget=1)
    assert loaded(out) == ["new.png"]
    assert host.fetched == ["new.png"]  # nothing over the size, nothing past the budget


async def test_salons_notes_are_never_loaded() -> None:
    host = Host()
    window = ImageWindow(host.fetch, wanted=lambda f: True)
    note = message(2, image("tool.png"), tags=frozenset({Tag.NOTE}))
    out = await window.load([message(1, image("mine.png")), note], budget=5)
    assert loaded(out) == ["mine.png"]
    assert out[1] is note


async def test_an_image_that_cannot_be_had_leaves_its_place_unless_counted() -> None:
    messages = [message(1, image("older.png")), message(2, image("gone.png"))]
    host = Host("gone.png")
    window = ImageWindow(host.fetch, wanted=lambda f: True)
    assert loaded(await window.load(messages, budget=1)) == ["older.png"]
    counting = ImageWindow(Host("gone.png").fetch, wanted=lambda f: True, count_failed=True)
    assert loaded(await counting.load(messages, budget=1)) == []


async def test_downloaded_images_are_kept_for_the_next_read() -> None:
    host = Host()
    window = ImageWindow(host.fetch, wanted=lambda f: True)
    messages = [message(1, image("cat.png"))]
    await window.load(messages, budget=5)
    again = await window.load(messages, budget=5)
    assert loaded(again) == ["cat.png"]
    assert host.fetched == ["cat.png"]


async def test_read_at_most_reads_no_more_than_the_limit() -> None:
    stream = asyncio.StreamReader()
    stream.feed_data(b"abc")
    stream.feed_data(b"defgh")
    stream.feed_eof()
    assert await read_at_most(stream, 5) == b"abcde"
