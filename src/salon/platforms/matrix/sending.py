"""Sending to Matrix rooms: messages and notes (an image a tool made follows the text as an
``m.image`` event, ``media.py``), each under a transaction id that makes its next try safe;
the key of an answer's first event (``sent_before``); direct messages, reactions,
redactions and the typing notice."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from salon.errors import PlatformError
from salon.model import Attachment, ChannelRef, Message, Participant
from salon.platforms.base import file_lines
from salon.platforms.matrix.api import Homeserver, new_txn_id
from salon.platforms.matrix.convert import MXID, NOTE_KEY, SALON_KEY, Me, room_and_root
from salon.platforms.matrix.directs import DirectRooms
from salon.platforms.matrix.media import Uploader
from salon.platforms.matrix.reading import Reader

__all__ = ["Sender"]

JSON = dict[str, Any]
_TYPING_REFRESH = 20.0  # the typing notice lasts 30 s: renewed before it lapses
_UNSENT = 256  # transaction ids of sends that failed, kept for their next try: a bound


class Sender:
    def __init__(
        self,
        *,
        need: Callable[[], Homeserver],
        read: Callable[[], Reader],
        me: Callable[[], Me],
    ) -> None:
        """``need``, ``read``: the homeserver and the reader of this connection (a
        PlatformError before it is made)."""
        self._need = need
        self._read = read
        self._me = me
        self._uploads: Uploader | None = None
        self._unsent: OrderedDict[str, str] = OrderedDict()  # content -> its transaction id
        self._directs = DirectRooms(need, lambda: me().user_id)

    def connect(self, server: Homeserver) -> None:
        """A new connection: its media repository's upload limit is asked anew."""
        self._uploads = Uploader(server)

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
        key: str | None = None,
        reply_to: str | None = None,
    ) -> Message:
        """``MatrixPlatform.send``: the text, then each uploaded image as an event."""
        images, links = await self._uploaded(files)
        body = "\n".join([text, *file_lines(links, local=False)]) if links else text
        contents: list[JSON] = []
        if body or not images:
            content = self._content(channel, body, note=note)
            if reply_to and "m.relates_to" not in content:
                content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
            contents.append(content)
        for image in images:
            contents.append({**self._content(channel, "", note=note), **image, "m.mentions": {}})
        if key:
            contents[0][SALON_KEY] = key
        sent = [
            await self._send_content(channel, content, key if index == 0 else None)
            for index, content in enumerate(contents)
        ]
        return sent[0]

    async def _uploaded(self, files: Sequence[Attachment]) -> tuple[list[JSON], list[Attachment]]:
        """The ``m.image`` contents of the images uploaded, and the files left as links."""
        images: list[JSON] = []
        links: list[Attachment] = []
        for file in files:
            if self._uploads is None:
                raise PlatformError("not connected to the Matrix homeserver")
            uploaded = await self._uploads.upload(file)
            if uploaded is None:
                links.append(file)
            else:
                images.append(uploaded.content)
        return images, links

    async def _send_content(
        self, channel: ChannelRef, content: JSON, key: str | None = None
    ) -> Message:
        """One event. Its transaction id is made from ``key``, else it is the one a failed
        try of the same content used (the homeserver may have taken that one: the answer's
        next try must not post it twice), else a new one."""
        room, _ = room_and_root(channel)
        same = hashlib.sha256(json.dumps([room, content], sort_keys=True).encode()).hexdigest()
        txn = _key_txn(key) if key else self._unsent.pop(same, "") or new_txn_id()
        try:
            event_id = await self._need().send_event(room, "m.room.message", content, txn)
        except PlatformError as exc:
            if exc.transient:
                self._unsent[same] = txn
                while len(self._unsent) > _UNSENT:
                    self._unsent.popitem(last=False)
            raise
        message = self._read().message(
            {**_shell(event_id, self._me().user_id), "content": content}, room
        )
        assert message is not None
        return message

    def _content(self, channel: ChannelRef, body: str, *, note: bool) -> JSON:
        """A message's content: a note is an ``m.notice`` that notifies nobody; an answer
        notifies only the people it names by MXID (never the whole room)."""
        content: JSON = {"msgtype": "m.notice" if note else "m.text", "body": body}
        if note:
            content[NOTE_KEY] = True
            content["m.mentions"] = {}
        else:
            users = sorted(set(MXID.findall(body)) - {self._me().user_id})
            content["m.mentions"] = {"user_ids": users}
        _, root = room_and_root(channel)
        if root is not None:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": root},
            }
        return content

    async def note(self, channel: ChannelRef, text: str) -> str:
        """A note posted; its event id."""
        return (await self.send(channel, text, note=True)).id

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """``MatrixPlatform.sent_before``: ``note`` sent under the key's transaction id,
        and what came back read."""
        room, _ = room_and_root(channel)
        server = self._need()
        content = self._content(channel, note, note=True)
        event_id = await server.send_event(room, "m.room.message", content, _key_txn(key))
        came_back = (await server.event(room, event_id)).get("content") or {}
        return not (came_back.get(NOTE_KEY) and came_back.get("body") == note)

    async def send_direct(self, person: Participant, text: str) -> None:
        room = await self._directs.of(person.id)
        content = {"msgtype": "m.text", "body": text, "m.mentions": {}}
        await self._need().send_event(room, "m.room.message", content)

    async def delete(self, channel: ChannelRef, message_id: str) -> None:
        room, _ = room_and_root(channel)
        await self._need().redact(room, message_id)

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        room, _ = room_and_root(channel)
        content = {
            "m.relates_to": {"rel_type": "m.annotation", "event_id": message_id, "key": emoji}
        }
        await self._need().send_event(room, "m.reaction", content)

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        room, _ = room_and_root(channel)
        server = self._need()
        user_id = self._me().user_id

        async def keep_typing() -> None:
            while True:
                with contextlib.suppress(PlatformError):
                    await server.typing(room, user_id, True)
                await asyncio.sleep(_TYPING_REFRESH)  # renewing a notice, not waiting on one

        task = asyncio.create_task(keep_typing())
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            with contextlib.suppress(PlatformError):
                await server.typing(room, user_id, False)


def _key_txn(key: str) -> str:
    """The transaction id of the message sent under ``key`` (``sent_before``)."""
    return f"salon-key-{key}"


def _shell(event_id: str, sender: str) -> JSON:
    """The parts of a sent event the homeserver would give back, for the Message of it."""
    return {
        "type": "m.room.message",
        "event_id": event_id,
        "sender": sender,
        "origin_server_ts": int(time.time() * 1000),
    }
