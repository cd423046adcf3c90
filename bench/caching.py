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

Since session 9 the fake bills as the API does (``fakes/billing.py``: entries expire, a
5th breakpoint or a 1-hour one after a 5-minute one is refused, short prefixes are not
cached, reads are found by a 20-block look-back), on a virtual clock the benchmark moves:
the loop's messages come a second apart. The **tempo** figures run seeded arrival
processes on that clock, the targeted rolling setting with ``cache_ttl`` ``auto``, ``off``,
``5m`` and ``1h``, beside the no-cache sliding window:

- ``busy``: a message every 5 s on average, each a mention with probability 1/12 (an
  activation a minute or so), for 4 simulated hours (a whole day would take minutes);
- ``bursty``: a simulated day of standup-style bursts, 5 of 10 to 20 minutes (a message
  every 8 s, an activation a minute or so), 1 to 5 hours idle between them;
- ``slow``: a simulated day with one activation every 10 to 40 minutes, 1 to 4 messages
  between.

For each: ``cache_read_share_<tempo>``, ``cache_cost_ratio_<tempo>`` (auto over the sliding
window), ``cache_write_waste_share_<tempo>`` (written tokens whose entry expired unread) and
``cache_cost_vs_best_fixed_<tempo>`` (auto over the cheapest of off/5m/1h for that tempo);
over the three, ``cache_cost_vs_best_single_fixed`` (auto over the one fixed setting
cheapest for all three together) and ``cache_write_waste_share_auto|5m|1h``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from bench.figures import Figure
from fakes.billing import AutoPrefixBilling, Bill, CacheBilling
from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
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
    cache_ttl: str = "auto",
    model: str = "model-test",
    thinking: bool = False,
    memory: bool = False,
    tools: bool = False,
) -> BotConfig:
    base = base_url + ("/v1" if vendor == "openai" else "")
    cache = {"cache_ttl": cache_ttl} if vendor == "anthropic" else {}
    # Thinking on: a budget (the API's least, 1024) below max_tokens, as Anthropic wants.
    reasoning = {"thinking": {"enabled": True, "budget_tokens": 1024}, "max_tokens": 4096}
    return BotConfig.model_validate(
        {
            **(reasoning if thinking else {}),
            "name": "Salon",
            "system_prompt": SYSTEM,
            "provider": "llm",
            "providers": {
                "llm": {
                    "type": vendor,
                    "model": model,
                    "base_url": base,
                    "api_key_env": "KEY",
                    **cache,
                }
            },
            "mode": mode,
            "prompt_caching": caching,
            "rolling_threshold": threshold,
            "rolling_budget": budget,
            "builtin_tools": tools,
            "default_tool_policy": "allow",
            "tool_output_visible": False,
            "memory": {"enabled": memory},
        }
    )


@dataclass(frozen=True)
class Said:
    at: float  # seconds since the start
    who: int
    text: str
    mention: bool


class VirtualClock:
    """The benchmark's time: moved by hand, read by the platform and the billing fake."""

    def __init__(self) -> None:
        self.start = self.now_at = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now_at

    def move_to(self, seconds: float) -> None:
        self.now_at = max(self.now_at, self.start + timedelta(seconds=seconds))


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 60)))


def _lines(seed: int = 7) -> list[Said]:
    """The loop: 1 000 messages a second apart, every fifth a mention."""
    rng = random.Random(seed)
    return [
        Said(float(i), rng.randrange(4), _text(rng), i % EVERY == 0) for i in range(1, MESSAGES + 1)
    ]


def _busy(rng: random.Random) -> list[Said]:
    out, at = [], 0.0
    while at < 4 * 3600:
        at += rng.expovariate(1 / 5)
        out.append(Said(at, rng.randrange(4), _text(rng), rng.random() < 1 / 12))
    return out


def _bursty(rng: random.Random) -> list[Said]:
    out, at = [], 3600.0
    for _ in range(5):
        end = at + rng.uniform(600, 1200)
        while at < end:
            at += rng.expovariate(1 / 8)
            out.append(Said(at, rng.randrange(4), _text(rng), rng.random() < 1 / 8))
        at += rng.uniform(3600, 5 * 3600)
    return out


def _slow(rng: random.Random) -> list[Said]:
    out, at = [], 0.0
    while at < 24 * 3600:
        gap = rng.uniform(600, 2400)
        chatter = rng.randint(1, 4)
        for i in range(chatter):
            out.append(
                Said(at + gap * (i + 1) / (chatter + 1), rng.randrange(4), _text(rng), False)
            )
        at += gap
        out.append(Said(at, rng.randrange(4), _text(rng), True))
    return out


TEMPOS: dict[str, Callable[[random.Random], list[Said]]] = {
    "busy": _busy,
    "bursty": _bursty,
    "slow": _slow,
}


class Tools(Protocol):
    """The model's tool calls in a conversation: ``runner`` sets the platform up (other
    channels, who may read them) and gives the agent its tools; ``respond`` answers each
    request (see LLMServer)."""

    def runner(
        self, config: BotConfig, store: SQLStore, platform: MemoryPlatform, root: Path
    ) -> AbstractAsyncContextManager[ToolRunner]: ...

    def respond(self, request: Recorded) -> Scripted: ...


@dataclass
class Run:
    bill: Bill
    recorded: Usage
    wasted: int  # tokens written whose entry expired unread


async def conversation(
    *,
    caching: bool,
    threshold: int = 50,
    mode: str = "chat",
    vendor: str = "anthropic",
    budget: str = "floor",
    cache_ttl: str = "auto",
    said: list[Said] | None = None,
    model: str = "model-test",
    thinking: bool = False,
    memory: bool = False,
    between: Callable[[SQLStore, int], Awaitable[None]] | None = None,
    tools: Tools | None = None,
) -> tuple[Bill, Usage]:
    """Bill of the whole conversation, and the cache tokens the store recorded.
    ``memory``: memory on (``bench/memory.py``); ``between``: called with the store and
    the activation's number before each activation (0 before the first); ``tools``: the
    built-in tools on, and the model's calls (``bench/memory.py``)."""
    run = await conversation_run(
        caching=caching,
        threshold=threshold,
        mode=mode,
        vendor=vendor,
        budget=budget,
        cache_ttl=cache_ttl,
        said=said,
        model=model,
        thinking=thinking,
        memory=memory,
        between=between,
        tools=tools,
    )
    return run.bill, run.recorded


async def conversation_run(
    *,
    caching: bool,
    threshold: int = 50,
    mode: str = "chat",
    vendor: str = "anthropic",
    budget: str = "floor",
    cache_ttl: str = "auto",
    said: list[Said] | None = None,
    model: str = "model-test",
    thinking: bool = False,
    memory: bool = False,
    between: Callable[[SQLStore, int], Awaitable[None]] | None = None,
    tools: Tools | None = None,
) -> Run:
    """The conversation ``said`` (the loop by default) on a virtual clock, billed;
    ``thinking``: the bot asks for reasoning and every answer streams some first."""
    clock = VirtualClock()
    billing = CacheBilling(clock=clock) if vendor == "anthropic" else AutoPrefixBilling(clock=clock)
    async with LLMServer(billing=billing) as server:
        server.default = Scripted(text="Sounds good to me, let us do that.")
        if thinking:
            server.default = Scripted(
                text="Sounds good to me, let us do that.",
                thinking="They agree on the plan; a short yes is enough here.",
                reasoning_tokens=14,
            )
        config = _config(
            server.base_url,
            caching=caching,
            threshold=threshold,
            mode=mode,
            vendor=vendor,
            budget=budget,
            cache_ttl=cache_ttl,
            model=model,
            thinking=thinking,
            memory=memory,
            tools=tools is not None,
        )
        if tools is not None:
            server.respond = tools.respond
        provider = build_provider(config, Secrets({"KEY": "k"}))
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLStore(sqlite_url(Path(tmp) / "bench.db"))
            await store.open()
            platform = MemoryPlatform(bot_name="Salon", clock=clock)
            stack = contextlib.AsyncExitStack()
            opened = tools.runner(config, store, platform, Path(tmp)) if tools else None
            agent = Agent(
                bot="bench",
                config=config,
                provider=provider,
                platforms={"memory": platform},
                store=store,
                tools=await stack.enter_async_context(opened) if opened else None,
                answers=store.traces,
                limits=store.limits,
                notes=store.notes,
                chatlog=store.chatlog,
            )
            await platform.start(agent.submit)
            runner = asyncio.create_task(agent.run())
            room = platform.channel("room")
            me = platform.self_participant
            people = [Participant(f"p{i}", n) for i, n in enumerate(["Ada", "Bo", "Cy", "Di"])]
            asked = 0
            try:
                for line in said if said is not None else _lines():
                    clock.move_to(line.at)
                    if not line.mention:
                        platform.add(room, people[line.who], line.text)
                        continue
                    if between is not None:
                        await between(store, asked)
                    asked += 1
                    text = f"@Salon {line.text}"
                    await platform.post(room, people[line.who], text, mentions=[me])
                    await agent.wait_idle()
                recorded = await store.channels.usage_totals("bench")
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
                await stack.aclose()
                await store.close()
                await provider.aclose()
    wasted = billing.settle() if isinstance(billing, CacheBilling) else 0
    return Run(billing.total, recorded, wasted)


THRESHOLD, BUDGET = 200, "average"  # the targeted setting


async def run() -> list[Figure]:
    return [*await loop(), *await tempos()]


async def loop() -> list[Figure]:
    """The loop: the figures of sessions 1 to 8, recomputed under the strict fake."""
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


FIXED = ("off", "5m", "1h")
TEMPO_MODEL = "claude-sonnet-4-6"  # a 1 024-token minimum


async def thinking() -> list[Figure]:
    """``cache_read_share_thinking``: the targeted loop with thinking on (every answer
    streams a signed thinking block first), beside the same without, in one run. Thinking
    blocks of earlier answers are never in a later prompt (the room is rendered from the
    channel), so the cache must read as much as without."""
    plain, _ = await conversation(caching=True, threshold=THRESHOLD, budget=BUDGET)
    with_thinking, recorded = await conversation(
        caching=True, threshold=THRESHOLD, budget=BUDGET, thinking=True
    )
    return [
        Figure(
            "cache_read_share_thinking",
            _share(with_thinking),
            "fraction",
            target=0.95,
            direction="min",
        ),
        Figure("cache_read_share_no_thinking", _share(plain), "fraction"),
        Figure("reasoning_tokens_recorded", float(recorded.reasoning_tokens), "tokens"),
    ]


async def tempos(seed: int = 9) -> list[Figure]:
    """Each tempo with ``cache_ttl`` auto and each fixed setting, beside no cache at all."""
    runs: dict[tuple[str, str], Run] = {}
    for tempo, arrivals in TEMPOS.items():
        said = arrivals(random.Random(seed))
        common = {"said": said, "model": TEMPO_MODEL, "threshold": THRESHOLD}
        runs[tempo, "sliding"] = await conversation_run(caching=False, **common)  # type: ignore[arg-type]
        for setting in ("auto", *FIXED):
            runs[tempo, setting] = await conversation_run(
                caching=True,
                budget=BUDGET,
                cache_ttl=setting,
                **common,  # type: ignore[arg-type]
            )
    return _tempo_figures(runs)


def _tempo_figures(runs: dict[tuple[str, str], Run]) -> list[Figure]:
    figures: list[Figure] = []
    for tempo in TEMPOS:
        auto, sliding = runs[tempo, "auto"].bill, runs[tempo, "sliding"].bill
        best = min(runs[tempo, f].bill.cost for f in FIXED)
        figures += [
            Figure(f"cache_read_share_{tempo}", _share(auto), "fraction"),
            Figure(f"cache_cost_ratio_{tempo}", auto.cost / sliding.cost, "ratio"),
            Figure(f"cache_write_waste_share_{tempo}", _waste([runs[tempo, "auto"]]), "fraction"),
            Figure(f"cache_cost_vs_best_fixed_{tempo}", auto.cost / best, "ratio", target=1.05),
        ]
        figures += [
            Figure(
                f"cache_cost_ratio_{tempo}_{f}", runs[tempo, f].bill.cost / sliding.cost, "ratio"
            )
            for f in FIXED
        ]
    total = {s: sum(runs[t, s].bill.cost for t in TEMPOS) for s in ("auto", *FIXED)}
    figures.append(
        Figure(
            "cache_cost_vs_best_single_fixed",
            total["auto"] / min(total[f] for f in FIXED),
            "ratio",
            target=0.90,
        )
    )
    for setting, target in (("auto", 0.15), ("5m", None), ("1h", None)):
        share = _waste([runs[t, setting] for t in TEMPOS])
        figures.append(
            Figure(f"cache_write_waste_share_{setting}", share, "fraction", target=target)
        )
    return figures


def _waste(runs: list[Run]) -> float:
    written = sum(r.bill.cache_write_tokens for r in runs)
    return sum(r.wasted for r in runs) / written if written else 0.0


def _share(bill: Bill) -> float:
    return bill.cache_read_tokens / bill.total_tokens
