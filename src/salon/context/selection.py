"""Which messages of the room the model sees: visibility, and the recency budgets.

``is_visible`` says whether any bot reads a message as conversation; ``select_context``
walks the history once, newest first, and keeps what fits both budgets. Both run for every
message of every activation.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from salon.config.views import Visibility, WindowSettings
from salon.model import Message, Tag

__all__ = [
    "TRUNCATION_MARK",
    "chain_first",
    "is_visible",
    "m_command",
    "select_context",
    "truncated",
]

TRUNCATION_MARK = " …[truncated]"

# An optional mention first, of a name of up to four words ("@Salon Bot m continue").
_M_COMMAND = re.compile(r"^\s*(?:@\S+(?: \S+){0,3}?\s+)?m\s+(\w+)\s*$", re.IGNORECASE)


def m_command(text: str) -> str | None:
    """The word of an ``m`` command (``m continue``, optionally after a mention)."""
    found = _M_COMMAND.match(text)
    return found[1].lower() if found else None


def is_visible(message: Message, shown: Visibility) -> bool:
    """Dot messages are commands and tool logs: no bot reads them as conversation. The same
    goes for a message marked with a hiding emoji (🫥), as a reaction or in its text, an
    ``m`` command, and Salon's own notes (a failure, an approval question)."""
    text = message.text
    first = text[:1]
    if first == "." and shown.ignore_dot_messages:
        return False
    if first in "mM@ " and m_command(text):
        return False
    if message.tags and Tag.NOTE in message.tags:
        return False
    hiding = shown.hiding_reactions
    if message.reactions and not set(message.reactions).isdisjoint(hiding):
        return False
    for emoji in hiding:  # noqa: SIM110 - a plain loop: it runs for every message, every time
        if emoji in text:
            return False
    return True


def select_context(
    history: Sequence[Message],
    window: WindowSettings,
    *,
    monitored_at: datetime | None = None,
    visible: bool = False,
) -> list[Message]:
    """Newest visible messages within the budgets, oldest first.

    Whichever budget is reached first stops the walk: messages, characters, and with
    ``recency_window_age`` the age. The newest message is always kept, cut to the character
    budget if it alone exceeds it. In a monitored channel (the bot reads every message)
    ``monitored_at`` is now, and the tighter monitor rule applies too: at most
    ``monitor_context_messages`` messages, none older than ``monitor_context_age``.
    ``visible``: ``history`` holds only visible messages already.
    """
    max_messages = window.recency_window_messages
    max_chars = window.recency_window_characters
    ages = [] if window.recency_window_age is None else [window.recency_window_age]
    if monitored_at is not None:
        max_messages = min(max_messages, window.monitor_context_messages)
        ages.append(window.monitor_context_age)
    now = monitored_at or datetime.now(UTC)
    oldest = now - timedelta(seconds=min(ages)) if ages else None
    picked: list[Message] = []
    used = 0
    for message in reversed(history):
        if not visible and not is_visible(message, window.visibility):
            continue
        if oldest is not None and message.created_at < oldest and picked:
            break
        size = len(message.text)
        if used + size > max_chars:
            if not picked:
                picked.append(truncated(message, max_chars))
            break
        picked.append(message)
        used += size
        if len(picked) >= max_messages:
            break
    picked.reverse()
    return picked


def truncated(message: Message, max_chars: int) -> Message:
    """``message`` cut to ``max_chars`` characters, marked as cut."""
    keep = max(max_chars - len(TRUNCATION_MARK), 0)
    return replace(message, text=message.text[:keep] + TRUNCATION_MARK)


def chain_first(
    chain: Sequence[Message],
    window: Sequence[Message],
    *,
    in_chain: Collection[str],
    keep: str | None,
    max_messages: int,
    max_chars: int,
) -> tuple[list[Message], list[Message]]:
    """The reply chain takes the budgets first and the window fills what is left (Bob
    Bot's rule): ``chain`` holds the chain's messages outside the window, ``in_chain`` the
    ids of the window's messages that are in the chain too. The message that asked
    (``keep``) always stays; each part keeps its newest messages that fit. Both come
    back oldest first: the chain's messages kept, the window's kept."""
    asked = [m for m in window if m.id == keep]
    primary = [m for m in reversed(window) if m.id in in_chain] + list(reversed(chain))
    secondary = [m for m in reversed(window) if m.id not in in_chain and m.id != keep]
    kept = {m.id for m in asked}
    left = (max_messages - len(asked), max_chars - sum(len(m.text) for m in asked))
    for part in (primary, secondary):
        left = _fill(part, kept, left)
    return [m for m in chain if m.id in kept], [m for m in window if m.id in kept]


def _fill(candidates: Sequence[Message], kept: set[str], left: tuple[int, int]) -> tuple[int, int]:
    """Add ``candidates`` to ``kept`` in order until one does not fit what is ``left``
    (messages, characters); what is left after them."""
    messages, chars = left
    for message in candidates:
        size = len(message.text)
        if messages < 1 or size > chars:
            break
        kept.add(message.id)
        messages, chars = messages - 1, chars - size
    return messages, chars
