"""The local provider's own logic: the bounded queue, cancellation between tokens, fitting
the prompt to the context, config errors. The model here is a stand-in with llama-cpp-
python's streaming shapes; tests/llm/test_local_model.py runs the real one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm._local_engine import Engine, EngineKey
from salon.llm.base import (
    ChatMessage,
    LLMRequest,
    StopEvent,
    TextDelta,
    Thinking,
    ThinkingDelta,
    UsageEvent,
)
from salon.llm.local import LocalProvider, fit_to_context


class GatedModel:
    """Streams ``words`` as llama-cpp-python does (completion chunks with ``text``), one
    for each ``allow``; ``started`` is set when a generation begins."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.allowed = threading.Semaphore(0)
        self.started = threading.Event()
        self.calls: list[dict[str, Any]] = []
        self.n_tokens = 0

    def create_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        self.started.set()
        for word in self.words:
            if not self.allowed.acquire(timeout=10):
                raise RuntimeError("the test never allowed this token")
            self.n_tokens += 1
            yield {"choices": [{"text": word, "finish_reason": None}]}
        yield {"choices": [{"text": "", "finish_reason": "stop"}]}

    def allow(self, count: int) -> None:
        self.allowed.release(count)

    def tokenize(self, text: bytes, add_bos: bool = True) -> list[int]:
        return [1] * len(text.split())

    def token_bos(self) -> int:
        return 1


def scripted_engine(model: GatedModel) -> Engine:
    return Engine(EngineKey("stand-in.gguf", 4096, None), lambda: model)


def config(**overrides: Any) -> ProviderConfig:
    return ProviderConfig.model_validate({"type": "local", "model": "m", **overrides})


def prefill(text: str = "Ann: hi\n\nBot:", max_tokens: int = 100) -> LLMRequest:
    messages = (ChatMessage.text("user", "go"), ChatMessage.text("assistant", text))
    return LLMRequest(model="m", messages=messages, prefill=True, max_tokens=max_tokens)


async def drain(provider: LocalProvider, request: LLMRequest) -> list[Any]:
    return [event async for event in provider.stream(request)]


async def test_a_prefill_request_is_a_raw_completion_streamed_as_text() -> None:
    model = GatedModel(["Hello", " there"])
    model.allow(2)
    provider = LocalProvider("local", config(), engine=scripted_engine(model))
    events = await drain(provider, prefill())
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello", " there"]
    assert [e.reason for e in events if isinstance(e, StopEvent)] == ["stop"]
    usage = next(e.usage for e in events if isinstance(e, UsageEvent))
    assert usage.output_tokens == 2
    assert model.calls[0]["prompt"] == "Ann: hi\n\nBot:"


async def test_requests_beyond_the_queue_are_refused_and_the_rest_answered() -> None:
    model = GatedModel(["a"])
    provider = LocalProvider("local", config(queue_size=1), engine=scripted_engine(model))
    running = asyncio.create_task(drain(provider, prefill()))
    assert await asyncio.to_thread(model.started.wait, 10)
    waiting = asyncio.create_task(drain(provider, prefill()))
    engine = provider.engine
    assert engine is not None
    assert await asyncio.to_thread(engine.wait_in_flight, 2, 10)
    with pytest.raises(ProviderError, match="busy \\(1 requests waiting\\)") as refused:
        await drain(provider, prefill())
    assert refused.value.retryable
    model.allow(2)
    async with asyncio.timeout(10):
        answers = await asyncio.gather(running, waiting)
    assert all(any(isinstance(e, TextDelta) for e in events) for events in answers)
    assert await asyncio.to_thread(engine.wait_in_flight, 0, 10)


async def test_closing_the_stream_stops_the_model_at_its_next_token() -> None:
    model = GatedModel(["w"] * 1000)
    provider = LocalProvider("local", config(), engine=scripted_engine(model))
    model.allow(1)
    stream = provider.stream(prefill(max_tokens=1000))
    first = await anext(stream)
    assert first == TextDelta("w")
    await stream.aclose()  # type: ignore[attr-defined]
    model.allow(1000)
    engine = provider.engine
    assert engine is not None
    assert await asyncio.to_thread(engine.wait_in_flight, 0, 10)
    assert engine.generated <= 2  # the token in hand when the close came, at most


async def test_a_cancelled_request_still_waiting_never_reaches_the_model() -> None:
    model = GatedModel(["a"])
    provider = LocalProvider("local", config(), engine=scripted_engine(model))
    running = asyncio.create_task(drain(provider, prefill()))
    assert await asyncio.to_thread(model.started.wait, 10)
    waiting = asyncio.create_task(drain(provider, prefill()))
    engine = provider.engine
    assert engine is not None
    assert await asyncio.to_thread(engine.wait_in_flight, 2, 10)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting  # its cancellation has landed before the model is free
    model.allow(1)
    await running
    assert await asyncio.to_thread(engine.wait_in_flight, 0, 10)
    assert len(model.calls) == 1


def test_a_long_transcript_keeps_its_newest_tokens() -> None:
    words = " ".join(f"w{i}" for i in range(1000))
    fitted = fit_to_context(
        GatedModel([]), {"prompt": words, "max_tokens": 56}, config(context_length=256)
    )
    assert len(fitted["prompt"]) == 200


def test_a_long_chat_drops_its_oldest_turns_but_keeps_the_system_prompt() -> None:
    messages = [{"role": "system", "content": "be brief"}] + [
        {"role": "user", "content": " ".join(["word"] * 50)} for _ in range(10)
    ]
    fitted = fit_to_context(
        GatedModel([]), {"messages": messages, "max_tokens": 56}, config(context_length=256)
    )
    assert fitted["messages"][0]["content"] == "be brief"
    assert 1 < len(fitted["messages"]) < len(messages)
    assert fitted["messages"][-1] is messages[-1]


def test_answer_length_is_capped_by_the_provider_and_the_window() -> None:
    provider = LocalProvider("local", config(max_tokens=300, context_length=512))
    assert provider.wire(prefill(max_tokens=1000))["max_tokens"] == 256
    provider = LocalProvider("local", config(max_tokens=100))
    assert provider.wire(prefill(max_tokens=1000))["max_tokens"] == 100


def test_sampling_settings_reach_the_model_and_a_bots_temperature_wins() -> None:
    sent = LocalProvider("local", config()).wire(prefill(max_tokens=1000))
    assert (sent["max_tokens"], sent["temperature"], sent["top_p"]) == (256, 0.2, 0.9)
    assert sent["repeat_penalty"] == 1.1
    assert "seed" not in sent  # a new one each answer
    provider = LocalProvider("local", config(temperature=0.7, repeat_penalty=1.0, seed=3))
    sent = provider.wire(prefill())
    assert (sent["temperature"], sent["repeat_penalty"], sent["seed"]) == (0.7, 1.0, 3)
    bots = LLMRequest(model="m", messages=prefill().messages, prefill=True, temperature=0.0)
    assert provider.wire(bots)["temperature"] == 0.0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("context_length", 100),
        ("queue_size", 0),
        ("threads", 0),
        ("max_tokens", 0),
        ("temperature", 3),
        ("top_p", 0),
        ("repeat_penalty", 0.5),
        ("seed", -1),
    ],
)
def test_impossible_local_settings_are_refused(key: str, value: float) -> None:
    with pytest.raises(ValidationError, match=key):
        config(**{key: value})


class ThinkingChatModel(GatedModel):
    """A Qwen3-style chat model: its chat template opens ``<think>`` itself when the model
    thinks, so the stream starts inside the block (``chat_chunks`` as llama-cpp-python
    streams chat deltas). The packaged SmolLM2 does not think: this stands in for one."""

    def create_chat_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        for word in self.words:
            self.n_tokens += 1
            yield {"choices": [{"delta": {"content": word}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}


def chat(thinking: Thinking | None = None) -> LLMRequest:
    messages = (ChatMessage.text("user", "Ann: is it four?"),)
    return LLMRequest(model="m", messages=messages, max_tokens=100, thinking=thinking)


@pytest.mark.parametrize(
    ("words", "thinking"),
    [
        (["<th", "ink>", "Ann wants", " a yes", "</th", "ink>\n\n", "Yes", ", four."], None),
        (["Ann wants", " a yes", "</think>", "\n\nYes", ", four."], Thinking()),
    ],
)
async def test_a_thinking_template_s_reasoning_is_never_answer(
    words: list[str], thinking: Thinking | None
) -> None:
    provider = LocalProvider("local", config(), engine=scripted_engine(ThinkingChatModel(words)))
    events = await drain(provider, chat(thinking))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Yes, four."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Ann wants a yes"
    usage = next(e.usage for e in events if isinstance(e, UsageEvent))
    assert usage.output_tokens == len(words)
    assert 0 < usage.reasoning_tokens < usage.output_tokens


async def test_an_unclosed_think_block_from_a_local_model_posts_nothing() -> None:
    model = ThinkingChatModel(["<think>", "Ann's password", " is hunter2"])
    provider = LocalProvider("local", config(), engine=scripted_engine(model))
    events = await drain(provider, chat())
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == (
        "Ann's password is hunter2"
    )
