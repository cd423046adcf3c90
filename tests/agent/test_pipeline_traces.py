"""What the pipeline decided is in the trace; the loop breaker by rate."""

from __future__ import annotations

import io
from pathlib import Path

from salon import trace_cli
from salon.llm import FakeProvider, FakeReply
from salon.model import MessageEvent, Participant, Tag
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.trace import (
    EvaluatorStep,
    GateStep,
    KeywordStep,
    LimitRefusal,
    PipelineRecord,
)
from tests.agent.conftest import StartAgent
from tests.agent.test_traces import ALICE, make_app, running

BOB = Participant("bob", "Bob")
OTHER_BOT = Participant("b2", "Chatterbox", is_bot=True)


async def test_the_trace_records_what_the_evaluator_dropped(tmp_path: Path) -> None:
    provider = FakeProvider([FakeReply(('{"keep": [1]}',)), FakeReply(("Peppers like heat.",))])
    app = make_app(
        tmp_path,
        provider,
        prompt_caching=False,
        context_evaluator={"enabled": True, "min_depth": 1, "max_depth": 5},
    )
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    async with running(app, platform):
        football = platform.add(dm, BOB, "the football match was wild")
        await platform.post(dm, ALICE, "what about peppers?")
        await platform.wait_sent(1)
        await app.agent.wait_idle()
        await app.traces.flush()
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
        shown = io.StringIO()
        assert await trace_cli.show(app.store.traces, str(summary.id), out=shown) == 0
    assert f'pipeline: evaluator: {{"kept": 1, "dropped": ["{football.id}"]}}' in shown.getvalue()
    assert body["pipeline"]["evaluator"]["dropped"] == [football.id]
    assert [c["kind"] for c in body["calls"]] == ["evaluate", "answer"]
    assert "football" not in str(body["calls"][1]["request"])


async def test_the_trace_and_counter_show_the_gate_saying_no(tmp_path: Path) -> None:
    provider = FakeProvider([FakeReply(("no",))])
    app = make_app(tmp_path, provider, speak_gate={"enabled": True})
    platform = MemoryPlatform(bot_name="Salon")
    room = platform.channel("room")
    async with running(app, platform):
        message = platform.add(room, ALICE, "lovely day", tags=frozenset({Tag.MONITORED}))
        await app.agent.submit(MessageEvent(message))
        await app.agent.wait_idle()
        await app.traces.flush()
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
        assert app.agent.pipeline.gate_stats.no == 1
    assert summary.outcome == "stopped"
    assert body["pipeline"]["speak_gate"]["decision"] == "quiet"
    assert [c["kind"] for c in body["calls"]] == ["gate"]
    assert platform.sent == []


async def test_bots_writing_too_fast_pause_the_bot_and_it_says_so_once(
    start_agent: StartAgent, store: SQLStore
) -> None:
    provider = FakeProvider([], default="hello")
    agent, platform = await start_agent(
        provider, loop_breaker={"bot_messages_per_minute": 3, "pause": 600}
    )
    room = platform.channel("room")
    for number in range(4):  # four bot messages, each a run of its own
        platform.add(room, OTHER_BOT, f"beep {number}")
        platform.add(room, BOB, "ok")
    me = platform.self_participant
    await platform.post(room, ALICE, "@Salon hi", mentions=[me])
    await agent.wait_idle()
    await platform.post(room, ALICE, "@Salon hello?", mentions=[me])
    await agent.wait_idle()
    assert provider.requests == []
    (note,) = platform.sent
    assert "faster than 3 messages a minute" in note.text
    assert "pauses for 10 min" in note.text
    assert await store.limits.mark("salon", f"pause:{room.key}") is not None


async def test_reply_on_random_asks_the_gate_and_a_keyword_skips_it(
    start_agent: StartAgent,
) -> None:
    provider = FakeProvider([FakeReply(("no",))], default="hello")
    agent, platform = await start_agent(
        provider,
        reply_on_random=1,
        speak_gate={"enabled": True},
        keywords={"help": {}},
        limits={"user_rate": {"requests": 1}},
    )
    room = platform.channel("room")
    await platform.post(room, BOB, "just chatting")  # picked at random: the gate says no
    await agent.wait_idle()
    await platform.post(room, BOB, "!help")  # a keyword: no gate
    await agent.wait_idle()
    assert len(provider.requests) == 1  # only the gate's call
    assert platform.sent[0].text.startswith("Salon answers these keywords:")


def test_pipeline_steps_are_stored_as_the_steps_that_acted() -> None:
    """The typed record is stored in the shape traces always had, so stored traces and
    their readers (``salon trace show``, the activity page) need no change."""
    record = PipelineRecord(
        keyword=KeywordStep("weather", "get_weather"),
        refused=LimitRefusal("rate", "user:1", 12.5),
        speak_gate=GateStep("quiet", "no"),
        evaluator=EvaluatorStep(kept=3, dropped=("m1", "m2")),
        final_pass=True,
        final_pass_error="HTTP 500",
    )
    assert record.body() == {
        "keyword": {"word": "weather", "tool": "get_weather"},
        "refused": {"limit": "rate", "key": "user:1", "reset_at": 12.5},
        "speak_gate": {"decision": "quiet", "answer": "no"},
        "evaluator": {"kept": 3, "dropped": ["m1", "m2"]},
        "final_pass": "failed: HTTP 500",
    }
    assert PipelineRecord().body() == {}
    help_only = PipelineRecord(keyword=KeywordStep("help"), paused_until=7.0)
    assert help_only.body() == {"keyword": {"word": "help"}, "paused_until": 7.0}
