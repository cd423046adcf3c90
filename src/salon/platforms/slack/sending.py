"""Posting on Slack: ``chat.postMessage`` with the text escaped (nothing the model writes
can notify a channel or a group), split at ``max_chars``, into the thread the context is;
Salon's own notes carry message metadata so they come back tagged ``Tag.NOTE``; a
progress report is one note, edited with ``chat.update`` at most every ``interval``."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from salon.model import Attachment, ChannelRef, Message, Tag
from salon.platforms.base import file_lines
from salon.platforms.slack.client import call
from salon.platforms.slack.people import NOTE_EVENT, People, thread_of
from salon.platforms.slack.reading import Reader
from salon.platforms.slack.text import escape, split

__all__ = ["Sender"]

_JOBS = 256  # progress messages remembered: a bound, not a limit
_NOTE = {"event_type": NOTE_EVENT, "event_payload": {}}


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
        self._max_chars = max_chars
        self._interval = interval
        self._progress: OrderedDict[str, tuple[ChannelRef, str, float]] = OrderedDict()

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
        **extra: Any,
    ) -> Message:
        """Every piece is posted; the first one is returned (the one replies point at)."""
        lines = file_lines(files, local=False)
        whole = "\n".join([text, *lines]) if lines else text
        first: Message | None = None
        for piece in split(whole, self._max_chars) or [""]:
            sent = await self.post(channel, piece, note=note, **extra)
            first = first or sent
        assert first is not None
        return first

    async def post(
        self, channel: ChannelRef, text: str, *, note: bool = False, **extra: Any
    ) -> Message:
        channel_id, thread = thread_of(channel)
        params: dict[str, Any] = {"channel": channel_id, "text": escape(text) or " "}
        if thread is not None:
            params["thread_ts"] = thread
        if note:
            params["metadata"] = _NOTE
        params |= extra
        found = await call(
            f"post in {channel.name or channel_id}",
            self._client().chat_postMessage(unfurl_links=False, **params),
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
        text = text[: self._max_chars]
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
