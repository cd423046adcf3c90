"""What the agent persists, behind a small protocol; SQLite is the default backend.

The scheduler and the schedule tools use the store's schedules part through
``salon.tools.schedules.ScheduleStore``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from salon.model import Approval, ChannelRef, FireStatus, Message, RollState, Usage
from salon.trace import Trace

__all__ = ["Store"]


class Store(Protocol):
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    async def close(self) -> None: ...

    async def log_message(
        self, bot: str, message: Message, kind: str = "message", *, durable: bool = False
    ) -> None:
        """Append one line to the chat log of a platform that keeps no history."""

    async def forget_message(self, bot: str, message_id: str) -> None: ...

    async def chat_history(
        self, bot: str, channel: ChannelRef, *, limit: int, before_id: str | None = None
    ) -> Sequence[Message]:
        """The newest ``limit`` logged messages of a channel, oldest first."""

    async def record_usage(
        self, bot: str, channel_key: str, provider: str, model: str, usage: Usage
    ) -> None: ...

    async def rolling_state(self, bot: str, channel_key: str) -> RollState | None:
        """The rolling-context state of a channel (anchor, breakpoint, head), if any."""

    async def save_rolling_state(self, bot: str, channel_key: str, state: RollState) -> None: ...

    async def open_approval(
        self, bot: str, channel_key: str, tool: str, arguments: str, requester: str
    ) -> int:
        """Persist a pending approval so a restart can close it; returns its id."""

    async def close_approval(self, approval_id: int, status: Approval) -> None: ...

    async def pending_approvals(self, bot: str) -> list[tuple[int, str, str]]:
        """(id, channel key, tool) of approvals still pending."""

    async def complete_fire(
        self, schedule_id: int, due: datetime, status: FireStatus = FireStatus.DONE
    ) -> None:
        """A schedule occurrence's activation ended (see ``salon.scheduler``)."""

    async def answering(self, fires: Sequence[tuple[int, datetime]], key: str) -> None:
        """The first message of these occurrences' answer goes out under ``key`` next
        (see ``salon.agent.answerkey``)."""

    async def write_traces(self, batch: Sequence[Trace]) -> list[int]:
        """Store finished traces (see ``salon.trace``)."""

    async def prune_traces(
        self, *, max_age: float, max_bytes: int, now: float | None = None
    ) -> int: ...
