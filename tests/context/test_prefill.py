"""Prefill rendering and rolling context: exact requests, and a cache-stable prefix."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from salon.context import (
    RollState,
    is_visible,
    render_prefill,
    roll,
    select_context,
    stop_sequences,
)
from salon.llm.anthropic import to_anthropic_messages
from salon.model import Attachment, ChannelRef, Message, Participant
from tests.conftest import bot_config

ROOM = ChannelRef("memory", "room")
ME = Participant("bot", "Salon-discord-nick", is_bot=True)
ALICE = Participant("a", "Alice")
BOB = Participant("b", "Bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def msg(i: int, author: Participant, text: str, **kw: Any) -> Message:
    return Message(str(i), ROOM, author, text, T0 + timedelta(minutes=i), **kw)


def prefill_config(**kw: Any):  # type: ignore[no-untyped-def]
    base = {
        "mode": "prefill",
        "name": "Claude",
        "providers": {"test": {"type": "anthropic", "model": "m", "api_key_env": "K"}},
    }
    return bot_config(**{**base, **kw})


def test_transcript_request_is_exact() -> None:
    history = [
        msg(1, ALICE, "Hello"),
        msg(2, ME, "Hi, how are you?"),
        msg(3, ALICE, "Very good.", mentions=(BOB,)),
    ]
    config = prefill_config(context_prefix="A chat log.")
    request = render_prefill(history, ME, config.render, "m")
    assert request.system == "The system is in CLI simulation mode."
    assert request.cache_system is True
    assert to_anthropic_messages(request) == [
        {"role": "user", "content": [{"type": "text", "text": "<cmd>cat untitled.txt</cmd>"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "A chat log.\n\nAlice: Hello\n\nClaude: Hi, how are you?\n\nAlice: Very good.\n\nClaude:",
                }
            ],
        },
    ]
    assert request.stop == ("\nAlice:", "\nBob:", "\nalice:", "\nbob:")


def test_continuation_adds_no_name() -> None:
    history = [msg(1, ALICE, "Tell me a story"), msg(2, ME, "Once upon a time ")]
    request = render_prefill(history, ME, prefill_config().render, "m")
    last = to_anthropic_messages(request)[-1]
    assert last["content"][-1]["text"] == "Alice: Tell me a story\n\nClaude: Once upon a time"


def test_breakpoint_and_image_split_the_assistant_turn() -> None:
    picture = Attachment("cat.png", "image/png", 3, data=b"png")
    history = [
        msg(1, ALICE, "one"),
        msg(2, BOB, "two"),
        msg(3, ALICE, "look", attachments=(picture,)),
        msg(4, BOB, "nice"),
    ]
    request = render_prefill(history, ME, prefill_config().render, "m", breakpoint_id="2")
    assert to_anthropic_messages(request)[1:] == [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "Alice: one\n\nBob: two",
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "\n\nAlice: look"},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "cG5n"},
                }
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "\n\nBob: nice\n\nClaude:"}]},
    ]


def test_stop_sequences_are_the_recent_participants_plus_configured() -> None:
    people = [Participant(str(i), f"P{i}") for i in range(15)]
    history = [msg(i, p, "hi") for i, p in enumerate(people)]
    config = prefill_config(recent_participant_count=3, stop_sequences=["END"])
    assert stop_sequences(history, ME, config.render) == (
        "\nP14:",
        "\nP13:",
        "\nP12:",
        "\np14:",
        "\np13:",
        "\np12:",
        "END",
    )


def test_stops_cover_case_variants_and_the_speakers_of_the_context_prefix() -> None:
    you = Participant("u", "you")
    config = prefill_config(context_prefix="Narrator: a quiet evening.\nGuide: welcome.")
    stops = stop_sequences([msg(1, you, "hello")], ME, config.render)
    assert "\nyou:" in stops
    assert "\nYou:" in stops
    assert "\nNarrator:" in stops
    assert "\nGuide:" in stops
    assert not any("Claude" in stop for stop in stops)  # never the bot's own name


def test_a_bots_run_is_one_block_in_the_transcript() -> None:
    robo = Participant("r", "Robo", is_bot=True)
    history = [msg(1, ALICE, "hi"), msg(2, robo, "One."), msg(3, robo, "Two."), msg(4, ME, "Hey")]
    text = to_anthropic_messages(render_prefill(history, ME, prefill_config().render, "m"))[-1]
    assert text["content"][-1]["text"] == "Alice: hi\n\nRobo: One.\n\nTwo.\n\nClaude: Hey"


def test_a_bots_run_can_join_with_a_space_in_the_transcript() -> None:
    robo = Participant("r", "Robo", is_bot=True)
    history = [msg(1, ALICE, "hi"), msg(2, robo, "One."), msg(3, robo, "Two."), msg(4, ME, "Hey")]
    config = prefill_config(bot_run_join="space")
    text = to_anthropic_messages(render_prefill(history, ME, config.render, "m"))[-1]
    assert text["content"][-1]["text"] == "Alice: hi\n\nRobo: One. Two.\n\nClaude: Hey"


def test_roll_keeps_everything_until_the_threshold() -> None:
    config = prefill_config(
        recency_window_messages=4, rolling_threshold=3, cache_breakpoint_offset=1
    )
    history = [msg(i, ALICE if i % 2 else BOB, f"m{i}") for i in range(10)]
    first = roll(history, None, config.window, select_context(history, config.window), ME.id)
    assert first.rolled
    assert [m.text for m in first.messages] == ["m6", "m7", "m8", "m9"]
    assert first.breakpoint_id == "8"
    longer = [*history, *(msg(i, ALICE, f"m{i}") for i in range(10, 12))]
    second = roll(longer, first.state, config.window, select_context(longer, config.window), ME.id)
    assert not second.rolled
    assert [m.text for m in second.messages] == ["m6", "m7", "m8", "m9", "m10", "m11"]
    assert second.breakpoint_id == "8"
    longest = [*longer, msg(12, BOB, "m12")]
    third = roll(
        longest, second.state, config.window, select_context(longest, config.window), ME.id
    )
    assert third.rolled
    assert [m.text for m in third.messages] == ["m9", "m10", "m11", "m12"]
    assert third.breakpoint_id == "11"
    # The roll's mark, the previous activation's newest message and this one's newest.
    assert first.breakpoints == ("8", "9")
    assert second.breakpoints == ("8", "9", "11")
    assert third.breakpoints == ("11", "12")


def test_the_bots_own_answers_do_not_bring_a_roll_closer() -> None:
    config = prefill_config(
        recency_window_messages=4, rolling_threshold=2, cache_breakpoint_offset=0
    )
    history = [msg(i, ALICE, f"m{i}") for i in range(4)]
    state = roll(history, None, config.window, select_context(history, config.window), ME.id).state
    answered = [*history, msg(4, ME, "answer"), msg(5, ME, "more"), msg(6, BOB, "q")]
    again = roll(answered, state, config.window, select_context(answered, config.window), ME.id)
    assert not again.rolled  # one arrival (Bob's), not three
    asked = [*answered, msg(7, ALICE, "q2")]
    assert roll(
        asked, again.state, config.window, select_context(asked, config.window), ME.id
    ).rolled


def test_vanished_breakpoint_falls_back_to_a_stable_message() -> None:
    config = prefill_config(
        recency_window_messages=4, rolling_threshold=10, cache_breakpoint_offset=1
    )
    history = [msg(1, ALICE, "a"), msg(2, ME, "b"), msg(3, BOB, "c"), msg(4, ALICE, "d")]
    state = RollState("1", "3", "4", history[2].created_at)
    without = [m for m in history if m.id != "3"]
    rolled = roll(without, state, config.window, without, ME.id)
    assert not rolled.rolled
    assert rolled.breakpoint_id == "1"  # the bot's own message is not a stable anchor


def _prefix(request: Any) -> str:
    """The Anthropic request up to and including the block carrying the breakpoint."""
    messages = to_anthropic_messages(request)
    for i, message in enumerate(messages):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                cut = [*messages[:i], {**message, "content": message["content"][: j + 1]}]
                return json.dumps({"system": request.system, "messages": cut}, sort_keys=True)
    raise AssertionError("no breakpoint rendered")


speakers = st.sampled_from([ALICE, BOB, ME])
lines = st.lists(st.tuples(speakers, st.text(min_size=1, max_size=40)), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(
    lines,
    st.lists(st.tuples(speakers, st.text(min_size=1, max_size=40)), max_size=9),
    st.integers(1, 20),
)
def test_prefix_up_to_the_breakpoint_is_byte_identical_between_rolls(
    before: list[tuple[Participant, str]], after: list[tuple[Participant, str]], window: int
) -> None:
    config = prefill_config(
        recency_window_messages=window, rolling_threshold=10, cache_breakpoint_offset=2
    )
    # As the agent does: roll over the visible messages only (dot messages drop out).
    first = [
        m
        for i, (who, text) in enumerate(before)
        if is_visible(m := msg(i, who, text), config.visibility)
    ]
    assume(first)
    rolled = roll(first, None, config.window, select_context(first, config.window), ME.id)
    request = render_prefill(
        rolled.messages, ME, config.render, "m", breakpoint_id=rolled.breakpoint_id
    )
    start = len(before)
    added = [msg(start + i, who, text) for i, (who, text) in enumerate(after)]
    grown = [*first, *(m for m in added if is_visible(m, config.visibility))]
    again = roll(grown, rolled.state, config.window, select_context(grown, config.window), ME.id)
    assert not again.rolled
    later = render_prefill(
        again.messages, ME, config.render, "m", breakpoint_id=again.breakpoint_id
    )
    assert _prefix(later) == _prefix(request)


def test_an_average_budget_rolls_below_it_by_half_the_threshold() -> None:
    config = prefill_config(
        recency_window_messages=6,
        rolling_threshold=4,
        cache_breakpoint_offset=0,
        rolling_budget="average",
    )
    history = [msg(i, ALICE if i % 2 else BOB, f"m{i}") for i in range(10)]
    first = roll(history, None, config.window, select_context(history, config.window), ME.id)
    assert first.rolled
    assert [m.text for m in first.messages] == ["m6", "m7", "m8", "m9"]  # 6 - 4/2
    grown = [*history, *(msg(i, ALICE, f"m{i}") for i in range(10, 14))]
    again = roll(grown, first.state, config.window, select_context(grown, config.window), ME.id)
    assert again.rolled  # four arrivals; between the rolls the window held 4 to 7 messages
    assert [m.text for m in again.messages] == ["m10", "m11", "m12", "m13"]


def test_an_average_budget_keeps_what_a_short_channel_has() -> None:
    config = prefill_config(
        recency_window_messages=6, rolling_threshold=4, rolling_budget="average"
    )
    history = [msg(i, ALICE, f"m{i}") for i in range(3)]
    first = roll(history, None, config.window, select_context(history, config.window), ME.id)
    assert [m.text for m in first.messages] == ["m0", "m1", "m2"]


def test_an_average_budget_cuts_characters_in_proportion() -> None:
    config = prefill_config(
        recency_window_messages=10,
        recency_window_characters=100,
        rolling_threshold=10,
        rolling_budget="average",
    )
    history = [msg(i, ALICE, "x" * 20) for i in range(8)]
    first = roll(history, None, config.window, select_context(history, config.window), ME.id)
    # Five messages by count (10 - 10/2) and 50 characters (100 x 5/10): two messages of 20.
    assert len(first.messages) == 2
