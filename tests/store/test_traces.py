"""Traces, cost totals, metrics, heartbeats and the inbox in the store."""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from fakes.databases import Database
from salon.store.sql import SQLStore
from salon.trace import BotHealth, CallTrace, Divergence, ToolTrace, Trace

SECRET = "sk-trace-secret-777"


@pytest.fixture
async def store(database: Database) -> AsyncIterator[SQLStore]:
    store = await database.open_store(redact=lambda t: t.replace(SECRET, "***"))
    yield store
    await store.close()


def make_trace(
    n: int, *, bot: str = "salon", channel: str = "memory:room", when: float | None = None
) -> Trace:
    started = when if when is not None else time.time()
    call = CallTrace(
        kind="answer",
        provider="test",
        model="claude-sonnet-4-5",
        request={"messages": [{"role": "user", "content": f"question {n} {SECRET}"}]},
        started_at=started,
        first_token_ms=120.0,
        total_ms=300.0,
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=900,
        cost=0.001,
        divergence=Divergence(3, "m3", "roll") if n % 2 else None,
        expected_read_share=0.9,
    )
    tool = ToolTrace("c1", "lookup", {"q": "x"}, "found", False, 12.0, "run")
    return Trace(
        bot=bot,
        platform="memory",
        channel=channel,
        channel_name="room",
        started_at=started,
        ended_at=started + 0.5,
        triggers=[{"id": f"msg-{n}", "author": "Alice", "text": "hi"}],
        requester={"id": "alice", "name": "Alice"},
        calls=[call],
        tools=[tool],
        answer=f"answer {n}",
    )


async def test_traces_are_listed_newest_first_and_read_whole(store: SQLStore) -> None:
    now = time.time()
    ids = await store.write_traces([make_trace(i, when=now + i) for i in range(3)])
    listed = await store.traces.list_traces()
    assert [t.id for t in listed] == ids[::-1]
    summary, body = await store.traces.get_trace(ids[1]) or (None, {})
    assert summary is not None
    assert summary.cache_break == "roll"
    assert summary.read_share == pytest.approx(900 / 1000)
    assert body["answer"] == "answer 1"
    assert body["calls"][0]["request"]["messages"][0]["content"] == "question 1 ***"
    assert await store.traces.trace_for_message("msg-2") == ids[2]


async def test_a_message_counts_as_answered_by_its_bot_unless_a_stop_cut_it(
    store: SQLStore,
) -> None:
    cut = make_trace(2)
    cut.outcome = "cancelled"
    await store.write_traces([make_trace(1), cut, make_trace(3, bot="other")])
    assert await store.traces.answered("salon", "memory", "msg-1")
    assert not await store.traces.answered("salon", "discord", "msg-1")  # another platform's id
    assert not await store.traces.answered("salon", "memory", "msg-2")  # cut by a stop: owed
    assert not await store.traces.answered("salon", "memory", "msg-3")  # another bot answered
    assert not await store.traces.answered("salon", "memory", "msg-4")


async def test_a_secret_never_reaches_a_stored_trace(store: SQLStore) -> None:
    failing = make_trace(1)
    failing.outcome, failing.error = "error", f"bad key {SECRET}"
    await store.write_traces([failing])
    async with store.db.connect() as conn:
        (row,) = await conn.fetch("SELECT * FROM traces")
    stored = [zlib.decompress(v).decode() if isinstance(v, bytes) else str(v) for v in row]
    assert not [v for v in stored if SECRET in v]
    (summary,) = await store.traces.list_traces()
    assert summary.error == "bad key ***"


async def test_reasoning_is_summed_kept_per_call_and_its_secrets_redacted(
    store: SQLStore,
) -> None:
    trace = make_trace(1)
    thinking = replace(trace.calls[0], reasoning_tokens=15, thinking=f"use {SECRET} here")
    trace.calls = [thinking, replace(thinking, reasoning_tokens=5, thinking="")]
    (trace_id,) = await store.write_traces([trace])
    summary, body = await store.traces.get_trace(trace_id) or (None, {})
    assert summary is not None
    assert summary.reasoning_tokens == 20
    assert summary.output_tokens == 40  # reasoning is part of the output, not added to it
    assert [c["reasoning_tokens"] for c in body["calls"]] == [15, 5]
    assert body["calls"][0]["thinking"] == "use *** here"


async def test_traces_filter_and_cost_totals_group(store: SQLStore) -> None:
    await store.write_traces(
        [make_trace(1), make_trace(2, bot="other"), make_trace(3, channel="memory:b")]
    )
    assert len(await store.traces.list_traces(bot="salon")) == 2
    assert len(await store.traces.list_traces(channel="memory:b")) == 1
    assert await store.traces.list_traces(outcome="error") == []
    by_bot = {row.key: row for row in await store.traces.cost_by("bot")}
    assert by_bot["salon"].activations == 2
    assert by_bot["salon"].cost == pytest.approx(0.002)
    (day,) = await store.traces.cost_by("day")
    assert len(day.key) == 10  # YYYY-MM-DD
    (series,) = await store.traces.daily()
    assert series["activations"] == 3


async def test_metrics_count_outcomes_tools_and_latency(store: SQLStore) -> None:
    await store.write_traces([make_trace(1), make_trace(2)])
    metrics = await store.traces.trace_metrics()
    (outcome,) = metrics["outcomes"]
    assert outcome[:3] == ("salon", "answered", 2)
    assert metrics["tools"] == [("salon", "lookup", "ok", 2)]
    (latency,) = metrics["latency"]
    assert latency[1] == 2  # both first tokens within 0.25 s


async def test_pruning_keeps_traces_within_age_and_size(store: SQLStore) -> None:
    now = time.time()
    await store.write_traces([make_trace(i, when=now - 10 * 86400 + i) for i in range(3)])
    await store.write_traces([make_trace(i, when=now + i) for i in range(3, 9)])
    gone = await store.prune_traces(max_age=7 * 86400, max_bytes=10**9, now=now)
    assert gone == 3
    gone = await store.prune_traces(max_age=7 * 86400, max_bytes=1, now=now)
    assert gone == 6
    assert await store.traces.list_traces() == []


async def test_heartbeats_replace_each_other_and_the_inbox_gives_each_event_once(
    store: SQLStore,
) -> None:
    beat = BotHealth("salon", 42, "host", 1.0, 2.0, {"discord": True}, None, None, 0, {})
    await store.health.beat(beat)
    await store.health.beat(
        BotHealth("salon", 42, "host", 1.0, 3.0, {"discord": False}, 2.5, None, 1, {})
    )
    (health,) = await store.health.health_reports()
    assert health.updated_at == 3.0
    assert health.platforms == {"discord": False}
    first = await store.inbox.enqueue_event("salon", "discord:10", "deploy finished", "CI")
    assert first > 0
    taken = await store.inbox.take_events("salon", "proc-a")
    assert [e.text for e in taken] == ["deploy finished"]
    assert await store.inbox.take_events("salon", "proc-b") == []


def test_a_trace_body_holds_what_asdict_would_give() -> None:
    from dataclasses import asdict

    for n in (1, 2):  # with and without a divergence
        trace = make_trace(n)
        # The pipeline's record is stored as the steps that acted (PipelineRecord.body).
        assert trace.body() == {**asdict(trace), "pipeline": trace.pipeline.body()}


async def test_cost_per_day_counts_utc_days_whatever_the_servers_time_zone(
    store: SQLStore,
) -> None:
    late = datetime(2026, 1, 1, 23, 30, tzinfo=UTC).timestamp()  # already Jan 2 east of UTC
    await store.write_traces([make_trace(1, when=late)])
    (day,) = await store.traces.cost_by("day")
    assert day.key == "2026-01-01"


async def test_a_trace_with_a_lone_surrogate_is_stored_with_a_replacement_character(
    store: SQLStore,
) -> None:
    # The provider boundary cleans what models say; a trace is stored whatever it holds.
    trace = make_trace(1)
    trace.answer = "half an emoji: \ud83d"
    trace.tools = [ToolTrace("c1", "echo", {"text": "\udc00"}, "ok", False, 1.0, "run")]
    trace.outcome, trace.error = "error", "cut off after \ud800"
    (trace_id,) = await store.write_traces([trace])
    summary, body = await store.traces.get_trace(trace_id) or (None, {})
    assert summary is not None
    assert summary.error == "cut off after \ufffd"
    assert body["answer"] == "half an emoji: \ufffd"
    assert body["tools"][0]["arguments"] == {"text": "\ufffd"}


async def test_a_trace_stored_by_json_at_zlib_6_reads_back(store: SQLStore) -> None:
    # Rows written before msgspec: json's text (spaces, a NaN only json reads), level 6.
    (trace_id,) = await store.write_traces([make_trace(1)])
    body = {"answer": "old één", "cost": float("nan"), "calls": [], "tools": []}
    old = zlib.compress(json.dumps(body, ensure_ascii=False).encode("utf-8"), 6)
    async with store.db.begin() as conn:
        await conn.execute(
            "UPDATE traces SET body = :body WHERE id = :id", {"body": old, "id": trace_id}
        )
    _, read = await store.traces.get_trace(trace_id) or (None, {})
    assert read["answer"] == "old één"
    assert math.isnan(read["cost"])


async def test_a_trace_body_is_stored_as_compact_json(store: SQLStore) -> None:
    (trace_id,) = await store.write_traces([make_trace(1)])
    async with store.db.connect() as conn:
        packed = await conn.fetchval("SELECT body FROM traces WHERE id = :id", {"id": trace_id})
    text = zlib.decompress(packed).decode("utf-8")
    assert text.startswith('{"bot":"salon",')
    assert json.loads(text)["answer"] == "answer 1"
