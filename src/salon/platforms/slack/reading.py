"""History from Slack: ``conversations.history`` for a channel, ``conversations.replies``
for a thread (its root first), ``pins.list`` for pins; what was said after a message,
read back after a gap (``after``); and whether an answer went out under a key (``sent``).

What was fetched is kept per context (a bounded number of them) and kept exact by the
events: a new message is added, an edit replaces, a deletion removes; a dropped
connection forgets everything, since events may be missed until it is back.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from salon.model import ChannelRef, Message
from salon.platforms.slack.client import call
from salon.platforms.slack.files import Images
from salon.platforms.slack.people import People, thread_of

__all__ = ["Reader"]

logger = logging.getLogger(__name__)

_PAGE = 200  # Slack asks for no more than 200 a page
_THREAD_PAGES = 5  # pages of a thread read back after a gap, at most
_KEYED = 100  # newest messages of a channel searched for an answer's key


@dataclass
class _Kept:
    messages: list[Message] = field(default_factory=list)
    everything: bool = False  # nothing older exists


class Reader:
    def __init__(
        self,
        *,
        client: Callable[[], AsyncWebClient],
        people: People,
        max_channels: int,
        images: Images,
    ) -> None:
        self._client = client
        self._images = images
        self._people = people
        self._max = max_channels
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._pins: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()  # channel id ->

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        """The newest ``limit`` messages, their newest images with their data."""
        if limit <= 0:
            return []
        return await self._images.load(await self._window(channel, limit))

    async def _window(self, channel: ChannelRef, limit: int) -> list[Message]:
        kept = self._kept.get(channel.key)
        if kept is not None and (kept.everything or len(kept.messages) >= limit):
            self._kept.move_to_end(channel.key)
            return kept.messages[-limit:]
        messages, everything = await self._fetch(channel, limit)
        self._kept[channel.key] = _Kept(messages, everything)
        while len(self._kept) > self._max:
            self._kept.popitem(last=False)
        return messages[-limit:]

    async def _fetch(self, channel: ChannelRef, limit: int) -> tuple[list[Message], bool]:
        """Newest first, page by page, until ``limit`` or the start; returned oldest first."""
        channel_id, thread = thread_of(channel)
        raw: list[dict[str, Any]] = []
        cursor = ""
        while True:
            if thread is None:
                request = self._client().conversations_history(
                    channel=channel_id,
                    limit=min(_PAGE, max(limit, 1)),
                    cursor=cursor or None,
                    include_all_metadata=True,
                )
            else:  # a thread: its root, then its replies, oldest first
                request = self._client().conversations_replies(
                    channel=channel_id,
                    ts=thread,
                    limit=_PAGE,
                    cursor=cursor or None,
                    include_all_metadata=True,
                )
            page = await call(f"read the history of {channel.name or channel_id}", request)
            found = list(page.get("messages", []))
            raw += found if thread is not None else list(reversed(found))
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor or (thread is None and len(raw) >= limit):
                break
        if thread is None:
            raw.sort(key=lambda m: float(str(m["ts"])))
        messages = await self._people.convert_all(channel, raw)
        return messages, not cursor

    async def after(self, channel: ChannelRef, after: str, *, limit: int) -> list[dict[str, Any]]:
        """The raw messages of ``channel`` newer than the message ``after`` (its ts), the
        newest ``limit`` of them, oldest first. A channel: one ``conversations.history``
        from ``oldest`` (which it excludes; the newest of the range come first); a thread:
        ``conversations.replies`` from ``oldest``, earliest first, page by page. An
        ``after`` that is no ts (an ``/ask``) reads the newest ``limit``."""
        channel_id, thread = thread_of(channel)
        oldest = after if _is_ts(after) else None
        what = f"read back {channel.name or channel_id}"
        if thread is None:
            request = self._client().conversations_history(
                channel=channel_id, oldest=oldest, limit=limit, include_all_metadata=True
            )
            page = await call(what, request)
            raw = list(reversed(page.get("messages", [])))
            more = bool(page.get("has_more"))
        else:
            raw, more = await self._thread_after(what, channel_id, thread, oldest)
        newer = [m for m in raw if oldest is None or float(m["ts"]) > float(oldest)]
        if more or len(newer) > limit:
            logger.warning(
                "Slack: more than %d messages in %s since the gap; the newest read back",
                limit,
                channel.key,
            )
        return newer[-limit:]

    async def _thread_after(
        self, what: str, channel_id: str, thread: str, oldest: str | None
    ) -> tuple[list[dict[str, Any]], bool]:
        """A thread's messages from ``oldest`` on, earliest first, and whether more are
        left unread past ``_THREAD_PAGES``."""
        raw: list[dict[str, Any]] = []
        cursor = ""
        for _ in range(_THREAD_PAGES):
            request = self._client().conversations_replies(
                channel=channel_id,
                ts=thread,
                oldest=oldest,
                limit=_PAGE,
                cursor=cursor or None,
                include_all_metadata=True,
            )
            page = await call(what, request)
            raw += page.get("messages", [])
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
        return raw, bool(cursor)

    async def sent(self, channel: ChannelRef, key: str, *, by: str) -> bool:
        """Whether ``by`` (the bot) posted a message under ``key`` (its metadata) among the
        newest ``_KEYED`` of the channel, or in the thread (``_THREAD_PAGES`` pages)."""
        channel_id, thread = thread_of(channel)
        what = f"look for an answer in {channel.name or channel_id}"
        if thread is None:
            request = self._client().conversations_history(
                channel=channel_id, limit=_KEYED, include_all_metadata=True
            )
            raw = list((await call(what, request)).get("messages", []))
        else:
            raw, _ = await self._thread_after(what, channel_id, thread, None)
        return any(m.get("user") == by and _key_of(m) == key for m in raw)

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        """The channel's pinned messages, oldest first (a thread has its channel's). Kept
        per channel until a pin event, an edit or deletion there, or a new connection."""
        channel_id, _ = thread_of(channel)
        raw = self._pins.get(channel_id)
        if raw is None:
            found = await call(
                f"read the pins of {channel.name or channel_id}",
                self._client().pins_list(channel=channel_id),
            )
            raw = [i["message"] for i in found.get("items", []) if i.get("type") == "message"]
            raw.sort(key=lambda m: float(m["ts"]))
            self._pins[channel_id] = raw
            while len(self._pins) > self._max:
                self._pins.popitem(last=False)
        return await self._people.convert_all(channel, raw)

    def pins_changed(self, channel_id: str) -> None:
        self._pins.pop(channel_id, None)

    # -- kept exact by the events ------------------------------------------------------

    def added(self, message: Message) -> None:
        kept = self._kept.get(message.channel.key)
        if kept is not None and all(m.id != message.id for m in kept.messages):
            kept.messages.append(message)

    def edited(self, message: Message) -> None:
        kept = self._kept.get(message.channel.key)
        if kept is not None:
            kept.messages = [message if m.id == message.id else m for m in kept.messages]

    def deleted(self, channel: ChannelRef, ts: str) -> None:
        kept = self._kept.get(channel.key)
        if kept is not None:
            kept.messages = [m for m in kept.messages if m.id != ts]

    def forget(self, key: str | None = None) -> None:
        if key is None:
            self._kept.clear()
            self._pins.clear()
        else:
            for known in [k for k in self._kept if k == key or k.startswith(key + "-")]:
                del self._kept[known]

    def cached(self, channel: ChannelRef) -> Sequence[Message]:
        kept = self._kept.get(channel.key)
        return kept.messages if kept is not None else ()


def _key_of(raw: dict[str, Any]) -> str | None:
    """The answer key in a message's metadata (``Sender.post``), if any."""
    payload = (raw.get("metadata") or {}).get("event_payload") or {}
    key = payload.get("key") if isinstance(payload, dict) else None
    return str(key) if key is not None else None


def _is_ts(value: str) -> bool:
    """Whether ``value`` is a Slack message ts (``1712345678.000100``)."""
    seconds, dot, micros = value.partition(".")
    return seconds.isdigit() and (not dot or micros.isdigit())
