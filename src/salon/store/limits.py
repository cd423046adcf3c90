"""What the limits of the pipeline ask of the store: one admission, taken or refused as a
whole, then the spend settled; marks that say until when something holds.

Every operation is one transaction that first locks the bot's limits, so two activations
(in one process or several sharing the database) never both take the last request or the
last of a budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["Admission", "Charge", "LimitStore", "Refusal", "Settlement"]


@dataclass(frozen=True, slots=True)
class Charge:
    """A budget an activation draws on: it holds ``amount`` while it runs."""

    key: str  # "user:<id>", "channel:<key>", "guild:<id>" with the unit
    limit: float
    amount: float


@dataclass(frozen=True, slots=True)
class Admission:
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
    held: float
    spent: float


@runtime_checkable
class LimitStore(Protocol):
    async def admit(self, bot: str, admission: Admission) -> Refusal | None:
        """Take the request (rate, cooldown, holds on budgets) or refuse it, as a whole."""

    async def settle(self, bot: str, day: int, settlements: Sequence[Settlement]) -> None:
        """Replace holds with what was spent."""

    async def set_mark(self, bot: str, key: str, until: float, now: float) -> bool:
        """Set ``key`` until ``until`` unless it holds already; True when it was set."""

    async def mark(self, bot: str, key: str) -> float | None:
        """Until when ``key`` holds (epoch seconds), if it was ever set."""

    async def spent(self, bot: str, key: str, day: int) -> tuple[float, float]:
        """(spent, held) of a budget on a day."""
