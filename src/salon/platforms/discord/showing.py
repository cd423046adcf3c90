"""What the bot shows on Discord besides text: files (images in embeds, with their links),
progress messages that are edited as a job advances, and the typing indicator."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import discord

from salon.errors import PlatformError
from salon.model import Attachment, ChannelRef
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.permissions import SEND
from salon.platforms.discord.refusals import NETWORK_ERRORS, Once, translated, where

__all__ = ["FileBatch", "ProgressBoard", "TypingIndicator", "file_batches"]

logger = logging.getLogger(__name__)

PER_MESSAGE = 10  # embeds (and files) Discord takes in one message
_EMBEDDABLE = (".png", ".jpg", ".jpeg", ".gif", ".webp")  # what attachment:// may show
_LINKABLE_NAME = re.compile(r"[A-Za-z0-9._-]+")  # what an attachment:// name may hold
_TITLE, _DESCRIPTION = 256, 4096  # Discord's embed limits


@dataclass(frozen=True)
class FileBatch:
    """The files and embeds of one message."""

    files: tuple[Attachment, ...]
    embeds: tuple[discord.Embed, ...]

    def uploads(self) -> list[discord.File]:
        """Fresh upload objects (a retried send needs unread ones)."""
        return [
            discord.File(io.BytesIO(f.data), f.filename) for f in self.files if f.data is not None
        ]


def _web(url: str) -> bool:
    return url.startswith(("https://", "http://"))


def _embeddable(file: Attachment) -> bool:
    if file.data is not None:
        name = file.filename
        return name.lower().endswith(_EMBEDDABLE) and _LINKABLE_NAME.fullmatch(name) is not None
    return file.content_type.startswith("image/") and _web(file.url)


def _embeds(files: Sequence[Attachment]) -> list[discord.Embed]:
    """An embed per image, titled with its label and linked to its public URL; with several
    links (a sprite's directions, as in ``000``) the first embed lists them all."""
    images = [f for f in files if _embeddable(f)]
    embeds = []
    for file in images:
        url = file.url if _web(file.url) else None
        embed = discord.Embed(title=(file.label or file.filename)[:_TITLE], url=url)
        source = f"attachment://{file.filename}" if file.data is not None else file.url
        embeds.append(embed.set_image(url=source))
    linked = [f for f in images if _web(f.url)]
    if len(linked) > 1:
        links = " · ".join(f"[{f.label or f.filename}]({f.url})" for f in linked)
        embeds[0].description = links[:_DESCRIPTION]
    return embeds


def file_batches(files: Sequence[Attachment]) -> list[FileBatch]:
    """``files`` in messages of at most ten; links without data need no upload."""
    batches = []
    for start in range(0, len(files), PER_MESSAGE):
        chunk = tuple(files[start : start + PER_MESSAGE])
        batches.append(FileBatch(chunk, tuple(_embeds(chunk))))
    return batches


@dataclass
class _Job:
    message: discord.Message
    text: str
    shown: str
    last: float  # time.monotonic() of the last edit
    pending: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


Post = Callable[[str], Awaitable[discord.Message]]


class ProgressBoard:
    """One message per running job: posted at the first report, then edited at most every
    ``interval`` seconds with the newest report (reports in between are folded), and once
    more at the end. Edits that fail are logged and cost only the display."""

    def __init__(self, interval: float, max_jobs: int = 64) -> None:
        self.interval = interval
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[str, _Job] = OrderedDict()

    async def report(self, key: str, text: str, *, done: bool, post: Post) -> None:
        job = self._jobs.get(key)
        if job is None:
            if not done:
                message = await post(text)
                self._jobs[key] = _Job(message, text, text, time.monotonic())
                while len(self._jobs) > self.max_jobs:
                    self._forget(next(iter(self._jobs)))
            return
        job.text = text
        if done:
            self._forget(key)
            await self._edit(job)
        elif job.pending is None:
            job.pending = asyncio.create_task(self._edit_later(job), name=f"progress {key}")

    def _forget(self, key: str) -> None:
        job = self._jobs.pop(key)
        if job.pending is not None:
            job.pending.cancel()

    async def _edit_later(self, job: _Job) -> None:
        wait = job.last + self.interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        job.pending = None  # a report from now on schedules the next edit
        await self._edit(job)

    async def _edit(self, job: _Job) -> None:
        async with job.lock:  # edits of one message never cross on the way
            text = job.text
            if text == job.shown:
                return
            job.last = time.monotonic()
            try:
                await job.message.edit(content=text)
            except (discord.DiscordException, *NETWORK_ERRORS) as exc:
                logger.warning("Discord: could not edit a progress message: %s", exc)
                return
            job.shown = text

    def close(self) -> None:
        for key in list(self._jobs):
            self._forget(key)


class TypingIndicator:
    """Typing shows at once and is said again until the context ends. A failure costs
    only the indicator: it is logged once per channel and the answer goes on."""

    def __init__(self, channels: Channels, every: Callable[[], float]) -> None:
        """``every``: the seconds between two showings (read before each wait)."""
        self._channels = channels
        self._every = every
        self._told = Once()

    @asynccontextmanager
    async def shown(self, channel: ChannelRef) -> AsyncIterator[None]:
        """Show it in ``channel`` while the context is open."""
        keeper: asyncio.Task[None] | None = None
        try:
            target = await self._channels.get(channel)
            await self._show(target)
            keeper = asyncio.create_task(self._keep(channel, target), name=f"typing {channel.key}")
        except PlatformError as exc:
            self._failed(channel, exc)
        try:
            yield
        finally:
            if keeper is not None:
                keeper.cancel()
                await asyncio.gather(keeper, return_exceptions=True)

    async def _keep(self, channel: ChannelRef, target: discord.abc.Messageable) -> None:
        try:
            while True:
                await asyncio.sleep(self._every())
                await self._show(target)
        except PlatformError as exc:
            self._failed(channel, exc)

    async def _show(self, target: discord.abc.Messageable) -> None:
        with translated(f"show typing in {where(target)}", needs=SEND):
            await target.typing()

    def _failed(self, channel: ChannelRef, exc: PlatformError) -> None:
        if self._told.first(channel.key):
            logger.warning("%s; answering without the typing indicator", exc)
