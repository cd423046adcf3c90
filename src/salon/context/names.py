"""Who is who in a rendered context: one label per participant, and no forged turns.

A transcript (and chat mode's user lines) names each speaker ``Label: text``. What the room
controls must not read as someone else speaking:

- a person whose name is the bot's (its configured name, or its account's name) or one a
  participant earlier in the window already goes by is told apart by their own account
  id: ``Zed [6661]``, ``Zed [@mallory:example.org]``; so is one the platform marks
  ``borrowed`` (the name is kept for someone else: Discord's application owner, a holder
  of an authorized role), whoever wrote in the window, and a name that would itself read
  as a turn (a colon, a line break), as a told-apart label (ending in ``[…]``) or as a
  message of the reply chain;
- a line inside a message that begins with a label (the bot's name, a told-apart label, or
  the label of someone who wrote before it in the window: ``Zed: I will now…``) is marked
  as quoted (``> Zed: I will now…``), so it reads as part of that message. Other lines
  with a colon (``Note: …``, a log file's ``line 12: …``) stay as they were written.

The bot's own messages render as before. Everything here is a pure function of the
messages up to the one being rendered (the first to write under a name keeps it), so a
name taken later never changes what was rendered, and cached, before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from salon.model import Message, Participant, name_key

__all__ = ["Labels", "with_mentions"]

# Where a model may see a new line begin: the breaks of str.splitlines.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
# A line that begins like a label (past any indentation): up to 80
# characters without a colon, perhaps ending in a told-apart id that has one (Matrix's
# ``[@bob:example.org]``), then a colon (perhaps inside bold or italics) and a space or
# the end. URLs and times (``http://``, ``10:30``) have no space after their colon.
_LABEL_LINE = re.compile(
    rf"([ \t]*)((?=[^\s>])[^{_BREAKS}:]{{0,81}}(?:\[[^{_BREAKS}\[\]]{{0,255}}\])?):[*_]*(?!\S)"
)
_QUOTE = "> "
_MARKUP = "*_~` "
_REPLIED = "(earlier message, replied to)"  # builder.REPLIED_TO_MARK, which a line may copy
_REPLIED_KEY = "(earlier message, replied to)"  # as _key folds it: a name may not begin so
_UNSAFE = re.compile(rf"[{_BREAKS}:\x00-\x1f\x7f]")  # in a name: it would open a line or a label
_UNSAFE_ID = re.compile(rf"[{_BREAKS}\x00-\x1f\x7f]")  # in an id: it would open a line
_TOLD_APART = re.compile(r"\[[^\]]*\]\s*$")

_PLATFORM = re.compile(r"^[a-z]+:")  # a platform's prefix of an id (``irc:``), not a server
_key = name_key


def _shown(name: str) -> str:
    return " ".join(_UNSAFE.sub(" ", name).split())


def _handle(who: Participant) -> str:
    """The account behind a participant: its own id, without the platform's prefix
    (``irc:bob`` → ``bob``; a Matrix ``@bob:example.org`` whole, its server names many)."""
    handle = _PLATFORM.sub("", who.id, count=1) or who.id
    shown = " ".join(_UNSAFE_ID.sub(" ", handle).split())
    return shown.replace("[", "(").replace("]", ")")  # one pair of brackets: the label's


class Labels:
    """The label each participant goes by in one channel's rendered context.

    Decided in the order messages are rendered (``position``: the message's index in the
    render) and kept: a render memo keeps the object while its channel only grows, so
    going on from the memo decides nothing again, and what a message shows depends only
    on decisions made at or before its position.
    """

    __slots__ = ("_owners", "_reserved", "_since", "decided")

    def __init__(self, reserved: Iterable[str]) -> None:
        """``reserved``: the names only the bot goes by (its configured name, its
        account's name, the speakers of a transcript's opening)."""
        self._reserved = frozenset(_key(name) for name in reserved if name.strip())
        self._owners: dict[str, str] = {}  # name key -> id of the first to write under it
        # (id, name, borrowed) -> label; a renderer reads it first, as a call costs more
        self.decided: dict[tuple[str, str, bool], str] = {}
        self._since: dict[str, int] = {}  # label key -> position of its first message

    def author(self, who: Participant, position: int) -> str:
        """The label of the author of the message at ``position``."""
        label = self.decided.get((who.id, who.name, who.borrowed))
        if label is None:
            label = self.decided[who.id, who.name, who.borrowed] = self._decide(who)
            self._since.setdefault(_key(label), position)
            if who.borrowed:  # the name is still its holder's label: their lines are quoted
                self._since.setdefault(_key(who.name), position)
        return label

    def known(self, who: Participant) -> str:
        """``who``'s label as decided so far, deciding nothing (a mention, a stop)."""
        return self.decided.get((who.id, who.name, who.borrowed)) or (
            self.told_apart(who) if self.reserved(who) else who.name
        )

    def reserved(self, who: Participant) -> bool:
        """Whether ``who`` goes by a name that is the bot's, or one the platform keeps for
        someone else."""
        return who.borrowed or _key(who.name) in self._reserved

    def told_apart(self, who: Participant) -> str:
        return f"{_shown(who.name)} [{_handle(who)}]".lstrip()

    def quoted(self, text: str, position: int, *, at_line_start: bool = False) -> str:
        """``text`` (of the message at ``position``) with every line after its first that
        begins with a label marked as quoted; its first line too when it starts a line of
        the transcript (a piece of a bot's run)."""
        lines = text.splitlines(keepends=True)  # at the breaks of _BREAKS, in C
        changed = False
        for index in range(0 if at_line_start else 1, len(lines)):
            line = lines[index]
            found = _LABEL_LINE.match(line) if ":" in line else None
            if found is not None and self._labels(found[2], position):
                lines[index] = f"{found[1]}{_QUOTE}{line[len(found[1]) :]}"
                changed = True
        return "".join(lines) if changed else text

    def _labels(self, words: str, position: int) -> bool:
        """Whether ``words`` (what comes before a line's colon) is a label at ``position``."""
        words = words.strip(_MARKUP).removeprefix(_REPLIED).strip(_MARKUP)
        if _TOLD_APART.search(words):
            return True
        key = _key(words)
        since = self._since.get(key)
        return key in self._reserved or (since is not None and since <= position)

    def _decide(self, who: Participant) -> str:
        name = who.name
        if not name.strip() or _UNSAFE.search(name) or _TOLD_APART.search(name):
            return self.told_apart(who)
        key = _key(name)
        if who.borrowed or key in self._reserved or key.startswith(_REPLIED_KEY):
            return self.told_apart(who)
        if self._owners.setdefault(key, who.id) != who.id:
            return self.told_apart(who)
        return name


def with_mentions(text: str, message: Message, me: Participant, name: str, labels: Labels) -> str:
    """``text`` with the bot's mentions (``@`` and the name the platform gave it) under
    its configured ``name``, and mentions of people who took the bot's name under their
    labels. A name two of the mentioned share is left as it is: the text cannot tell
    which of them it meant."""
    swaps: dict[str, str | None] = {}
    for who in message.mentions:
        if who.id == me.id:
            target = name
        elif labels.reserved(who):
            target = labels.told_apart(who)
        else:
            target = who.name
        before = swaps.get(who.name, target)
        swaps[who.name] = target if before == target else None
    wanted = {old: new for old, new in swaps.items() if new is not None and new != old and old}
    if not wanted:
        return text
    found = re.compile(
        "@(" + "|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True)) + r")(?!\w)"
    )
    return found.sub(lambda m: f"@{wanted[m[1]]}", text)
