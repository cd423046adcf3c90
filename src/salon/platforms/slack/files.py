"""Images of Slack messages as the model's input: a message's ``files`` name their
``url_private``, which Slack serves only with the bot token (``Authorization: Bearer``,
scope ``files:read``); without it Slack answers with its sign-in page, so anything that is
not an image is dropped rather than shown to the model.

The newest ``max_images`` images of a window (under ``max_image_bytes`` each) are
downloaded, and kept for the next activations (a bounded number). The token is sent only
over https to Slack's file hosts (``files.slack.com``; GovSlack's ``files.slack-gov.com``),
or to the host of ``api_base_url`` by its own scheme (the Web API has the token already);
Slack issues ``url_private`` as https only, so plain http is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from salon.model import Attachment, Message
from salon.platforms.images import ImageWindow, read_at_most
from salon.platforms.slack.client import NETWORK_ERRORS

__all__ = ["Images", "attachments_of"]

logger = logging.getLogger(__name__)

_DOWNLOAD_TIMEOUT = 30.0
_FILE_HOSTS = (("https", "files.slack.com"), ("https", "files.slack-gov.com"))  # GovSlack


def attachments_of(raw: dict[str, Any]) -> tuple[Attachment, ...]:
    """A message's shared files (their data is downloaded when read)."""
    files = raw.get("files")
    if not isinstance(files, list):
        return ()
    return tuple(
        Attachment(
            filename=str(f.get("name") or f.get("title") or "file"),
            content_type=str(f.get("mimetype") or ""),
            size=int(f.get("size") or 0),
            url=str(f.get("url_private") or ""),
        )
        for f in files
        if isinstance(f, dict)
    )


class Images:
    def __init__(
        self, *, token: str, api_base_url: str | None, max_images: int, max_bytes: int
    ) -> None:
        self._token = token
        self._places = set(_FILE_HOSTS)
        if api_base_url:
            api = urlsplit(api_base_url)
            self._places.add((api.scheme, api.netloc))
        self._max_images = max_images
        self._max_bytes = max_bytes
        self._window = ImageWindow(
            self._download,
            wanted=lambda file: (
                file.content_type.startswith("image/") and 0 < file.size <= max_bytes
            ),
        )
        self._session: aiohttp.ClientSession | None = None
        self.downloads = 0

    def may_fetch(self, url: str) -> bool:
        """Whether ``url`` is one the bot token may be sent to (scheme and host)."""
        parts = urlsplit(url)
        return (parts.scheme, parts.netloc) in self._places

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def load(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with the data of their newest images (Salon's notes are skipped)."""
        return await self._window.load(messages, budget=self._max_images)

    async def _download(self, file: Attachment) -> bytes | None:
        if not self.may_fetch(file.url):
            logger.warning(
                "Slack: %s is not on Slack's file host over https; not fetched", file.filename
            )
            return None
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=_DOWNLOAD_TIMEOUT)
            self._session = aiohttp.ClientSession(timeout=timeout)
        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            async with self._session.get(file.url, headers=headers) as response:
                kind = response.content_type
                if response.status != 200 or not kind.startswith("image/"):
                    logger.warning(
                        "Slack: %s answered %s (%s), not an image; is files:read granted?",
                        file.filename,
                        response.status,
                        kind,
                    )
                    return None
                data = await read_at_most(response.content, self._max_bytes + 1)
        except NETWORK_ERRORS as exc:
            logger.warning("Slack: could not load %s: %s", file.filename, exc)
            return None
        if len(data) > self._max_bytes:
            logger.warning("Slack: %s is larger than max_image_bytes; skipped", file.filename)
            return None
        self.downloads += 1
        return data
