"""Inline ``<think>…</think>`` taken out of a streamed answer, however the chunks fall."""

from __future__ import annotations

import pytest

from salon.llm.base import TextDelta, ThinkingClosed, ThinkingDelta
from salon.llm.think_tags import ThinkSplitter


def split(chunks: list[str], *, expect_thinking: bool = False) -> tuple[str, str]:
    """(answer, reasoning) of a stream of ``chunks``."""
    splitter = ThinkSplitter(expect_thinking=expect_thinking)
    events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.finish()
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    return answer, reasoning


STREAM = "<think>Is it a trick? No.</think>\n\nFour, as ever."


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_tag_cut_anywhere_between_two_chunks_is_still_a_tag(cut: int) -> None:
    assert split([STREAM[:cut], STREAM[cut:]]) == ("Four, as ever.", "Is it a trick? No.")


def test_a_stream_of_single_characters_is_split_the_same() -> None:
    assert split(list(STREAM)) == ("Four, as ever.", "Is it a trick? No.")


def test_an_unclosed_block_at_the_end_is_all_reasoning() -> None:
    assert split(["<think>I should say", " the secret is 42"]) == (
        "",
        "I should say the secret is 42",
    )
    assert split(["Sure. <think>but wait"]) == ("Sure. ", "but wait")


def test_a_tagless_start_is_reasoning_when_thinking_is_on() -> None:
    chunks = ["The user wants", " a number.</th", "ink>\n\n", "Four."]
    assert split(chunks, expect_thinking=True) == ("Four.", "The user wants a number.")


def test_a_tagless_answer_with_thinking_on_is_the_answer_at_the_end() -> None:
    assert split(["Just ", "four."], expect_thinking=True) == ("Just four.", "")
    assert split(["  <think>plan</think>Four."], expect_thinking=True) == ("Four.", "plan")


def test_with_thinking_off_a_stray_closing_tag_is_dropped_not_posted() -> None:
    assert split(["Four.</think> Five."]) == ("Four.Five.", "")


def test_a_stray_closing_tag_is_said_where_it_was() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("thinking first</th") == [TextDelta("thinking first")]
    assert splitter.feed("ink>\n\nParis.") == [ThinkingClosed(), TextDelta("Paris.")]
    closed = ThinkSplitter()
    assert closed.feed("<think>plan</think>Paris.") == [ThinkingDelta("plan"), TextDelta("Paris.")]


def test_only_what_could_be_a_tag_is_held_back() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("Hello <b>world</b> and <") == [TextDelta("Hello <b>world</b> and ")]
    assert splitter.feed("3 too") == [TextDelta("<3 too")]
    assert splitter.feed(" </thin") == [TextDelta(" ")]
    assert splitter.feed("gs>") == [TextDelta("</things>")]
    thinking = ThinkSplitter()
    assert thinking.feed("<think>a < b") == [ThinkingDelta("a < b")]
    assert thinking.feed(" </thi") == [ThinkingDelta(" ")]


def test_reasoning_streams_as_it_comes_and_is_kept_whole() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<think>step one") == [ThinkingDelta("step one")]
    assert splitter.feed(", step two</think>Done") == [
        ThinkingDelta(", step two"),
        TextDelta("Done"),
    ]
    assert splitter.reasoning == "step one, step two"


def test_a_tagless_start_still_sees_an_opening_tag_cut_in_two() -> None:
    assert split(["  <th", "ink>plan</think>ok"], expect_thinking=True) == ("ok", "plan")
    assert split(["<b>plan</b>", " more</think>ok"], expect_thinking=True) == (
        "ok",
        "<b>plan</b> more",
    )


def test_a_server_that_gives_reasoning_apart_ends_the_wait() -> None:
    splitter = ThinkSplitter(expect_thinking=True)
    splitter.apart()
    assert splitter.feed("Four.") == [TextDelta("Four.")]
