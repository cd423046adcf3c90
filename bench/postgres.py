"""Figures of the PostgreSQL store. They need a server: run them beside a throwaway one,

    scripts/with-postgres .venv/bin/python -m bench pg_

which sets ``SALON_TEST_DATABASE_URL`` and ``SALON_TEST_DATABASE_PASSWORD``; each figure
gets a fresh database on it.

``pg_activation_overhead_ratio``: activation overhead (``activation_overhead``'s spans) with
the store on PostgreSQL over the same on SQLite, alternating rounds of each in one run.
``pg_chatlog_search_p50_ms``: ``chatlog``'s search mix over 1,000,000 lines in PostgreSQL
(the GIN-indexed tsvector). ``schedule_claims_per_s``: two processes fire the same 2 000 due
occurrences as the scheduler does (claim, move the schedule on, complete what they won);
occurrences fired per second of wall time, each exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import asyncpg

from bench import activation, chatlog
from bench.figures import Figure, percentile
from fakes.databases import throwaway_database
from salon.model import ChannelRef, Participant, Schedule
from salon.store._dialects import parse_url
from salon.store.sql import SQLStore

URL_ENV = "SALON_TEST_DATABASE_URL"
PASSWORD_ENV = "SALON_TEST_DATABASE_PASSWORD"
OCCURRENCES = 2000
WORKERS = 2
Database = tuple[str, str | None]


@asynccontextmanager
async def fresh_database() -> AsyncIterator[Database]:
    """(URL, password) of a new database on the server, dropped afterwards."""
    url = os.environ.get(URL_ENV)
    if not url:
        sys.exit(f"{URL_ENV} is not set: run through scripts/with-postgres (see bench/postgres.py)")
    password = os.environ.get(PASSWORD_ENV)
    async with throwaway_database(url, password, "salon_bench") as database_url:
        yield database_url, password


async def activation_ratio() -> list[Figure]:
    """Activation overhead with the store on PostgreSQL over SQLite, the two taking turns
    in one process (``activation.interleaved``). Both arms idle alike between activations
    (``activation.PAUSE``; see ``activation.trace_overhead``): back to back, the
    PostgreSQL arm idled while its writes after each answer crossed the network and the
    SQLite arm hardly did; that ratio is reported too, without a target."""
    config, runs, rig = activation._config(), activation.RUNS, activation.Rig
    async with fresh_database() as database:
        sqlite, postgres = await activation.interleaved(
            rig(config), rig(config, database=database), runs, pause=activation.PAUSE
        )
        hot_sqlite, hot_postgres = await activation.interleaved(
            rig(config), rig(config, database=database), runs // 2
        )
    ratio = percentile(postgres, 50) / percentile(sqlite, 50)
    return [
        Figure("pg_activation_overhead_ratio", ratio, "x", target=1.3),
        Figure("pg_activation_overhead_p50_us", percentile(postgres, 50), "us"),
        Figure(
            "pg_activation_overhead_back_to_back_ratio",
            percentile(hot_postgres, 50) / percentile(hot_sqlite, 50),
            "x",
        ),
    ]


async def _populate(database: Database, rng: random.Random, words: list[str]) -> None:
    """Bulk-load the million lines with COPY (setup, not measured), then ANALYZE."""
    parts = parse_url(database[0])
    conn = await asyncpg.connect(
        host=parts.host,
        port=parts.port,
        user=parts.username,
        password=database[1],
        database=parts.database,
    )
    weights = [1 / (rank + 1) for rank in range(len(words))]
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    columns = ["bot", "channel", "message_id", "author_id", "author_name", "author_is_bot"]
    columns += ["kind", "text", "created_at"]
    try:
        rows: list[tuple[object, ...]] = []
        for i in range(chatlog.LINES):
            text = " ".join(rng.choices(words, weights, k=rng.randint(4, 14)))
            nick = f"user{rng.randrange(50)}"
            channel = f"irc:#c{i % chatlog.CHANNELS}"
            rows.append(("bench", channel, f"m{i}", f"irc:{nick}", nick, False, "message", text))
            rows[-1] += (start + i,)
            if len(rows) == 50_000:
                await conn.copy_records_to_table("chat_log", records=rows, columns=columns)
                rows.clear()
        await conn.copy_records_to_table("chat_log", records=rows, columns=columns)
        await conn.execute("ANALYZE chat_log")
    finally:
        await conn.close()


async def chatlog_search() -> list[Figure]:
    rng = random.Random(7)
    words = chatlog._words(rng)
    async with fresh_database() as database:
        store = SQLStore(database[0], password=database[1])
        await store.open()  # the schema, with the tsvector column and its GIN index
        try:
            await _populate(database, rng, words)
            samples = await chatlog._searches(store, rng, words)
        finally:
            await store.close()
    return [
        Figure("pg_chatlog_search_p50_ms", percentile(samples, 50), "ms", target=20),
        Figure("pg_chatlog_search_p99_ms", percentile(samples, 99), "ms"),
    ]


async def _due_schedules(store: SQLStore, count: int) -> datetime:
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    for n in range(count):
        await store.schedules.create_schedule(
            Schedule(
                0, "bench", ChannelRef("irc", "#bench"), f"task {n}", "UTC",
                at=due, created_by=Participant("irc:alice", "alice"), next_due=due,
            )
        )  # fmt: skip
    return due


async def _claimer(
    url: str, password: str | None, due_text: str, seed: int, start_at: float
) -> dict[str, float]:
    """One process's part: every due occurrence, in an order of its own, as
    ``Scheduler._fire`` handles it, from the moment ``start_at`` (so both processes start
    together, after their imports); how many it won, and when it was done."""
    store = SQLStore(url, password=password)
    await store.open()
    due = datetime.fromisoformat(due_text)
    won = 0
    try:
        await store.schedules.renew_lease("bench", 60)
        schedules = await store.schedules.find("bench")
        random.Random(seed).shuffle(schedules)
        await asyncio.sleep(max(start_at - time.time(), 0))
        for schedule in schedules:
            if await store.schedules.claim_fire(schedule.id, due, store.owner):
                won += 1
                await store.complete_fire(schedule.id, due)
            await store.schedules.set_next_due(schedule.id, None)
        done = time.time()
    finally:
        await store.close()
    return {"won": won, "done": done}


async def claims() -> list[Figure]:
    async with fresh_database() as (url, password):
        store = SQLStore(url, password=password)
        await store.open()
        due = await _due_schedules(store, OCCURRENCES)
        await store.close()
        env = {**os.environ, "BENCH_PASSWORD": password or ""}
        start_at = time.time() + 5  # both processes are up and have read the schedules
        arguments = ["-m", "bench.postgres", url, due.isoformat()]
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                *arguments,
                str(seed),
                str(start_at),
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
            for seed in range(WORKERS)
        ]
        results = [json.loads((await p.communicate())[0]) for p in procs]
    won = [r["won"] for r in results]
    if sum(won) != OCCURRENCES:
        sys.exit(f"schedule_claims_per_s: {sum(won)} occurrences fired, not {OCCURRENCES}")
    elapsed = max(r["done"] for r in results) - start_at
    return [
        Figure("schedule_claims_per_s", OCCURRENCES / elapsed, "claims/s"),
        Figure("schedule_claims_share_min", min(won) / OCCURRENCES, "of all"),
    ]


if __name__ == "__main__":  # one claiming process of ``claims``
    url, due_text, seed, start_at = sys.argv[1:5]
    password = os.environ.get("BENCH_PASSWORD")
    print(json.dumps(asyncio.run(_claimer(url, password, due_text, int(seed), float(start_at)))))
