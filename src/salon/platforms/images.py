"""The image window: which images of a window of messages the model sees, loaded once for
every adapter whose messages carry images (Discord, Slack, Matrix).

The newest images first, at most a budget of them (``ImageInput.image_budget``), each one
the adapter wants (an image under ``max_image_bytes``); Salon's notes (a tool's images
among them) are never read back, so never loaded. The adapter says how an image is fetched
(its host, its token) and what its other files carry; downloaded images are kept, a
bounded number, for the next activations.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Protocol

from salon.model import Attachment, Message, Tag

__all__ = ["Fetch", "ImageWindow", "read_at_most"]

Fetch = Callable[[Attachment], Awaitable[bytes | None]]
"""A file's bytes, or None when it cannot be had (refused, too large, gone)."""

_KEPT = 16  # downloaded images kept for the next activations: a bound


class _Stream(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def read_at_most(stream: _Stream, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``stream`` (a response body): no more is read."""
    data = bytearray()
    while len(data) < limit:
        chunk = await stream.read(limit - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


class ImageWindow:
    def __init__(
        self,
        fetch: Fetch,
        *,
        wanted: Callable[[Attachment], bool],
        kept: int = _KEPT,
        count_failed: bool = False,
    ) -> None:
        """``wanted``: whether a file is an image the window takes (the rest go to
        ``load``'s ``others``); ``kept``: downloaded images kept (0: none);
        ``count_failed``: an image that could not be had still takes its place in the
        budget (the newest images are then chosen by what the messages say of them)."""
        self._fetch = fetch
        self._wanted = wanted
        self._bound = kept
        self._count_failed = count_failed
        self._kept: OrderedDict[str, bytes] = OrderedDict()  # by URL

    async def load(
        self, messages: Sequence[Message], *, budget: int, others: Fetch | None = None
    ) -> list[Message]:
        """``messages`` with the data of their newest ``budget`` images (the others'
        dropped) and of their other files as ``others`` gives it (none without). A message
        with nothing new is returned as it was (the same object)."""
        out = list(messages)
        left = budget
        for index in range(len(out) - 1, -1, -1):  # the newest images first
            message = out[index]
            if not message.attachments or Tag.NOTE in message.tags:
                continue
            files = []
            for file in message.attachments:
                data, taken = await self._data(file, left, others)
                left -= taken
                files.append(replace(file, data=data))
            loaded = replace(message, attachments=tuple(files))
            if loaded != message:
                out[index] = loaded
        return out

    async def _data(
        self, file: Attachment, left: int, others: Fetch | None
    ) -> tuple[bytes | None, int]:
        """A file's data, and how much of the budget it took."""
        if not self._wanted(file):
            return (await others(file) if others is not None else None), 0
        if left <= 0:
            return None, 0
        data = await self._image(file)
        return data, 1 if data is not None or self._count_failed else 0

    async def _image(self, file: Attachment) -> bytes | None:
        if file.data is not None:
            return file.data
        if file.url in self._kept:
            self._kept.move_to_end(file.url)
            return self._kept[file.url]
        data = await self._fetch(file)
        if data is not None and self._bound > 0:
            self._kept[file.url] = data
            while len(self._kept) > self._bound:
                self._kept.popitem(last=False)
        return data
