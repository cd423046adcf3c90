"""Every activation leaves a trace: what it saw and sent, cost, cache diagnosis, tools."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from fakes.billing import CacheBilling
from fakes.llm_server import LLMServer, Scripted
from salon import trace_cli
from salon.agent.recording.traces import TraceWriter
from salon.app import BotApp
from salon.config import Price, Secrets, TracesConfig
from salon.errors import ProviderError
from salon.llm import FakeProvider, FakeReply
from salon.llm.factory import build_provider
from salon.model import Participant, ToolCall
from salon.platforms.memory import MemoryPlatform
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
SECRET = "sk-tr4ce-Qx81mZ"


@asynccontextmanager
async def running(app: BotApp, platform: MemoryPlatform) -> AsyncIterator[BotApp]:
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        try:
            yield app
        finally:
            await app.agent.wait_idle()
            stop.set()
            await asyncio.wait_for(serving, 15)


def make_app(tmp_path: Path, provider: Any, extra: Any = (), **config: Any) -> BotApp:
    cfg = bot_config(data_dir=str(tmp_path / "data"), **config)
    secrets = Secrets({"SOME_KEY": SECRET})
    return BotApp(
        key="salon",
        config=cfg,
        root=tmp_path,
        secrets=secrets,
        provider=provider,
        extra_servers=extra,
    )


async def ask(app: BotApp, platform: MemoryPlatform, text: str, n: int) -> None:
    await platform.post(platform.channel("dm", is_direct=True), ALICE, text)
    await platform.wait_sent(n)
    await app.agent.wait_idle()
    await app.traces.flush()


async def test_an_answer_leaves_a_trace_with_its_request_answer_cost_and_timings(
    tmp_path: Path,
) -> None:
    provider = FakeProvider([FakeReply(("Hello, Alice.",))])
    app = make_app(tmp_path, provider, model="claude-sonnet-5-5", system_prompt="Be brief.")
    platform = MemoryPlatform(bot_name="Salon")
    async with running(app, platform):
        await ask(app, platform, "hi there", 1)
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
    assert summary.outcome == "answered"
    assert summary.requester == "Alice"
    assert summary.model == "claude-sonnet-5-5"
    assert summary.cost == pytest.approx((10 * 2 + 5 * 10) / 1e6)  # 10 in, 5 out at Sonnet's
    assert body["triggers"][0]["text"] == "hi there"
    assert body["answer"] == "Hello, Alice."
    (call,) = body["calls"]
    assert call["request"]["system"] == "Be brief."
    assert call["request"]["messages"][-1]["content"][0]["text"] == "Alice: hi there"
    assert call["stop_reason"] == "end_turn"
    assert {"history", "render", "send", "total", "first_token"} <= set(body["timings"])


async def test_a_failure_is_traced_with_its_kind_and_its_secrets_redacted(tmp_path: Path) -> None:
    error = ProviderError(f"test: HTTP 401: bad key {SECRET}", status=401)
    app = make_app(tmp_path, FakeProvider([FakeReply(error=error)]))
    platform = MemoryPlatform(bot_name="Salon")
    async with running(app, platform):
        await ask(app, platform, "hi", 1)
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
    assert summary.outcome == "error"
    assert summary.error == "test: HTTP 401: bad key ***"
    assert body["error_kind"] == "provider"
    assert body["notes"] == ["⚠️ Salon could not answer: test: HTTP 401: bad key ***"]
    assert SECRET not in repr(body)


def wipe_server() -> MCPServer:
    server = MCPServer("danger")

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe(target: str) -> str:
        """Wipe something."""
        return f"wiped {target}, token {SECRET}"

    return server


async def test_a_tool_call_needing_approval_shows_who_approved_it(tmp_path: Path) -> None:
    asks = FakeReply(calls=(ToolCall("c1", "wipe", {"target": "logs"}),))
    app = make_app(tmp_path, FakeProvider([asks, "Done."]), [in_process(wipe_server(), "danger")])
    platform = MemoryPlatform(bot_name="Salon")
    async with running(app, platform):
        await platform.post(platform.channel("dm", is_direct=True), ALICE, "wipe the logs")
        await platform.wait_approvals(1)
        assert platform.click(0, ALICE, approve=True)
        await platform.wait_sent(1)
        await app.agent.wait_idle()
        await app.traces.flush()
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
    (tool,) = body["tools"]
    assert tool["name"] == "wipe"
    assert tool["verdict"] == "run"
    assert tool["approval"]["answer"] == "approved"
    assert tool["approval"]["by"] == "Alice"
    assert tool["result"] == "wiped logs, token ***"
    assert len(body["calls"]) == 2  # the call, then the answer with its result


Edit = Callable[[MemoryPlatform], None]


async def test_a_cache_break_names_its_cause_and_the_read_shares_sit_side_by_side(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    llm_server.billing = CacheBilling()
    providers = {
        "test": {
            "type": "anthropic",
            "model": "claude-sonnet-5-5",
            "base_url": llm_server.base_url,
            "api_key_env": "SOME_KEY",
            "backoff_initial": 0,
        }
    }
    config = bot_config(providers=providers)
    provider = build_provider(config, Secrets({"SOME_KEY": SECRET}))
    # No tools: the cached prefix is then the messages alone, which keeps the shares crisp.
    app = make_app(tmp_path, provider, providers=providers, builtin_tools=False)
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    for i in range(30):
        # Long enough that the prefix passes the model's minimum cacheable length.
        platform.add(dm, ALICE, f"an earlier message, number {i}, with more words in it " * 3)
    async with running(app, platform):
        await ask(app, platform, "first question", 1)
        await ask(app, platform, "second question", 2)
        old = platform.messages(dm)[3]
        platform.edit(old, "this one was edited since")
        await ask(app, platform, "third question", 3)
        traces = await app.store.traces.list_traces()
        bodies = [(await app.store.traces.get_trace(t.id) or (None, {}))[1] for t in traces]
    third, second, first = traces
    assert first.cache_break is None  # the first call of a channel breaks nothing
    assert second.cache_break is None  # new messages at the end
    assert second.expected_read_share is not None
    assert second.read_share == pytest.approx(second.expected_read_share, abs=0.1)
    assert third.cache_break == "edited message"
    divergence = bodies[0]["calls"][0]["divergence"]
    assert divergence == {
        "index": 3,
        "message_id": old.id,
        "cause": "edited message",
        "detail": "",
    }
    assert third.expected_read_share is not None
    assert third.expected_read_share < 0.2  # almost all of it had to be written again
    # The second call's write past the edit was never read: the third call shows it wasted.
    wasted = bodies[0]["calls"][0]["cache_write_wasted_tokens"]
    assert wasted > 0
    assert bodies[1]["calls"][0]["cache_write_wasted_tokens"] == 0  # the first write was read

    out = io.StringIO()
    await app.store.open()
    try:
        assert await trace_cli.show(app.store.traces, str(third.id), out=out) == 0
        shown = out.getvalue()
        out = io.StringIO()
        assert await trace_cli.list_traces(app.store.traces, out=out) == 0
        listed = out.getvalue()
        out = io.StringIO()
        assert await trace_cli.cost(app.store.traces, by="channel", out=out) == 0
        costs = out.getvalue().splitlines()
    finally:
        await app.store.close()
    assert f"prefix: edited message at message 3 ({old.id})" in shown
    # Each marker's lifetime as sent, and why cache_ttl: auto chose it.
    call = bodies[0]["calls"][0]
    assert call["cache_ttls"]
    assert all(m.endswith(" 5m") for m in call["cache_ttls"])
    assert call["cache_reason"].startswith("stable 5m, tail 5m: ")
    assert "the API's default" in call["cache_reason"]  # too few gaps seen yet
    assert f"cache ttl: {', '.join(call['cache_ttls'])} ({call['cache_reason']})" in shown
    assert "edited message" in listed.splitlines()[1]
    assert costs[0].split()[-1] == "WASTED"
    assert costs[1].split()[-1] == str(wasted)


async def test_a_secret_in_a_long_request_is_redacted_where_messages_are_encoded_once(
    tmp_path: Path,
) -> None:
    provider = FakeProvider([FakeReply(("One.",)), FakeReply(("Two.",))])
    app = make_app(tmp_path, provider)
    platform = MemoryPlatform(bot_name="Salon")
    room = platform.channel("dm", is_direct=True)
    for i in range(12):
        who = platform.self_participant if i % 2 else ALICE  # a turn each: none merged
        platform.add(room, who, f"line {i}" + (f" with {SECRET}" if i == 4 else ""))
    async with running(app, platform):
        await ask(app, platform, "first", 1)
        await ask(app, platform, "second", 2)  # the same messages, from the encoder's memory
        bodies = [
            (await app.store.traces.get_trace(s.id) or (None, {}))[1]
            for s in await app.store.traces.list_traces()
        ]
    for body in bodies:
        texts = [m["content"][0]["text"] for m in body["calls"][0]["request"]["messages"]]
        assert len(texts) >= 12
        assert SECRET not in repr(body)
        assert any(t.endswith("line 4 with ***") for t in texts)


def test_the_trace_writer_prices_with_the_prices_of_a_reloaded_config() -> None:
    writer = TraceWriter(store=None, settings=TracesConfig(), prices={})  # type: ignore[arg-type]
    assert writer._price("house-model") is None
    writer.prices = {"house-model": Price(input=1.0, output=2.0)}
    assert writer._price("house-model") == Price(input=1.0, output=2.0)


async def test_a_lone_surrogate_from_the_model_is_shown_logged_and_traced(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    from fakes import mcp_server

    broken = {"text": "half an emoji: \ud83d"}  # sent as the JSON escape "\ud83d"
    llm_server.queue(
        Scripted(tool_calls=[("call_1", "echo", broken)]),
        Scripted(chunks=["It said \udc00", " back."]),
    )
    providers = {
        "test": {
            "type": "openai",
            "model": "m",
            "base_url": llm_server.base_url + "/v1",
            "api_key_env": "SOME_KEY",
            "backoff_initial": 0,
        }
    }
    provider = build_provider(bot_config(providers=providers), Secrets({"SOME_KEY": SECRET}))
    app = make_app(tmp_path, provider, [in_process(mcp_server.build(), "kit")], providers=providers)
    platform = MemoryPlatform(bot_name="Salon")
    async with running(app, platform):
        await ask(app, platform, "say it back", 1)
        (summary,) = await app.store.traces.list_traces()
        _, body = await app.store.traces.get_trace(summary.id) or (None, {})
    assert [m.text for m in platform.sent] == ["It said \ufffd back."]
    (logged,) = (tmp_path / "data" / "tools").rglob("*.jsonl")
    (line,) = logged.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["call"]["arguments"] == {"text": "half an emoji: \ufffd"}
    assert summary.outcome == "answered"
    assert body["answer"] == "It said \ufffd back."
    assert body["tools"][0]["arguments"] == {"text": "half an emoji: \ufffd"}


def test_cache_markers_are_named_where_they_sit_in_any_body() -> None:
    from salon.agent.recording.traces import _cache_ttls

    marker = {"type": "ephemeral"}
    body = {
        "tools": [{"name": "a"}, {"name": "b", "cache_control": {**marker, "ttl": "1h"}}],
        "system": [{"type": "text", "text": "s", "cache_control": marker}],
        "messages": [
            {"role": "user", "content": "a plain string turn"},
            {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
            {"role": "user", "content": [{"type": "text", "text": "y", "cache_control": marker}]},
        ],
    }
    assert _cache_ttls(body) == ["tools.1 1h", "system.0 5m", "messages.2.content.0 5m"]
    assert _cache_ttls({"system": "a string", "messages": [{"content": "z"}]}) == []
