"""Wasted cache writes as Salon estimates them, against the billing fake's own count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fakes.billing import CacheBilling
from salon.llm.cache_plan import WriteWatch

MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def body(turns: int) -> dict[str, Any]:
    """A channel's request after ``turns`` messages: a 1-hour system prompt, the newest
    message marked (5 minutes)."""
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"message {i} " + "w" * 2400}],
        }
        for i in range(turns)
    ]
    messages[-1]["content"][0]["cache_control"] = MARK
    system = [{"type": "text", "text": "rules " * 900, "cache_control": HOUR}]
    return {"model": "claude-sonnet-4-6", "system": system, "messages": messages}


def test_salons_estimate_of_wasted_writes_matches_the_billing_fakes_count() -> None:
    clock = Clock()
    billing = CacheBilling(clock=clock)
    watch = WriteWatch()
    # Busy, then past the 5-minute tail (the 1-hour system prompt is still read), busy,
    # past the hour (everything gone), and a retry of the same prompt (nothing written).
    gaps = [0, 30, 60, 400, 20, 90, 4000, 15, 45, 0]
    turns = [1, 3, 5, 7, 9, 11, 13, 15, 17, 17]
    found = []
    for gap, n in zip(gaps, turns, strict=True):
        clock.now += timedelta(seconds=gap)
        bill = billing.bill(body(n))
        read, written = bill.cache_read_tokens, bill.cache_write_tokens
        found.append(watch.observe("room", read, written, bill.total_tokens))
    assert found[3] > 0  # the 5-minute tail expired unread
    assert found[6] > 0  # everything did
    assert found[1] == found[2] == 0  # each read what the one before wrote
    # Salon counts a write once the next call shows it unread: add what is still pending.
    assert sum(found) + watch.pending("room") == billing.settle()


def test_a_call_that_failed_before_its_prompt_was_read_shows_nothing_unread() -> None:
    watch = WriteWatch()
    assert watch.observe("room", read=0, written=3000, prompt=3100) == 0
    assert watch.observe("room", read=0, written=0, prompt=0) == 0  # a 500: no usage
    assert watch.pending("room") == 3000  # still there for the next call to read
    assert watch.observe("room", read=3000, written=200, prompt=3300) == 0
    assert watch.observe("room", read=1000, written=0, prompt=1400) == 200  # an edit
