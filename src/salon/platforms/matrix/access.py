"""Which rooms the bot knows and who may read them, from room membership (``m.room.member``
state): a room is the bot's when its own membership is ``join``; a person may read a room
(a thread: its room) when theirs is ``join`` now. For linked contexts (``salon.agent.links``)
and channels rebuilt from a stored key (the dispatcher's lookup).

Memberships are kept per (room, user) until the sync brings a member event for that user
in that room, a gap in the room's timeline (events may have been missed), the bot's leaving
the room, or ``_KEPT_SECONDS`` at most. What cannot be told (a room the bot cannot read, a
refused call) is not kept, and counts as unreadable.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from mautrix.errors import MatrixRequestError

from salon.errors import PlatformError
from salon.model import ChannelRef, Participant
from salon.platforms.matrix.api import Homeserver
from salon.platforms.matrix.convert import channel_of, room_and_root

__all__ = ["Access"]

logger = logging.getLogger(__name__)

_KEPT_SECONDS = 30.0  # a membership is asked again after this
_KEPT = 2048  # (room, user) memberships kept
_NOT_THERE = frozenset({400, 403, 404})  # no such room or event, or not one the bot is in


class Access:
    def __init__(self, server: Callable[[], Homeserver], me: Callable[[], str]) -> None:
        self._server = server
        self._me = me
        self._members: OrderedDict[tuple[str, str], tuple[float, str]] = OrderedDict()

    async def find(self, channel_id: str) -> ChannelRef | None:
        """The room (``!id``) or thread (``!id/$root``) as messages in it are given, if the
        bot is joined to the room (and the thread's root is there); else None."""
        room, root = room_and_root(ChannelRef("matrix", channel_id))
        if not _room_id(room) or (root is not None and not _word(root[1:])):
            return None
        if await self._membership(room, self._me()) != "join":
            return None
        if root is not None and await self._event_missing(room, root):
            return None
        return channel_of(room, root)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """Whether ``person`` is joined to the room now (a thread: its room)."""
        room, _ = room_and_root(channel)
        if not person.id.startswith("@") or not _room_id(room):
            return False
        try:
            return await self._membership(room, person.id) == "join"
        except PlatformError as exc:
            logger.warning("Matrix: cannot tell whether %s reads %s: %s", person.id, room, exc)
            return False

    def changed(self, room: str, user: str) -> None:
        """A member event for ``user`` in ``room`` came in the sync."""
        self._members.pop((room, user), None)

    def forget_room(self, room: str) -> None:
        """The room's memberships may have changed unseen (a gap, the bot's leaving)."""
        for key in [k for k in self._members if k[0] == room]:
            del self._members[key]

    async def _membership(self, room: str, user: str) -> str:
        """``user``'s membership of ``room`` ('' where the room shows none to the bot)."""
        key = (room, user)
        kept = self._members.get(key)
        if kept is not None and time.monotonic() - kept[0] < _KEPT_SECONDS:
            self._members.move_to_end(key)
            return kept[1]
        try:
            state = await self._server().state(room, "m.room.member", user)
        except PlatformError as exc:
            if _status(exc) not in _NOT_THERE:
                raise
            return ""  # not kept: the bot may join it in a moment
        membership = state.get("membership") if state else None
        found = membership if isinstance(membership, str) else ""
        self._members[key] = (time.monotonic(), found)
        self._members.move_to_end(key)
        while len(self._members) > _KEPT:
            self._members.popitem(last=False)
        return found

    async def _event_missing(self, room: str, event_id: str) -> bool:
        try:
            await self._server().event(room, event_id)
        except PlatformError as exc:
            if _status(exc) in _NOT_THERE:
                return True
            raise
        return False


def _status(exc: PlatformError) -> int | None:
    cause = exc.__cause__
    return cause.http_status if isinstance(cause, MatrixRequestError) else None


def _word(text: str) -> bool:
    return bool(text) and not any(c.isspace() or c == "/" for c in text)


def _room_id(room: str) -> bool:
    """A room id (``!opaque:server``, or ``!opaque`` from room version 12), not an alias."""
    return room.startswith("!") and _word(room[1:])
