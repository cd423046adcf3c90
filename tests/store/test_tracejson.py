"""A trace body's text is the same as encoding and redacting it whole, message by message
cache or not."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from salon.store._tracejson import TraceEncoder


def whole(body: dict[str, Any], redact: Any = None) -> str:
    text = json.dumps(body, ensure_ascii=False, default=str)
    return redact(text) if redact else text


def hide(text: str) -> str:
    return text.replace("sk-SECRET", "[redacted]")


def turn(i: int, text: str = "") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text or f'message {i} é "q"'}]}


def body(messages: list[Any], key: str = "messages") -> dict[str, Any]:
    request = {"model": "m", key: messages, "stream": True}
    return {"bot": "b", "answer": "ok", "calls": [{"kind": "answer", "request": request}]}


def test_a_long_request_encodes_as_the_whole_would() -> None:
    encoder = TraceEncoder(None)
    messages = [turn(i) for i in range(40)]
    assert encoder.encode(body(messages)) == whole(body(messages))
    again = [*messages, turn(40)]  # the next activation: the same objects and one more
    assert encoder.encode(body(again)) == whole(body(again))


def test_google_contents_short_and_empty_lists_too() -> None:
    encoder = TraceEncoder(None)
    for value in (body([turn(i) for i in range(20)], "contents"), body([]), body([turn(1)])):
        assert encoder.encode(value) == whole(value)


def test_secrets_are_redacted_in_remembered_messages_and_around_them() -> None:
    encoder = TraceEncoder(hide)
    messages = [turn(i, "key sk-SECRET here" if i == 3 else "") for i in range(12)]
    value = body(messages)
    value["answer"] = "the key is sk-SECRET"
    text = encoder.encode(value)
    assert "sk-SECRET" not in text
    assert text == whole(value, hide)
    assert encoder.encode(value) == text  # from the remembered encodings


def test_the_body_given_is_not_changed() -> None:
    value = body([turn(i) for i in range(10)])
    before = json.dumps(value)
    TraceEncoder(None).encode(value)
    assert json.dumps(value) == before


def test_the_remembered_encodings_are_bounded() -> None:
    encoder = TraceEncoder(None, limit=10)
    messages = [turn(i) for i in range(30)]
    assert encoder.encode(body(messages)) == whole(body(messages))
    assert len(encoder._done) == 10


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(json_values, max_size=20), st.text())
def test_any_json_encodes_as_the_whole_would(messages: list[Any], answer: str) -> None:
    value = body(messages)
    value["answer"] = answer
    assert TraceEncoder(None).encode(value) == whole(value)
