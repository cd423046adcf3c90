"""Reading a room from the homeserver (no local copy): history from ``/messages`` (a
thread's from ``/relations``), paginated until ``limit`` messages or the page bound, with
edits applied and redactions gone; pinned events; reply chains."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from salon.errors import PlatformError
from salon.model import ChannelRef, Message
from salon.platforms.images import ImageWindow
from salon.platforms.matrix.api import Homeserver
from salon.platforms.matrix.convert import (
    Me,
    Names,
    apply_changes,
    event_message,
    relation,
    room_and_root,
)

__all__ = ["Reader"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
_PAGE = 100
_SENDERS_KEPT = 4096  # senders of replied-to events beyond the window: a bound
_PAGES_PER_LIMIT = 4  # edits, reactions and state share pages with messages: a bound


class Reader:
    def __init__(
        self,
        server: Homeserver,
        names: Names,
        me: Me,
        *,
        reply_depth: int,
        max_images: int,
        max_image_bytes: int,
    ) -> None:
        self._server = server
        self._names = names
        self.me = me
        self._reply_depth = reply_depth
        self._max_images = max_images
        self._images = ImageWindow(  # an m.image is an image: the homeserver bounds its size
            lambda file: server.download(file.url, max_bytes=max_image_bytes),
            wanted=lambda file: True,
        )
        self._senders: OrderedDict[str, str] = OrderedDict()  # replied-to events' senders

    def message(self, event: JSON, room: str) -> Message | None:
        return event_message(event, room, self._names, self.me)

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        room, root = room_and_root(channel)
        events: list[JSON] = []
        messages: list[Message] = []
        start: str | None = None
        pages = max(1, -(-limit // _PAGE) * _PAGES_PER_LIMIT)
        for _ in range(pages):
            if root is None:
                page = await self._server.messages(room, start=start, limit=_PAGE)
                chunk, start = page.get("chunk") or [], page.get("end")
                self._names.learn(room, [*(page.get("state") or []), *chunk])
            else:
                page = await self._server.thread(room, root, start=start, limit=_PAGE)
                chunk, start = page.get("chunk") or [], page.get("next_batch")
            events.extend(chunk)
            for event in chunk:
                message = self.message(event, room)
                if message is not None and (root is not None or message.channel.parent_id is None):
                    messages.append(message)
            if len(messages) >= limit or not start or not chunk:
                break
        if root is not None and len(messages) < limit:
            first = await self._root(room, root)
            if first is not None:
                messages.append(replace(first, channel=channel))
        messages = apply_changes(events, messages)
        messages.sort(key=lambda m: m.created_at)
        window = await self._with_reply_authors(messages[-limit:] if limit > 0 else [])
        return await self._images.load(window, budget=self._max_images)

    async def _root(self, room: str, root: str) -> Message | None:
        try:
            return self.message(await self._server.event(room, root), room)
        except PlatformError:
            return None

    async def _with_reply_authors(self, messages: list[Message]) -> list[Message]:
        """Who each reply answers (a reply to the bot addresses it), from the window or the
        homeserver."""
        authors = {m.id: m.author.id for m in messages}
        done = []
        for message in messages:
            reply = message.reply_to_id
            if reply and reply not in authors:
                authors[reply] = await self.author_of(message)
            done.append(replace(message, reply_to_author_id=authors[reply]) if reply else message)
        return done

    async def author_of(self, message: Message) -> str:
        """The sender of the event ``message`` replies to ('' when it cannot be read);
        kept, as an event's sender never changes, so a window is not fetched again."""
        room, _ = room_and_root(message.channel)
        target = message.reply_to_id
        if not target:
            return ""
        if target in self._senders:
            return self._senders[target]
        try:
            event = await self._server.event(room, target)
        except PlatformError:
            return ""
        self._senders[target] = sender = str(event.get("sender", ""))
        while len(self._senders) > _SENDERS_KEPT:
            self._senders.popitem(last=False)
        return sender

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        room, _ = room_and_root(message.channel)
        chain: list[Message] = []
        seen = {message.id}
        target = message.reply_to_id
        while target and target not in seen and len(chain) < self._reply_depth:
            seen.add(target)
            try:
                event = await self._server.event(room, target)
            except PlatformError:
                break
            found = self.message(event, room)
            if found is None:
                break
            edited = await self._edited(room, found)
            chain.append(edited)
            target = found.reply_to_id
        return list(reversed(chain))

    async def _edited(self, room: str, message: Message) -> Message:
        """The message with its newest edit, from the event's bundled relations."""
        try:
            event = await self._server.event(room, message.id)
        except PlatformError:
            return message
        replaced = (event.get("unsigned", {}).get("m.relations") or {}).get("m.replace")
        if isinstance(replaced, dict) and "content" in replaced:
            return apply_changes([replaced], [message])[0]
        return message

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        """The room's pinned events (a thread reads its room's), oldest first."""
        room, _ = room_and_root(channel)
        state = await self._server.state(room, "m.room.pinned_events")
        ids = state.get("pinned") if state else None
        found = []
        for event_id in ids if isinstance(ids, list) else []:
            if not isinstance(event_id, str):
                continue
            try:
                event = await self._server.event(room, event_id)
            except PlatformError:
                continue  # unpinned meanwhile, or redacted
            message = self.message(event, room)
            if message is not None and relation(event).get("rel_type") != "m.replace":
                found.append(await self._edited(room, message))
        found.sort(key=lambda m: m.created_at)
        return found
