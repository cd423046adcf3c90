"""The XML text protocol: parsing never raises; malformed calls become error results."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from salon.context.textproto import (
    MALFORMED,
    CallTextFilter,
    format_calls,
    format_results,
    parse_calls,
    render_tool_list,
)
from salon.model import UNPARSED_ARGUMENTS, ToolCall, ToolResult, ToolSpec

SCHEMAS = {
    "echo": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
    }
}


def test_text_without_calls_is_all_visible() -> None:
    parsed = parse_calls("Just words.")
    assert (parsed.text, parsed.calls) == ("Just words.", [])


def test_calls_are_parsed_with_types_from_the_schema() -> None:
    completion = (
        'Let me echo.\n<function_calls>\n<invoke name="echo">\n'
        '<parameter name="text">42</parameter>\n<parameter name="times">3</parameter>\n'
        '</invoke>\n<invoke name="other">\n<parameter name="flag">true</parameter>\n</invoke>\n'
    )
    parsed = parse_calls(completion, SCHEMAS)
    assert parsed.text == "Let me echo.\n"
    assert [(c.name, c.arguments) for c in parsed.calls] == [
        ("echo", {"text": "42", "times": 3}),
        ("other", {"flag": True}),
    ]


def test_an_unclosed_invoke_at_the_stop_sequence_still_parses() -> None:
    parsed = parse_calls('<function_calls><invoke name="echo"><parameter name="text">hi', SCHEMAS)
    assert parsed.calls[0].arguments == {"text": "hi"}


def test_garbage_inside_the_block_is_a_malformed_call() -> None:
    parsed = parse_calls("<function_calls>\nnot xml at all")
    (bad,) = parsed.calls
    assert bad.name == MALFORMED
    assert UNPARSED_ARGUMENTS in bad.arguments


def test_format_round_trips_through_the_parser() -> None:
    calls = [ToolCall("a", "echo", {"text": "x < y", "times": 2})]
    parsed = parse_calls(format_calls(calls), SCHEMAS)
    assert parsed.calls[0].arguments == {"text": "x < y", "times": 2}
    results = format_results(calls, [ToolResult("a", "boom", is_error=True)])
    assert "<error>boom</error>" in results


def test_tool_list_names_every_tool() -> None:
    specs = [ToolSpec("echo", "kit", "echo", "Repeat text.", SCHEMAS["echo"])]
    listing = render_tool_list(specs)
    assert '<tool name="echo">' in listing
    assert "<function_calls>" in listing


@given(st.text(alphabet=st.sampled_from(list('<>/="abcinvokeparametrfu_ \n{}[]1')), max_size=300))
def test_parser_never_raises(text: str) -> None:
    for completion in (text, "<function_calls>" + text):
        parsed = parse_calls(completion, SCHEMAS)
        assert isinstance(parsed.text, str)
        for parsed_call in parsed.calls:
            assert isinstance(parsed_call.arguments, dict)


@given(st.lists(st.text(max_size=12), max_size=20))
def test_filter_never_shows_the_call_block(deltas: list[str]) -> None:
    text = "".join(deltas) + '<function_calls><invoke name="x"></invoke>'
    chunks = [*deltas, "<function_", 'calls><invoke name="x"></invoke>']
    shown_filter = CallTextFilter()
    shown = "".join(shown_filter.feed(d) for d in chunks) + shown_filter.flush()
    assert shown == text[: text.find("<function_calls>")]
    assert shown_filter.full == text
