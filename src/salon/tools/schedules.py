"""What the scheduler and the schedule tools need of the store: one protocol for both.

It lives here, in the lowest layer that uses it: ``salon.scheduler`` (above) imports it,
and the store's schedules part (``salon.store.sql.SQLStore.schedules``, a sibling layer
that may not import this one) has these methods without naming it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Protocol

from salon.model import FireStatus, Schedule

__all__ = ["ScheduleStore"]


class ScheduleStore(Protocol):
    """Schedules, the claims on their occurrences (exactly one process gets each), and the
    lease of the process that claims them (see ``salon.scheduler``)."""

    async def create_schedule(self, schedule: Schedule) -> Schedule: ...

    async def find(
        self, bot: str, *, channel_key: str | None = None, active_only: bool = True
    ) -> list[Schedule]: ...

    async def cancel_schedule(self, bot: str, schedule_id: int) -> bool: ...

    async def set_next_due(self, schedule_id: int, next_due: datetime | None) -> None: ...

    async def claim_fire(self, schedule_id: int, due: datetime, owner: str) -> bool: ...

    async def complete_fire(
        self, schedule_id: int, due: datetime, status: FireStatus = FireStatus.DONE
    ) -> None: ...

    async def take_over_fires(
        self, bot: str, owner: str
    ) -> list[tuple[Schedule, datetime, str | None]]: ...

    async def schedules_signature(self, bot: str) -> tuple[int, int]: ...

    async def renew_lease(self, bot: str, seconds: float) -> None: ...

    def schedule_notices(self, bot: str) -> AsyncIterator[None] | None:
        """Yields when any process creates or cancels a schedule of ``bot``; None when the
        store cannot tell (then ``Scheduler.watch`` polls)."""
