"""Choosing and rendering the context in chat mode."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from salon.context import TRUNCATION_MARK, render_chat, select_context
from salon.model import ChannelRef, Message, Participant
from tests.conftest import bot_config

ROOM = ChannelRef("memory", "room")
ME = Participant("bot", "Salon", is_bot=True)
ALICE = Participant("a", "Alice")
BOB = Participant("b", "Bob")


T = datetime(2026, 1, 1, tzinfo=UTC)


def msg(i: int, author: Participant, text: str) -> Message:
    return Message(str(i), ROOM, author, text, datetime(2026, 1, 1, tzinfo=UTC))


def test_message_budget_keeps_the_newest() -> None:
    history = [msg(i, ALICE, f"m{i}") for i in range(10)]
    picked = select_context(history, bot_config(recency_window_messages=3).window)
    assert [m.text for m in picked] == ["m7", "m8", "m9"]


def test_character_budget_stops_first_when_reached_first() -> None:
    history = [msg(i, ALICE, "x" * 10) for i in range(10)]
    picked = select_context(history, bot_config(recency_window_characters=35).window)
    assert len(picked) == 3


def test_an_oversized_newest_message_is_truncated_not_dropped() -> None:
    history = [msg(1, ALICE, "older"), msg(2, ALICE, "y" * 100_000)]
    picked = select_context(history, bot_config(recency_window_characters=1000).window)
    assert len(picked) == 1
    assert len(picked[0].text) == 1000
    assert picked[0].text.endswith(TRUNCATION_MARK)


def test_dot_messages_are_skipped_unless_configured() -> None:
    history = [msg(1, ALICE, ".hidden"), msg(2, ALICE, "shown")]
    assert [m.text for m in select_context(history, bot_config().window)] == ["shown"]
    config = bot_config(ignore_dot_messages=False)
    assert len(select_context(history, config.window)) == 2


def test_chat_roles_names_and_merging() -> None:
    history = [
        msg(1, ALICE, "hi"),
        msg(2, BOB, "hey"),
        msg(3, ME, "hello both"),
        msg(4, ME, "how are you?"),
        msg(5, ALICE, "fine"),
    ]
    request = render_chat(history, ME, bot_config(system_prompt="sys", max_tokens=99).render, "m")
    assert [(m.role, m.plain_text) for m in request.messages] == [
        ("user", "Alice: hi\nBob: hey"),
        ("assistant", "hello both\n\nhow are you?"),  # one bot's run is one message
        ("user", "Alice: fine"),
    ]
    assert (request.system, request.max_tokens, request.model) == ("sys", 99, "m")


def test_monitored_channels_see_less_and_only_recent() -> None:
    from datetime import timedelta

    start = datetime(2026, 1, 1, tzinfo=UTC)
    history = [
        Message(str(i), ROOM, ALICE, f"m{i}", start + timedelta(minutes=10 * i)) for i in range(12)
    ]
    now = start + timedelta(minutes=110)
    config = bot_config(monitor_context_messages=4, monitor_context_age=1800)
    assert [m.text for m in select_context(history, config.window, monitored_at=now)] == [
        "m8",
        "m9",
        "m10",
        "m11",
    ]
    config = bot_config(monitor_context_messages=100, monitor_context_age=1800)
    assert [m.text for m in select_context(history, config.window, monitored_at=now)] == [
        "m8",
        "m9",
        "m10",
        "m11",
    ]
    assert len(select_context(history, config.window)) == 12
    lonely = [Message("x", ROOM, ALICE, "old but newest", start)]
    assert len(select_context(lonely, config.window, monitored_at=now)) == 1


def test_chat_breakpoint_ends_a_marked_part_and_the_prefix_stays_put() -> None:
    from salon.llm.anthropic import to_anthropic_messages
    from salon.llm.base import TextPart

    config = bot_config()
    room = [
        msg(1, ALICE, "one"),
        msg(2, BOB, "two"),
        msg(3, ME, "three"),
        msg(4, ALICE, "four"),
    ]
    request = render_chat(room, ME, config.render, "m", breakpoint_id="2")
    first = request.messages[0]
    assert first.parts == (
        TextPart("Alice: one\nBob: two", cache_breakpoint=True),
    )  # the turn ends at the breakpoint here, so nothing follows in it
    converted = to_anthropic_messages(request)
    assert converted[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in b for m in converted[1:] for b in m["content"])

    later = render_chat([*room, msg(5, BOB, "five")], ME, config.render, "m", breakpoint_id="2")
    assert later.messages[:2] == request.messages[:2]  # up to the breakpoint: identical

    mid = render_chat(room, ME, config.render, "m", breakpoint_id="1")
    assert mid.messages[0].parts == (
        TextPart("Alice: one", cache_breakpoint=True),
        TextPart("\nBob: two"),
    )


ROBO = Participant("r", "Robo", is_bot=True)


def test_another_bots_run_reads_as_one_message_under_one_label() -> None:
    history = [msg(1, ALICE, "hi"), msg(2, ROBO, "First."), msg(3, ROBO, "Second.")]
    request = render_chat(history, ME, bot_config().render, "m")
    assert request.messages[0].plain_text == "Alice: hi\nRobo: First.\n\nSecond."


def test_paragraphs_of_an_answer_keep_their_breaks_and_size_cuts_join_with_a_space() -> None:
    cut = "x" * 1790  # a piece cut at Discord's size limit ends mid-paragraph
    history = [msg(1, ALICE, "talk"), msg(2, ME, "One."), msg(3, ME, cut), msg(4, ME, "tail")]
    request = render_chat(history, ME, bot_config().render, "m", message_limit=1800)
    assert request.messages[1].plain_text == f"One.\n\n{cut} tail"


def test_a_bots_run_can_join_with_a_space_as_chapterx_does() -> None:
    history = [msg(1, ALICE, "hi"), msg(2, ROBO, "First."), msg(3, ROBO, "Second.")]
    history += [msg(4, ME, "Mine,"), msg(5, ME, "too.")]
    request = render_chat(history, ME, bot_config(bot_run_join="space").render, "m")
    assert [m.plain_text for m in request.messages] == [
        "Alice: hi\nRobo: First. Second.",
        "Mine, too.",
    ]


def test_lines_can_read_as_a_timestamped_irc_log() -> None:
    """Terrarium's `[time] <nick> message`, in the bot's timezone; the bot's own turns
    stay bare (it would learn to write the stamp)."""
    history = [msg(1, ALICE, "hi"), msg(2, BOB, "yo"), msg(3, ME, "Hello."), msg(4, ALICE, "ok")]
    config = bot_config(line_format="irc", timezone="Europe/Paris")
    request = render_chat(history, ME, config.render, "m")
    assert [m.plain_text for m in request.messages] == [
        "[2026-01-01 01:00:00] <Alice> hi\n[2026-01-01 01:00:00] <Bob> yo",
        "Hello.",
        "[2026-01-01 01:00:00] <Alice> ok",
    ]


def test_notes_and_the_hiding_emoji_in_text_hide_a_message() -> None:
    from salon.context import is_visible
    from salon.model import Tag

    config = bot_config()
    note = Message("1", ROOM, ME, "⚠️ Salon could not answer", T, tags=frozenset({Tag.NOTE}))
    assert not is_visible(note, config.visibility)
    assert not is_visible(msg(2, ALICE, "do not read this \U0001fae5"), config.visibility)
    assert is_visible(msg(3, ALICE, "read this"), config.visibility)


def test_past_tool_calls_are_native_turns_when_tools_are_native() -> None:
    from salon.llm.base import TextPart, ToolResultPart, ToolUsePart
    from salon.model import ToolCall, ToolRecord, ToolResult

    call = ToolCall("call_1", "lookup", {"word": "jazz"})
    record = ToolRecord(T, ROOM.key, "2", call, ToolResult("call_1", "a music"))
    history = [msg(1, ALICE, "what is jazz?"), msg(2, ME, "Let me look."), msg(3, ALICE, "ok")]
    native = render_chat(history, ME, bot_config().render, "m", [record], native_tools=True)
    roles = [m.role for m in native.messages]
    assert roles == ["user", "assistant", "user"]
    said, used = native.messages[1].parts
    assert said == TextPart("Let me look.")
    assert isinstance(used, ToolUsePart)
    assert used.call.name == "lookup"
    answered = native.messages[2].parts[0]
    assert isinstance(answered, ToolResultPart)
    assert answered.result.content == "a music"
    assert answered.result.call_id == used.call.id
    assert "<function_calls>" not in "".join(m.plain_text for m in native.messages)
    text = render_chat(history, ME, bot_config().render, "m", [record])
    assert "<function_calls>" in text.messages[1].plain_text


THOUGHT_TEXT = "the user wants jazz explained; look it up first"


def thinking_records() -> list[Any]:
    """Two calls of one turn that thought first (its thoughts on the first call), then a
    call of a later turn with thoughts of its own."""
    from salon.model import Thought, ToolCall, ToolRecord, ToolResult

    thought = Thought("anthropic", "m", text=THOUGHT_TEXT, signature="c2ln")
    hidden = Thought("anthropic", "m", redacted="b3BhcXVl")
    later = Thought("anthropic", "m", text="now the second word", signature="c2lnMg")

    def made(n: int, *thoughts: Thought) -> ToolRecord:
        call = ToolCall(f"call_{n}", "lookup", {"word": f"w{n}"})
        return ToolRecord(T, ROOM.key, "1", call, ToolResult(f"call_{n}", f"r{n}"), thoughts)

    return [made(1, thought, hidden), made(2), made(3, later)]


def test_past_thoughts_go_first_on_the_assistant_turn_of_their_calls() -> None:
    from salon.llm.base import ThinkingPart, ToolResultPart, ToolUsePart

    records = thinking_records()
    history = [msg(1, ALICE, "what are w1 and w2?")]
    native = render_chat(history, ME, bot_config().render, "m", records, native_tools=True)
    roles = [m.role for m in native.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    first, second = native.messages[1].parts, native.messages[3].parts
    # The turn's calls are one assistant turn again, its thoughts first, as it was made.
    assert [type(p) for p in first] == [ThinkingPart, ThinkingPart, ToolUsePart, ToolUsePart]
    assert [p.thought for p in first[:2]] == list(records[0].thoughts)  # type: ignore[union-attr]
    results = native.messages[2].parts
    assert [type(p) for p in results] == [ToolResultPart, ToolResultPart]
    assert [type(p) for p in second] == [ThinkingPart, ToolUsePart]
    assert all(THOUGHT_TEXT not in m.plain_text for m in native.messages)


def test_past_thoughts_never_become_text() -> None:
    from salon.context import render_prefill

    history = [msg(1, ALICE, "what are w1 and w2?")]
    text = render_chat(history, ME, bot_config().render, "m", thinking_records())
    prefill = render_prefill(
        history, ME, bot_config(mode="prefill").render, "m", thinking_records()
    )
    for request in (text, prefill):
        shown = repr(request.messages) + request.system
        assert "<function_calls>" in shown
        assert THOUGHT_TEXT not in shown
        assert "c2ln" not in shown


def said_records() -> list[Any]:
    """A turn that said something, then made two calls (its words went out as message 2),
    then a call of a later turn that said nothing."""
    from dataclasses import replace

    from salon.model import ToolCall, ToolRecord, ToolResult

    def made(n: int) -> ToolRecord:
        call = ToolCall(f"call_{n}", "lookup", {"word": f"w{n}"})
        return ToolRecord(T, ROOM.key, "1", call, ToolResult(f"call_{n}", f"r{n}"))

    first = replace(made(1), said="Let me look.\n", posted_as=("2",))
    return [first, replace(made(2), same_turn=True), made(3)]


def test_the_words_a_turn_said_before_its_calls_go_back_on_that_turn_once() -> None:
    from salon.llm.base import TextPart, ToolResultPart, ToolUsePart

    history = [msg(1, ALICE, "w1 and w2?"), msg(2, ME, "Let me look."), msg(3, ME, "Both rare.")]
    records = said_records()
    native = render_chat(history, ME, bot_config().render, "m", records, native_tools=True)
    assert [m.role for m in native.messages] == ["user", "assistant"] * 3
    assert native.messages[1].parts[0] == TextPart("Let me look.\n")
    assert [type(p) for p in native.messages[1].parts[1:]] == [ToolUsePart, ToolUsePart]
    assert [type(p) for p in native.messages[2].parts] == [ToolResultPart, ToolResultPart]
    assert [type(p) for p in native.messages[3].parts] == [ToolUsePart]  # a turn of its own
    assert native.messages[-1].plain_text == "Both rare."
    text = render_chat(history, ME, bot_config().render, "m", records)
    assert text.messages[1].plain_text.startswith("Let me look.\n<function_calls>")
    for request in (native, text):
        assert sum(m.plain_text.count("Let me look.") for m in request.messages) == 1


def test_the_words_of_a_turn_whose_calls_are_gone_stay_a_message() -> None:
    history = [msg(1, ALICE, "w1?"), msg(2, ME, "Let me look."), msg(3, ME, "Rare.")]
    request = render_chat(history, ME, bot_config().render, "m", [], native_tools=True)
    assert request.messages[1].plain_text == "Let me look.\n\nRare."
