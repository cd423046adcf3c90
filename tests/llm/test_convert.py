"""Turns converted once per message object, and never changed once shared."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

from salon.config import Secrets
from salon.llm import ChatMessage, FakeProvider, LLMRequest
from salon.llm._convert import Converted
from salon.llm.anthropic import to_anthropic_messages
from salon.llm.factory import build_provider
from tests.conftest import bot_config


def _provider(vendor: str):  # type: ignore[no-untyped-def]
    config = bot_config(
        providers={"test": {"type": vendor, "model": "m", "base_url": "http://127.0.0.1:9"}}
    )
    return build_provider(config, Secrets({}))


def test_a_turn_ending_a_request_is_stripped_without_changing_the_shared_form() -> None:
    provider = _provider("anthropic")
    asked, said = ChatMessage.text("user", "hi"), ChatMessage.text("assistant", "well  ")
    first = provider.wire(LLMRequest(model="m", messages=(asked, said)))
    later = provider.wire(
        LLMRequest(model="m", messages=(asked, said, ChatMessage.text("user", "go on")))
    )
    assert first["messages"][-1]["content"][-1]["text"] == "well"
    fresh = to_anthropic_messages(LLMRequest(model="m", messages=(asked, said, asked)))
    assert later["messages"][1] == fresh[1]  # still "well  " in the middle of a request


def test_the_same_turn_object_is_converted_once() -> None:
    for vendor in ("openai", "anthropic"):
        provider = _provider(vendor)
        turn = ChatMessage.text("user", "Alice: hello")
        one = provider.wire(LLMRequest(model="m", messages=(turn,)))
        two = provider.wire(LLMRequest(model="m", messages=(turn,)))
        assert one["messages"][-1] is two["messages"][-1]
        other = provider.wire(
            LLMRequest(model="m", messages=(ChatMessage.text("user", "Alice: hello"),))
        )
        assert other["messages"][-1] == one["messages"][-1]
        assert other["messages"][-1] is not one["messages"][-1]


def test_a_one_hour_cache_marks_every_breakpoint_and_costs_its_write_rate() -> None:
    from salon.config.prices import call_cost, price_for
    from salon.llm import TextPart
    from salon.model import Usage

    def config(**extra: object):  # type: ignore[no-untyped-def]
        settings = {"type": "anthropic", "model": "m", "base_url": "http://127.0.0.1:9"}
        settings |= {"cache_min_tokens": 0, **extra}  # a short request: mark it anyway
        return bot_config(providers={"test": settings})

    marked = ChatMessage("user", (TextPart("Alice: hi", cache_breakpoint=True),))
    request = LLMRequest(model="m", system="Be kind.", messages=(marked,), cache_system=True)
    plain = build_provider(config(), Secrets({})).wire(request)
    assert plain["system"][0]["cache_control"] == {"type": "ephemeral"}
    provider = build_provider(config(cache_ttl="1h"), Secrets({}))
    body = provider.wire(request)
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    price = price_for("claude-sonnet-4-5", {})
    writes = Usage(cache_write_tokens=1_000_000)
    factor = provider.traits.cache_write_factor
    assert call_cost(price, writes, write_factor=factor) == 2 * price.input  # type: ignore[union-attr]
    assert call_cost(price, writes) == 1.25 * price.input  # type: ignore[union-attr]


def _held_after(work: Callable[[], None]) -> int:
    """The memory ``work`` left allocated (what the caches it fed keep)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_the_turn_memo_keeps_within_a_byte_budget_whatever_the_turns_weigh() -> None:
    """Long turns (a pasted log, an image) are few by count but many megabytes: the memo
    of converted turns is bounded by their weight too (it kept 200 000 turns whatever they
    weighed)."""

    def convert_long_turns() -> None:
        for n in range(150):  # 1 MB each: 150 MB if all were kept
            turn = ChatMessage.text("user", "x" * 1_000_000 + str(n))
            FakeProvider().wire(LLMRequest(model="m", messages=(turn,)))

    assert _held_after(convert_long_turns) < 144 * 1024 * 1024  # the default budget: 128 MiB


def test_a_turn_nothing_holds_any_more_leaves_the_memo() -> None:
    """A turn is reused only while a render memo holds it: one gone from every memo will
    never be asked for again, and the provider's memo lets it go (it kept 200 000 such
    turns, about 200 MiB at 200 busy channels)."""
    provider = _provider("openai")

    def converse() -> None:
        for n in range(10_000):
            turn = ChatMessage.text("user", f"Alice: question {n}")
            provider.wire(LLMRequest(model="m", messages=(turn,)))

    converse()  # the provider's request memo fills to its bound of requests
    assert _held_after(converse) < 1024 * 1024


def test_turns_still_held_are_let_go_by_weight_past_the_byte_budget() -> None:
    converted: list[str] = []

    def convert(text: str) -> str:
        converted.append(text)
        return text.upper()

    memo = Converted(convert, weigh=len, max_bytes=100)
    turns = [f"{n}" * 40 for n in range(5)]  # held by the caller, 40 bytes each
    for turn in turns:
        memo(turn)
    assert memo.nbytes <= 100
    memo(turns[-1])  # the newest is kept
    memo(turns[0])  # the oldest went
    assert converted == [*turns, turns[0]]
