"""The limits' counts in memory: a hold on a budget is worked out only when another
admission to that budget comes while it is held, and let go of exactly once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from salon.agent.pipeline.limitbook import Estimate, LimitBook
from salon.store.limits import Admission, Charge, Refusal, Settlement
from salon.store.sql import SQLStore, sqlite_url

NOW = time.time()
DAY = int(NOW // 86400)
USER = Charge("user:alice:tokens", 1000)
CHANNEL = Charge("channel:memory:c:tokens", 1000)


@pytest.fixture
async def book(tmp_path: Path) -> AsyncIterator[LimitBook]:
    store = SQLStore(sqlite_url(tmp_path / "s.db"))
    await store.open()
    try:
        yield LimitBook("bot", store.limits)
    finally:
        await store.close()


def _estimate(tokens: float, worked: list[float]) -> Estimate:
    def work() -> tuple[float, float]:
        worked.append(tokens)
        return tokens, 0.0

    return Estimate(work)


async def _take(book: LimitBook, estimate: Estimate, *charges: Charge) -> Refusal | None:
    admission = Admission(now=NOW, day=DAY, charges=charges)
    await book.load(admission)
    return book.take(admission, estimate)


async def test_holds_are_worked_out_only_when_admissions_overlap(book: LimitBook) -> None:
    worked: list[float] = []
    first, second = _estimate(600, worked), _estimate(700, worked)
    assert await _take(book, first, USER) is None
    assert worked == []  # alone on the budget: its context is never walked
    assert await _take(book, second, USER) is None  # 600 held, under 1000
    assert worked == [600]
    refused = await _take(book, _estimate(1, worked), USER)
    assert isinstance(refused, Refusal)
    assert refused.kind == "budget"  # 600 + 700 held
    assert worked == [600, 700]
    book.settle(DAY, first, [Settlement(USER.key, 600, 100)])
    assert book.spent(USER.key, DAY) == (100, 700)
    book.settle(DAY, second, [Settlement(USER.key, 700, 100)])
    assert book.spent(USER.key, DAY) == (200, 0)
    assert worked == [600, 700]  # each worked out once


async def test_a_hold_never_worked_out_is_let_go(book: LimitBook) -> None:
    worked: list[float] = []
    alone = _estimate(600, worked)
    assert await _take(book, alone, USER) is None
    book.settle(DAY, alone, [Settlement(USER.key, 0, 90)])
    assert book.spent(USER.key, DAY) == (90, 0)
    assert worked == []


async def test_a_hold_counted_on_one_budget_is_let_go_of_on_each(book: LimitBook) -> None:
    worked: list[float] = []
    both = _estimate(600, worked)
    assert await _take(book, both, USER, CHANNEL) is None
    assert await _take(book, _estimate(5, worked), USER) is None  # counts it on USER only
    book.settle(DAY, both, [Settlement(USER.key, 600, 50), Settlement(CHANNEL.key, 600, 50)])
    assert book.spent(USER.key, DAY) == (50, 5)  # the other admission's hold, now counted
    assert book.spent(CHANNEL.key, DAY) == (50, 0)  # pending there: never added, not taken
