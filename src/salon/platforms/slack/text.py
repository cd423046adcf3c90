"""Slack's text both ways: mrkdwn read into plain words, and words written so that
nothing in them is markup Slack acts on.

Slack's docs ask apps to escape ``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;`` and
``&gt;``; everything Slack turns into a notification (``<!channel>``, ``<!here>``,
``<!everyone>``, ``<!subteam^…>``, ``<@U…>``) is written between angle brackets, so text
escaped this way notifies nobody (and ``link_names`` is never set, so ``@channel`` stays
text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["escape", "fit", "readable", "split", "user_mentions"]

_MARKUP = re.compile(r"<([^<>]*)>")
_USER = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


def escape(text: str) -> str:
    """``text`` as Slack shows it, with no markup of its own."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(text: str, limit: int) -> str:
    """A start of ``text`` of at most ``limit`` characters once escaped (all of it when
    it fits)."""
    if len(escape(text)) <= limit:
        return text
    cut = text[:limit]
    while len(escape(cut)) > limit:  # each escape adds at most four: a few rounds
        cut = cut[: len(cut) - max(1, (len(escape(cut)) - limit) // 4)]
    return cut


def user_mentions(text: str) -> list[str]:
    """The user ids ``text`` mentions (``<@U…>``), in order, once each."""
    return list(dict.fromkeys(_USER.findall(text)))


def readable(text: str, name_of: Callable[[str], str]) -> str:
    """A message's mrkdwn as plain words: ``<@U1>`` is ``@Name``, ``<#C1|general>`` is
    ``#general``, ``<https://x|label>`` is ``label (https://x)``, ``<!here>`` is ``@here``,
    ``<!subteam^S1|@devs>`` is ``@devs``, ``<!date^…|Feb 18>`` is ``Feb 18``; then the
    three escapes are undone."""

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return "@" + (label or name_of(target[1:]))
        if target.startswith("#"):
            return "#" + (label or target[1:])
        if target.startswith("!"):
            return _special(target[1:], label)
        return f"{label} ({target})" if label and label != target else target

    plain = _MARKUP.sub(one, text)
    return plain.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _special(command: str, label: str) -> str:
    """``<!…>`` read: a date is its fallback text (Slack asks for one; else the moment in
    UTC), a user group (``subteam^S…|@devs``) or ``here``/``channel``/``everyone`` is
    ``@`` and its name, whether or not the label has its ``@`` already."""
    word, _, rest = command.partition("^")
    if word == "date":
        if label:
            return label
        seconds = rest.partition("^")[0]
        try:
            moment = datetime.fromtimestamp(int(seconds), UTC)
        except (ValueError, OverflowError, OSError):
            return seconds
        return moment.strftime("%Y-%m-%d %H:%M UTC")
    if word == "subteam":
        return "@" + (label.removeprefix("@") or rest)
    return "@" + (label.removeprefix("@") or word)


def split(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at a line break, else a
    space, in the second half of a piece (else at ``limit``). Only the break cut at (and
    blank lines there) is dropped: the next line keeps its indentation."""
    pieces: list[str] = []
    while len(text) > limit:
        cut, resume = limit, limit
        for separator in ("\n", " "):
            at = text.rfind(separator, 0, limit + 1)
            if at >= max(1, limit // 2):
                cut, resume = at, at + 1
                break
        pieces.append(text[:cut].rstrip("\n"))
        text = text[resume:].lstrip("\n")
    return [*pieces, text] if text or not pieces else pieces
