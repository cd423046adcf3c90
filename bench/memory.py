"""The memory faculty's figures (issue #27).

- ``memory_leaks``: notes found outside their scope by the leak suite (the generated
  probes on the fake Discord, ``tests/platforms/test_discord_memory_leaks.py``, and on the
  store, ``tests/store/test_note_leaks.py``, run by pytest in a child process); 0 when it
  passes, else the leaks its assertion lists. PostgreSQL too when ``SALON_TEST_DATABASE_URL``
  is set (``scripts/with-postgres``).
- ``cache_read_share_memory``: the cache benchmark's conversation (``bench/caching.py``, the
  targeted setting) with memory on, ten notes in view from the start and one more kept
  every 20 activations (in the store, as ``remember`` keeps it), on the Anthropic-billed
  fake: the share of input tokens read from the cache.
- ``reach_leaks`` (issue #46): markers of what a reader may not read (the #staff lines
  Alice fetched, her own note, notes Mallory and Carol had kept) found in requests built
  for people who may not read them or in posts they can see, over the probe's cases on the
  fake Discord (``tests/platforms/test_discord_memory_leaks.py``, the reach test: past
  tool results, a batch of Mallory and Alice, shown tool output, after a restart, with
  prompt caching on and off), run by pytest in a child process; each marker, reader and
  case counted once.
- ``cache_read_share_tools``: the cache benchmark's conversation (the targeted setting)
  with the built-in tools on: every fourth activation the model reads #staff through
  ``get_recent_messages`` (``in_channel``), which only Ada may read; her lookups are
  replayed whole to her and sealed as their placeholder for everyone once another person
  is answered, the others' are refused.
- ``recall_p50_ms``: a ranked ``recall`` search of two words over 100 000 notes of one bot
  (1 000 channels, 100 guilds, 1 000 people), from a viewpoint in one channel, on SQLite.
  The notes' words follow Zipf's law over a 5 000-word vocabulary, as a language's do, and
  so do the queries' words. ``recall_common_words_p50_ms`` is the worst case beside it: a
  17-word vocabulary, every query word in about half of all notes (FTS5 ranks every match
  before the scope filter leaves the hundred in view).
- ``memory_overhead_ratio``: activation overhead with memory on (20 notes in view, the
  block read at each roll and checked at each activation) over memory off, interleaved as
  ``trace_overhead`` (``bench/activation.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench import caching
from bench.activation import PAUSE, RUNS, Rig, _config, interleaved
from bench.figures import Figure, percentile
from fakes.llm_server import Recorded, Scripted
from salon.agent.conversation.toolrunner import ToolRunner
from salon.config import BotConfig
from salon.config.memory import MemoryConfig
from salon.model import ChannelRef, Message, Participant
from salon.notes import NoteScope, Provenance, Scope, Viewpoint
from salon.platforms.memory import MemoryPlatform
from salon.store._dialects import insert_sql
from salon.store._notes import scope_tag
from salon.store.sql import SQLStore, sqlite_url
from salon.tools.builtin import build_builtin_server
from salon.tools.hub import ToolHub
from salon.tools.log import ToolLog
from salon.tools.servers import builtin_spec

LEAK_SUITE = ("tests/platforms/test_discord_memory_leaks.py", "tests/store/test_note_leaks.py")
_LEAK = re.compile(r"'((?:NOTE-\S+|note \d+) reached [^']*)'")
REACH_SUITE = ("tests/platforms/test_discord_memory_leaks.py", "-k", "reaches_no_one_else")
_REACHED = re.compile(r"^E\s+(\S+ reached \S+ in .+)$", re.MULTILINE)
LOOKUP_EVERY = 4
NOTES = 100_000
SEARCHES = 300
COMMON = ("tea", "deploy", "friday", "birthday", "cat", "launch", "coffee", "review", "rain")
COMMON += ("plan", "guitar", "march", "office", "holiday", "server", "python", "garden")
VOCABULARY = 5000


class _Words:
    """Words drawn from a vocabulary by Zipf's law (the n-th word 1/n as often)."""

    def __init__(self, rng: random.Random, words: tuple[str, ...], zipf: bool) -> None:
        self.rng, self.words = rng, words
        self.weights = [1 / (n + 1) for n in range(len(words))] if zipf else None

    def take(self, count: int) -> list[str]:
        if self.weights is None:
            return [self.rng.choice(self.words) for _ in range(count)]
        return self.rng.choices(self.words, self.weights, k=count)


async def memory_leaks() -> list[Figure]:
    env = dict(os.environ)
    if not env.get("SALON_TEST_DATABASE_URL"):
        env["SALON_TEST_NO_POSTGRES"] = "1"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-q", "-vv", "-p", "no:cacheprovider", *LEAK_SUITE,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await child.communicate()
    text = out.decode(errors="replace")
    leaks = set(_LEAK.findall(text))
    if child.returncode and not leaks:
        raise RuntimeError(f"the leak suite failed for another reason:\n{text[-3000:]}")
    return [Figure("memory_leaks", len(leaks), "notes", target=0)]


async def reach_leaks() -> list[Figure]:
    env = dict(os.environ)
    env["SALON_TEST_NO_POSTGRES"] = "1"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *REACH_SUITE,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await child.communicate()
    text = out.decode(errors="replace")
    leaks = set(_REACHED.findall(text))
    if child.returncode and not leaks:
        raise RuntimeError(f"the reach cases failed for another reason:\n{text[-3000:]}")
    return [Figure("reach_leaks", len(leaks), "markers", target=0)]


class _StaffLookups:
    """The model reads #staff every ``LOOKUP_EVERY``-th activation; only Ada may read it."""

    def __init__(self) -> None:
        self.asked = 0

    @contextlib.asynccontextmanager
    async def runner(
        self, config: BotConfig, store: SQLStore, platform: MemoryPlatform, root: Path
    ) -> AsyncIterator[ToolRunner]:
        staff = platform.channel("staff")
        for n in range(40):
            platform.add(staff, Participant("p9", "Eve"), f"staff line {n}: the launch slips")
        platform.unreadable |= {(who, staff.key) for who in ("p1", "p2", "p3")}

        async def history(channel: ChannelRef, limit: int) -> Sequence[Message]:
            return await platform.history(channel, limit=limit)

        async def nobody(_key: str) -> list[str]:
            return []

        tools = build_builtin_server(
            "bench", store.chatlog, nobody, history=history, access=platform.can_read
        )
        async with ToolHub([builtin_spec(tools)]) as hub:
            log = ToolLog(root / "tools", "bench")
            yield ToolRunner(
                bot="bench",
                config=config,
                tools=hub,
                store=store,
                log=log,
                clock=platform.clock,  # the conversation's virtual time, as its messages
            )

    def respond(self, request: Recorded) -> Scripted:
        last = (request.body.get("messages") or [{}])[-1]
        if "tool_result" in json.dumps(last):
            return Scripted(text="Staff says the launch slips.")
        self.asked += 1
        if self.asked % LOOKUP_EVERY:
            return Scripted(text="Sounds good to me, let us do that.")
        arguments = {"in_channel": "staff", "limit": 20}
        return Scripted(tool_calls=[(f"c{self.asked}", "get_recent_messages", arguments)])


async def cache_read_share_tools() -> list[Figure]:
    bill, _ = await caching.conversation(
        caching=True, threshold=caching.THRESHOLD, budget=caching.BUDGET, tools=_StaffLookups()
    )
    share = bill.cache_read_tokens / bill.total_tokens
    return [Figure("cache_read_share_tools", share, "fraction", target=0.95, direction="min")]


async def cache_read_share_memory() -> list[Figure]:
    async def remember(store: SQLStore, activation: int) -> None:
        room = NoteScope(Scope.CHANNEL, "memory:room")
        if activation == 0:
            for n in range(10):
                await store.notes.add_note(
                    "bench", room, f"standing note {n}: the launch plan", _said(n), trusted=True
                )
        elif activation % 20 == 0:
            text = f"kept at activation {activation}: review the code"
            await store.notes.add_note("bench", room, text, _said(activation), trusted=True)

    bill, _ = await caching.conversation(
        caching=True,
        threshold=caching.THRESHOLD,
        budget=caching.BUDGET,
        memory=True,
        between=remember,
    )
    share = bill.cache_read_tokens / bill.total_tokens
    return [Figure("cache_read_share_memory", share, "fraction", target=0.95, direction="min")]


async def recall_p50() -> list[Figure]:
    realistic = tuple(f"w{n}x" for n in range(VOCABULARY))
    return [
        Figure("recall_p50_ms", await _recall(realistic, zipf=True), "ms", target=10),
        Figure("recall_common_words_p50_ms", await _recall(COMMON, zipf=False), "ms"),
    ]


async def _recall(vocabulary: tuple[str, ...], *, zipf: bool) -> float:
    rng = random.Random(27)
    words = _Words(rng, vocabulary, zipf)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLStore(sqlite_url(Path(tmp) / "notes.db"))
        await store.open()
        try:
            await _fill(store, rng, words)
            view = Viewpoint("discord:7", guild_id="g7", person_id="p7", person_allows=True)
            samples = []
            for _ in range(SEARCHES):
                query = " ".join(words.take(2))
                start = time.perf_counter()
                await store.notes.search_notes("bench", view, query, limit=5)
                samples.append((time.perf_counter() - start) * 1000)
        finally:
            await store.close()
    return percentile(samples, 50)


async def _fill(store: SQLStore, rng: random.Random, words: _Words) -> None:
    """``NOTES`` notes in one transaction: channel, person and guild notes, half trusted."""
    now = time.time()
    rows = []
    for n in range(NOTES):
        kind = rng.choice((Scope.CHANNEL, Scope.CHANNEL, Scope.PERSON, Scope.GUILD))
        key = {
            Scope.CHANNEL: f"discord:{n % 1000}",
            Scope.PERSON: f"p{n % 1000}",
            Scope.GUILD: f"g{n % 100}",
        }[kind]
        text = " ".join(words.take(rng.randint(4, 20)))
        rows.append(
            {
                "bot": "bench", "scope": kind.value, "scope_key": key, "text": text,
                "author_id": f"p{n % 1000}", "author_name": "Someone", "channel": key,
                "channel_name": "#x", "message_id": str(n), "said_at": now,
                "created_at": now, "updated_at": now, "trusted": n % 2 == 0,
                "tag": scope_tag(NoteScope(kind, key)),
            }
        )  # fmt: skip
    statement = insert_sql("notes", tuple(rows[0]), "")
    async with store.notes.db.begin() as conn:
        await conn.many([(statement, row) for row in rows])


class _MemoryRig(Rig):
    """A rig whose rooms (DMs) hold notes in view: the room's, the bot's, the person's."""

    async def __aenter__(self) -> _MemoryRig:
        await super().__aenter__()
        for n in range(20):
            scope = NoteScope(Scope.CHANNEL, self.rooms[0].key) if n % 2 else NoteScope(Scope.BOT)
            await self.store.notes.add_note(
                "bench", scope, f"note {n}: the launch plan and the review", _said(n), trusted=True
            )
        return self


async def memory_overhead() -> list[Figure]:
    plain = _config()
    memory = plain.model_copy(update={"memory": MemoryConfig(enabled=True)})
    off, on = await interleaved(Rig(plain), _MemoryRig(memory), pause=PAUSE)
    return [
        Figure("memory_overhead_ratio", percentile(on, 50) / percentile(off, 50), "x", target=1.10),
        Figure("activation_overhead_memory_p50_us", percentile(on, 50), "us"),
        Figure("activation_overhead_memory_off_p50_us", percentile(off, 50), "us"),
        Figure("memory_overhead_runs", RUNS, "activations per arm"),
    ]


def _said(n: int) -> Provenance:
    return Provenance("u0", "User0", "memory:room", "#room", f"m{n}", datetime.now(UTC))


__all__ = [
    "cache_read_share_memory",
    "cache_read_share_tools",
    "memory_leaks",
    "memory_overhead",
    "reach_leaks",
    "recall_p50",
]
