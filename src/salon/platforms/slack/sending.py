"""Posting on Slack: ``chat.postMessage`` with the text escaped (nothing the model writes
can notify a channel or a group) and no link or media unfurled, split at ``max_chars``,
into the thread the context is; Salon's own notes carry message metadata so they come
back tagged ``Tag.NOTE``, and the first message of an answer its key (``Reader.sent``:
whether it showed, after a stop); a progress report is one note, edited with
``chat.update`` at most every ``interval``. Files a tool made are uploaded after the text
(slack_sdk's ``files_upload_v2``: ``files.getUploadURLExternal``, the bytes POSTed,
``files.completeUploadExternal`` into the same channel and thread); one that cannot be
(no bytes, too big, refused) is a link line."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from salon.errors import PlatformError
from salon.model import Attachment, ChannelRef, Message, Tag
from salon.platforms.base import file_lines
from salon.platforms.slack.client import call
from salon.platforms.slack.people import ANSWER_EVENT, NOTE_EVENT, People, thread_of
from salon.platforms.slack.reading import Reader
from salon.platforms.slack.text import escape, split

__all__ = ["Sender"]

logger = logging.getLogger(__name__)

_JOBS = 256  # progress messages remembered: a bound, not a limit
# Slack takes files up to 1 GB; the bytes are held in memory, so Salon's bound is lower
MAX_UPLOAD = 100 * 1024 * 1024
# No previews of what the bot links: Slack unfurls media unless told not to.
_PLAIN: dict[str, Any] = {"unfurl_links": False, "unfurl_media": False}


class Sender:
    def __init__(
        self,
        *,
        client: Callable[[], AsyncWebClient],
        people: People,
        reader: Reader,
        max_chars: int,
        interval: float,
    ) -> None:
        self._client = client
        self._people = people
        self._reader = reader
        self.max_chars = max_chars
        self._interval = interval
        self._progress: OrderedDict[str, tuple[ChannelRef, str, float]] = OrderedDict()

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
        key: str | None = None,
        **extra: Any,
    ) -> Message:
        """Every piece is posted, then the files uploaded; the first piece is returned
        (the one replies point at), with ``key`` in its metadata (``Reader.sent``). Only a
        failure of the first post can be transient: once something is out, another try of
        the whole would show it twice."""
        loaded = [(file, await _bytes(file)) for file in files]
        uploads = [(file, data) for file, data in loaded if data is not None]
        lines = file_lines([file for file, data in loaded if data is None], local=False)
        first = await self._pieces(channel, text, lines, note=note, key=key, **extra)
        failed = [file for file, data in uploads if not await self.upload(channel, file, data)]
        if failed:
            with _settled():
                await self._pieces(channel, "", file_lines(failed, local=False), note=note)
        return first

    async def _pieces(
        self,
        channel: ChannelRef,
        text: str,
        lines: list[str],
        *,
        note: bool,
        key: str | None = None,
        **extra: Any,
    ) -> Message:
        whole = "\n".join([text, *lines]) if text else "\n".join(lines)
        first: Message | None = None
        for piece in split(whole, self.max_chars) or [""]:
            with _settled() if first is not None else nullcontext():
                sent = await self.post(
                    channel, piece, note=note, key=key if first is None else None, **extra
                )
            first = first or sent
        assert first is not None
        return first

    async def direct(self, user_id: str, text: str) -> None:
        """``text`` to one person alone: their DM with the bot (``conversations.open``,
        scope im:write), then the message, never cached or logged."""
        try:
            opened = await call(
                "open a direct message", self._client().conversations_open(users=user_id)
            )
        except PlatformError as exc:
            if "missing_scope" in str(exc):
                raise PlatformError(f"{exc} (the bot token needs scope im:write)") from exc
            raise
        channel_id = str((opened.get("channel") or {}).get("id", ""))
        for piece in split(text, self.max_chars):
            await call(
                "send a direct message",
                self._client().chat_postMessage(channel=channel_id, text=escape(piece), **_PLAIN),
                repeatable=False,
            )

    async def upload(self, channel: ChannelRef, file: Attachment, data: bytes) -> bool:
        """Whether ``file`` was uploaded into the context; a refusal is logged."""
        channel_id, thread = thread_of(channel)
        request = self._client().files_upload_v2(
            filename=file.filename,
            file=data,
            title=file.label or file.filename,
            channel=channel_id,
            thread_ts=thread,
        )
        try:
            await call(f"upload {file.filename} to {channel.name or channel_id}", request)
        except PlatformError as exc:
            hint = " (the bot token needs scope files:write)" if "missing_scope" in str(exc) else ""
            logger.warning("Slack: %s%s; posted as a link instead", exc, hint)
            return False
        return True

    async def post(
        self,
        channel: ChannelRef,
        text: str,
        *,
        note: bool = False,
        key: str | None = None,
        **extra: Any,
    ) -> Message:
        """One message; a note, or one sent under ``key``, carries message metadata."""
        channel_id, thread = thread_of(channel)
        params: dict[str, Any] = {"channel": channel_id, "text": escape(text) or " "}
        if thread is not None:
            params["thread_ts"] = thread
        if note or key is not None:
            payload = {"key": key} if key is not None else {}
            kind = NOTE_EVENT if note else ANSWER_EVENT
            params["metadata"] = {"event_type": kind, "event_payload": payload}
        params |= extra
        found = await call(
            f"post in {channel.name or channel_id}",
            self._client().chat_postMessage(**_PLAIN, **params),
            repeatable=False,  # Slack takes the same post twice
        )
        message = Message(
            id=str(found.get("ts", "")),
            channel=channel,
            author=self._people.me,
            text=text,
            created_at=datetime.now(UTC),
            tags=frozenset({Tag.NOTE}) if note else frozenset(),
        )
        self._reader.added(message)
        return message

    async def update(self, channel: ChannelRef, ts: str, text: str, **extra: Any) -> None:
        channel_id, _ = thread_of(channel)
        await call(
            f"edit a message in {channel.name or channel_id}",
            self._client().chat_update(channel=channel_id, ts=ts, text=escape(text), **extra),
        )

    async def progress(self, channel: ChannelRef, key: str, text: str, *, done: bool) -> None:
        text = text[: self.max_chars]
        known = self._progress.get(key)
        if known is None:
            if done:
                return
            sent = await self.post(channel, text, note=True)
            self._progress[key] = (channel, sent.id, time.monotonic())
            while len(self._progress) > _JOBS:
                self._progress.popitem(last=False)
            return
        where, ts, last = known
        if done:
            self._progress.pop(key, None)
        elif time.monotonic() - last < self._interval:
            return
        else:
            self._progress[key] = (where, ts, time.monotonic())
        await self.update(where, ts, text)


@contextmanager
def _settled() -> Iterator[None]:
    """A failure here comes after part of the message is out: not to be tried again."""
    try:
        yield
    except PlatformError as exc:
        if not exc.transient:
            raise
        raise PlatformError(str(exc)) from exc


async def _bytes(file: Attachment) -> bytes | None:
    """What an upload sends: the file's bytes, or its saved copy read; None when it has
    neither or is past ``MAX_UPLOAD`` (it stays a link line)."""
    if file.data is not None:
        return file.data if 0 < len(file.data) <= MAX_UPLOAD else None
    if not file.path:
        return None
    path = Path(file.path)
    try:
        size = (await asyncio.to_thread(path.stat)).st_size
        if not 0 < size <= MAX_UPLOAD:
            return None
        return await asyncio.to_thread(path.read_bytes)
    except OSError as exc:
        logger.warning("Slack: cannot read %s to upload it: %s", file.filename, exc)
        return None
