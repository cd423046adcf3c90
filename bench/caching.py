"""cache_read_share and billed_cost_ratio: what rolling context saves on Anthropic.

A 1 000-message conversation among four people; every fifth message mentions the bot, so
200 activations. The real anthropic SDK talks to the loopback fake server, which bills like
the API's prompt cache (``fakes/billing.py``: a prefix seen before at 0.1x, a newly
written prefix at 1.25x, the rest at 1x). The same conversation runs twice with the same
recency window (400 messages): once rolling with cache breakpoints (``prompt_caching: true``,
the defaults: roll every 50 messages, breakpoint 5 below the newest), once as a plain
sliding window without breakpoints. The ratio is the first bill over the second.

The ``*_openai`` figures run the targeted conversation against an OpenAI-type provider
billed as OpenAI's automatic prefix caching (no markers, reads from 1 024 tokens in steps
of 128; ``AutoPrefixBilling``), rolling on, beside the same with a sliding window.

The targeted figures use ``rolling_threshold: 200`` with ``rolling_budget: average`` (a roll
cuts to 300 messages, so the window holds about the 400 of the sliding one on average). A
roll rewrites the whole prompt (its front moved), so rolls must be rare for the cache to
answer most of the input: the ``*_default`` figures run the defaults (50, ``floor``: a roll
cuts to the budget, at most about 9 in 10 prompts are read), the ``*_floor`` figures a
threshold of 100 with ``floor`` (the targeted setting until session 5). The ``*_prefill``
figures repeat the targeted run in prefill mode.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.figures import Figure
from fakes.billing import AutoPrefixBilling, Bill, CacheBilling
from fakes.llm_server import LLMServer, Scripted
from salon.agent import Agent
from salon.config import BotConfig, Secrets
from salon.llm.factory import build_provider
from salon.model import Participant, Usage
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url

MESSAGES = 1000
EVERY = 5
WORDS = ("the", "a", "launch", "plan", "coffee", "rain", "tomorrow", "code", "review")
WORDS += ("ship", "it", "why", "not", "maybe")
SYSTEM = "You are Salon, a friendly regular of this channel. Keep answers short and kind."


def _config(
    base_url: str,
    *,
    caching: bool,
    threshold: int,
    mode: str,
    vendor: str = "anthropic",
    budget: str = "floor",
    memory: bool = False,
) -> BotConfig:
    base = base_url + ("/v1" if vendor == "openai" else "")
    return BotConfig.model_validate(
        {
            "name": "Salon",
            "system_prompt": SYSTEM,
            "provider": "llm",
            "providers": {
                "llm": {
                    "type": vendor,
                    "model": "model-test",
                    "base_url": base,
                    "api_key_env": "KEY",
                }
            },
            "mode": mode,
            "prompt_caching": caching,
            "rolling_threshold": threshold,
            "rolling_budget": budget,
            "builtin_tools": False,
            "memory": {"enabled": memory},
        }
    )


def _lines(seed: int = 7) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    words = WORDS
    return [
        (rng.randrange(4), " ".join(rng.choice(words) for _ in range(rng.randint(6, 60))))
        for _ in range(MESSAGES)
    ]


async def conversation(
    *,
    caching: bool,
    threshold: int = 50,
    mode: str = "chat",
    vendor: str = "anthropic",
    budget: str = "floor",
    memory: bool = False,
    between: Callable[[SQLStore, int], Awaitable[None]] | None = None,
) -> tuple[Bill, Usage]:
    """Bill of the whole conversation, and the cache tokens the store recorded.
    ``memory``: memory on (``bench/memory.py``); ``between``: called with the store and
    the activation's number before each activation (0 before the first)."""
    billing = CacheBilling() if vendor == "anthropic" else AutoPrefixBilling()
    async with LLMServer(billing=billing) as server:
        server.default = Scripted(text="Sounds good to me, let us do that.")
        config = _config(
            server.base_url,
            caching=caching,
            threshold=threshold,
            mode=mode,
            vendor=vendor,
            budget=budget,
            memory=memory,
        )
        provider = build_provider(config, Secrets({"KEY": "k"}))
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLStore(sqlite_url(Path(tmp) / "bench.db"))
            await store.open()
            platform = MemoryPlatform(bot_name="Salon")
            agent = Agent(
                bot="bench",
                config=config,
                provider=provider,
                platforms={"memory": platform},
                store=store,
            )
            await platform.start(agent.submit)
            runner = asyncio.create_task(agent.run())
            room = platform.channel("room")
            me = platform.self_participant
            people = [Participant(f"p{i}", n) for i, n in enumerate(["Ada", "Bo", "Cy", "Di"])]
            try:
                for index, (who, text) in enumerate(_lines(), start=1):
                    if index % EVERY:
                        platform.add(room, people[who], text)
                        continue
                    if between is not None:
                        await between(store, index // EVERY - 1)
                    await platform.post(room, people[who], f"@Salon {text}", mentions=[me])
                    await agent.wait_idle()
                recorded = await store.channels.usage_totals("bench")
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
                await store.close()
                await provider.aclose()
    return billing.total, recorded


THRESHOLD, BUDGET = 200, "average"  # the targeted setting


async def run() -> list[Figure]:
    sliding, _ = await conversation(caching=False)
    rolling, recorded = await conversation(caching=True, threshold=THRESHOLD, budget=BUDGET)
    default, _ = await conversation(caching=True, threshold=50)
    floor, _ = await conversation(caching=True, threshold=100)
    prefill, _ = await conversation(
        caching=True, mode="prefill", threshold=THRESHOLD, budget=BUDGET
    )
    prefill_sliding, _ = await conversation(caching=False, mode="prefill")
    billed = (rolling.input_tokens, rolling.cache_read_tokens, rolling.cache_write_tokens)
    stored = (recorded.input_tokens, recorded.cache_read_tokens, recorded.cache_write_tokens)
    if stored != billed:  # the usage recorded per activation must add up to the bill
        raise AssertionError(f"the store recorded {stored}, the server billed {billed}")
    openai, _ = await conversation(
        caching=True, vendor="openai", threshold=THRESHOLD, budget=BUDGET
    )
    openai_sliding, _ = await conversation(caching=False, vendor="openai")
    return [
        Figure("cache_read_share", _share(rolling), "fraction", target=0.96, direction="min"),
        Figure("billed_cost_ratio", rolling.cost / sliding.cost, "ratio", target=0.15),
        Figure("cache_read_share_openai", _share(openai), "fraction"),
        Figure("cache_read_share_openai_sliding", _share(openai_sliding), "fraction"),
        Figure("billed_cost_ratio_openai", openai.cost / openai_sliding.cost, "ratio"),
        Figure("cache_read_share_default", _share(default), "fraction"),
        Figure("billed_cost_ratio_default", default.cost / sliding.cost, "ratio"),
        Figure("cache_read_share_floor", _share(floor), "fraction"),
        Figure("billed_cost_ratio_floor", floor.cost / sliding.cost, "ratio"),
        Figure("cache_read_share_prefill", _share(prefill), "fraction"),
        Figure("billed_cost_ratio_prefill", prefill.cost / prefill_sliding.cost, "ratio"),
        Figure("rolling_input_tokens", rolling.total_tokens, "tokens"),
        Figure("sliding_input_tokens", sliding.total_tokens, "tokens"),
    ]


def _share(bill: Bill) -> float:
    return bill.cache_read_tokens / bill.total_tokens
