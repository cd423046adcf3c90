"""Each cause of a cache break or miss, as a call's trace names it, through the real path:
a bot on the loopback LLM server, billed by the vendor's billing fake."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from fakes.billing import AutoPrefixBilling, CacheBilling, ImplicitPrefixBilling
from fakes.llm_server import LLMServer, Scripted
from salon.agent.recording import recorder as recorder_module
from salon.agent.recording.diagnosis import CacheDiagnosis
from salon.app import BotApp
from salon.config import BotConfig, Secrets
from salon.config.channels import ChannelConfigs
from salon.context.records import record_id
from salon.llm import LLMRequest, ProviderTraits
from salon.llm.base import ChatMessage, TextPart, ToolDefinition, ToolResultPart, ToolUsePart
from salon.llm.factory import build_provider
from salon.model import ChannelRef, Message, Participant, ToolCall, ToolRecord, ToolResult
from salon.platforms.memory import MemoryPlatform
from salon.trace import CAUSES, CallTrace, Divergence, TraceSummary
from salon.web.pages import CAUSE_WORDS, _divergence, timeline_row
from tests.conftest import bot_config
from tests.tools.conftest import in_process

ALICE = Participant("alice", "Alice")
KEY = "sk-causes-0"
VENDORS = {
    "anthropic": ("anthropic", "claude-sonnet-5-5", CacheBilling),
    "openai": ("openai", "gpt-5.5", AutoPrefixBilling),
    "google": ("google", "gemini-2.5-flash", ImplicitPrefixBilling),
}


class Clock:
    """The billing fake's time and the traces' time, moved together by the test."""

    def __init__(self) -> None:
        self.offset = 0.0

    def wall(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset)

    def time(self) -> float:
        return time.time() + self.offset

    def pass_(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    fake_time = SimpleNamespace(time=moved.time, perf_counter=time.perf_counter)
    monkeypatch.setattr(recorder_module, "time", fake_time)
    return moved


def lookup_server() -> MCPServer:
    server = MCPServer("words")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(word: str) -> str:
        """Look a word up."""
        return f"{word}: a room where people meet to talk"

    return server


class Bot:
    """One bot in a direct-message channel, its provider on the loopback server."""

    def __init__(self, app: BotApp, platform: MemoryPlatform) -> None:
        self.app, self.platform = app, platform
        self.dm = platform.channel("dm", is_direct=True)
        self.sent = 0

    async def ask(self, text: str) -> None:
        self.sent += 1
        await self.platform.post(self.dm, ALICE, text)
        await self.platform.wait_sent(self.sent)
        await self.app.agent.wait_idle()
        await self.app.traces.flush()

    async def calls(self) -> list[dict[str, Any]]:
        """Every call of every stored trace, oldest first."""
        found: list[dict[str, Any]] = []
        for summary in reversed(await self.app.store.traces.list_traces()):
            _, body = await self.app.store.traces.get_trace(summary.id) or (None, {})
            found += body["calls"]
        return found

    async def last(self) -> dict[str, Any]:
        return (await self.calls())[-1]

    def reconfigure(self, **changes: Any) -> None:
        """A reloaded config, as the config watch hands it over."""
        data = {**self.app.config.model_dump(exclude_unset=True), **changes}
        config = BotConfig.model_validate(data)
        self.app.config = config
        self.app.channel_configs = ChannelConfigs(config)
        self.app.agent.reconfigure(config, self.app.channel_configs)


def vendor_config(vendor: str, server: LLMServer, **config: Any) -> dict[str, Any]:
    kind, model, _ = VENDORS[vendor]
    provider = {
        "type": kind,
        "model": model,
        "base_url": server.base_url,
        "api_key_env": "SOME_KEY",
        "backoff_initial": 0,
    }
    return {"providers": {"test": provider}, **config}


@asynccontextmanager
async def bot(
    tmp_path: Path,
    server: LLMServer,
    vendor: str = "anthropic",
    *,
    history: int = 30,
    words: int = 3,
    tools: bool = False,
    **config: Any,
) -> AsyncIterator[Bot]:
    """A running bot whose channel holds ``history`` messages of ``words`` sentences each."""
    settings = vendor_config(vendor, server, data_dir=str(tmp_path / "data"), **config)
    settings.setdefault("builtin_tools", False)
    cfg = bot_config(**settings)
    secrets = Secrets({"SOME_KEY": KEY})
    app = BotApp(
        key="salon",
        config=cfg,
        root=tmp_path,
        secrets=secrets,
        provider=build_provider(cfg, secrets),
        extra_servers=[in_process(lookup_server(), "words")] if tools else (),
    )
    platform = MemoryPlatform(bot_name="Salon")
    running = Bot(app, platform)
    for i in range(history):
        platform.add(
            running.dm, ALICE, f"an earlier message, number {i}, with more words. " * words
        )
    stop = asyncio.Event()
    async with app:
        serving = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        try:
            yield running
        finally:
            await app.agent.wait_idle()
            stop.set()
            await asyncio.wait_for(serving, 15)


def billed(server: LLMServer, vendor: str, clock: Clock | None = None) -> None:
    billing = VENDORS[vendor][2]
    server.billing = billing(clock=clock.wall) if clock is not None else billing()


def cause(call: dict[str, Any]) -> str:
    return str(call["divergence"]["cause"])


def billed_share(call: dict[str, Any]) -> float:
    prompt = call["input_tokens"] + call["cache_read_tokens"] + call["cache_write_tokens"]
    return float(call["cache_read_tokens"] / prompt)


Check = Callable[[dict[str, Any]], None]


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_a_past_tool_call_is_read_through_and_never_called_a_deleted_message(
    tmp_path: Path, llm_server: LLMServer, vendor: str
) -> None:
    billed(llm_server, vendor)
    llm_server.queue(
        Scripted(tool_calls=[("call_1", "lookup", {"word": "salon"})]), "A room.", "Yes."
    )
    async with bot(tmp_path, llm_server, vendor, tools=True) as running:
        await running.ask("what is a salon?")
        await running.ask("and is it nice?")
        _, follow_up, later = await running.calls()
    assert cause(follow_up) == "new messages"
    assert cause(later) == "new messages"  # the tool call is where it was: nothing broke
    assert later["expected_read_share"] > 0.9
    assert billed_share(later) == pytest.approx(later["expected_read_share"], abs=0.1)


async def test_words_before_a_text_protocol_call_are_read_through(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    billed(llm_server, "openai")
    written = 'Let me look.\n<function_calls>\n<invoke name="lookup">\n<parameter name="word">salon</parameter>\n</invoke>\n'
    llm_server.queue(written, "A room.", "Yes.")
    async with bot(tmp_path, llm_server, "openai", tools=True, tool_mode="text") as running:
        await running.ask("what is a salon?")
        await running.ask("and is it nice?")
        *_, later = await running.calls()
    assert cause(later) == "new messages"
    assert later["expected_read_share"] > 0.9
    assert billed_share(later) == pytest.approx(later["expected_read_share"], abs=0.1)


def unmarked(value: Any) -> Any:
    """A request body without its cache markers (no part of a prefix)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_words_before_a_tool_call_go_back_where_the_loop_sent_them(
    tmp_path: Path, llm_server: LLMServer, vendor: str
) -> None:
    """The model says something, then calls a tool, in one turn: every later request
    carries that turn as the loop's follow-up sent it, and the words once."""
    billed(llm_server, vendor)
    words = Scripted(
        text="Let me look that up.", tool_calls=[("call_1", "lookup", {"word": "salon"})]
    )
    llm_server.queue(words, "A room.", "Yes.")
    async with bot(tmp_path, llm_server, vendor, tools=True) as running:
        await running.ask("what is a salon?")
        await running.ask("and is it nice?")
        *_, later = await running.calls()
        shown = [m.text for m in running.platform.sent]
    assert shown == ["Let me look that up.", "A room.", "Yes."]  # the room sees them as before
    _, sent, again = (unmarked(r.body["messages"]) for r in llm_server.requests)
    assert again[: len(sent)] == sent
    assert json.dumps(again).count("Let me look that up.") == 1
    assert cause(later) == "new messages"
    assert later["expected_read_share"] > 0.9
    assert billed_share(later) == pytest.approx(later["expected_read_share"], abs=0.1)


@pytest.mark.parametrize(
    ("vendor", "history"), [("anthropic", 60), ("openai", 60), ("google", 120)]
)
async def test_the_expected_share_counts_only_a_prefix_the_vendor_caches(
    tmp_path: Path, llm_server: LLMServer, vendor: str, history: int
) -> None:
    billed(llm_server, vendor)
    async with bot(tmp_path, llm_server, vendor, history=history) as running:
        await running.ask("first question")
        await running.ask("second question")
        _, second = await running.calls()
    assert cause(second) == "new messages"
    assert second["expected_read_share"] > 0.9
    assert billed_share(second) == pytest.approx(second["expected_read_share"], abs=0.1)


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "google"])
async def test_a_prompt_below_the_vendors_minimum_is_expected_to_read_nothing(
    tmp_path: Path, llm_server: LLMServer, vendor: str
) -> None:
    """A 244-token prompt is never cached: 0 % expected, and no miss to explain."""
    billed(llm_server, vendor)
    async with bot(tmp_path, llm_server, vendor, history=8, words=1) as running:
        await running.ask("first question")
        await running.ask("second question")
        _, second = await running.calls()
    assert billed_share(second) == 0
    assert second["expected_read_share"] == 0
    assert cause(second) == "new messages"


async def test_a_deleted_message_is_named(tmp_path: Path, llm_server: LLMServer) -> None:
    billed(llm_server, "anthropic")
    async with bot(tmp_path, llm_server) as running:
        await running.ask("first question")
        gone = running.platform.messages(running.dm)[2]
        await running.platform.delete_message(running.dm, gone.id)
        await running.ask("second question")
        second = await running.last()
    assert second["divergence"] == {
        "index": 2,
        "message_id": "4",
        "cause": "deleted message",
        "detail": "",
    }
    assert second["expected_read_share"] < 0.2


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"system_prompt": "Be brief, and kind."}, "config change"),
        ({"model": "claude-sonnet-4-6"}, "model change"),
    ],
)
async def test_a_config_change_before_the_messages_is_named(
    tmp_path: Path, llm_server: LLMServer, change: dict[str, Any], expected: str
) -> None:
    billed(llm_server, "anthropic")
    async with bot(tmp_path, llm_server) as running:
        await running.ask("first question")
        running.reconfigure(**change)
        await running.ask("second question")
        second = await running.last()
    assert second["divergence"] == {
        "index": -1,
        "message_id": None,
        "cause": expected,
        "detail": "",
    }
    assert second["expected_read_share"] == 0


async def test_a_roll_is_named(tmp_path: Path, llm_server: LLMServer) -> None:
    billed(llm_server, "anthropic")
    async with bot(
        tmp_path, llm_server, recency_window_messages=20, rolling_threshold=4
    ) as running:
        for n in range(4):
            await running.ask(f"question {n}")
        causes = [cause(c) for c in await running.calls()]
    assert causes[0] == "first call"
    assert "roll" in causes
    assert set(causes[1:]) == {"new messages", "roll"}


@pytest.mark.parametrize(("vendor", "idle"), [("anthropic", 301), ("openai", 660)])
async def test_a_read_lost_to_the_caches_lifetime_is_named_expired(
    tmp_path: Path, llm_server: LLMServer, clock: Clock, vendor: str, idle: float
) -> None:
    billed(llm_server, vendor, clock)
    async with bot(tmp_path, llm_server, vendor, history=60) as running:
        await running.ask("first question")
        clock.pass_(idle)
        await running.ask("second question")
        second = await running.last()
    assert billed_share(second) == 0
    assert second["expected_read_share"] > 0.9
    found = second["divergence"]
    assert found["cause"] == "expired"
    lifetime = "5 min"
    assert f"past the cache's lifetime of {lifetime}" in found["detail"]
    assert found["detail"].startswith("read 0% against ")


async def test_a_read_nothing_in_the_prompt_explains_is_unexplained_and_says_what_differed(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    billed(llm_server, "anthropic")
    async with bot(tmp_path, llm_server) as running:
        await running.ask("first question")
        assert isinstance(llm_server.billing, CacheBilling)
        llm_server.billing.entries.clear()  # the vendor evicted it
        await running.ask("second question")
        second = await running.last()
    found = second["divergence"]
    assert found["cause"] == "unexplained"
    detail = found["detail"]
    assert "since the previous call, within the cache's lifetime of 5 min" in detail
    assert "the request as sent repeats the previous one's" in detail


# The causes a running bot is not easily brought to, on the diagnosis itself.
ROOM = ChannelRef("memory", "room")
WHEN = datetime(2026, 11, 23, tzinfo=UTC)


def chat(n: int) -> list[Message]:
    return [Message(f"m{i}", ROOM, ALICE, f"message {i} says something", WHEN) for i in range(n)]


def observe(
    diagnosis: CacheDiagnosis,
    messages: list[Message],
    *,
    tools: tuple[ToolDefinition, ...] = (),
    records: tuple[ToolRecord, ...] = (),
    turns: tuple[ChatMessage, ...] = (),
    sent: dict[str, Any] | None = None,
    read: int | None = None,
) -> CallTrace:
    """One call of an activation whose context is ``messages`` (and ``records``), its
    tool loop's ``turns`` after them; billed ``read`` of 1 000 prompt tokens (None: no
    usage reported)."""
    scene = SimpleNamespace(
        messages=tuple(messages),
        records=records,
        breakpoints=(),
        config=None,
        memory="",
        linked="",
        preamble="",
        cut=False,
    )
    first = LLMRequest(model="m", messages=(), system="be kind", tools=tools)
    request = replace(first, messages=turns)
    recorder = SimpleNamespace(scene=scene, calls=[SimpleNamespace(request=first)])
    pending = SimpleNamespace(request=request, provider=SimpleNamespace(traits=ProviderTraits()))
    call = CallTrace("answer", "p", "m", sent or {}, 1000.0, total_ms=10.0)
    if read is not None:
        call.input_tokens, call.cache_read_tokens = 1000 - read, read
    diagnosis.observe("room", recorder, pending, call)  # type: ignore[arg-type]
    return call


def found(call: CallTrace) -> str:
    assert call.divergence is not None
    return call.divergence.cause


def test_a_changed_tool_list_is_named() -> None:
    diagnosis = CacheDiagnosis()
    observe(diagnosis, chat(5))
    lookup = ToolDefinition("lookup", "Look a word up.", {"type": "object"})
    assert found(observe(diagnosis, chat(5), tools=(lookup,))) == "tool-list change"


def test_an_inserted_message_and_a_reordered_one_are_told_apart() -> None:
    diagnosis = CacheDiagnosis()
    before = chat(6)
    observe(diagnosis, before)
    late = Message("late", ROOM, ALICE, "an older message that arrived late", WHEN)
    inserted = observe(diagnosis, [*before[:3], late, *before[3:]])
    assert inserted.divergence == Divergence(3, "late", "inserted message")
    swapped = [*before[:3], before[4], late, before[3], *before[5:]]
    assert found(observe(diagnosis, swapped)) == "unknown"


def record(result: str) -> ToolRecord:
    call = ToolCall("call_1", "lookup", {"word": "salon"})
    return ToolRecord(WHEN, ROOM.key, "m4", call, ToolResult("call_1", result))


def loop_turns(past: ToolRecord, said: str = "") -> tuple[ChatMessage, ...]:
    """The tool loop's follow-up turns for ``past``, named by its record's id."""
    named = record_id(past)
    used = ToolUsePart(replace(past.call, id=named))
    parts = ((TextPart(said),) if said else ()) + (used,)
    answered = ToolResultPart(replace(past.result, call_id=named))
    return ChatMessage("assistant", parts), ChatMessage("user", (answered,))


def test_a_past_tool_call_sent_as_the_loop_sent_it_keeps_the_prefix() -> None:
    diagnosis = CacheDiagnosis()
    past = record("a room")
    observe(diagnosis, chat(5))
    observe(diagnosis, chat(5), turns=loop_turns(past))
    later = observe(diagnosis, chat(7), records=(past,))
    assert later.divergence == Divergence(6, "m5", "new messages")


def test_a_past_tool_call_with_the_words_the_loop_sent_before_it_keeps_the_prefix() -> None:
    """The words went out as a chat message too (m5): the request carries them once, on
    the call's turn, and the diagnosis counts them there."""
    diagnosis = CacheDiagnosis()
    past = replace(record("a room"), said="Let me look.", posted_as=("m5",))
    observe(diagnosis, chat(5))
    observe(diagnosis, chat(5), turns=loop_turns(past, "Let me look."))
    later = observe(diagnosis, chat(7), records=(past,))
    assert later.divergence == Divergence(7, "m6", "new messages")


@pytest.mark.parametrize(
    "how",
    [
        "another result",
        "the loop's words before the call",
        "other words before the call",
        "words the loop did not send",
        "left out",
    ],
)
def test_a_past_tool_call_sent_otherwise_than_the_loop_sent_it_is_named(how: str) -> None:
    diagnosis = CacheDiagnosis()
    past = record("a room")
    observe(diagnosis, chat(5))
    said = (
        "Let me look."
        if how in ("the loop's words before the call", "other words before the call")
        else ""
    )
    observe(diagnosis, chat(5), turns=loop_turns(past, said))
    if how == "other words before the call":
        past = replace(past, said="Let me see.")
    elif how == "words the loop did not send":
        past = replace(past, said="Let me look.")
    kept = () if how == "left out" else (record("a hall") if how == "another result" else past,)
    later = observe(diagnosis, chat(7), records=kept)
    assert later.divergence is not None
    assert later.divergence.cause == "tool call changed"
    assert later.divergence.index == 5


def test_an_unexplained_miss_says_where_the_request_as_sent_first_differs() -> None:
    diagnosis = CacheDiagnosis()
    system = [{"type": "text", "text": "be kind", "cache_control": {"type": "ephemeral"}}]
    first = {"model": "m", "system": system, "messages": [{"role": "user", "content": "hi"}]}
    observe(diagnosis, chat(5), sent=first, read=0)
    stamped = {**first, "messages": [{"role": "user", "content": "hi at 10:02"}]}
    call = observe(diagnosis, chat(6), sent={**stamped, "thinking": {"type": "on"}}, read=0)
    assert call.divergence is not None
    assert call.divergence.cause == "unexplained"
    detail = call.divergence.detail
    plain = [{"type": "text", "text": "be kind"}]  # cache markers are no part of a prefix
    at = len(json.dumps(plain, sort_keys=True)) + len('{"content": "hi')
    assert f"differs from the previous one at byte {at}, in message 0 (user)" in detail
    assert "its settings differ: thinking" in detail
    assert "lifetime not documented" in detail  # a provider Salon knows no lifetime of


def test_every_cause_has_words_on_the_activity_page() -> None:
    assert set(CAUSES) - {"first call", "new messages"} == set(CAUSE_WORDS)


def test_the_activity_page_names_a_miss_and_says_what_differed() -> None:
    summary = TraceSummary(
        1, "salon", "memory", "room", 0.0, 1.0, "answered", None, "Alice", None, "m",
        10, 5, 0, 0, 0.0, 0.0, 0.95, "expired", None, 1000.0,
    )  # fmt: skip
    row = timeline_row(summary)
    assert "cache miss: expired: the prompt was unchanged, but longer passed" in row
    detail = "read 0% against 95% expected: 6 min since the previous call, past the cache's"
    call = {"divergence": {"index": -1, "message_id": None, "cause": "expired", "detail": detail}}
    shown = f'<p class="cache-break">cache miss: expired · {escape(detail)}</p>'
    assert _divergence(call) == shown
