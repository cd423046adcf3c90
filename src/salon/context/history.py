"""``.history`` messages: splice another stretch of conversation into the context.

::

    .history [targets]
    ---
    first: <message link>      (optional)
    last: <message link>

Walking back from the newest message, the newest ``.history`` that is meant for this bot
(its inner name is among the targets, or there are none) and comes from an authorized
author (a member of ``authorized_roles``; with none, nobody) replaces everything older
than itself with the messages from ``first`` to ``last`` (any channel the platform can
read; ``fetch_until`` may leave a stretch out, as ``salon.agent.links.readable_stretches``
does one the person answered cannot read). If ``first`` is not found within the context
depth before ``last``, it is ignored. A ``.history`` with no body clears everything older. The
spliced stretch may hold ``.history`` messages of its own: they are followed to a bounded
depth, and a link seen twice on one path (a cycle) stops there.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

from salon.errors import PlatformError
from salon.model import Message, Participant

__all__ = ["FetchUntil", "HistoryDirective", "by_roles", "expand_history", "parse_history_message"]

logger = logging.getLogger(__name__)

FetchUntil = Callable[[str, int], Awaitable[Sequence[Message] | None]]
"""(message link, limit) -> that message and the ones before it, oldest first, at most
``limit``; None when the link is not one the platform can follow."""


@dataclass(frozen=True, slots=True)
class HistoryDirective:
    targets: tuple[str, ...]
    first: str | None = None
    last: str | None = None

    @property
    def clears(self) -> bool:
        return self.last is None


def by_roles(roles: Collection[str]) -> Callable[[Participant], bool]:
    """Who may splice history: a member of one of ``roles``; with none, nobody (a
    ``.history`` rewrites what the bot remembers of a channel)."""
    allowed = frozenset(roles)
    return lambda author: not allowed.isdisjoint(author.roles)


def parse_history_message(text: str) -> HistoryDirective | None:
    """The directive of a ``.history`` message; None if it is not one (or is malformed:
    a ``first`` without a ``last``)."""
    head, _, body = text.partition("\n")
    words = head.split()
    if not words or words[0] != ".history":
        return None
    fields: dict[str, str] = {}
    for line in body.split("\n"):
        key, colon, value = line.strip().partition(":")
        if colon and key.strip() in {"first", "last"}:
            fields[key.strip()] = value.strip().strip("<>")
    if "first" in fields and "last" not in fields:
        return None
    return HistoryDirective(tuple(words[1:]), fields.get("first"), fields.get("last"))


async def expand_history(
    messages: Sequence[Message],
    *,
    me_name: str,
    fetch_until: FetchUntil,
    authorized: Callable[[Participant], bool],
    depth: int,
    max_nesting: int = 5,
) -> list[Message]:
    """``messages`` (oldest first) with the newest applicable ``.history`` applied."""
    expander = _Expander(me_name, fetch_until, authorized, depth)
    return await expander.expand(list(messages), max_nesting, frozenset())


@dataclass(frozen=True, slots=True)
class _Expander:
    me_name: str
    fetch_until: FetchUntil
    authorized: Callable[[Participant], bool]
    depth: int

    def _applies(self, message: Message) -> HistoryDirective | None:
        if not message.text.startswith(".history"):
            return None
        directive = parse_history_message(message.text)
        if directive is None or (directive.targets and self.me_name not in directive.targets):
            return None
        return directive if self.authorized(message.author) else None

    async def expand(
        self, messages: list[Message], nesting_left: int, seen: frozenset[str]
    ) -> list[Message]:
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            directive = self._applies(message)
            if directive is None:
                continue
            after = messages[index + 1 :]
            if directive.last is None:
                return after
            if directive.last in seen or nesting_left <= 0:
                why = "a cycle" if directive.last in seen else "nested too deeply"
                logger.warning(".history in %s is %s; stopping there", message.channel.key, why)
                return after
            stretch = await _fetch(self.fetch_until, directive.last, self.depth)
            if stretch is None:
                logger.warning(".history link %s cannot be followed; ignored", directive.last)
                continue
            if directive.first is not None:
                first_id = directive.first.rstrip("/").rsplit("/", 1)[-1]
                starts = [i for i, m in enumerate(stretch) if m.id == first_id]
                if starts:
                    stretch = stretch[starts[-1] :]
            inner = await self.expand(stretch, nesting_left - 1, seen | {directive.last})
            return [*inner, *after]
        return messages


async def _fetch(fetch_until: FetchUntil, link: str, depth: int) -> list[Message] | None:
    try:
        found = await fetch_until(link, depth)
    except PlatformError as exc:  # an unreadable link must not cost the answer
        logger.warning(".history link %s could not be read: %s", link, exc)
        return None
    return None if found is None else list(found)
