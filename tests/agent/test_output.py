"""Splitting model text into chat messages."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from salon.agent.conversation.output import ParagraphStream, split_message


def fences_balanced(piece: str) -> bool:
    return sum(1 for line in piece.split("\n") if line.lstrip().startswith("```")) % 2 == 0


def test_short_text_is_one_piece() -> None:
    assert split_message("hello", 10) == ["hello"]


def test_prefers_paragraph_then_line_then_word() -> None:
    text = "aaaa bbbb\ncccc dddd\n\neeee"
    assert split_message(text, 20) == ["aaaa bbbb\ncccc dddd", "eeee"]
    assert split_message("aaaa bbbb\ncccc dddd", 12) == ["aaaa bbbb", "cccc dddd"]
    assert split_message("aaaa bbbb cccc", 10) == ["aaaa bbbb", "cccc"]


def test_a_word_longer_than_the_limit_is_cut_hard() -> None:
    assert split_message("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_code_fence_is_closed_and_reopened() -> None:
    code = "\n".join(f"line {i}" for i in range(30))
    text = f"Here:\n\n```python\n{code}\n```\n\nDone."
    pieces = split_message(text, 120)
    assert len(pieces) > 2
    assert all(len(p) <= 120 for p in pieces)
    assert all(fences_balanced(p) for p in pieces)
    assert pieces[1].startswith("```python\n")
    assert pieces[2].startswith("```python\n")


@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab \n", min_size=0, max_size=80),
            st.just("```py\n"),
            st.just("\n```\n"),
        ),
        max_size=30,
    ),
    st.integers(min_value=64, max_value=300),
)
def test_pieces_fit_and_lose_no_words(parts: list[str], limit: int) -> None:
    text = "".join(parts)
    pieces = split_message(text, limit)
    assert all(0 < len(p) <= limit for p in pieces)
    words = [w for w in text.split() if not w.startswith("```")]
    got = [w for p in pieces for w in p.split() if not w.startswith("```")]
    # hard cuts may split a word in two; the letters are all there in order
    assert "".join(got) == "".join(words)


@given(st.text(alphabet="`ab \n", max_size=400), st.integers(min_value=1, max_value=63))
def test_tiny_limits_still_terminate_and_fit(text: str, limit: int) -> None:
    assert all(0 < len(p) <= limit for p in split_message(text, limit))


def test_paragraph_stream_releases_complete_paragraphs() -> None:
    stream = ParagraphStream(1800)
    assert stream.feed("One") == []
    assert stream.feed(" two.\n") == []
    assert stream.feed("\nThree") == ["One two."]
    assert stream.finish() == ["Three"]


def test_paragraph_stream_holds_blank_lines_inside_code() -> None:
    stream = ParagraphStream(1800)
    out = stream.feed("```\na\n\nb\n```\n\nafter")
    assert out == ["```\na\n\nb\n```"]
    assert stream.finish() == ["after"]


def test_paragraph_stream_flushes_an_overlong_paragraph() -> None:
    stream = ParagraphStream(50)
    out = stream.feed("word " * 30)
    assert out
    assert all(len(p) <= 50 for p in out)
    rest = stream.finish()
    assert " ".join(out + rest).split() == ["word"] * 30


def test_a_delta_ending_in_a_space_keeps_it_when_held_text_is_cut_for_size() -> None:
    stream = ParagraphStream(50)
    words = [f"w{i}" for i in range(40)]
    first, second = " ".join(words[:20]) + " ", " ".join(words[20:])
    pieces = [*stream.feed(first), *stream.feed(second), *stream.finish()]
    assert " ".join(pieces).split() == words
