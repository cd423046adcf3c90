"""Gemini thinking through the real google-genai SDK against the loopback fake: the
``thinkingConfig`` as documented, thought summaries kept apart from the answer, thought
signatures kept with the part they came on and sent back, and what the API refuses."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from pydantic.alias_generators import to_camel

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets
from salon.errors import ProviderError
from salon.llm import ChatMessage, LLMRequest, Provider, StreamEvent, TextDelta, ToolDefinition
from salon.llm.base import (
    TextPart,
    Thinking,
    ThinkingDelta,
    ThinkingPart,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
)
from salon.llm.factory import build_provider
from salon.model import Thought, ToolCall, ToolResult, Usage
from tests.conftest import bot_config

MODEL = "gemini-3-pro-preview"
TOOL = ToolDefinition(
    "lookup", "look a word up", {"type": "object", "properties": {"word": {"type": "string"}}}
)
ASKED = ChatMessage.text("user", "Alice: what is a salon?")


def gemini(server: LLMServer, model: str = MODEL) -> Provider:
    providers = {
        "gemini": {
            "type": "google",
            "model": model,
            "base_url": server.base_url,
            "api_key_env": "GEMINI_KEY",
            "retries": 0,
        }
    }
    config = bot_config(provider="gemini", providers=providers)
    return build_provider(config, Secrets({"GEMINI_KEY": "gm-secret"}))


def thinking_request(*messages: ChatMessage, model: str = MODEL, **fields: Any) -> LLMRequest:
    return LLMRequest(
        model=model,
        messages=messages or (ASKED,),
        tools=(TOOL,),
        thinking=fields.pop("thinking", Thinking(budget_tokens=2048)),
        **fields,
    )


async def collect(provider: Provider, request: LLMRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def thoughts(events: list[StreamEvent]) -> list[Thought]:
    return [e.thought for e in events if isinstance(e, ThoughtEvent)]


def raw_signature(part: dict[str, Any]) -> bytes:
    """A part's signature as bytes, whichever base64 alphabet the SDK wrote it in."""
    text = part.get("thoughtSignature") or part["thought_signature"]
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_"))


@pytest.mark.parametrize(
    ("model", "thinking", "expected"),
    [
        # Gemini 2.5 takes a token budget only.
        ("gemini-2.5-flash", Thinking(budget_tokens=2048), {"thinkingBudget": 2048}),
        # An effort on 2.5 becomes the budget Google's own OpenAI layer maps it to.
        ("gemini-2.5-flash", Thinking(effort="low"), {"thinkingBudget": 1024}),
        ("gemini-2.5-pro", Thinking(effort="high"), {"thinkingBudget": 24576}),
        ("gemini-2.5-pro", Thinking(budget_tokens=500, effort="high"), {"thinkingBudget": 500}),
        # Gemini 3 and later take a thinking level; never both fields at once.
        ("gemini-3-pro-preview", Thinking(effort="high"), {"thinkingLevel": "HIGH"}),
        (
            "gemini-3-flash",
            Thinking(budget_tokens=500, effort="medium"),
            {"thinkingLevel": "MEDIUM"},
        ),
        ("gemini-3-flash", Thinking(budget_tokens=500), {"thinkingBudget": 500}),
        ("gemini-3-flash", Thinking(), {}),
    ],
)
async def test_thinking_config_as_the_api_documents(
    llm_server: LLMServer, model: str, thinking: Thinking, expected: dict[str, Any]
) -> None:
    llm_server.queue("ok")
    provider = gemini(llm_server, model)
    request = LLMRequest(model=model, messages=(ASKED,), thinking=thinking)
    await collect(provider, request)
    config = llm_server.requests[0].body["generationConfig"]["thinkingConfig"]
    # The SDK writes this object's fields snake_case; the API reads either spelling.
    assert {to_camel(k): v for k, v in config.items()} == {"includeThoughts": True, **expected}
    await provider.aclose()


async def test_no_thinking_config_when_thinking_is_off(llm_server: LLMServer) -> None:
    llm_server.queue("ok")
    provider = gemini(llm_server)
    await collect(provider, LLMRequest(model=MODEL, messages=(ASKED,)))
    assert "thinkingConfig" not in llm_server.requests[0].body["generationConfig"]
    await provider.aclose()


async def test_thoughts_stream_apart_from_the_answer_and_are_counted(
    llm_server: LLMServer,
) -> None:
    llm_server.queue(
        Scripted(
            thinking_chunks=["A salon is ", "a room; say so."],
            chunks=["A room ", "for talk."],
            output_tokens=6,
            reasoning_tokens=40,
        )
    )
    provider = gemini(llm_server)
    events = await collect(provider, thinking_request())
    thinking = [e.text for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(thinking) == "A salon is a room; say so."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "A room for talk."
    kinds = [e.kind for e in events if isinstance(e, TextDelta | ThinkingDelta)]
    assert kinds == ["thinking", "thinking", "text", "text"]  # the reasoning came first
    usage = sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage())
    # thoughtsTokenCount is reported beside candidatesTokenCount and billed as output.
    assert (usage.output_tokens, usage.reasoning_tokens) == (46, 40)
    # The answer's text part carried a signature: kept, for no function call.
    (thought,) = thoughts(events)
    assert (thought.vendor, thought.model, thought.call_id) == ("google", MODEL, "")
    assert thought.signature
    assert not thought.text
    await provider.aclose()


async def test_a_function_calls_signature_goes_back_on_that_call(llm_server: LLMServer) -> None:
    llm_server.queue(
        Scripted(thinking="Look it up.", tool_calls=[("fc1", "lookup", {"word": "salon"})])
    )
    provider = gemini(llm_server)
    events = await collect(provider, thinking_request())
    (call,) = [e.call for e in events if isinstance(e, ToolCallEvent)]
    (thought,) = thoughts(events)
    assert thought.call_id == call.id
    llm_server.queue("A room for talk.")
    follow = thinking_request(
        ASKED,
        ChatMessage("assistant", (ThinkingPart(thought), ToolUsePart(call))),
        ChatMessage("user", (ToolResultPart(ToolResult(call.id, "a room")),)),
    )
    events = await collect(provider, follow)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "A room for talk."
    model_turn = llm_server.requests[1].body["contents"][1]
    assert model_turn["role"] == "model"
    (part,) = model_turn["parts"]  # the signature rides on the call, not a part of its own
    assert part["functionCall"]["name"] == "lookup"
    assert raw_signature(part) == base64.b64decode(thought.signature)
    await provider.aclose()


async def test_the_fake_refuses_a_dropped_signature(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(tool_calls=[("fc1", "lookup", {"word": "salon"})]))
    provider = gemini(llm_server)
    events = await collect(provider, thinking_request())
    (call,) = [e.call for e in events if isinstance(e, ToolCallEvent)]
    dropped = thinking_request(
        ASKED,
        ChatMessage("assistant", (ToolUsePart(call),)),
        ChatMessage("user", (ToolResultPart(ToolResult(call.id, "a room")),)),
    )
    with pytest.raises(ProviderError, match="missing a thought_signature") as caught:
        await collect(provider, dropped)
    assert "`default_api:lookup`" in str(caught.value)
    await provider.aclose()


async def test_the_fake_refuses_a_signature_it_did_not_issue(llm_server: LLMServer) -> None:
    provider = gemini(llm_server)
    call = ToolCall("fc1", "lookup", {"word": "salon"})
    forged = Thought(
        "google", MODEL, signature=base64.b64encode(b"made up").decode(), call_id="fc1"
    )
    request = thinking_request(
        ASKED,
        ChatMessage("assistant", (ThinkingPart(forged), ToolUsePart(call))),
        ChatMessage("user", (ToolResultPart(ToolResult(call.id, "a room")),)),
    )
    with pytest.raises(ProviderError, match="Corrupted thought signature"):
        await collect(provider, request)
    await provider.aclose()


async def test_only_the_current_turn_needs_signatures(llm_server: LLMServer) -> None:
    """Function calls before the last user text are not checked, as the docs say."""
    llm_server.queue("fine")
    provider = gemini(llm_server)
    call = ToolCall("old", "lookup", {"word": "salon"})
    request = thinking_request(
        ASKED,
        ChatMessage("assistant", (ToolUsePart(call),)),
        ChatMessage("user", (ToolResultPart(ToolResult(call.id, "a room")),)),
        ChatMessage.text("assistant", "A room."),
        ChatMessage.text("user", "Alice: thanks"),
    )
    events = await collect(provider, request)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "fine"
    await provider.aclose()


async def test_thoughts_of_other_vendors_and_models_stay_out(llm_server: LLMServer) -> None:
    llm_server.queue("fine")
    provider = gemini(llm_server)
    signed = base64.b64encode(b"other").decode()
    theirs = (
        Thought("anthropic", MODEL, text="claude mused", signature="sig-a"),
        Thought("google", "gemini-2.5-flash", text="an older model mused", signature=signed),
    )
    request = thinking_request(
        ASKED,
        ChatMessage("assistant", (*(ThinkingPart(t) for t in theirs), TextPart("A room."))),
        ChatMessage.text("user", "Alice: thanks"),
    )
    await collect(provider, request)
    model_turn = llm_server.requests[0].body["contents"][1]
    assert model_turn["parts"] == [{"text": "A room."}]
    await provider.aclose()


async def test_a_text_signature_goes_back_on_the_turns_text(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(thinking="Brief.", text="A room."), "fine", "fine")
    provider = gemini(llm_server)
    (thought,) = thoughts(await collect(provider, thinking_request()))
    mused = Thought("google", MODEL, text="Brief.", signature=thought.signature)
    for said in ((TextPart("A room."),), ()):
        request = thinking_request(
            ASKED,
            ChatMessage("assistant", (ThinkingPart(mused), *said)),
            ChatMessage.text("user", "Alice: thanks"),
        )
        await collect(provider, request)
    with_text, without = (r.body["contents"][1]["parts"] for r in llm_server.requests[1:])
    (part,) = with_text
    assert part["text"] == "A room."
    assert raw_signature(part) == base64.b64decode(thought.signature)
    (part,) = without  # no text: the signature keeps a part of its own, as streamed
    assert part["text"] == ""
    assert raw_signature(part) == base64.b64decode(thought.signature)
    for parts in (with_text, without):  # the reasoning itself never goes back as text
        assert "Brief." not in str(parts)
    await provider.aclose()


async def test_parallel_calls_then_a_second_step_each_keep_their_signature(
    llm_server: LLMServer,
) -> None:
    """Parallel calls: only the first is signed; a later step of the same turn is signed
    again, and every step's signature must come back."""
    both = [("a", "lookup", {"word": "salon"}), ("b", "lookup", {"word": "room"})]
    llm_server.queue(
        Scripted(tool_calls=both),
        Scripted(tool_calls=[("c", "lookup", {"word": "talk"})]),
        "All looked up.",
    )
    provider = gemini(llm_server)
    messages: tuple[ChatMessage, ...] = (ASKED,)
    for _ in range(3):
        events = await collect(provider, thinking_request(*messages))
        calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
        signed = tuple(ThinkingPart(t) for t in thoughts(events))
        if calls:
            asked = ChatMessage("assistant", (*signed, *(ToolUsePart(c) for c in calls)))
            results = tuple(ToolResultPart(ToolResult(c.id, "found")) for c in calls)
            messages = (*messages, asked, ChatMessage("user", results))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "All looked up."
    steps = [c["parts"] for c in llm_server.requests[2].body["contents"] if c["role"] == "model"]
    assert [[("thoughtSignature" in p) for p in parts] for parts in steps] == [
        [True, False],
        [True],
    ]
    await provider.aclose()
