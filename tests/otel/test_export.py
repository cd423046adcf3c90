"""OpenTelemetry export against a loopback OTLP/HTTP receiver that decodes the protobuf."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

from fakes.llm_server import LLMServer, Scripted
from fakes.otlp import OtlpReceiver, ReceivedSpan
from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.agent.recording.traces import TraceWriter
from salon.config import Redactor, Secrets
from salon.config.observability import OtelConfig
from salon.errors import ProviderError
from salon.llm.factory import build_provider
from salon.llm.fake import FakeProvider, FakeReply
from salon.model import MessageEvent, Participant, ToolCall, Usage
from salon.otel.export import OtelExport
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from salon.tools.hub import ToolHub
from salon.tools.log import ToolLog
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
SECRET = "sk-otel-7f6e5d"


class Rig:
    def __init__(self, agent: Agent, platform: MemoryPlatform, writer: TraceWriter) -> None:
        self.agent, self.platform, self.writer = agent, platform, writer
        self.export: OtelExport = writer.sink  # type: ignore[assignment]

    async def ask(self, text: str, *, traceparent: str = "") -> None:
        room = self.platform.channel("general")
        message = self.platform.add(room, ALICE, text, mentions=[self.platform.self_participant])
        await self.agent.submit(MessageEvent(message, traceparent=traceparent))
        await self.agent.wait_idle()
        await self.writer.flush()
        assert await asyncio.to_thread(self.export.flush, 10)


Make = Callable[..., Any]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Make]:
    stack: list[Any] = []

    async def make(
        provider: Any,
        receiver: OtlpReceiver,
        *,
        tools: ToolHub | None = None,
        otel: dict[str, Any] | None = None,
        **config: Any,
    ) -> Rig:
        store = SQLStore(sqlite_url(tmp_path / f"salon{len(stack)}.db"))
        await store.open()
        stack.append(store)
        cfg = bot_config(**config)
        settings = OtelConfig.model_validate(
            {"endpoint": receiver.endpoint, "metrics_interval": 3600, **(otel or {})}
        )
        export = OtelExport(
            settings,
            bot="salon",
            provider_types={"test": "openai", provider.name: "openai"},
            env={},
            redact=Redactor(frozenset({SECRET})),
        )
        stack.append(export)
        writer = TraceWriter(store=store, settings=cfg.traces, prices=cfg.prices, sink=export)
        runner = None
        if tools is not None:
            log = ToolLog(tmp_path / "tools", "salon")
            runner = ToolRunner(bot="salon", config=cfg, tools=tools, store=store, log=log)
        platform = MemoryPlatform(bot_name="Salon")
        agent = Agent(
            bot="salon",
            config=cfg,
            provider=provider,
            platforms={"memory": platform},
            store=store,
            tools=runner,
            traces=writer,
        )
        await platform.start(agent.submit)
        stack.append(asyncio.create_task(agent.run()))
        stack.append(asyncio.create_task(writer.run()))
        return Rig(agent, platform, writer)

    yield make
    for item in reversed(stack):
        if isinstance(item, asyncio.Task):
            item.cancel()
            await asyncio.gather(item, return_exceptions=True)
        elif isinstance(item, OtelExport):
            await asyncio.to_thread(item.shutdown, 2)
        else:
            await item.close()


@asynccontextmanager
async def receiving() -> AsyncIterator[OtlpReceiver]:
    async with OtlpReceiver() as receiver:
        yield receiver


def by_name(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_a_chat_activation_is_one_trace_with_genai_spans(rig: Make) -> None:
    provider = FakeProvider(
        [FakeReply(("Paris.",), usage=Usage(40, 6, cache_read_tokens=100, cache_write_tokens=8))]
    )
    async with receiving() as receiver:
        bot = await rig(provider, receiver)
        await bot.ask("@Salon capital of France?")
        await receiver.wait_for(lambda r: by_name(r.spans, "chat "))
    spans = receiver.spans
    assert len({s.trace_id for s in spans}) == 1
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "invoke_agent salon"
    assert root.kind == 1  # SPAN_KIND_INTERNAL
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "salon"
    assert root.attributes["gen_ai.conversation.id"] == "memory:general"
    assert root.resource["service.name"] == "salon-salon"
    (chat,) = by_name(spans, "chat ")
    assert chat.name == "chat test-model"
    assert chat.kind == 3  # SPAN_KIND_CLIENT
    ids = {s.span_id for s in spans}
    assert chat.parent_span_id in ids
    attributes = chat.attributes
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "test-model"
    assert attributes["gen_ai.usage.input_tokens"] == 148  # cache reads and writes included
    assert attributes["gen_ai.usage.output_tokens"] == 6
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 8
    assert attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert attributes["salon.cache.break_cause"] == "first call"
    # Content is off by default: no message text on any span.
    assert not any("France" in str(v) for s in spans for v in s.attributes.values())
    phases = {s.name for s in spans if s.parent_span_id == root.span_id}
    assert {"salon.history", "salon.render", "salon.send"} <= phases
    for span in spans:  # children lie within the root
        assert root.start_ns <= span.start_ns <= span.end_ns <= root.end_ns + 5_000_000


async def test_content_is_exported_only_when_asked_and_redacted(rig: Make) -> None:
    provider = FakeProvider([f"The key is {SECRET}, and Paris."])
    async with receiving() as receiver:
        bot = await rig(provider, receiver, otel={"capture_content": True})
        await bot.ask(f"@Salon say {SECRET} back")
        await receiver.wait_for(lambda r: by_name(r.spans, "chat "))
    (chat,) = by_name(receiver.spans, "chat ")
    (root,) = by_name(receiver.spans, "invoke_agent")
    assert "say" in chat.attributes["gen_ai.input.messages"]
    assert "Paris" in root.attributes["gen_ai.output.messages"]
    assert not any(SECRET in str(v) for s in receiver.spans for v in s.attributes.values())


def _kit(seen: list[str] | None = None) -> MCPServer:
    server = MCPServer("kit")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(word: str, ctx: Context) -> str:
        """Look a word up."""
        meta = ctx.request_context.meta or {}
        if seen is not None:
            seen.append(str(meta.get("traceparent", "")))
        return f"{word} means something"

    return server


async def test_a_tool_loop_has_execute_tool_spans_under_the_tools_phase(rig: Make) -> None:
    hub = ToolHub([in_process(_kit())])
    await hub.start()
    try:
        replies = [
            FakeReply(("Checking.",), calls=(ToolCall("c1", "lookup", {"word": "salon"}),)),
            "It means a room.",
        ]
        async with receiving() as receiver:
            bot = await rig(FakeProvider(replies), receiver, tools=hub)
            await bot.ask("@Salon what is a salon?")
            await receiver.wait_for(lambda r: by_name(r.spans, "execute_tool"))
    finally:
        await hub.stop()
    spans = receiver.spans
    (tool,) = by_name(spans, "execute_tool ")
    assert tool.name == "execute_tool lookup"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.attributes["salon.tool.verdict"] == "run"
    (phase,) = [s for s in spans if s.span_id == tool.parent_span_id]
    assert phase.name == "salon.tools"
    assert len(by_name(spans, "chat ")) == 2


async def test_a_failed_call_is_an_error_span(rig: Make) -> None:
    failure = ProviderError("test: 500 the server broke", provider="test", status=500)
    provider = FakeProvider([FakeReply(error=failure)] * 4)
    async with receiving() as receiver:
        bot = await rig(provider, receiver, error_replies=False)
        await bot.ask("@Salon hello?")
        await receiver.wait_for(lambda r: by_name(r.spans, "invoke_agent"))
    (root,) = by_name(receiver.spans, "invoke_agent")
    assert root.status_code == 2  # STATUS_CODE_ERROR
    assert root.attributes["error.type"] == "provider"
    assert root.attributes["salon.outcome"] == "error"
    chats = by_name(receiver.spans, "chat ")
    assert chats
    assert all(c.status_code == 2 for c in chats)


async def test_metrics_agree_with_the_stored_totals(rig: Make) -> None:
    provider = FakeProvider(
        [
            FakeReply(("one",), usage=Usage(30, 5, cache_read_tokens=70)),
            FakeReply(("two",), usage=Usage(12, 9, cache_write_tokens=40)),
        ]
    )
    async with receiving() as receiver:
        bot = await rig(provider, receiver)
        await bot.ask("@Salon first")
        await bot.ask("@Salon second")
        await asyncio.to_thread(bot.export.flush, 10)
        await receiver.wait_for(lambda r: r.metric_points("gen_ai.client.token.usage"))
    totals = await bot.writer.store.traces.trace_metrics()
    stored: dict[str, float] = {"input": 0.0, "output": 0.0}
    for _bot, _outcome, _count, tin, tout, tread, twrite, _cost, _wasted in totals["outcomes"]:
        stored["input"] += tin + tread + twrite
        stored["output"] += tout
    exported: dict[str, float] = {}
    for point in receiver.metric_points("gen_ai.client.token.usage"):
        kind = next(a.value.string_value for a in point.attributes if a.key == "gen_ai.token.type")
        exported[kind] = exported.get(kind, 0.0) + point.sum
    assert exported == stored == {"input": 152.0, "output": 14.0}
    durations = receiver.metric_points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == 2


async def test_the_provider_request_carries_the_traceparent_of_its_span(
    rig: Make, llm_server: LLMServer
) -> None:
    llm_server.queue(Scripted(text="Hello."))
    config = bot_config(
        providers={"test": {"type": "openai", "model": "m", "base_url": llm_server.base_url}}
    )
    provider = build_provider(config, Secrets({}))
    try:
        async with receiving() as receiver:
            bot = await rig(provider, receiver, providers=config.model_dump()["providers"])
            await bot.ask("@Salon hi")
            await receiver.wait_for(lambda r: by_name(r.spans, "chat "))
    finally:
        await provider.aclose()
    header = llm_server.requests[0].headers["traceparent"]
    version, trace_id, span_id, flags = header.split("-")
    (chat,) = by_name(receiver.spans, "chat ")
    assert (version, trace_id, span_id, flags) == ("00", chat.trace_id, chat.span_id, "01")


async def test_an_event_with_a_traceparent_continues_its_trace(rig: Make) -> None:
    upstream_trace, upstream_span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    async with receiving() as receiver:
        bot = await rig(FakeProvider(["ok"]), receiver)
        await bot.ask("@Salon deploy done", traceparent=f"00-{upstream_trace}-{upstream_span}-01")
        await receiver.wait_for(lambda r: by_name(r.spans, "invoke_agent"))
    (root,) = by_name(receiver.spans, "invoke_agent")
    assert root.trace_id == upstream_trace
    assert root.parent_span_id == upstream_span
    assert {s.trace_id for s in receiver.spans} == {upstream_trace}


async def test_an_unsampled_upstream_trace_is_not_exported(rig: Make) -> None:
    async with receiving() as receiver:
        bot = await rig(FakeProvider(["ok", "again"]), receiver)
        await bot.ask("@Salon quiet", traceparent=f"00-{'ab' * 16}-{'cd' * 8}-00")
        await bot.ask("@Salon loud")
        await receiver.wait_for(lambda r: by_name(r.spans, "invoke_agent"))
    assert {s.trace_id for s in receiver.spans} != {"ab" * 16}
    assert len(by_name(receiver.spans, "invoke_agent")) == 1


async def test_a_collector_that_hangs_never_delays_an_answer(rig: Make) -> None:
    """While the collector holds the first export (for up to 300 s), every answer still
    goes out; spans past the queue's bound are dropped and counted."""
    async with receiving() as receiver:
        receiver.mode = "hang"
        bot = await rig(
            FakeProvider(default="fine"),
            receiver,
            otel={"queue_size": 5, "export_timeout": 300, "metrics": False},
        )
        room, me = bot.platform.channel("general"), bot.platform.self_participant
        await bot.platform.post(room, ALICE, "@Salon first", mentions=[me])
        await bot.agent.wait_idle()
        await bot.writer.flush()
        # Its spans go out, and the collector keeps the request open.
        await receiver.wait_for(lambda r: r.requests >= 1)
        for i in range(6):
            await bot.platform.post(room, ALICE, f"@Salon {i}", mentions=[me])
            await bot.agent.wait_idle()
        await bot.writer.flush()
        assert [m.text for m in bot.platform.sent] == ["fine"] * 7
        assert receiver.requests == 1  # the export is still waiting on the collector
        assert bot.export.dropped > 0
        assert bot.export.task_state().counts["dropped"] == bot.export.dropped


async def test_a_collector_answering_500_counts_its_spans_as_dropped(rig: Make) -> None:
    async with receiving() as receiver:
        receiver.mode = "error"
        bot = await rig(FakeProvider(["ok"]), receiver, otel={"metrics": False})
        await bot.ask("@Salon hi")
        assert bot.platform.sent[-1].text == "ok"
    assert receiver.requests >= 1
    assert bot.export.exported == 0
    assert bot.export.dropped >= 4  # the root and its phases and call


async def test_an_mcp_server_gets_the_tool_calls_trace_context_in_meta(rig: Make) -> None:
    """As the MCP conventions propagate it: ``params._meta.traceparent`` naming the call's
    ``execute_tool`` span, so a traced server's spans join the activation's trace."""
    seen: list[str] = []
    hub = ToolHub([in_process(_kit(seen))])
    await hub.start()
    try:
        replies = [
            FakeReply((), calls=(ToolCall("c1", "lookup", {"word": "salon"}),)),
            "It means a room.",
        ]
        async with receiving() as receiver:
            bot = await rig(FakeProvider(replies), receiver, tools=hub)
            await bot.ask("@Salon what is a salon?")
            await receiver.wait_for(lambda r: by_name(r.spans, "execute_tool"))
    finally:
        await hub.stop()
    (tool,) = by_name(receiver.spans, "execute_tool ")
    assert seen == [f"00-{tool.trace_id}-{tool.span_id}-01"]


async def test_a_cache_alarm_is_an_event_on_the_span_of_the_activation_it_began_in(
    rig: Make,
) -> None:
    warm = Usage(100, 5, cache_read_tokens=900)
    cold = Usage(100, 5, cache_write_tokens=900)  # nothing read: the prefix broke
    replies = [FakeReply((f"a{i}",), usage=warm if i < 3 else cold) for i in range(5)]
    async with receiving() as receiver:
        bot = await rig(
            FakeProvider(replies),
            receiver,
            traces={"cache_alarm": {"answers": 2, "baseline_answers": 3}},
        )
        for i in range(5):
            await bot.ask(f"@Salon question {i}?")
        await receiver.wait_for(lambda r: len(by_name(r.spans, "invoke_agent")) == 5)
    roots = sorted(by_name(receiver.spans, "invoke_agent"), key=lambda s: s.start_ns)
    assert [bool(s.events) for s in roots] == [False, False, False, False, True]
    ((name, attributes),) = roots[-1].events
    assert name == "salon.cache_alarm"
    assert attributes["salon.cache_alarm.state"] == "began"
    assert attributes["salon.cache_alarm.read_share"] == 0.0
    assert attributes["salon.cache_alarm.baseline_read_share"] == 0.9
