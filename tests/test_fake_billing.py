"""The billing fakes themselves: the benchmark's figures are only as good as their rules."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import pytest

from fakes.billing import (
    AutoPrefixBilling,
    BillingRefused,
    CacheBilling,
    ImplicitPrefixBilling,
)
from fakes.llm_server import LLMServer

MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
K = 4096  # characters: 1 024 tokens, the minimum cacheable prefix of most models


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def pass_(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def text(t: str, *, mark: dict[str, str] | None = None) -> dict[str, object]:
    block: dict[str, object] = {"type": "text", "text": t}
    if mark is not None:
        block["cache_control"] = mark
    return block


def asks(*blocks: dict[str, object], model: str = "claude-sonnet-4-6") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": list(blocks)}]}


def triple(bill: Any) -> tuple[int, int, int]:
    return bill.cache_read_tokens, bill.cache_write_tokens, bill.input_tokens


def test_reads_the_longest_seen_prefix_and_writes_up_to_the_last_mark() -> None:
    billing = CacheBilling()
    first = {
        "system": [text("s" * K, mark=MARK)],  # 1 024 tokens
        "messages": [{"role": "user", "content": [text("a" * K, mark=MARK), text("b" * 8)]}],
    }
    assert triple(billing.bill(first)) == (0, 2048, 2)
    # Same text, cut into blocks differently, with one more mark further on.
    second = {
        "system": [text("s" * K, mark=MARK)],
        "messages": [
            {
                "role": "user",
                "content": [
                    text("a" * 2048),
                    text("a" * 2048, mark=MARK),
                    text("b" * 8, mark=MARK),
                ],
            },
            {"role": "assistant", "content": "c" * 4},
        ],
    }
    bill = billing.bill(second)
    assert triple(bill) == (2048, 2, 1)
    assert bill.cost == 2048 * 0.1 + 2 * 1.25 + 1
    changed = {"system": "t" * 40, "messages": [{"role": "user", "content": "a" * 80}]}
    assert triple(billing.bill(changed)) == (0, 0, 30)  # no marks: nothing read or written


def test_a_five_minute_entry_expires_unless_a_read_refreshes_it() -> None:
    clock = Clock()
    billing = CacheBilling(clock=clock)
    prompt = asks(text("a" * K, mark=MARK), text("q" * 40))
    assert triple(billing.bill(prompt)) == (0, 1024, 10)
    clock.pass_(minutes=4)
    assert triple(billing.bill(prompt)) == (1024, 0, 10)  # read: lives 5 minutes more
    clock.pass_(minutes=4)
    assert triple(billing.bill(prompt)) == (1024, 0, 10)  # 8 minutes after the write
    clock.pass_(minutes=5, seconds=1)
    assert triple(billing.bill(prompt)) == (0, 1024, 10)  # expired: written again
    assert billing.wasted_tokens == 0  # every write was read before it expired
    clock.pass_(minutes=6)
    billing.bill(asks(text("x" * 40)))
    assert billing.wasted_tokens == 1024  # the last write expired unread


def test_a_one_hour_entry_outlives_a_half_hour_gap_and_its_write_costs_double() -> None:
    clock = Clock()
    billing = CacheBilling(clock=clock)
    prompt = asks(text("a" * K, mark=HOUR), text("q" * 40))
    bill = billing.bill(prompt)
    assert triple(bill) == (0, 1024, 10)
    assert bill.cache_write_1h_tokens == 1024
    assert bill.cost == 1024 * 2.0 + 10
    clock.pass_(minutes=30)
    assert triple(billing.bill(prompt)) == (1024, 0, 10)
    clock.pass_(minutes=61)
    assert triple(billing.bill(prompt)) == (0, 1024, 10)


def test_a_fifth_breakpoint_is_refused_as_the_api_refuses_it() -> None:
    billing = CacheBilling()
    five = asks(*(text(f"{i}" * K, mark=MARK) for i in range(5)))
    with pytest.raises(BillingRefused, match="A maximum of 4 blocks with cache_control"):
        billing.bill(five)
    four = asks(*(text(f"{i}" * K, mark=MARK) for i in range(4)))
    assert billing.bill(four).cache_write_tokens == 4096


def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused() -> None:
    billing = CacheBilling()
    wrong = asks(text("a" * K, mark=MARK), text("b" * K, mark=HOUR))
    with pytest.raises(BillingRefused, match="ttl='1h' cache_control block must not come after"):
        billing.bill(wrong)
    right = asks(text("a" * K, mark=HOUR), text("b" * K, mark=MARK))
    bill = billing.bill(right)
    assert (bill.cache_write_tokens, bill.cache_write_1h_tokens) == (2048, 1024)


def test_a_prefix_below_the_models_minimum_is_not_cached_and_not_refused() -> None:
    billing = CacheBilling()
    short = asks(text("a" * 2000, mark=MARK), text("q" * 40))  # 500 tokens
    assert triple(billing.bill(short)) == (0, 0, 510)
    assert triple(billing.bill(short)) == (0, 0, 510)
    # Haiku 4.5 wants 4 096 tokens: what Sonnet caches, Haiku does not.
    sonnet = asks(text("a" * 3 * K, mark=MARK))
    assert billing.bill(sonnet).cache_write_tokens == 3072
    haiku = asks(text("a" * 3 * K, mark=MARK), model="claude-haiku-4-5")
    assert triple(billing.bill(haiku)) == (0, 0, 3072)


def test_the_look_back_finds_an_entry_within_about_twenty_blocks_only() -> None:
    billing = CacheBilling()
    head = [text("h" * K, mark=MARK)]
    billing.bill(asks(*head))
    near = [text("h" * K), *(text(f"n{i}") for i in range(18)), text("end", mark=MARK)]
    assert billing.bill(asks(*near)).cache_read_tokens == 1024  # 19 blocks back
    far = [text("h" * K), *(text(f"f{i}") for i in range(25)), text("end", mark=MARK)]
    assert billing.bill(asks(*far)).cache_read_tokens == 0  # 26 blocks back: missed


def test_the_server_answers_a_refused_request_with_anthropics_400() -> None:
    async def main() -> None:
        async with LLMServer(billing=CacheBilling()) as server:
            client = anthropic.AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
            blocks = [text(f"{i}" * K, mark=MARK) for i in range(5)]
            try:
                with pytest.raises(anthropic.BadRequestError) as refused:
                    await client.messages.create(
                        model="claude-sonnet-4-6",
                        max_tokens=10,
                        messages=[{"role": "user", "content": blocks}],  # type: ignore[typeddict-item]
                    )
            finally:
                await client.close()
            error = refused.value.body
            assert isinstance(error, dict)
            assert error["error"]["type"] == "invalid_request_error"
            assert "Found 5." in error["error"]["message"]

    asyncio.run(main())


def test_automatic_prefix_caching_reads_in_steps_of_128_from_1024_tokens() -> None:
    billing = AutoPrefixBilling()

    def chat(*contents: str) -> dict[str, object]:
        return {"messages": [{"role": "user", "content": c} for c in contents]}

    short = chat("x" * 2000)  # 500 tokens: below the minimum, never cached
    assert billing.bill(short).cache_read_tokens == 0
    assert billing.bill(short).cache_read_tokens == 0
    long = chat("a" * 6000)  # 1 500+ tokens: cached once seen
    assert billing.bill(long).cache_read_tokens == 0
    grown = chat("a" * 6000, "b" * 400)
    bill = billing.bill(grown)
    # The shared prefix is the first message: whole steps of 128 tokens of it are read.
    assert bill.cache_read_tokens % 128 == 0
    assert 1024 <= bill.cache_read_tokens <= 6000 // 4
    assert bill.cache_read_tokens + bill.input_tokens == bill.total_tokens
    assert billing.bill(chat("c" * 6000)).cache_read_tokens == 0  # another prefix


def test_openai_clears_an_idle_prefix_unless_asked_to_keep_it_a_day() -> None:
    clock = Clock()
    billing = AutoPrefixBilling(clock=clock)
    prompt = {"messages": [{"role": "user", "content": "a" * 8000}]}
    billing.bill(prompt)
    clock.pass_(minutes=8)
    assert billing.bill(prompt).cache_read_tokens > 0
    clock.pass_(minutes=11)
    assert billing.bill(prompt).cache_read_tokens == 0  # idle longer than 10 minutes
    kept = {**prompt, "messages": [{"role": "user", "content": "k" * 8000}]}
    kept["prompt_cache_retention"] = "24h"
    billing.bill(kept)
    clock.pass_(hours=5)
    assert billing.bill(kept).cache_read_tokens > 0


def test_gemini_implicit_caching_starts_at_the_models_minimum() -> None:
    clock = Clock()
    billing = ImplicitPrefixBilling(clock=clock)

    def contents(t: str) -> dict[str, object]:
        return {"contents": [{"role": "user", "parts": [{"text": t}]}]}

    small = contents("a" * 6000)  # ~1 500 tokens: under 2.5's 2 048
    billing.bill(small, model="gemini-2.5-flash")
    assert billing.bill(small, model="gemini-2.5-flash").cache_read_tokens == 0
    big = contents("b" * 12000)  # ~3 000 tokens
    billing.bill(big, model="gemini-2.5-flash")
    assert billing.bill(big, model="gemini-2.5-flash").cache_read_tokens >= 2048
    assert billing.bill(big, model="gemini-3-flash").cache_read_tokens == 0  # wants 4 096
