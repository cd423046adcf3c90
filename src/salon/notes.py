"""Notes: what a bot keeps across conversations, each with a scope and its provenance, and
the one rule for which notes are in view where.

Salon decides what is in view, never the model: every read of notes (``recall``, the
memory block of a prompt, a person's ``/memory``) passes a ``Viewpoint`` through
``scopes_in_view`` and reads those scopes only. The store's read methods take the
viewpoint itself, so no caller can ask it for a scope of its own choosing (the operator's
listing, export and deletion by person are the exceptions, and say so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from salon.model import ChannelRef, Participant

__all__ = [
    "MAX_NOTE_CHARS",
    "Note",
    "NoteScope",
    "NoteStore",
    "Provenance",
    "Scope",
    "Viewpoint",
    "in_view",
    "note_in_view",
    "scopes_in_view",
]

MAX_NOTE_CHARS = 4000
"""The longest note the store keeps, whatever the config says (``memory.max_note_chars``
is the limit the tools apply, at most this)."""


class Scope(StrEnum):
    """Where a note belongs; its ``NoteScope.key`` says which one."""

    CHANNEL = "channel"  # key: the channel's key (platform:id)
    GUILD = "guild"  # key: the guild's (server's) id
    PERSON = "person"  # key: the person's id (Participant.id)
    BOT = "bot"  # key: "" (the bot everywhere)


@dataclass(frozen=True, slots=True)
class NoteScope:
    kind: Scope
    key: str = ""

    def describe(self) -> str:
        return self.kind.value


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who said what the note keeps, where and when: the message that led to it."""

    author_id: str
    author_name: str
    channel_key: str
    channel_name: str  # as shown: "#general", "a DM"
    message_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Note:
    id: int
    bot: str
    scope: NoteScope
    text: str
    provenance: Provenance
    created_at: datetime
    updated_at: datetime
    trusted: bool = False  # may shape answers to others than its author: see ``in_view``


@dataclass(frozen=True, slots=True)
class Viewpoint:
    """Where the bot is answering and whom: all that decides which notes are in view.

    ``person_id`` is the person being answered ("" when none is). ``person_allows`` says
    whether that person allowed their notes outside DMs (their own choice, else the
    operator's default, ``memory.person_notes_outside_dm``). In a DM (``is_direct``) the
    person answered is the one the DM is with."""

    channel_key: str
    guild_id: str | None = None
    is_direct: bool = False
    person_id: str = ""
    person_allows: bool = False

    @classmethod
    def of(cls, channel: ChannelRef, person: Participant | None, *, allows: bool) -> Viewpoint:
        """Answering ``person`` in ``channel``; ``allows``: the person's choice (see
        ``NoteStore.consent``), else ``memory.person_notes_outside_dm``."""
        return cls(
            channel.key,
            guild_id=channel.guild_id,
            is_direct=channel.is_direct,
            person_id=person.id if person is not None else "",
            person_allows=allows,
        )


def scopes_in_view(view: Viewpoint) -> tuple[NoteScope, ...]:
    """The scopes whose notes are in view from ``view``; the only place this is decided.

    ====================  ==============================================================
    a note of scope ...   is in view ...
    ====================  ==============================================================
    ``channel`` (key C)   in channel C only (a thread is a channel of its own)
    ``guild`` (key G)     in the channels (and DMs: never) of guild G only
    ``person`` (key P)    in a DM answering P; elsewhere only when the person answered
                          is P and P allowed it (``person_allows``)
    ``bot``               everywhere
    ====================  ==============================================================

    Nothing is in view by default: a channel with no key sees the bot's notes only, and
    a person's notes never show to anyone but that person.

    Against poisoning, a note of a scope in view is read only when it is *trusted* or its
    author is the person answered (``note_in_view``): a note is trusted when the operator,
    a holder of one of ``authorized_roles`` or the bot itself (a digest) wrote it, or one
    of them approved it. So what Mallory had the bot keep for a channel shapes answers to
    Mallory only; server and bot notes need an authorized writer anyway, and a person's
    notes are their own words.
    """
    scopes = []
    if view.channel_key:
        scopes.append(NoteScope(Scope.CHANNEL, view.channel_key))
    if view.guild_id and not view.is_direct:
        scopes.append(NoteScope(Scope.GUILD, view.guild_id))
    if view.person_id and (view.is_direct or view.person_allows):
        scopes.append(NoteScope(Scope.PERSON, view.person_id))
    scopes.append(NoteScope(Scope.BOT, ""))
    return tuple(scopes)


def in_view(scope: NoteScope, view: Viewpoint) -> bool:
    """Whether a note of ``scope`` is in view from ``view`` (``scopes_in_view``'s rule)."""
    return scope in scopes_in_view(view)


def note_in_view(note: Note, view: Viewpoint) -> bool:
    """Whether ``note`` may be read from ``view``: its scope is in view, and it is trusted
    or its author is the person answered (the store's reads apply the same rule)."""
    mine = bool(view.person_id) and note.provenance.author_id == view.person_id
    return in_view(note.scope, view) and (note.trusted or mine)


class NoteStore(Protocol):
    """The store's notes part (``salon.store._notes.NotePart``), as tools and the context
    use it: every read takes a viewpoint."""

    changes: int  # notes edited, approved, deleted and choices made by this process so far
    additions: int  # notes this process added so far

    async def add_note(
        self,
        bot: str,
        scope: NoteScope,
        text: str,
        provenance: Provenance,
        *,
        trusted: bool = False,
    ) -> Note: ...

    async def count_notes(self, bot: str, scope: NoteScope) -> int: ...

    async def search_notes(
        self, bot: str, view: Viewpoint, query: str, *, limit: int = 10
    ) -> list[Note]: ...

    async def notes_in_view(self, bot: str, view: Viewpoint, *, limit: int = 100) -> list[Note]: ...

    async def note_in_view(self, bot: str, view: Viewpoint, note_id: int) -> Note | None: ...

    async def note_stamps(self, bot: str, ids: Sequence[int]) -> dict[int, datetime]: ...

    async def delete_note(self, bot: str, note_id: int) -> bool: ...

    async def set_consent(self, bot: str, person_id: str, outside_dm: bool) -> None: ...

    async def consent(self, bot: str, person_id: str) -> bool | None: ...

    async def notes_of_person(self, person_id: str, *, bot: str | None = None) -> list[Note]: ...

    async def forget_person(self, person_id: str, *, bot: str | None = None) -> int: ...
