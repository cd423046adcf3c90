"""local: the in-process model (SmolLM2-135M-Instruct, the ``local`` extra).

- ``local_first_token_ms``: median time from the request to the first text through Salon's
  provider path (retries and deadlines around ``LocalProvider``: its queue, worker thread
  and hand-over to the event loop), a short chat prompt.
- ``local_tokens_per_s``: median generation speed after the first token, same runs.
- ``local_overhead_ratio``: Salon's median first-token time over the same generation
  called directly through llama-cpp-python (``create_chat_completion``, streaming, on a
  thread of its own as Salon's is) on a model instance of its own, rounds alternating
  in one run. Each prompt starts with its
  round's number, so neither side reads the previous prompt from the model's state.
- ``local_path_overhead_ms``: the same path's median time to the first text with a
  stand-in model that answers at once: what Salon itself adds, free of the model's time
  (on a busy shared machine the ratio above swings with the load far more than this).
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import sys
import threading
import time
from typing import Any

from bench.figures import Figure
from salon.config import BotConfig, Secrets
from salon.llm import ChatMessage, LLMRequest, TextDelta
from salon.llm._local_engine import Engine, EngineKey
from salon.llm.deadline import DeadlineProvider
from salon.llm.factory import build_provider
from salon.llm.local import LocalProvider, default_model_path, default_threads
from salon.llm.retry import RetryingProvider

ROUNDS = 20
MAX_TOKENS = 32
SYSTEM = "You are Bot, a friendly participant in a group chat."
CONTEXT = 2048


def _prompt(round_number: int) -> str:
    return f"Message {round_number}: hi Bot, what is a good name for a cat?"


async def _through_salon(provider: Any, round_number: int) -> tuple[float, float, int]:
    request = LLMRequest(
        model="smol",
        messages=(ChatMessage.text("user", _prompt(round_number)),),
        system=SYSTEM,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
    )
    started = time.perf_counter()
    first = last = 0.0
    pieces = 0
    async for event in provider.stream(request):
        if isinstance(event, TextDelta):
            last = time.perf_counter()
            first = first or last
            pieces += 1
    return first - started, last - first, pieces


def _direct(model: Any, round_number: int) -> tuple[float, float, int]:
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _prompt(round_number)},
    ]
    started = time.perf_counter()
    first = last = 0.0
    pieces = 0
    for chunk in model.create_chat_completion(
        messages=messages, max_tokens=MAX_TOKENS, temperature=0.0, stream=True
    ):
        if chunk["choices"][0]["delta"].get("content"):
            last = time.perf_counter()
            first = first or last
            pieces += 1
    return first - started, last - first, pieces


async def _on_a_thread(model: Any, round_number: int) -> tuple[float, float, int]:
    """The direct call on a thread of its own, as Salon's provider runs each generation:
    llama.cpp's OpenMP workers belong to the calling thread, so both sides start alike."""
    done = asyncio.get_running_loop().create_future()

    def work() -> None:
        result = _direct(model, round_number)
        done.get_loop().call_soon_threadsafe(done.set_result, result)

    threading.Thread(target=work, daemon=True).start()
    result: tuple[float, float, int] = await done
    return result


class _Instant:
    """A stand-in for ``llama_cpp.Llama`` whose answer is ready at once."""

    n_tokens = 0
    input_ids = ()

    def create_chat_completion(self, **kwargs: Any) -> Any:
        for word in ("a", "b"):
            yield {"choices": [{"delta": {"content": word}, "finish_reason": None}]}

    def tokenize(self, text: bytes, add_bos: bool = True) -> list[int]:
        return [1] * len(text.split())


async def _path_overhead(bot: BotConfig) -> float:
    settings = bot.providers["local"]
    engine = Engine(EngineKey("instant", settings.context_length, None), _Instant)
    timed = DeadlineProvider(
        LocalProvider("local", settings, engine=engine), first_token_timeout=60, timeout=300
    )
    provider = RetryingProvider(timed, retries=2, backoff_initial=1, backoff_max=30)
    samples = []
    for round_number in range(300):
        samples.append((await _through_salon(provider, round_number))[0])
    return statistics.median(samples[50:]) * 1000


def _speed(samples: list[tuple[float, float, int]]) -> float:
    return statistics.median((n - 1) / span for _, span, n in samples if n > 1 and span > 0)


async def run() -> list[Figure]:
    path = default_model_path()
    if importlib.util.find_spec("llama_cpp") is None or path is None:
        print("local: skipped (the local extra is not installed)", file=sys.stderr)
        return []
    import llama_cpp

    bot = BotConfig.model_validate(
        {
            "name": "Bot",
            "provider": "local",
            "providers": {"local": {"type": "local", "model": "smol", "context_length": CONTEXT}},
        }
    )
    provider = build_provider(bot, Secrets({}, {}))
    threads = bot.providers["local"].threads
    direct = llama_cpp.Llama(
        model_path=str(path), n_ctx=CONTEXT, n_threads=threads or default_threads(), verbose=False
    )
    salon: list[tuple[float, float, int]] = []
    plain: list[tuple[float, float, int]] = []
    try:
        await _through_salon(provider, -1)  # load the model and warm up, on both sides
        await _on_a_thread(direct, -1)
        for round_number in range(ROUNDS):
            # ABBA order, so a machine growing busier or quieter favours neither side.
            if round_number % 2:
                plain.append(await _on_a_thread(direct, round_number))
                salon.append(await _through_salon(provider, round_number))
            else:
                salon.append(await _through_salon(provider, round_number))
                plain.append(await _on_a_thread(direct, round_number))
    finally:
        await provider.aclose()
        direct.close()
    salon_first = statistics.median(s[0] for s in salon) * 1000
    plain_first = statistics.median(s[0] for s in plain) * 1000
    return [
        Figure("local_first_token_ms", salon_first, "ms"),
        Figure("local_tokens_per_s", _speed(salon), "tokens/s", direction="min"),
        Figure("local_direct_first_token_ms", plain_first, "ms"),
        Figure("local_overhead_ratio", salon_first / plain_first, "x", target=1.1),
        Figure("local_path_overhead_ms", await _path_overhead(bot), "ms"),
    ]
