"""What the model may see of attachments, downloaded once.

The newest ``max_images`` images under ``max_image_bytes`` (unless ``include_images`` is
off), and text files: the first ``max_text_attachment_kb`` of each (no more is read),
marked when cut.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import aiohttp

from salon.config import DiscordConfig
from salon.model import Attachment, Message, Tag
from salon.platforms.discord.refusals import NETWORK_ERRORS

__all__ = ["AttachmentLoader"]

logger = logging.getLogger(__name__)

_DOWNLOAD_TIMEOUT = 30.0  # seconds for one attachment
_TEXT_SUFFIXES = (".txt", ".md", ".py", ".json", ".csv", ".log", ".yaml", ".yml", ".toml")


class AttachmentLoader:
    def __init__(self, config: DiscordConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None

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
        out = list(messages)
        images_left = self.config.max_images if self.config.include_images and images else 0
        for index in range(len(out) - 1, -1, -1):  # the newest images first
            # Salon's notes (a tool's images among them) are never read back: not loaded.
            if out[index].attachments and Tag.NOTE not in out[index].tags:
                loaded, images_left = await self._load_files(out[index], images_left)
                if loaded != out[index]:
                    out[index] = loaded
        return out

    async def _load_files(self, message: Message, images_left: int) -> tuple[Message, int]:
        files = []
        for attachment in message.attachments:
            image = attachment.content_type.startswith("image/")
            wanted = self._wanted(attachment, images_left)
            images_left -= 1 if image and wanted else 0
            data = attachment.data
            if wanted and data is None:
                data = await self._download(attachment, image)
            files.append(replace(attachment, data=data if wanted else None))
        return replace(message, attachments=tuple(files)), images_left

    def _wanted(self, attachment: Attachment, images_left: int) -> bool:
        if attachment.content_type.startswith("image/"):
            return images_left > 0 and attachment.size <= self.config.max_image_bytes
        textual = attachment.content_type.startswith("text/")
        return textual or attachment.filename.endswith(_TEXT_SUFFIXES)

    async def _download(self, attachment: Attachment, image: bool) -> bytes | None:
        limit = self.config.max_image_bytes if image else self.config.max_text_attachment_kb * 1024
        if self._session is None or limit <= 0:
            return None
        try:
            async with self._session.get(attachment.url) as response:
                if response.status != 200:
                    logger.warning("Discord: %s answered %s", attachment.filename, response.status)
                    return None
                data = await _read_at_most(response.content, limit)
        except NETWORK_ERRORS as exc:
            logger.warning("Discord: could not load %s: %s", attachment.filename, exc)
            return None
        if not image and attachment.size > len(data):
            kept, whole = round(len(data) / 1024), round(attachment.size / 1024)
            data += f"\n[cut: the first {kept} kB of {whole} kB]".encode()
        return data


async def _read_at_most(stream: aiohttp.StreamReader, limit: int) -> bytes:
    data = bytearray()
    while len(data) < limit:
        chunk = await stream.read(limit - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)
