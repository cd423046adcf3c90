"""``recency_window_age``: no message older than it in any context, whichever budget is
smaller (seed 002's "100 messages or 1 hour"), rolling included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from salon.context import select_context
from salon.context.rolling import roll
from salon.context.view import ChannelView
from salon.model import ChannelRef, Message, Participant
from tests.conftest import bot_config

ROOM = ChannelRef("memory", "room")
ALICE = Participant("a", "Alice")


def _history(now: datetime, minutes: list[int], first_id: int = 0) -> list[Message]:
    """One message per entry, that many minutes before ``now``, oldest first."""
    return [
        Message(str(first_id + i), ROOM, ALICE, f"m{ago}", now - timedelta(minutes=ago))
        for i, ago in enumerate(minutes)
    ]


def test_the_age_limit_holds_outside_monitored_channels() -> None:
    now = datetime.now(UTC)
    history = _history(now, [120, 70, 50, 10, 0])
    window = bot_config(recency_window_messages=100, recency_window_age=3600).window
    assert [m.text for m in select_context(history, window)] == ["m50", "m10", "m0"]
    assert len(select_context(history, bot_config(recency_window_messages=100).window)) == 5


def test_the_message_budget_still_wins_when_smaller() -> None:
    now = datetime.now(UTC)
    window = bot_config(recency_window_messages=2, recency_window_age=3600).window
    assert [m.text for m in select_context(_history(now, [50, 10, 0]), window)] == ["m10", "m0"]


def test_the_channel_view_picks_by_age_too() -> None:
    now = datetime.now(UTC)
    view = ChannelView()
    view.update(_history(now, [120, 50, 0]), bot_config().visibility)
    window = bot_config(recency_window_age=3600).window
    assert [m.text for m in view.select(window)] == ["m50", "m0"]


def test_a_rolling_window_rolls_once_it_holds_a_message_too_old() -> None:
    now = datetime.now(UTC)
    config = bot_config(recency_window_age=3600)
    visible = _history(now, [50, 30, 0])
    first = roll(visible, None, config.window, select_context(visible, config.window), "bot")
    assert [m.text for m in first.messages] == ["m50", "m30", "m0"]
    later = now + timedelta(minutes=20)  # m50 is now 70 minutes old
    visible = [*visible, *_history(later, [0], first_id=3)]
    picked = [m for m in visible if m.created_at >= later - timedelta(hours=1)]
    second = roll(visible, first.state, config.window, picked, "bot")
    assert [m.text for m in second.messages] == ["m30", "m0", "m0"]
    assert second.rolled
