"""The memory faculty's settings: notes (salon.notes) and the tools that keep them."""

from __future__ import annotations

from pydantic import Field

from salon.config._common import _Strict
from salon.notes import MAX_NOTE_CHARS

__all__ = ["ConsolidateConfig", "MemoryConfig"]


class ConsolidateConfig(_Strict):
    """``memory.consolidate``: a channel's older history turned into a digest note (the
    channel's), by a side call charged to the bot's budgets. Off by default."""

    enabled: bool = Field(default=False, description="write digests of older history")
    every_messages: int = Field(
        default=200,
        gt=0,
        description="a channel gets a new digest once this many messages arrived since the last",
    )
    interval: float = Field(
        default=3600.0, gt=0, description="seconds between looks for channels to digest"
    )
    messages: int = Field(
        default=200, gt=0, le=1000, description="older messages one digest is made from, at most"
    )
    max_channels: int = Field(
        default=5, gt=0, le=100, description="channels digested per look, at most"
    )
    max_tokens: int = Field(default=400, gt=0, description="the digest call's answer, at most")
    exclude: list[str] = Field(
        default_factory=list,
        description="channels never digested (ids or platform:id; a thread's parent counts)",
    )


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
    block_notes: int = Field(
        default=20,
        ge=0,
        le=200,
        description="notes in view shown in the memory block at most (0: no block)",
    )
    block_characters: int = Field(
        default=4000, gt=0, description="the memory block's notes, in characters at most"
    )
    consolidate: ConsolidateConfig = Field(default_factory=ConsolidateConfig)
