"""What the limits of the pipeline keep in the store: requests (for the sliding window),
cooldowns' starts, spend per budget and UTC day, and marks that say until when something
holds.

The agent decides in memory (``salon.agent.pipeline.limits``) and records here, so the counts
survive a restart; it reads a key back from here the first time it meets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

__all__ = ["Admission", "Charge", "LimitStore", "Refusal", "Settlement"]


@dataclass(frozen=True, slots=True)
class Charge:
    """A budget an activation draws on (it holds its estimated spend while it runs)."""

    key: str  # "user:<id>", "channel:<key>", "guild:<id>" with the unit ("...:usd" in dollars)
    limit: float


class Admission(NamedTuple):
    """An activation's request, cooldown and budgets, at the moment it was admitted (a
    tuple: one is made per activation, and a frozen dataclass costs several times more)."""

    now: float  # epoch seconds
    day: int  # UTC day number, the period of budgets
    rate_key: str | None = None
    rate_limit: int = 0
    rate_window: float = 0.0
    cooldown_key: str | None = None
    cooldown: float = 0.0
    charges: tuple[Charge, ...] = ()


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: Literal["rate", "cooldown", "budget"]
    key: str
    reset_at: float  # epoch seconds


@dataclass(frozen=True, slots=True)
class Settlement:
    """What a finished activation spent against one budget, and what it had held."""

    key: str
    held: float  # its estimate, or 0 when no other admission needed it worked out
    spent: float


class LimitStore(Protocol):
    async def record(
        self, bot: str, admission: Admission, settlements: Sequence[Settlement]
    ) -> None:
        """An admitted activation, once it ended: its request (rate), its cooldown, and
        what it spent on each budget."""

    async def rate_events(self, bot: str, key: str, since: float, limit: int) -> list[float]:
        """The newest ``limit`` times ``key`` was taken after ``since`` (requests of a
        rate, starts of a cooldown), oldest first."""

    async def set_mark(self, bot: str, key: str, until: float) -> None:
        """``key`` holds until ``until`` (a cooldown, a pause, a refusal already said)."""

    async def mark(self, bot: str, key: str) -> float | None:
        """Until when ``key`` holds (epoch seconds), if it was ever set."""

    async def spent(self, bot: str, key: str, day: int) -> float:
        """What was spent against a budget on a UTC day."""
