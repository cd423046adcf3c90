"""A channel's view kept up to date step by step gives what reading it whole gives."""

from __future__ import annotations

import gc
import random
import tracemalloc
from datetime import UTC, datetime, timedelta

from salon.context import is_visible, select_context
from salon.context.view import ChannelView, PlainIndex, channel_views
from salon.model import ChannelRef, Message, Participant
from tests.conftest import bot_config

ROOM = ChannelRef("memory", "room")
PEOPLE = [Participant("a", "Alice"), Participant("bot", "Salon", is_bot=True)]
T = datetime(2026, 1, 1, tzinfo=UTC)
TEXTS = [
    "hi",
    ".tool log",
    "m continue",
    "a longer line",
    "x" * 300,
    ".history https://x",
    "🫥 hide",
]


def test_a_view_follows_a_sliding_history_exactly() -> None:
    configs = [bot_config(recency_window_characters=2000, recency_window_messages=40), bot_config()]
    for seed in range(30):
        rng = random.Random(seed)
        ids = iter(range(10**6))
        channel: list[Message] = []
        view = ChannelView()
        depth = 60
        for _step in range(80):
            action = rng.random()
            if action < 0.7 or not channel:
                for _ in range(rng.randint(0, 5)):
                    n = next(ids)
                    text = rng.choice(TEXTS)
                    channel.append(
                        Message(str(n), ROOM, rng.choice(PEOPLE), text, T + timedelta(seconds=n))
                    )
            elif action < 0.8:
                i = rng.randrange(len(channel))
                old = channel[i]
                channel[i] = Message(old.id, ROOM, old.author, rng.choice(TEXTS), old.created_at)
            elif action < 0.9:
                del channel[rng.randrange(len(channel))]
            else:
                depth = rng.choice([20, 60, 200])
            config = configs[seed % 2]
            history = channel[-depth:]
            view.update(history, config.visibility)
            visible = [m for m in history if is_visible(m, config.visibility)]
            assert view.visible == visible
            assert view.count == len(visible)
            assert view.has_history_links == any(m.text.startswith(".history") for m in history)
            assert view.select(config.window) == select_context(
                visible, config.window, visible=True
            )
            plain = PlainIndex(visible)
            for m in visible:
                assert view.position(m.id) == plain.position(m.id)
            for start in range(len(visible)):
                assert view.chars_from(start) == plain.chars_from(start)


def test_views_are_bounded_by_the_messages_they_hold() -> None:
    views = channel_views(limit=100)
    history = [Message(str(n), ROOM, PEOPLE[0], "hi", T) for n in range(30)]
    for name in "abcdef":
        view = views.get(name)
        view.update(history, bot_config().visibility)
        views.settle(view)
    assert len(views) == 3  # each holds 30 messages (once, though in two lists): three fit


def test_a_view_counts_what_slid_out_but_is_kept_until_compaction() -> None:
    view = ChannelView()
    channel = [Message(str(n), ROOM, PEOPLE[0], "hi", T) for n in range(60)]
    view.update(channel[:30], bot_config().visibility)
    assert view.size == 30
    view.update(channel[10:40], bot_config().visibility)  # 10 slid out, still held; 10 new
    assert view.size == 40


def test_a_long_slide_is_compacted_and_stays_exact() -> None:
    config = bot_config()
    view = ChannelView()
    channel = [Message(str(n), ROOM, PEOPLE[n % 2], TEXTS[n % 5], T) for n in range(12_000)]
    for end in range(50, 12_000, 3):
        history = channel[end - 50 : end]
        view.update(history, config.visibility)
    visible = [m for m in history if is_visible(m, config.visibility)]
    assert view.visible == visible
    assert view.select(config.window) == select_context(visible, config.window, visible=True)
    assert len(view._all) < 5000  # dropped messages were let go
    assert [view.position(m.id) for m in visible] == list(range(len(visible)))


def test_views_keep_within_a_byte_budget_whatever_their_messages_weigh() -> None:
    """Channels of long messages hold few by count but many megabytes: the views are
    bounded by their estimated weight too (they kept 200 000 messages whatever they
    weighed)."""
    views = channel_views()
    config = bot_config()

    def fill() -> None:
        for n in range(150):  # one 1 MB message per channel: 150 MB if all were kept
            message = Message(str(n), ROOM, PEOPLE[0], "x" * 1_000_000, T)
            view = views.get(f"memory:c{n}")
            view.update([message], config.visibility)
            views.settle(view)

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fill()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 80 * 1024 * 1024  # the default budget: 64 MiB
    assert 0 < len(views) < 150


def test_a_sliding_view_holds_little_more_than_its_window() -> None:
    """What slid out of the window goes soon: a view kept thousands of messages the
    platform had dropped, for every channel."""
    view = ChannelView()
    config = bot_config()
    history = [Message(str(n), ROOM, PEOPLE[n % 2], f"line {n}", T) for n in range(100)]
    for n in range(100, 3000):
        history = [*history[1:], Message(str(n), ROOM, PEOPLE[n % 2], f"line {n}", T)]
        view.update(history, config.visibility)
        assert view.size <= 100 + 100
    assert [m.text for m in view.visible][-1] == "line 2999"
