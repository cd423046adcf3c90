"""The local provider with the real SmolLM2-135M-Instruct through llama-cpp-python."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm.base import ChatMessage, LLMRequest, StopEvent, TextDelta, UsageEvent
from salon.llm.local import LocalProvider, local_problem


def config(**overrides: Any) -> ProviderConfig:
    return ProviderConfig.model_validate(
        {"type": "local", "model": "smol", "context_length": 1024, **overrides}
    )


def ask(text: str, *, max_tokens: int = 24, prefill: bool = False) -> LLMRequest:
    if prefill:
        messages = (ChatMessage.text("user", "<cmd>cat chat.txt</cmd>"),)
        messages += (ChatMessage.text("assistant", f"Ann: {text}\n\nBot:"),)
    else:
        messages = (ChatMessage.text("user", text),)
    return LLMRequest(
        model="smol",
        messages=messages,
        system="You are Bot, a helpful assistant.",
        max_tokens=max_tokens,
        temperature=0.0,
        prefill=prefill,
    )


async def answer(provider: LocalProvider, request: LLMRequest) -> list[Any]:
    async with asyncio.timeout(60):
        return [event async for event in provider.stream(request)]


@pytest.mark.parametrize("prefill", [False, True])
async def test_the_model_answers_in_both_modes(local_model: Path, prefill: bool) -> None:
    provider = LocalProvider("local", config())
    try:
        events = await answer(provider, ask("What is the capital of France?", prefill=prefill))
    finally:
        await provider.aclose()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.strip()
    assert [e.reason for e in events if isinstance(e, StopEvent)] in (["stop"], ["length"])
    usage = next(e.usage for e in events if isinstance(e, UsageEvent))
    assert usage.output_tokens > 0
    assert usage.input_tokens > 5


async def test_a_second_request_reads_the_shared_prefix_from_the_models_state(
    local_model: Path,
) -> None:
    provider = LocalProvider("local", config())
    try:
        await answer(provider, ask("Tell me about cats.", prefill=True))
        events = await answer(provider, ask("Tell me about cats and dogs.", prefill=True))
    finally:
        await provider.aclose()
    usage = next(e.usage for e in events if isinstance(e, UsageEvent))
    assert usage.cache_read_tokens > 0


async def test_channels_share_one_loaded_model(local_model: Path) -> None:
    first, second = LocalProvider("local", config()), LocalProvider("local", config())
    try:
        await asyncio.gather(answer(first, ask("Hi")), answer(second, ask("Hello")))
        assert first.engine is second.engine
    finally:
        await first.aclose()
        await second.aclose()


async def test_cancelling_an_answer_stops_the_generation(local_model: Path) -> None:
    provider = LocalProvider("local", config(max_tokens=800))
    first_text = asyncio.Event()

    async def listen() -> None:
        async for event in provider.stream(ask("Write a very long story.", max_tokens=800)):
            if isinstance(event, TextDelta):
                first_text.set()

    listening = asyncio.create_task(listen())
    try:
        async with asyncio.timeout(60):
            await first_text.wait()
        listening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listening
        engine = provider.engine
        assert engine is not None
        assert await asyncio.to_thread(engine.wait_in_flight, 0, 30)
        stopped_at = engine.generated
        assert stopped_at < 800
        # the model is free again and answers the next request
        events = await answer(provider, ask("Hi", max_tokens=4))
        assert any(isinstance(e, TextDelta) for e in events)
    finally:
        await provider.aclose()


async def test_a_file_that_is_not_a_model_is_one_clear_error(
    local_model: Path, tmp_path: Path
) -> None:
    bogus = tmp_path / "notes.gguf"
    bogus.write_text("not a model")
    provider = LocalProvider("local", config(model_path=str(bogus)))
    try:
        with pytest.raises(ProviderError, match="cannot load the model") as failed:
            await answer(provider, ask("Hi"))
    finally:
        await provider.aclose()
    assert not failed.value.retryable
    assert "\n" not in str(failed.value)


def test_check_names_a_missing_model_file(local_model: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nothing.gguf"
    assert local_problem(config(model_path=str(missing))) == (
        "model_path",
        f"no model file at {missing}",
    )
    assert local_problem(config()) is None


async def test_the_readmes_first_question_gets_a_short_answer_naming_paris(
    local_model: Path,
) -> None:
    """What ``salon chat``'s built-in bot sends for the README's first question (its system
    prompt, the terminal's ``you:``), sampled as the provider does by default, seed fixed."""
    provider = LocalProvider("local", config(seed=18))
    request = LLMRequest(
        model="smol",
        system="You are Assistant, a friendly and concise participant in a group chat.\n",
        messages=(ChatMessage.text("user", "you: What is the capital of France?"),),
        max_tokens=1024,  # the built-in bot's: the provider's cap is what holds
    )
    try:
        async with asyncio.timeout(100):
            events = [event async for event in provider.stream(request)]
    finally:
        await provider.aclose()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    usage = next(e.usage for e in events if isinstance(e, UsageEvent))
    assert usage.output_tokens < 100, text
    assert "Paris" in text
    assert [e.reason for e in events if isinstance(e, StopEvent)] == ["stop"]
