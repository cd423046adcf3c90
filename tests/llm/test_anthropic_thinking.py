"""Extended thinking on Anthropic and Bedrock through the real anthropic SDK, against the
loopback fake, which refuses what the Messages API documents it refuses about thinking."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from fakes.anthropic_reasoning import anthropic_signature
from fakes.llm_server import LLMServer, Scripted
from salon.errors import ProviderError
from salon.llm import ChatMessage, LLMRequest, TextPart, ToolDefinition
from salon.llm.base import Thinking as Asked
from salon.llm.base import (
    ThinkingDelta,
    ThinkingPart,
    ThoughtEvent,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
)
from salon.model import Thought, ToolCall, ToolResult, Usage
from tests.llm._vendors import MODEL, collect, provider_for, request, text_of

VENDORS = ["anthropic", "bedrock"]
BUDGET = Asked(budget_tokens=2048)
TOOL = ToolDefinition("lookup", "Look a word up.", {"type": "object", "properties": {}})
INTERLEAVED = "interleaved-thinking-2025-05-14"
CALL = ToolCall("c1", "lookup", {"word": "salon"})


def thought(vendor: str, text: str = "I should look it up.", **fields: Any) -> Thought:
    return Thought(vendor, MODEL, text, signature=anthropic_signature(text), **fields)


def tool_loop(*asked: ThinkingPart | TextPart | ToolUsePart, **fields: Any) -> LLMRequest:
    """A request continuing a tool loop: the assistant turn ``asked``, then its result."""
    return LLMRequest(
        model=MODEL,
        max_tokens=4096,
        messages=(
            ChatMessage.text("user", "what is a salon?"),
            ChatMessage("assistant", asked),
            ChatMessage("user", (ToolResultPart(ToolResult("c1", "a room")),)),
        ),
        tools=(TOOL,),
        **{"thinking": BUDGET, **fields},
    )


async def refused(provider: Any, sent: LLMRequest) -> str:
    with pytest.raises(ProviderError) as caught:
        await collect(provider, sent)
    return str(caught.value)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_budget_goes_out_as_manual_thinking(llm_server: LLMServer, vendor: str) -> None:
    provider = provider_for(llm_server, vendor)
    await collect(provider, request(thinking=BUDGET, max_tokens=4096))
    await collect(provider, request(thinking=BUDGET, max_tokens=4096, tools=(TOOL,)))
    plain, with_tools = llm_server.requests
    assert plain.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "output_config" not in plain.body
    assert INTERLEAVED not in json.dumps(plain.body) + str(plain.headers)
    # With tools the model may think between calls; Bedrock takes betas in the body.
    if vendor == "bedrock":
        assert INTERLEAVED in with_tools.body["anthropic_beta"]
    else:
        assert INTERLEAVED in with_tools.headers["anthropic-beta"].split(",")


@pytest.mark.parametrize("vendor", VENDORS)
async def test_an_effort_alone_is_adaptive_thinking(llm_server: LLMServer, vendor: str) -> None:
    provider = provider_for(llm_server, vendor)
    await collect(provider, request(thinking=Asked(effort="high"), tools=(TOOL,)))
    await collect(provider, request(thinking=Asked()))
    (effort, bare) = (r.body for r in llm_server.requests)
    assert effort["thinking"] == {"type": "adaptive"}
    assert effort["output_config"] == {"effort": "high"}
    assert "anthropic_beta" not in effort  # adaptive thinking interleaves by itself
    assert bare["thinking"] == {"type": "adaptive"}
    assert "output_config" not in bare


@pytest.mark.parametrize("vendor", VENDORS)
async def test_no_thinking_asked_sends_none(llm_server: LLMServer, vendor: str) -> None:
    llm_server.queue(Scripted(text="plain", thinking="never streamed"))
    events = await collect(provider_for(llm_server, vendor))
    assert "thinking" not in llm_server.requests[0].body
    assert text_of(events) == "plain"
    assert not [e for e in events if isinstance(e, ThinkingDelta | ThoughtEvent)]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_thinking_streams_apart_from_the_answer_and_comes_back_signed(
    llm_server: LLMServer, vendor: str
) -> None:
    llm_server.queue(
        Scripted(
            chunks=["The ", "answer."],
            thinking_chunks=["Let me ", "think."],
            redacted_thinking="b3BhcXVl",
            output_tokens=40,
            reasoning_tokens=30,
        )
    )
    events = await collect(
        provider_for(llm_server, vendor), request(thinking=BUDGET, max_tokens=4096)
    )
    assert text_of(events) == "The answer."
    assert [e.text for e in events if isinstance(e, ThinkingDelta)] == ["Let me ", "think."]
    thoughts = [e.thought for e in events if isinstance(e, ThoughtEvent)]
    assert thoughts == [
        thought(vendor, "Let me think."),
        Thought(vendor, MODEL, redacted="b3BhcXVl"),
    ]
    usage = sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage())
    assert (usage.output_tokens, usage.reasoning_tokens) == (40, 30)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_thoughts_go_back_exactly_and_only_to_their_vendor_and_model(
    llm_server: LLMServer, vendor: str
) -> None:
    other = "anthropic" if vendor == "bedrock" else "bedrock"
    mine, redacted = thought(vendor), Thought(vendor, MODEL, redacted="b3BhcXVl")
    foreign = [
        Thought(vendor, "another-model", "thought for another model", signature="x"),
        Thought(other, MODEL, "thought on the other platform", signature="y"),
        Thought("gemini", MODEL, "a gemini thought", signature="z"),
        Thought(vendor, MODEL, "cut short before its signature came"),
    ]
    sent = tool_loop(
        ThinkingPart(mine),
        ThinkingPart(redacted),
        *(ThinkingPart(t) for t in foreign),
        TextPart("Checking.", cache_breakpoint=True),
        ToolUsePart(CALL),
    )
    llm_server.queue("It means a room.")
    events = await collect(provider_for(llm_server, vendor), sent)
    assert text_of(events) == "It means a room."
    body = llm_server.requests[0].body
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": mine.text, "signature": mine.signature},
        {"type": "redacted_thinking", "data": "b3BhcXVl"},
        {"type": "text", "text": "Checking.", "cache_control": {"type": "ephemeral"}},
        {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"word": "salon"}},
    ]
    assert not any(t.text in json.dumps(body) for t in foreign)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_the_fake_refuses_a_tool_loop_whose_thinking_was_dropped(
    llm_server: LLMServer, vendor: str
) -> None:
    provider = provider_for(llm_server, vendor)
    message = await refused(provider, tool_loop(ToolUsePart(CALL)))
    assert "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`" in message
    assert "but found `tool_use`" in message
    # Thinking from another model is dropped, which the API refuses the same way.
    elsewhere = Thought(vendor, "another-model", "old", signature=anthropic_signature("old"))
    message = await refused(provider, tool_loop(ThinkingPart(elsewhere), ToolUsePart(CALL)))
    assert "Expected `thinking` or `redacted_thinking`" in message


@pytest.mark.parametrize("vendor", VENDORS)
async def test_adaptive_thinking_may_skip_thinking_in_a_tool_loop(
    llm_server: LLMServer, vendor: str
) -> None:
    """The model decides whether to think: a round it did not think in goes back as is;
    only a final assistant turn (a prefill) must still open with thinking."""
    llm_server.queue("It means a room.")
    sent = tool_loop(ToolUsePart(CALL), thinking=Asked(effort="low"))
    assert text_of(await collect(provider_for(llm_server, vendor), sent)) == "It means a room."


@pytest.mark.parametrize("vendor", VENDORS)
async def test_the_fake_refuses_a_changed_thinking_block(
    llm_server: LLMServer, vendor: str
) -> None:
    provider = provider_for(llm_server, vendor)
    edited = Thought(vendor, MODEL, "I changed my mind.", signature=anthropic_signature("I was"))
    message = await refused(provider, tool_loop(ThinkingPart(edited), ToolUsePart(CALL)))
    assert "messages.1.content.0: Invalid `signature` in `thinking` block" in message


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"thinking": Asked(budget_tokens=512)}, "greater than or equal to 1024"),
        ({"max_tokens": 2048}, "`max_tokens` must be greater than `thinking.budget_tokens`"),
        ({"extra": {"tool_choice": {"type": "any"}}}, "tool_choice forces tool use"),
        ({"extra": {"temperature": 0.5}}, "`temperature` may only be set to 1"),
        ({"extra": {"top_k": 5}}, "`top_k` must be unset when thinking is enabled"),
    ],
)
async def test_the_fake_refuses_what_thinking_does_not_take(
    llm_server: LLMServer, vendor: str, fields: dict[str, Any], words: str
) -> None:
    sent = request(**{"thinking": BUDGET, "max_tokens": 4096, **fields})
    assert words in await refused(provider_for(llm_server, vendor), sent)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_prefill_goes_without_thinking_and_the_log_says_so_once(
    llm_server: LLMServer, vendor: str, caplog: pytest.LogCaptureFixture
) -> None:
    transcript = (
        ChatMessage.text("user", "(the conversation so far)"),
        ChatMessage.text("assistant", "Alice: hi\n\nSalon:"),
    )
    sent = LLMRequest(MODEL, transcript, max_tokens=4096, prefill=True, thinking=BUDGET)
    provider = provider_for(llm_server, vendor)
    llm_server.queue(" Hello.", " Again.")
    with caplog.at_level(logging.WARNING, logger="salon.llm.anthropic"):
        assert text_of(await collect(provider, sent)) == " Hello."
        assert text_of(await collect(provider, sent)) == " Again."
    assert all("thinking" not in r.body for r in llm_server.requests)
    told = [r.getMessage() for r in caplog.records if "thinking" in r.getMessage()]
    assert len(told) == 1
    assert "prefill" in told[0]
    # What the API does with a prefill and thinking both: refuses it.
    forced = LLMRequest(
        MODEL, transcript, max_tokens=4096, prefill=True, extra={"thinking": {"type": "adaptive"}}
    )
    message = await refused(provider, forced)
    assert "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`" in message
    assert "but found `text`" in message


@pytest.mark.parametrize("vendor", VENDORS)
async def test_the_fake_refuses_a_cache_marker_on_a_thinking_block(
    llm_server: LLMServer, vendor: str
) -> None:
    """Salon never marks one (its breakpoints sit on text); the API would refuse it."""
    block = {
        "type": "thinking",
        "thinking": "t",
        "signature": anthropic_signature("t"),
        "cache_control": {"type": "ephemeral"},
    }
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [block, {"type": "text", "text": "hello"}]},
        {"role": "user", "content": "again"},
    ]
    sent = request(thinking=BUDGET, max_tokens=4096, extra={"messages": messages})
    message = await refused(provider_for(llm_server, vendor), sent)
    assert "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted" in message


async def test_a_whole_answer_opens_with_its_thinking_blocks(llm_server: LLMServer) -> None:
    """The fake's non-streamed body, read by the SDK itself, as the API writes it."""
    import anthropic

    llm_server.queue(Scripted(text="Done.", thinking="Quick check.", redacted_thinking="b3A="))
    client = anthropic.AsyncAnthropic(api_key="k-test", base_url=llm_server.base_url)
    answer = await client.messages.create(
        model=MODEL,
        max_tokens=4096,
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "hi"}],
    )
    await client.close()
    assert [b.type for b in answer.content] == ["thinking", "redacted_thinking", "text"]
    thinking = answer.content[0]
    assert thinking.type == "thinking"
    assert (thinking.thinking, thinking.signature) == (
        "Quick check.",
        anthropic_signature("Quick check."),
    )
