"""What the model may see of attachments, downloaded once.

The newest ``max_images`` images under ``max_image_bytes`` (unless ``include_images`` is
off), and text files: the first ``max_text_attachment_kb`` of each (no more is read),
marked when cut.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import aiohttp

from salon.config import DiscordConfig
from salon.model import Attachment, Message
from salon.platforms.discord.refusals import NETWORK_ERRORS
from salon.platforms.images import ImageWindow, read_at_most

__all__ = ["AttachmentLoader"]

logger = logging.getLogger(__name__)

_DOWNLOAD_TIMEOUT = 30.0  # seconds for one attachment
_TEXT_SUFFIXES = (".txt", ".md", ".py", ".json", ".csv", ".log", ".yaml", ".yml", ".toml")


class AttachmentLoader:
    def __init__(self, config: DiscordConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        # Discord says each image's size: the newest are chosen by it, loaded or not.
        self._images = ImageWindow(
            lambda file: self._download(file, image=True),
            wanted=lambda file: _image(file) and file.size <= self.config.max_image_bytes,
            kept=0,
            count_failed=True,
        )

    async def open(self) -> None:
        timeout = aiohttp.ClientTimeout(total=_DOWNLOAD_TIMEOUT)
        self._session = aiohttp.ClientSession(timeout=timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def load(self, messages: Sequence[Message], *, images: bool = True) -> list[Message]:
        """``messages`` with the data the model may see; a message with nothing new to
        load is returned as it was (the same object). ``images=False``: text files only,
        images already loaded are dropped."""
        budget = self.config.image_budget if images else 0
        return await self._images.load(messages, budget=budget, others=self._text)

    async def _text(self, attachment: Attachment) -> bytes | None:
        """A text file's start (an image over the budget or the size: nothing)."""
        textual = attachment.content_type.startswith("text/")
        if _image(attachment) or not (textual or attachment.filename.endswith(_TEXT_SUFFIXES)):
            return None
        if attachment.data is not None:
            return attachment.data
        return await self._download(attachment, image=False)

    async def _download(self, attachment: Attachment, *, image: bool) -> bytes | None:
        limit = self.config.max_image_bytes if image else self.config.max_text_attachment_kb * 1024
        if self._session is None or limit <= 0:
            return None
        try:
            async with self._session.get(attachment.url) as response:
                if response.status != 200:
                    logger.warning("Discord: %s answered %s", attachment.filename, response.status)
                    return None
                data = await read_at_most(response.content, limit)
        except NETWORK_ERRORS as exc:
            logger.warning("Discord: could not load %s: %s", attachment.filename, exc)
            return None
        if not image and attachment.size > len(data):
            kept, whole = round(len(data) / 1024), round(attachment.size / 1024)
            data += f"\n[cut: the first {kept} kB of {whole} kB]".encode()
        return data


def _image(attachment: Attachment) -> bool:
    return attachment.content_type.startswith("image/")
