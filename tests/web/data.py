"""Traces for the web tests and the screenshots: answers, an error, a tool call approved by
a person, and a cache break caused by an edited message."""

from __future__ import annotations

import time

from salon.store.sql import SQLStore
from salon.trace import CallTrace, Divergence, ToolTrace, Trace

DAY = 86400.0


def _request(question: str, edited: bool = False) -> dict[str, object]:
    old = "the deploy is on friday" if not edited else "the deploy moved to monday"
    return {
        "model": "claude-sonnet-5-5",
        "system": [
            {
                "type": "text",
                "text": "You are Salon, a calm helper.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"Bob: {old}"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Carol: noted", "cache_control": {"type": "ephemeral"}}
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": f"Alice: {question}"}]},
        ],
        "stop_sequences": ["\nAlice:"],
    }


def llm_call(question: str, *, read: int, write: int, cost: float, **extra: object) -> CallTrace:
    return CallTrace(
        kind="answer",
        provider="anthropic",
        model="claude-sonnet-5-5",
        request=_request(question, edited=bool(extra.pop("edited", False))),
        started_at=time.time(),
        first_token_ms=620.0,
        total_ms=1400.0,
        input_tokens=40,
        output_tokens=25,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cost=cost,
        stop_reason="end_turn",
        **extra,  # type: ignore[arg-type]
    )


def activation(started: float, question: str, call: CallTrace, **extra: object) -> Trace:
    trace = Trace(
        bot="salon",
        platform="discord",
        channel="discord:1001",
        channel_name="#general",
        started_at=started,
        ended_at=started + 1.6,
        triggers=[{"id": f"m{int(started)}", "author": "Alice", "text": question, "link": None}],
        requester={"id": "alice", "name": "Alice"},
        layers=["shared.yaml", "bots/salon.yaml"],
        calls=[call],
        answer="Friday at ten, after the standup.",
        timings={"queue": 3.0, "history": 40.0, "render": 2.0, "first token": 620.0, "send": 90.0},
    )
    for key, value in extra.items():
        setattr(trace, key, value)
    return trace


def sample_traces(now: float | None = None) -> list[Trace]:
    now = time.time() if now is None else now
    traces = []
    for day in range(12, 0, -1):  # a history of cheap days
        call = llm_call(
            "what changed?",
            read=5000 + day * 40,
            write=300,
            cost=0.004 + day * 0.0007,
            expected_read_share=0.93,
        )
        traces.append(activation(now - day * DAY, "what changed?", call))
    kept = Divergence(index=3, message_id="m3", cause="new messages")
    traces.append(
        activation(
            now - 600,
            "when is the deploy?",
            llm_call(
                "when is the deploy?",
                read=5200,
                write=120,
                cost=0.0031,
                divergence=kept,
                expected_read_share=0.95,
            ),
        )
    )
    broken = Divergence(index=0, message_id="m-old-1", cause="edited message")
    traces.append(
        activation(
            now - 300,
            "and now?",
            llm_call(
                "and now?",
                read=0,
                write=5400,
                cost=0.0215,
                divergence=broken,
                edited=True,
                expected_read_share=0.02,
                flags=["cache write larger than expected: edited message"],
                cache_ttls=["system.0 1h", "messages.1.content.0 5m"],
                cache_write_wasted_tokens=1234,
                cache_reason="stable 1h, tail 5m: 6 gaps, 2 within 5m, 6 within 1h",
            ),
        )
    )
    tool = ToolTrace(
        "c1",
        "wipe",
        {"target": "logs"},
        "wiped logs",
        False,
        85.0,
        "run",
        approval={"answer": "approved", "by": "Alice", "at": "2026-11-23 03:00:00"},
    )
    traces.append(
        activation(
            now - 200,
            "wipe the logs",
            llm_call("wipe the logs", read=5300, write=90, cost=0.0029, expected_read_share=0.96),
            tools=[tool],
            answer="Done: the logs are wiped.",
        )
    )
    failed = llm_call("are you there?", read=0, write=0, cost=0.0, error="provider timed out")
    traces.append(
        activation(
            now - 100,
            "are you there?",
            failed,
            outcome="error",
            error="the provider did not answer in 60 s",
            error_kind="provider",
            answer="",
        )
    )
    return traces


async def write_sample(store: SQLStore, now: float | None = None) -> list[int]:
    return await store.write_traces(sample_traces(now))
