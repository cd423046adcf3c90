"""The pipeline's pure rules: keyword matching, the evaluator's reading and choice, the
gate's reading, the breaker's count, the refusal's words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from salon.agent.pipeline.evaluator import parse_keep, select, split
from salon.agent.pipeline.gate import bot_runs_last_minute, gate_says_yes
from salon.agent.pipeline.keywords import keyword_call, match_keyword
from salon.agent.pipeline.limits import refusal_text
from salon.config.pipeline import ContextEvaluatorConfig, SpeakGateConfig
from salon.model import ChannelRef, Message, Participant, Tag, ToolSpec
from salon.store.limits import Refusal
from tests.conftest import bot_config

ROOM = ChannelRef("memory", "room")
ALICE = Participant("alice", "Alice")
ME = Participant("bot", "Salon", is_bot=True)
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def message(number: int, text: str = "", author: Participant = ALICE, **kw: object) -> Message:
    at = kw.pop("at", NOW)
    assert isinstance(at, datetime)
    return Message(str(number), ROOM, author, text or f"m{number}", at, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "word", "rest"),
    [
        ("!weather Seattle", "weather", "Seattle"),
        ("!WEATHER  New York ", "weather", "New York"),
        ("@Salon !weather Oslo", "weather", "Oslo"),
        ("salon: !weather Rome", "weather", "Rome"),
        ("!help", "help", ""),
    ],
)
def test_keywords_match_with_any_case_and_after_a_mention(text: str, word: str, rest: str) -> None:
    config = bot_config(keywords={"!weather": {"tool": "get_weather"}, "help": {}})
    found = match_keyword(message(1, text), ME, config)
    assert found is not None
    assert (found.word, found.rest) == (word, rest)


@pytest.mark.parametrize("text", ["weather Seattle", "!unknown x", "say !weather", ""])
def test_other_messages_are_no_keyword(text: str) -> None:
    config = bot_config(keywords={"weather": {"tool": "get_weather"}})
    assert match_keyword(message(1, text or " "), ME, config) is None


def test_a_keyword_spelled_twice_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="given twice"):
        bot_config(keywords={"!weather": {"tool": "a"}, "weather": {"tool": "b"}})


def test_the_rest_of_the_line_fills_the_first_required_string() -> None:
    spec = ToolSpec(
        "get_weather",
        "wx",
        "get_weather",
        "",
        {
            "type": "object",
            "properties": {"units": {"type": "string"}, "location": {"type": "string"}},
            "required": ["location"],
        },
    )
    config = bot_config(keywords={"weather": {"tool": "get_weather"}})
    found = match_keyword(message(1, "!weather Lima"), ME, config)
    assert found is not None
    call = keyword_call(found, spec, "k1")
    assert not isinstance(call, str)
    assert call.arguments == {"location": "Lima"}
    empty = match_keyword(message(2, "!weather"), ME, config)
    assert empty is not None
    assert keyword_call(empty, spec, "k2") == "!weather needs something after it (its location)"


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ('{"keep": [1, 3]}', {1, 3}),
        ('Sure! {"keep": [2, 99]} done', {2}),
        ("keep 1 and 2", None),
        ('{"keep": "1,2"}', None),
        ("{broken", None),
    ],
)
def test_the_evaluator_answer_is_read_or_refused(answer: str, kept: set[int] | None) -> None:
    assert parse_keep(answer, 5) == kept


def test_min_depth_is_kept_max_depth_bounds_and_the_cached_prefix_is_never_judged() -> None:
    settings = ContextEvaluatorConfig(enabled=True, min_depth=2, max_depth=4)
    messages = [message(n) for n in range(1, 9)]  # 1 oldest .. 8 newest
    judged = split(messages, ["2"], settings)  # the roll's breakpoint on message 2
    assert [m.id for m in judged.protected] == ["1", "2"]
    assert [m.id for m in judged.eligible] == ["8", "7", "6", "5"]
    chosen, dropped = select(messages, judged, {4}, settings)
    assert [m.id for m in chosen] == ["1", "2", "5", "7", "8"]
    assert dropped == ["3", "4", "6"]


def test_reply_chain_messages_are_marked_for_the_evaluator() -> None:
    from salon.agent.pipeline.evaluator import evaluator_prompt

    settings = ContextEvaluatorConfig(enabled=True)
    chained = message(1, "old question", tags=frozenset({Tag.REPLY_CHAIN}))
    judged = split([chained, message(2, "new")], [], settings)
    prompt = evaluator_prompt(judged, "new", settings)
    assert "2. [reply chain] Alice: old question" in prompt
    assert "1. Alice: new" in prompt


@pytest.mark.parametrize(
    ("style", "answer", "decision"),
    [
        ("question", "Yes.", True),
        ("question", " no", False),
        ("question", "maybe", None),
        ("next_speaker", "Salon", True),
        ("next_speaker", "Alice", False),
        ("next_speaker", "", None),
    ],
)
def test_the_gate_answer_is_read(style: str, answer: str, decision: bool | None) -> None:
    settings = SpeakGateConfig(enabled=True, style=style)  # type: ignore[arg-type]
    assert gate_says_yes(answer, "Salon", settings) is decision


def test_a_run_of_one_bot_counts_once_and_old_messages_not_at_all() -> None:
    bot = Participant("b", "Beep", is_bot=True)
    old = NOW - timedelta(minutes=5)
    messages = [
        message(1, author=bot, at=old),
        message(2, author=bot),
        message(3, author=bot),  # same run as 2
        message(4, author=ME),
        message(5, author=ALICE),
        message(6, author=bot),
    ]
    assert bot_runs_last_minute(messages, NOW) == 3


def test_a_refusal_says_what_and_when() -> None:
    config = bot_config(limits={"user_rate": {"requests": 20, "per_seconds": 3600}})
    now = NOW.timestamp()
    rate = Refusal("rate", "rate:alice", now + 1800)
    assert refusal_text(rate, "Alice", config, now) == (
        "Alice: you have reached 20 requests per hour; I can answer you again at 12:30:00 UTC."
    )
    budget = Refusal("budget", "guild:discord:1:tokens", now + 7200)
    assert refusal_text(budget, "Alice", config, now) == (
        "Alice: this server's daily budget for Salon is used up; it resets at 14:00 UTC."
    )
