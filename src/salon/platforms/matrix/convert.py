"""Matrix events as ``salon.model`` messages: who wrote them (the display name each was sent
under, where the room told it), replies, threads, mentions (``m.mentions``, else the bot's
MXID or display name in the text), notes (Salon's own ``m.notice`` events, marked so) and
edits applied; ``MXID``, a user id as people write one."""

from __future__ import annotations

import bisect
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from salon.model import Attachment, ChannelRef, Message, Participant, Tag

__all__ = [
    "MXID",
    "NOTE_KEY",
    "SALON_KEY",
    "Names",
    "apply_changes",
    "channel_of",
    "event_message",
    "relation",
    "room_and_root",
]

JSON = dict[str, Any]
NOTE_KEY = "org.salon.note"  # in the content of Salon's own notes
SALON_KEY = "org.salon.key"  # the key a schedule's answer went out under
_THREAD_SEP = "/"
_NAMES = 4096  # people whose display names are remembered: a bound
_CHANGES = 16  # name changes remembered per person: a bound
# A user id as people write it: the server name ends with a letter, digit or an IPv6
# literal's ``]``, and a port is digits, so a sentence's full stop or colon is not in it.
_DNS_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
MXID = re.compile(
    rf"@[a-z0-9._=/+-]+:(?:\[[0-9a-fA-F:.]+\]|{_DNS_LABEL}(?:\.{_DNS_LABEL})*)(?::\d{{1,5}})?"
)


def room_and_root(channel: ChannelRef) -> tuple[str, str | None]:
    """The room of a channel and, for a thread, its root event."""
    room, sep, root = channel.id.partition(_THREAD_SEP + "$")
    return room, ("$" + root) if sep else None


def channel_of(room: str, root: str | None, name: str = "") -> ChannelRef:
    if root is None:
        return ChannelRef("matrix", room, name=name or room)
    return ChannelRef(
        "matrix", f"{room}{_THREAD_SEP}{root}", name=f"{name or room} thread", parent_id=room
    )


_Change = tuple[int, str, str | None]  # when (ms), the name then, the name before or None


class Names:
    """Display names by room and user, from the member events the bot saw (bounded), each
    with when it took effect: a message reads under the name it was sent under."""

    def __init__(self) -> None:
        # (room, user) -> changes, oldest first: (time, name, the name before it or None)
        self._changes: OrderedDict[tuple[str, str], list[_Change]] = OrderedDict()

    def learn(self, room: str, events: Iterable[JSON]) -> None:
        """Take the name changes among ``events`` (joins: a name is only sent under while
        joined), in any order, seen before or not."""
        for event in events:
            content = event.get("content")
            if event.get("type") != "m.room.member" or not isinstance(content, dict):
                continue
            if content.get("membership") != "join":
                continue
            unsigned = event.get("unsigned")
            before = unsigned.get("prev_content") if isinstance(unsigned, dict) else None
            change = (
                int(event.get("origin_server_ts", 0)),
                _display_name(content),
                _display_name(before) if isinstance(before, dict) else None,
            )
            self._add((room, str(event.get("state_key", ""))), change)
        while len(self._changes) > _NAMES:
            self._changes.popitem(last=False)

    def _add(self, key: tuple[str, str], change: _Change) -> None:
        changes = self._changes.setdefault(key, [])
        self._changes.move_to_end(key)
        if any(c[:2] == change[:2] for c in changes):
            return
        bisect.insort(changes, change, key=lambda c: c[0])
        if len(changes) > _CHANGES:
            del changes[0]

    def name(self, room: str, user: str, at: int | None = None) -> str:
        """``user``'s display name in ``room`` at ``at`` (milliseconds since the epoch,
        as ``origin_server_ts``), else now; their MXID's localpart without one."""
        changes = self._changes.get((room, user))
        return (changes and _name_at(changes, at)) or user.removeprefix("@").split(":", 1)[0]


def _name_at(changes: list[_Change], at: int | None) -> str:
    """The name in effect at ``at``: the last change before it, else what the first
    change replaced."""
    if at is None:
        return changes[-1][1]
    index = bisect.bisect_right(changes, at, key=lambda c: c[0])
    if index:
        return changes[index - 1][1]
    first = changes[0]
    return first[2] if first[2] is not None else first[1]


def _display_name(content: JSON) -> str:
    name = content.get("displayname")
    return name.strip() if isinstance(name, str) else ""


def relation(event: JSON) -> JSON:
    content = event.get("content")
    relates = content.get("m.relates_to") if isinstance(content, dict) else None
    return relates if isinstance(relates, dict) else {}


@dataclass(frozen=True)
class Me:
    user_id: str
    name: str
    display_name: str = ""  # the account's own, where it has one


def event_message(
    event: JSON, room: str, names: Names, me: Me, *, room_name: str = ""
) -> Message | None:
    """A message event as a Message (None: not one people read: an edit, a redacted
    event, a reaction, state)."""
    content = event.get("content")
    if event.get("type") != "m.room.message" or not isinstance(content, dict):
        return None
    body = content.get("body")
    if not isinstance(body, str) or relation(event).get("rel_type") == "m.replace":
        return None
    relates = relation(event)
    root = relates.get("event_id") if relates.get("rel_type") == "m.thread" else None
    reply = relates.get("m.in_reply_to")
    reply_id = reply.get("event_id") if isinstance(reply, dict) else None
    if relates.get("is_falling_back") and reply_id == root:
        reply_id = None  # a thread's fallback reply is no reply
    sender = str(event.get("sender", ""))
    sent = event.get("origin_server_ts")
    name = names.name(room, sender, at=sent if isinstance(sent, int) else None)
    author = Participant(sender, name, is_bot=sender == me.user_id)
    tags = (
        {Tag.NOTE}
        if content.get(NOTE_KEY)
        or (content.get("msgtype") == "m.notice" and (sender == me.user_id))
        else set()
    )
    text = _without_fallback(body) if reply_id else body
    files = _files(content)
    if files and content.get("filename") in (None, body):
        text = ""  # the body only names the file
    return Message(
        id=str(event.get("event_id", "")),
        channel=channel_of(room, str(root) if isinstance(root, str) else None, room_name),
        author=author,
        text=text,
        created_at=datetime.fromtimestamp(int(event.get("origin_server_ts", 0)) / 1000, UTC),
        mentions=_mentions(content, text, me),
        reply_to_id=str(reply_id) if isinstance(reply_id, str) else None,
        attachments=files,
        tags=frozenset(tags),
    )


def _files(content: JSON) -> tuple[Attachment, ...]:
    """An image event's file (its ``mxc://`` URL; the data is downloaded when read)."""
    url = content.get("url")
    if content.get("msgtype") != "m.image" or not isinstance(url, str):
        return ()
    info = content.get("info")
    info = info if isinstance(info, dict) else {}
    kind, size = info.get("mimetype"), info.get("size")
    kind = kind if isinstance(kind, str) else "image/png"
    size = size if isinstance(size, int) else 0
    name = content.get("filename") or content.get("body") or "image"
    return (Attachment(str(name), kind, size, url=url),)


def _without_fallback(body: str) -> str:
    """A reply's text without the quoted fallback older clients put before it."""
    if not body.startswith("> <"):
        return body
    lines = body.split("\n")
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).lstrip("\n")


def _mentions(content: JSON, text: str, me: Me) -> tuple[Participant, ...]:
    intentional = content.get("m.mentions")
    users = intentional.get("user_ids") if isinstance(intentional, dict) else None
    if isinstance(users, list) and me.user_id in users:
        return (Participant(me.user_id, me.name, is_bot=True),)
    if isinstance(intentional, dict) and isinstance(users, list):
        return ()  # the client said whom it mentions, and it is not us
    words = [re.escape(w) for w in (me.user_id, me.name, me.display_name) if w]
    if re.search(rf"(?<![\w@])({'|'.join(words)})(?!\w)", text, re.IGNORECASE):
        return (Participant(me.user_id, me.name, is_bot=True),)
    return ()


def apply_changes(events: Sequence[JSON], messages: list[Message]) -> list[Message]:
    """``messages`` with the edits among ``events`` applied (the newest edit by the
    original's sender wins) and redacted ones left out."""
    edits: dict[str, tuple[int, str]] = {}
    senders = {m.id: m.author.id for m in messages}
    for event in events:
        relates = relation(event)
        target = relates.get("event_id")
        new = event.get("content", {}).get("m.new_content")
        if relates.get("rel_type") != "m.replace" or not isinstance(new, dict):
            continue
        if not isinstance(target, str) or senders.get(target) != event.get("sender"):
            continue  # only its author edits a message
        body = new.get("body")
        stamp = int(event.get("origin_server_ts", 0))
        if isinstance(body, str) and stamp >= edits.get(target, (-1, ""))[0]:
            edits[target] = (stamp, body)
    return [replace(m, text=edits[m.id][1]) if m.id in edits else m for m in messages]
