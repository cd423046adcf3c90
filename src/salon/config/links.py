"""``links:``: other channels of the bot whose recent messages a channel's context shows.

Each entry names one channel (a key ``platform:id``, or an id on the channel's own
platform); ``where`` narrows the channels the entry applies in (``direct``: every direct
message). The linked messages are chosen and shown by ``salon.agent.links``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from salon.config._common import _Strict

__all__ = ["DIRECT", "MAX_LINKS", "LinkConfig"]

DIRECT = "direct"
"""A ``where`` word: every direct message."""

MAX_LINKS = 8
"""Entries per channel: each costs a history read per answer."""


def _channel_word(value: str) -> str:
    """A channel key or id as written; YAML reads a bare Discord id as a number."""
    value = value.strip()
    if not value or any(c.isspace() for c in value):
        raise ValueError("must be a channel key (platform:id) or a channel id, without spaces")
    return value


class LinkConfig(_Strict):
    """One linked channel and how much of it a context shows."""

    channel: str = Field(description="the linked channel: `discord:123`, or its id")
    mode: Literal["recent", "digest"] = Field(
        default="recent",
        description="recent: its messages as written; digest: a line each, cut short",
    )
    messages: int = Field(default=20, ge=1, le=200, description="its newest visible messages")
    characters: int = Field(default=4000, ge=100, le=50_000, description="their text at most")
    where: list[str] = Field(
        default_factory=list,
        description="channels (keys or ids) the link applies in, or `direct` for every DM; "
        "empty: wherever this config applies",
    )

    @field_validator("channel", mode="before")
    @classmethod
    def _channel(cls, value: object) -> object:
        return _channel_word(str(value)) if isinstance(value, str | int) else value

    @field_validator("where", mode="before")
    @classmethod
    def _where(cls, value: object) -> object:
        if not isinstance(value, list):
            return value
        return [_channel_word(str(v)) if isinstance(v, str | int) else v for v in value]
