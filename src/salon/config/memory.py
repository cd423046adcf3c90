"""The memory faculty's settings: notes (salon.notes) and the tools that keep them."""

from __future__ import annotations

from pydantic import Field

from salon.config._common import _Strict
from salon.notes import MAX_NOTE_CHARS

__all__ = ["MemoryConfig"]


class MemoryConfig(_Strict):
    """``memory:``. Off by default: with it on, the built-in tools include ``remember``,
    ``recall`` and ``forget``."""

    enabled: bool = Field(default=False, description="offer remember, recall and forget")
    max_note_chars: int = Field(
        default=1000, gt=0, le=MAX_NOTE_CHARS, description="a longer note is refused"
    )
    max_notes_per_scope: int = Field(
        default=500,
        gt=0,
        description="notes one scope (a channel, a guild, a person, the bot) may hold",
    )
    max_age_days: float = Field(
        default=365.0, gt=0, description="a note not changed for this long is deleted"
    )
    person_notes_outside_dm: bool = Field(
        default=False,
        description="a person's notes are in view outside DMs, where that person is the one "
        "answered, unless they chose otherwise",
    )
    recall_limit: int = Field(
        default=5, gt=0, le=50, description="notes one recall returns at most"
    )
