"""What the bot's power level in a room keeps it from doing (``salon check --live``), by
the rules of ``m.room.power_levels`` in the Matrix spec, defaults for absent keys included:
``users_default`` 0, ``events_default`` 0 (a message event not in ``events`` needs it),
``redact`` 50. A room with no power levels gives its creator 100 and everyone else 0.
Redacting another person's event takes both ``redact`` and the level of sending an
``m.room.redaction``. A creator not listed in ``users`` counts as above every level (room
version 12), as the approvals do (``approvals.py``). Reading pinned events needs no level."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["level_of", "power_problems"]

_ABOVE_ALL = 2**53  # a creator: above any power level a room can give
_REDACT_DEFAULT = 50
_CREATOR_WITHOUT_LEVELS = 100


def power_problems(
    levels: Mapping[str, Any] | None,
    *,
    bot: str,
    approval_level: int,
    creators: Collection[str] = (),
    members: Collection[str] | None = None,
) -> list[str]:
    """One line per thing the bot cannot do with its level in a room whose power levels
    are ``levels`` (None: the room has none); ``members``: who is in the room now (None:
    everyone the levels name)."""
    if levels is None:
        levels = {"users": dict.fromkeys(creators, _CREATOR_WITHOUT_LEVELS)}
    mine = level_of(levels, bot, creators)
    events = levels.get("events")
    events = events if isinstance(events, Mapping) else {}
    default = _number(levels.get("events_default"), 0)

    def needed(kind: str) -> int:
        return _number(events.get(kind), default)

    redact = max(_number(levels.get("redact"), _REDACT_DEFAULT), needed("m.room.redaction"))
    found = []
    for what, key, need, so in (
        ("send messages", "m.room.message", needed("m.room.message"), "it cannot answer"),
        ("react", "m.reaction", needed("m.reaction"), "no ✅ ❌ on approval questions"),
        ("redact other people's messages", "redact", redact, "`m continue` messages stay"),
    ):
        if mine < need:
            found.append(f"the bot cannot {what} ({key} needs {need}, the bot has {mine}): {so}")
    if not _approver(levels, bot, approval_level, creators, members):
        found.append(
            f"no one here but the bot has power level {approval_level} "
            "(approval_power_level): only the asker can answer a tool approval"
        )
    return found


def _approver(
    levels: Mapping[str, Any],
    bot: str,
    approval_level: int,
    creators: Collection[str],
    members: Collection[str] | None,
) -> bool:
    """Whether someone other than the bot (in the room, where ``members`` says) reaches
    ``approval_level``; the bot's own reactions are never answers."""
    users = levels.get("users")
    named = set(users) if isinstance(users, Mapping) else set()
    people = set(members) if members is not None else named | set(creators)
    return any(level_of(levels, person, creators) >= approval_level for person in people - {bot})


def level_of(levels: Mapping[str, Any], user: str, creators: Collection[str]) -> int:
    """``user``'s level: theirs in ``users``, else above all for a creator, else
    ``users_default``."""
    users = levels.get("users")
    value = users.get(user) if isinstance(users, Mapping) else None
    if value is None and user in creators:
        return _ABOVE_ALL
    if value is None:
        return _number(levels.get("users_default"), 0)
    return _number(value, 0)


def _number(value: object, default: int) -> int:
    """A level: an integer, or (older room versions) a string of one; else ``default``."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default
