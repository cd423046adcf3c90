"""Turns converted once per message object, and never changed once shared."""

from __future__ import annotations

from salon.config import Secrets
from salon.llm import ChatMessage, LLMRequest
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
        settings = {"type": "anthropic", "model": "m", "base_url": "http://127.0.0.1:9", **extra}
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
