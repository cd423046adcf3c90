"""trace_query: what `salon trace list` runs, filtered, over 100 000 stored traces."""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.figures import Figure, percentile
from salon.store.sql import SQLStore, sqlite_url
from salon.trace import CallTrace, Trace

TRACES = 100_000
BATCH = 1_000
QUERIES = 400
BOTS = [f"bot{i}" for i in range(5)]
CHANNELS = [f"discord:{i}" for i in range(200)]
USERS = [str(i) for i in range(500)]
OUTCOMES = ["answered"] * 96 + ["error"] * 3 + ["cancelled"]


def _trace(rng: random.Random, at: float) -> Trace:
    user = rng.choice(USERS)
    call = CallTrace(
        kind="answer",
        provider="anthropic",
        model="claude-sonnet-5-5",
        request={"messages": [{"role": "user", "content": "hello " * rng.randint(5, 40)}]},
        started_at=at,
        first_token_ms=rng.uniform(200, 900),
        total_ms=rng.uniform(500, 4000),
        input_tokens=rng.randint(10, 400),
        output_tokens=rng.randint(10, 300),
        cache_read_tokens=rng.randint(0, 20_000),
        cost=rng.uniform(0.0001, 0.02),
    )
    return Trace(
        bot=rng.choice(BOTS),
        platform="discord",
        channel=rng.choice(CHANNELS),
        channel_name="general",
        started_at=at,
        ended_at=at + 2,
        outcome=rng.choice(OUTCOMES),  # type: ignore[arg-type]
        triggers=[{"id": str(int(at * 1000)), "author": user, "text": "hi", "link": None}],
        requester={"id": user, "name": f"user{user}"},
        calls=[call],
        answer="An answer of about one sentence.",
    )


async def _fill(store: SQLStore, rng: random.Random) -> None:
    start = time.time() - 30 * 86_400
    for first in range(0, TRACES, BATCH):
        batch = [_trace(rng, start + (first + i) * 25.0) for i in range(BATCH)]
        await store.write_traces(batch)


def _filters(rng: random.Random) -> dict[str, Any]:
    """A mix of what an operator asks: by bot, channel, outcome, user, or two at once."""
    choice = rng.randrange(6)
    if choice == 0:
        return {}
    if choice == 1:
        return {"bot": rng.choice(BOTS)}
    if choice == 2:
        return {"channel": rng.choice(CHANNELS)}
    if choice == 3:
        return {"outcome": "error"}
    if choice == 4:
        return {"user": f"user{rng.choice(USERS)}"}
    return {"bot": rng.choice(BOTS), "outcome": "error"}


async def run() -> list[Figure]:
    rng = random.Random(13)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLStore(sqlite_url(Path(tmp) / "salon.db"))
        await store.open()
        try:
            await _fill(store, rng)
            samples: list[float] = []
            for _ in range(QUERIES):
                filters = _filters(rng)
                began = time.perf_counter()
                await store.traces.list_traces(**filters, limit=50)
                samples.append((time.perf_counter() - began) * 1000)
        finally:
            await store.close()
    return [
        Figure("trace_query_p50_ms", percentile(samples, 50), "ms", target=50),
        Figure("trace_query_p99_ms", percentile(samples, 99), "ms"),
    ]
