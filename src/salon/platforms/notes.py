"""``/memory`` and ``/forget``: what a bot keeps about a person, shown to that person alone,
and deleted on their word.

A person's notes are the notes about them (scope ``person``, keyed by their id) and every
note they said, in any scope: what ``salon memory export --user`` exports. Each platform
answers privately (Discord: ephemeral; IRC: a NOTICE to the person; the terminal: its
operator) and names its own way of typing the commands (``MemoryWords``). Someone may
forget only their own notes; holders of an authorized role and the terminal's operator may
forget any note by its number.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from salon.model import Participant
from salon.notes import Note, Scope

__all__ = [
    "DISCORD_WORDS",
    "IRC_WORDS",
    "TERMINAL_WORDS",
    "MemoryWords",
    "NotesBook",
    "PeoplesMemory",
    "PersonNotes",
]

MAX_ANSWER_CHARS = 1900  # fits one Discord message; IRC splits it into lines


class PersonNotes(Protocol):
    """The store's notes part as these commands use it (``salon.store._notes.NotePart``)."""

    async def notes_of_person(self, person_id: str, *, bot: str | None = None) -> list[Note]: ...

    async def delete_note(self, bot: str, note_id: int) -> bool: ...

    async def forget_person(self, person_id: str, *, bot: str | None = None) -> int: ...

    async def set_consent(self, bot: str, person_id: str, outside_dm: bool) -> None: ...

    async def consent(self, bot: str, person_id: str) -> bool | None: ...


class NotesBook(Protocol):
    """The memory tools' rules (``salon.tools.memory.MemoryBook``), which these commands
    share: the notes, the authorized roles, a person's choice or the config's default."""

    @property
    def notes(self) -> PersonNotes: ...

    @property
    def authorized_roles(self) -> Callable[[], Sequence[str]]: ...

    async def allows(self, bot: str, person_id: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class MemoryWords:
    """How people type the commands on one platform, for the answers' hints."""

    show: str
    share: str  # with {on}: "on" or "off"
    forget: str  # one note: with {id}
    forget_all: str
    confirm: str  # forget_all, confirmed


DISCORD_WORDS = MemoryWords(
    "/memory",
    "/memory share:{on}",
    "/forget note:{id}",
    "/forget all:True",
    "/forget all:True confirm:True",
)
IRC_WORDS = MemoryWords(
    "!memory", "!memory share {on}", "!forget {id}", "!forget all", "!forget all confirm"
)
TERMINAL_WORDS = MemoryWords(
    "/memory", "/memory share {on}", "/forget {id}", "/forget all", "/forget all confirm"
)


class PeoplesMemory:
    """The commands' answers for one bot."""

    def __init__(self, book: NotesBook, *, bot: str) -> None:
        self.book = book
        self.notes = book.notes
        self.bot = bot

    async def answer(
        self,
        person: Participant,
        command: str,
        rest: str,
        words: MemoryWords,
        *,
        operator: bool = False,
    ) -> str:
        """A typed command (IRC, the terminal): ``command`` is "memory" or "forget" and
        ``rest`` the words after it."""
        parts = rest.lower().split()
        if command == "memory":
            if not parts:
                return await self.show(person, words)
            if len(parts) == 2 and parts[0] == "share" and parts[1] in {"on", "off"}:
                return await self.share(person, parts[1] == "on")
            return f"Say {words.show}, or {words.share.format(on='on')} (or off)."
        if parts[:1] == ["all"] and parts[1:] in ([], ["confirm"]):
            return await self.forget_all(person, words, confirmed=len(parts) == 2)
        if len(parts) == 1 and parts[0].lstrip("#").isdigit():
            return await self.forget(person, int(parts[0].lstrip("#")), words, operator=operator)
        return f"Say which: {words.forget.format(id='N')}, or {words.forget_all}."

    def authorized(self, person: Participant) -> bool:
        roles = set(self.book.authorized_roles())
        return bool(roles) and not roles.isdisjoint(person.roles)

    async def show(self, person: Participant, words: MemoryWords) -> str:
        """Every note about or by ``person``, newest first with where each came from, as
        many as fit one answer; then whether they are shared outside DMs."""
        notes = (await self.notes.notes_of_person(person.id, bot=self.bot))[::-1]
        shared = await self.book.allows(self.bot, person.id)
        share_line = (
            f"Notes about you are used outside DMs (where you are the one answered): "
            f"{'yes' if shared else 'no'}; change it with {words.share.format(on=_flip(shared))}."
        )
        if not notes:
            return f"I keep no notes about you or from you.\n{share_line}"
        head = f"I keep {_count(len(notes))} about you or from you (newest first):"
        tail = [
            share_line,
            f"Forget one with {words.forget.format(id='N')}, all with {words.forget_all}.",
        ]
        room = MAX_ANSWER_CHARS - len(head) - sum(len(t) + 1 for t in tail) - 80
        lines = []
        for note in notes:
            line = describe(note)
            if len(line) + 1 > room:
                break
            lines.append(line)
            room -= len(line) + 1
        if len(lines) < len(notes):
            lines.append(f"… and {_count(len(notes) - len(lines), 'older note')} not shown here.")
        return "\n".join([head, *lines, *tail])

    async def share(self, person: Participant, on: bool) -> str:
        await self.notes.set_consent(self.bot, person.id, on)
        if on:
            return "Notes about you are now used outside DMs too, where you are the one answered."
        return "Notes about you are now used only in DMs with you."

    async def forget(
        self, person: Participant, note_id: int, words: MemoryWords, *, operator: bool = False
    ) -> str:
        """Delete one note: theirs (about them or said by them), or any for the operator
        and authorized roles."""
        if operator or self.authorized(person):
            if await self.notes.delete_note(self.bot, note_id):
                return f"Forgot note {note_id}."
            return f"There is no note {note_id}."
        own = {n.id for n in await self.notes.notes_of_person(person.id, bot=self.bot)}
        if note_id not in own:  # another's note is not told apart from no note at all
            return f"You have no note {note_id}: see yours with {words.show}."
        if not await self.notes.delete_note(self.bot, note_id):
            return f"You have no note {note_id}."  # forgotten meanwhile
        return f"Forgot note {note_id}."

    async def forget_all(self, person: Participant, words: MemoryWords, *, confirmed: bool) -> str:
        """Every note about or by ``person``, and their choice; asked to confirm first."""
        if not confirmed:
            held = len(await self.notes.notes_of_person(person.id, bot=self.bot))
            if not held:
                return "I keep no notes about you or from you."
            return (
                f"This deletes all {_count(held)} about you or from you, for good. "
                f"To go ahead: {words.confirm}"
            )
        gone = await self.notes.forget_person(person.id, bot=self.bot)
        return f"Forgot {_count(gone)} about you or from you."


def describe(note: Note) -> str:
    """One note for its person: number, what it is, where and when it was said, the text."""
    said = note.provenance
    kind = {
        Scope.PERSON: "about you",
        Scope.CHANNEL: "for that channel",
        Scope.GUILD: "for the server",
        Scope.BOT: "for everywhere",
    }[note.scope.kind]
    message = f", message {said.message_id}" if said.message_id else ""
    origin = f"said by {said.author_name} in {said.channel_name}, {said.at:%Y-%m-%d %H:%M} UTC"
    return f"#{note.id} ({kind}; {origin}{message}): {json.dumps(note.text, ensure_ascii=False)}"


def _count(n: int, word: str = "note") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _flip(on: bool) -> str:
    return "off" if on else "on"
