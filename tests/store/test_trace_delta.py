"""A channel's traces stored as references to the previous one plus what changed: read back
exactly as sent, kept whole by retention, free of secrets."""

from __future__ import annotations

import copy
import json
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fakes.databases import Database
from salon.store._tables import migrate
from salon.store.sql import SQLStore
from salon.trace import CallTrace, Trace

SECRET = "sk-delta-secret-999"
Turn = dict[str, Any]


@pytest.fixture
async def store(database: Database) -> AsyncIterator[SQLStore]:
    store = await database.open_store(redact=lambda t: t.replace(SECRET, "***"))
    yield store
    await store.close()


def turn(n: int, text: str | None = None) -> Turn:
    words = text if text is not None else f"message {n} with a few words"
    return {"role": "user", "content": [{"text": words}]}


def traced(messages: list[Turn], *, when: float, channel: str = "memory:room") -> Trace:
    request = {"model": "m", "system": "be brief", "messages": messages, "max_tokens": 100}
    call = CallTrace(kind="answer", provider="p", model="m", request=request, started_at=when)
    return Trace(
        bot="salon",
        platform="memory",
        channel=channel,
        channel_name="room",
        started_at=when,
        ended_at=when + 0.1,
        calls=[call],
    )


def conversation(rounds: int, *, start: float) -> tuple[list[Trace], list[list[Turn]]]:
    """A channel whose request grows by two turns a round (the same turn objects, as the
    render memos give them), a copy of each request as sent, and a roll halfway."""
    turns = [turn(i) for i in range(40)]
    written: list[Trace] = []
    sent: list[list[Turn]] = []
    for r in range(rounds):
        if r == rounds // 2:
            turns = turns[20:]  # a roll: the front goes
        turns = [*turns, turn(1000 + r), turn(2000 + r, f"answer {r}")]
        if r == 3:
            turns[-1] = turn(0, f"a key {SECRET} pasted")
        messages = [t if r % 3 else copy.deepcopy(t) for t in turns]  # equal, or the same
        written.append(traced(messages, when=start + r))
        sent.append(json.loads(json.dumps(messages).replace(SECRET, "***")))
    return written, sent


async def rows(store: SQLStore) -> list[Any]:
    query = "SELECT id, base_id, size, body FROM traces ORDER BY id"
    async with store.db.connect() as conn:
        return list(await conn.fetch(query))


async def test_each_trace_reads_back_the_request_as_sent(store: SQLStore) -> None:
    written, sent = conversation(12, start=time.time())
    ids = [i for t in written for i in await store.write_traces([t])]
    batch, in_batch = conversation(4, start=time.time() + 100)
    ids += await store.write_traces(batch)  # one transaction, referring within it
    for trace_id, messages in zip(ids, sent + in_batch, strict=True):
        found = await store.traces.get_trace(trace_id)
        assert found is not None
        request = found[1]["calls"][0]["request"]
        assert list(request) == ["model", "system", "messages", "max_tokens"]
        assert request["messages"] == messages
    stored = await rows(store)
    referring = [r for r in stored if r["base_id"] is not None]
    assert len(referring) >= 10  # all but the first of each group
    assert max(r["size"] for r in referring) < min(
        r["size"] for r in stored if r["base_id"] is None
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": f"a distinctive description of tool number {i}",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
    for i in range(6)
]


async def test_the_tools_and_system_of_a_group_are_stored_once(store: SQLStore) -> None:
    """A bot offers the same tools and system prompt at every activation: a referring
    trace refers to its group's (most of its body before), and reads back as sent."""
    written, _ = conversation(6, start=time.time())
    for number, trace in enumerate(written):
        request = trace.calls[0].request
        request["tools"] = copy.deepcopy(TOOLS) if number % 2 else TOOLS  # equal, or the same
        request["system"] = [{"type": "text", "text": "a long system prompt " * 20}]
    written[4].calls[0].request["tools"] = TOOLS[:3]  # changed: stored whole again
    ids = [i for t in written for i in await store.write_traces([t])]
    stored = await rows(store)
    bodies = [zlib.decompress(r["body"]).decode() for r in stored]
    whole = [r["base_id"] is None for r in stored]
    same = [n > 0 and written[n - 1].calls[0].request["tools"] == t.calls[0].request["tools"]
            for n, t in enumerate(written)]  # fmt: skip
    assert same == [False, True, True, True, False, False]
    assert whole == [True, False, False, True, False, False]  # a roll at the fourth
    for body, kept_whole, unchanged in zip(bodies, whole, same, strict=True):
        assert ("tool number 0" in body) == (kept_whole or not unchanged)
        assert ("system prompt" in body) == kept_whole
    for trace_id, trace in zip(ids, written, strict=True):
        found = await store.traces.get_trace(trace_id)
        assert found is not None
        request = found[1]["calls"][0]["request"]
        assert list(request) == ["model", "system", "messages", "max_tokens", "tools"]
        assert request["tools"] == trace.calls[0].request["tools"]
        assert request["system"] == trace.calls[0].request["system"]
    async with store.db.begin() as conn:  # a keyframe removed by hand: said, not guessed
        await conn.execute("DELETE FROM traces WHERE id = :id", {"id": ids[0]})
    found = await store.traces.get_trace(ids[1])
    assert found is not None
    assert found[1]["calls"][0]["request"]["tools"] is None
    assert "tools and system" in found[1]["incomplete"]


async def test_no_secret_in_a_stored_body_whole_or_referring(store: SQLStore) -> None:
    written, _ = conversation(8, start=time.time())
    for trace in written:
        await store.write_traces([trace])
    bodies = [zlib.decompress(r["body"]).decode() for r in await rows(store)]
    assert not [b for b in bodies if SECRET in b]
    assert any("***" in b for b in bodies)


async def test_retention_deletes_a_group_only_whole(store: SQLStore) -> None:
    """A group's keyframe older than the age bound stays while a trace referring to it is
    younger, and they read whole; once the whole group is old it goes, the next stays."""
    now = time.time()
    written, sent = conversation(6, start=now - 3600)
    for trace in written[:2]:
        trace.started_at -= 10 * 86400
    ids = [i for t in written for i in await store.write_traces([t])]
    stored = await rows(store)
    assert [r["base_id"] for r in stored] == [None, ids[0], ids[0], None, ids[3], ids[3]]
    assert await store.prune_traces(max_age=7 * 86400, max_bytes=10**9, now=now) == 0
    found = await store.traces.get_trace(ids[2])
    assert found is not None
    assert found[1]["calls"][0]["request"]["messages"] == sent[2]
    assert await store.prune_traces(max_age=3597.5, max_bytes=10**9, now=now) == 3
    for trace_id, messages in zip(ids[3:], sent[3:], strict=True):
        found = await store.traces.get_trace(trace_id)
        assert found is not None
        assert found[1]["calls"][0]["request"]["messages"] == messages
    assert await store.prune_traces(max_age=10**9, max_bytes=1, now=now) == 3
    assert await store.traces.list_traces() == []


async def test_a_trace_whose_keyframe_was_removed_by_hand_shows_its_tail(
    store: SQLStore,
) -> None:
    written, sent = conversation(6, start=time.time())
    ids = [i for t in written for i in await store.write_traces([t])]
    async with store.db.begin() as conn:
        await conn.execute("DELETE FROM traces WHERE id = :id", {"id": ids[0]})
    found = await store.traces.get_trace(ids[2])
    assert found is not None
    body = found[1]
    assert "incomplete" in body
    assert body["calls"][0]["request"]["messages"] == sent[2][-2:]


async def test_a_trace_after_pruning_starts_a_new_group(store: SQLStore) -> None:
    written, sent = conversation(4, start=time.time() - 60)
    await store.write_traces(written[:2])
    await store.prune_traces(max_age=1, max_bytes=10**9, now=time.time() + 10)
    (trace_id,) = await store.write_traces(written[2:3])
    assert (await rows(store))[-1]["base_id"] is None
    found = await store.traces.get_trace(trace_id)
    assert found is not None
    assert found[1]["calls"][0]["request"]["messages"] == sent[2]


async def test_migration_13_gives_an_older_traces_table_its_base_column(
    store: SQLStore,
) -> None:
    async with store.db.begin() as conn:  # the table as version 12 left it
        await conn.execute("DROP INDEX ix_traces_base")
        await conn.execute("ALTER TABLE traces DROP COLUMN base_id")
        await conn.execute("DELETE FROM schema_migrations WHERE version = 13")
    async with store.db.begin() as conn:
        await migrate(conn)
    written, sent = conversation(6, start=time.time())
    ids = await store.write_traces(written[:2])
    found = await store.traces.get_trace(ids[1])
    assert found is not None
    assert found[1]["calls"][0]["request"]["messages"] == sent[1]
    assert (await rows(store))[1]["base_id"] == ids[0]
