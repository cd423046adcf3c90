"""chatlog: logging throughput and full-text search over a million logged lines.

``chatlog_lines_per_s``: lines written through ``SQLStore.log_message`` one after another,
as the IRC adapter writes them, until all are committed (the store batches commits).
``chatlog_search_p50_ms``: ``search_chat_logs`` (the built-in tool, through the store's
FTS5 query) over 1,000,000 lines in 10 channels; queries mix rare and common words, one and
two words, with and without a user filter.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.figures import Figure, percentile
from salon.model import ChannelRef, Message, Participant
from salon.store.sql import SQLStore, sqlite_url

LINES = 1_000_000
CHANNELS = 10
WRITES = 20_000
SEARCHES = 300
VOCABULARY = 5000


def _words(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _populate(path: Path, rng: random.Random, words: list[str]) -> None:
    """Bulk-load the million lines straight through sqlite3 (setup, not measured)."""
    weights = [1 / (rank + 1) for rank in range(len(words))]  # Zipf-like: a few common words
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    with sqlite3.connect(path) as db:
        rows = []
        for i in range(LINES):
            text = " ".join(rng.choices(words, weights, k=rng.randint(4, 14)))
            channel = f"irc:#c{i % CHANNELS}"
            nick = f"user{rng.randrange(50)}"
            rows.append(
                ("bench", channel, f"m{i}", f"irc:{nick}", nick, False, "message", text, start + i)
            )
            if len(rows) == 50_000:
                _insert(db, rows)
                rows.clear()
        _insert(db, rows)


def _insert(db: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    db.executemany(
        "INSERT INTO chat_log (bot, channel, message_id, author_id, author_name, author_is_bot,"
        " kind, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    db.commit()


async def _throughput(store: SQLStore) -> float:
    channel = ChannelRef("irc", "#throughput")
    alice = Participant("irc:alice", "alice")
    now = datetime.now(UTC)
    started = time.perf_counter()
    for i in range(WRITES):
        message = Message(
            f"w{i}",
            channel,
            alice,
            f"line {i} of the throughput run",
            now + timedelta(microseconds=i),
        )
        await store.log_message("bench", message)
    await store.chatlog.flush()  # count only lines that are committed
    return WRITES / (time.perf_counter() - started)


async def _searches(store: SQLStore, rng: random.Random, words: list[str]) -> list[float]:
    samples: list[float] = []
    for i in range(SEARCHES):
        if i % 3 == 0:
            query = rng.choice(words[:50])  # common
        elif i % 3 == 1:
            query = rng.choice(words[1000:])  # rare
        else:
            query = f"{rng.choice(words[:300])} {rng.choice(words[:300])}"
        user = f"user{rng.randrange(50)}" if i % 4 == 0 else None
        channel = f"irc:#c{rng.randrange(CHANNELS)}"
        started = time.perf_counter()
        await store.chatlog.search_chat("bench", channel, query, user=user, limit=20)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def run() -> list[Figure]:
    rng = random.Random(7)
    words = _words(rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chatlog.db"
        store = SQLStore(sqlite_url(path))
        await store.open()  # creates the schema, FTS index and triggers
        _populate(path, rng, words)
        try:
            rate = await _throughput(store)
            samples = await _searches(store, rng, words)
        finally:
            await store.close()
    return [
        Figure("chatlog_lines_per_s", rate, "lines/s", target=5000, direction="min"),
        Figure("chatlog_search_p50_ms", percentile(samples, 50), "ms", target=20),
        Figure("chatlog_search_p99_ms", percentile(samples, 99), "ms"),
    ]
