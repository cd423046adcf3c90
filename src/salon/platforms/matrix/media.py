"""Files a tool made, uploaded to the homeserver's media repository and sent as ``m.image``
events: an image with its bytes (or a saved file Salon can read) under the homeserver's
upload limit. Anything else stays a link line in the text (``file_lines``)."""

from __future__ import annotations

import asyncio
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import PIL.Image

from salon.errors import PlatformError
from salon.model import Attachment
from salon.platforms.matrix.api import Homeserver

__all__ = ["Uploaded", "Uploader"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Uploaded:
    """An image in the media repository: the ``m.image`` content that shows it."""

    content: JSON


class Uploader:
    """Uploads a message's images; the homeserver's upload limit is asked once."""

    def __init__(self, server: Homeserver) -> None:
        self._server = server
        self._limit: int | None = None
        self._asked = False

    async def limit(self) -> int | None:
        if not self._asked:
            self._limit = await self._server.upload_limit()
            self._asked = True
        return self._limit

    async def upload(self, file: Attachment) -> Uploaded | None:
        """``file`` as an ``m.image`` content, or None where it stays a link (not an
        image, no bytes, over the limit, refused)."""
        if not file.content_type.startswith("image/"):
            return None
        limit = await self.limit()
        data = await _bytes(file, limit)
        if data is None:
            return None
        try:
            mxc = await self._server.upload(data, file.content_type, file.filename)
        except PlatformError as exc:
            logger.warning("Matrix: could not upload %s: %s", file.filename, exc)
            return None
        info: JSON = {"mimetype": file.content_type, "size": len(data), **_dimensions(data)}
        content: JSON = {
            "msgtype": "m.image",
            "body": file.label or file.filename,
            "filename": file.filename,
            "url": mxc,
            "info": info,
        }
        return Uploaded(content)


async def _bytes(file: Attachment, limit: int | None) -> bytes | None:
    """The file's bytes: its data, or its saved file read (at most ``limit`` bytes);
    None when there are none or they are over the limit."""
    data = file.data
    if data is None and file.path:
        data = await asyncio.to_thread(_read, Path(file.path), limit)
    if data is None or not data or (limit is not None and len(data) > limit):
        return None
    return data


def _read(path: Path, limit: int | None) -> bytes | None:
    try:
        with path.open("rb") as handle:
            return handle.read(-1 if limit is None else limit + 1)
    except OSError as exc:
        logger.warning("Matrix: could not read %s (%s)", path.name, type(exc).__name__)
        return None


def _dimensions(data: bytes) -> JSON:
    """``w`` and ``h`` where Pillow can read the image's header; nothing otherwise."""
    try:
        with PIL.Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (OSError, ValueError, PIL.Image.DecompressionBombError):
        return {}
    return {"w": width, "h": height}
