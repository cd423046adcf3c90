"""From a recorder's notes to a stored trace: requests as sent, cost, cache diagnosis.

``TraceWriter`` takes finished recorders from a bounded queue (an answer never waits for
its trace; under extreme load the oldest waiting traces are dropped, counted and logged),
builds each ``Trace`` and writes them in batches. ``CacheDiagnosis`` compares every call
with the previous call in the same channel, message by message:

- where the two first differ: the index and id of that message, and why, as far as Salon
  knows it: ``roll`` (the context was cut back this time), ``config change``, ``memory
  change`` and ``linked change`` (the memory or linked block before the history), ``edited
  message``, ``deleted message``, ``tool-list change``, ``model change`` (``thinking
  dropped`` when the request carries the old model's thoughts, which the provider leaves
  out for the new one); ``new messages``
  when the previous request is a prefix of this one (nothing broken);
- the expected read share: the part of this request the provider could read from its cache
  (up to the divergence, and for providers with cache markers up to the last marker
  before it), by characters, beside the share the provider billed;
- a cache write well above what arrived since the previous call is flagged with the cause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, attrgetter
from typing import Any

from salon.agent.recording.alarm import CacheWatch, SpanEvent
from salon.agent.recording.export import TraceSink, finished
from salon.agent.recording.recorder import PendingCall, Recorder
from salon.config import BotConfig, Price, TracesConfig
from salon.config.prices import call_cost, price_for
from salon.llm.base import LLMRequest, ThinkingPart, cache_reason, request_as_sent
from salon.llm.cache_plan import WriteWatch
from salon.model import Message
from salon.store.base import Store
from salon.trace import CallTrace, Divergence, Trace

__all__ = ["CacheDiagnosis", "TraceWriter"]

logger = logging.getLogger(__name__)

_BATCH = 50
_CHANNELS = 4096  # channels whose previous call is remembered for the diagnosis
_MESSAGES = 200_000  # messages those calls may hold between them (as the views do)
DIAGNOSIS_BYTES = 64 * 1024 * 1024  # their estimated memory (as the views' CACHE_BYTES)
_ENTRY_BYTES = 128  # per entry besides its text: its id, hash and size (the message is shared)
_MODELS = 256  # models whose price is remembered
_PRUNE_EVERY = 600.0  # seconds
# The pipeline's calls and the memory digest: prompts of their own.
_SIDE_CALLS = frozenset({"evaluate", "gate", "digest"})
_CHARS_PER_TOKEN = 4  # for telling a large cache write: rough, as tokenizers differ
_WRITE_SLACK = 512  # tokens a cache write may exceed its estimate by before it is flagged
_THINKING_CHARS = 100_000  # of a call's reasoning kept in its trace
_SLIDE = 64  # how far a window may have slid for the previous call's entries to be reused


@dataclass(frozen=True, slots=True)
class _Seen:
    """What a call's request was made of, entry by entry (context messages, then turns the
    tool loop or the planner added)."""

    model: str
    system: int
    tools: int
    config: BotConfig | None
    messages: tuple[Message, ...]  # the scene's: the first entries are theirs
    ids: tuple[str | None, ...]
    hashes: tuple[int, ...]
    sizes: tuple[int, ...]
    marks: frozenset[int]  # entries that end a cache block
    fixed: int  # characters before the messages: system prompt, tools, preamble blocks
    memory: int = 0  # the memory block's hash (salon.agent.memoryblock)
    linked: int = 0  # the linked block's
    dropped: bool = False  # it carries thoughts of another model, which are not sent


class CacheDiagnosis:
    """The previous call of each recent channel, bounded by channels and by the messages
    their calls hold between them (each holds its scene's message objects)."""

    def __init__(
        self,
        max_channels: int = _CHANNELS,
        max_messages: int = _MESSAGES,
        max_bytes: int = DIAGNOSIS_BYTES,
    ) -> None:
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._max = max_channels
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self.messages_held = 0
        self.nbytes = 0  # the estimate of what the calls hold: see _weight

    @property
    def channels(self) -> list[str]:
        """The channels remembered, least recent first."""
        return list(self._seen)

    def observe(
        self, channel: str, recorder: Recorder, pending: PendingCall, call: CallTrace
    ) -> None:
        """Fill in the call's divergence, expected read share and flags."""
        scene = recorder.scene
        if scene is None:
            return
        previous = self._seen.get(channel)
        seen = _fingerprint(recorder, pending, previous)
        markers = pending.provider.traits.cache_markers
        divergence, readable = _compare(previous, seen, cut=scene.cut, markers=markers)
        call.divergence = divergence
        total = seen.fixed + sum(seen.sizes)
        if previous is not None and total:
            call.expected_read_share = readable / total
            _flag_large_write(call, seen, readable, markers)
        self._remember(channel, seen)

    def _remember(self, channel: str, seen: _Seen) -> None:
        if (replaced := self._seen.pop(channel, None)) is not None:
            self._forget(replaced)
        self._seen[channel] = seen
        self.messages_held += len(seen.ids)
        self.nbytes += _weight(seen)
        while len(self._seen) > 1 and (
            len(self._seen) > self._max
            or self.messages_held > self._max_messages
            or self.nbytes > self._max_bytes
        ):
            self._forget(self._seen.popitem(last=False)[1])

    def _forget(self, seen: _Seen) -> None:
        self.messages_held -= len(seen.ids)
        self.nbytes -= _weight(seen)


def _weight(seen: _Seen) -> int:
    """An estimate of the memory a call's entries hold: each entry, and the texts of its
    messages (kept alive while the entry is)."""
    return len(seen.ids) * _ENTRY_BYTES + sum(seen.sizes)


_ID, _TEXT, _AUTHOR, _NAME = (attrgetter(n) for n in ("id", "text", "author", "name"))


def _fingerprint(recorder: Recorder, pending: PendingCall, previous: _Seen | None) -> _Seen:
    scene = recorder.scene
    assert scene is not None
    request = pending.request
    messages = scene.messages
    start, count = _reusable(previous, messages)
    ids: list[str | None] = []
    hashes: list[int] = []
    sizes: list[int] = []
    if previous is not None and count:  # the same message objects: the same entries
        ids += previous.ids[start : start + count]
        hashes += previous.hashes[start : start + count]
        sizes += previous.sizes[start : start + count]
    # Walked with map() in C: a Python loop over a long chat was most of a trace's cost.
    new = messages[count:]
    ids += map(_ID, new)
    texts = list(map(_TEXT, new))
    authors = list(map(_AUTHOR, new))
    hashes += map(hash, zip(texts, map(_ID, authors), strict=True))
    names = map(len, map(_NAME, authors))
    sizes += map(add, map(len, texts), map(add, names, repeat(2)))
    first = recorder.calls[0].request if recorder.calls else request
    for turn in request.messages[len(first.messages) :]:  # tool turns, a planning turn
        ids.append(None)
        hashes.append(hash((turn.role, turn.plain_text)))
        sizes.append(len(turn.plain_text))
    marks = frozenset(_positions(ids, scene.breakpoints))
    schemas = [repr(t.input_schema) for t in request.tools]  # once each: dicts to walk
    tools = hash(tuple(zip((t.name for t in request.tools), schemas, strict=True)))
    tools_size = sum(len(t.name) + len(t.description) for t in request.tools)
    tools_size += sum(map(len, schemas))
    return _Seen(
        model=request.model,
        system=hash(request.system),
        tools=hash((tools, request.tool_listing)),
        config=scene.config,
        messages=messages,
        ids=tuple(ids),
        hashes=tuple(hashes),
        sizes=tuple(sizes),
        marks=marks,
        fixed=len(request.system) + tools_size + len(request.tool_listing) + len(scene.preamble),
        memory=hash(scene.memory),
        linked=hash(scene.linked),
        dropped=previous is not None and previous.model != request.model and _foreign(request),
    )


def _foreign(request: LLMRequest) -> bool:
    """Whether ``request`` carries thoughts another model wrote (asked on a model change)."""
    return any(
        isinstance(part, ThinkingPart) and part.thought.model != request.model
        for message in request.messages
        for part in message.parts
    )


def _reusable(previous: _Seen | None, messages: tuple[Message, ...]) -> tuple[int, int]:
    """(where, how many): ``messages`` starts with that many of the previous call's scene
    messages, from that index on (a window slides: the oldest go). The previous entries
    for them hold, as a message object never changes. (0, 0) when nothing is reusable."""
    if previous is None or not messages or not previous.messages:
        return 0, 0
    old = previous.messages
    try:  # ids compare in C; an edit or a roll makes the check below fail
        start = previous.ids.index(messages[0].id, 0, min(len(old), _SLIDE))
    except ValueError:
        return 0, 0
    count = min(len(old) - start, len(messages))
    # Tuples compare item by item, identity first: the same objects cost no __eq__.
    if messages[:count] != old[start : start + count]:
        return 0, 0
    return start, count


def _positions(ids: list[str | None], wanted: Iterable[str]) -> Iterator[int]:
    for message_id in wanted:
        try:
            yield ids.index(message_id)
        except ValueError:
            continue


def _compare(
    previous: _Seen | None, seen: _Seen, *, cut: bool, markers: bool
) -> tuple[Divergence, int]:
    """Where ``seen`` first differs from ``previous``, why, and how many of its characters
    the provider could read from its cache."""
    if previous is None:
        return Divergence(-1, None, "first call"), 0
    for changed, cause in (
        (previous.model != seen.model, "thinking dropped" if seen.dropped else "model change"),
        (previous.tools != seen.tools, "tool-list change"),
        (previous.system != seen.system, "config change"),
        (previous.linked != seen.linked, "linked change"),
        (previous.memory != seen.memory, "memory change"),
    ):
        if changed:
            return Divergence(-1, None, cause), 0
    index = _first_difference(previous, seen)
    cause = _cause(previous, seen, index, cut=cut)
    upto = index
    if markers:  # the cache holds prefixes that end at a marker of the previous request
        marked = [m + 1 for m in previous.marks if m < index]
        upto = max(marked, default=0)
    message_id = seen.ids[index] if index < len(seen.ids) else None
    return Divergence(index, message_id, cause), previous.fixed + sum(seen.sizes[:upto])


def _first_difference(previous: _Seen, seen: _Seen) -> int:
    common = min(len(previous.hashes), len(seen.hashes))
    if previous.hashes[:common] == seen.hashes[:common] and (
        previous.ids[:common] == seen.ids[:common]
    ):  # the usual case, compared in C
        return common
    for index, (a, b) in enumerate(zip(previous.hashes, seen.hashes, strict=False)):
        if a != b or previous.ids[index] != seen.ids[index]:
            return index
    return min(len(previous.hashes), len(seen.hashes))


def _cause(previous: _Seen, seen: _Seen, index: int, *, cut: bool) -> str:
    if index >= len(previous.ids):
        return "new messages"  # the previous request is a prefix of this one
    if cut:
        return "roll"
    if previous.config is not seen.config and previous.config != seen.config:
        return "config change"
    if index < len(seen.ids) and previous.ids[index] == seen.ids[index]:
        return "edited message"
    if previous.ids[index] not in set(seen.ids):
        return "deleted message"
    return "unknown"


def _flag_large_write(call: CallTrace, seen: _Seen, readable: int, markers: bool) -> None:
    """A cache write much larger than what is new since the cached prefix."""
    if not markers or not call.cache_write_tokens or not seen.marks:
        return
    written = seen.fixed + sum(seen.sizes[: max(seen.marks) + 1]) - readable
    expected = max(written, 0) // _CHARS_PER_TOKEN
    if call.cache_write_tokens > expected * 1.5 + _WRITE_SLACK:
        cause = call.divergence.cause if call.divergence else "unknown"
        call.flags.append(
            f"cache write of {call.cache_write_tokens} tokens, about {expected} expected ({cause})"
        )


class TraceWriter:
    """Builds and stores traces in the background; ``submit`` never waits."""

    def __init__(
        self,
        *,
        store: Store,
        settings: TracesConfig,
        prices: Mapping[str, Price],
        queue_size: int = 1000,
        sink: TraceSink | None = None,
    ) -> None:
        """``sink``: where each finished activation is exported as well (OpenTelemetry),
        stored or not (``settings.enabled``)."""
        self.store = store
        self.settings = settings
        self.sink = sink
        self._price_of: OrderedDict[str, Price | None] = OrderedDict()  # by model name
        self.prices = dict(prices)
        self.diagnosis = CacheDiagnosis()
        self.waste = WriteWatch()  # cache writes the channel's next call left unread
        self.alarms = CacheWatch()  # each channel's cache read share and cost per answer
        self._queue: asyncio.Queue[Recorder] = asyncio.Queue(maxsize=queue_size)
        self.dropped = 0
        self.written = 0

    def begin(self, recorder: Recorder) -> None:
        """At an activation's start: give it a trace context when its calls carry one
        (``trace_id``/``parent_span_id``: an inbound event's ``traceparent``, if any)."""
        sink = self.sink
        if sink is None or not sink.traceparent:
            return
        trace_id, parent, sampled = recorder.inbound_context()
        recorder.start_trace(trace_id, parent)
        recorder.sampled = sampled if trace_id else sink.sampled(recorder.trace_id)

    def submit(self, recorder: Recorder) -> None:
        if not self.settings.enabled and self.sink is None:
            return
        if self._queue.full():  # the oldest goes: the newest is what an operator looks for
            self._queue.get_nowait()
            self._queue.task_done()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                logger.warning("traces are written slower than they come: %d dropped", self.dropped)
        self._queue.put_nowait(recorder)

    async def run(self) -> None:
        """Write traces as they come, in batches (supervised by the app)."""
        while True:
            batch = [await self._queue.get()]
            while len(batch) < _BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                await self._write(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def flush(self) -> None:
        """Return once every submitted trace is written (or failed and was logged)."""
        await self._queue.join()

    async def _write(self, batch: Sequence[Recorder]) -> None:
        traces = [self.build(recorder) for recorder in batch]
        events = [self._alarm(trace) for trace in traces]
        if self.sink is not None:
            for recorder, trace, event in zip(batch, traces, events, strict=True):
                self._export(self.sink, recorder, trace, event)
        if not self.settings.enabled:
            return
        await self.store.write_traces(traces)
        self.written += len(traces)

    def _alarm(self, trace: Trace) -> SpanEvent | None:
        """The cache alarm's event for the activation's span; its failure is logged, never
        the writer's."""
        try:
            return self.alarms.observe(trace, self.settings.cache_alarm)
        except Exception:
            logger.exception("the cache alarm failed on the trace of %s", trace.channel)
            return None

    @staticmethod
    def _export(sink: TraceSink, recorder: Recorder, trace: Trace, event: SpanEvent | None) -> None:
        """Hand one activation to the sink; its failure is logged, never the writer's."""
        try:
            sink.export(finished(recorder, trace, () if event is None else (event,)))
        except Exception:
            logger.exception("could not export the trace of %s", trace.channel)

    def build(self, recorder: Recorder) -> Trace:
        trace = recorder.trace
        for pending in recorder.calls:
            call = _call_trace(pending, self._price(pending.request.model))
            if pending.kind not in _SIDE_CALLS:  # their own prompts: no prefix to compare
                self.diagnosis.observe(trace.channel, recorder, pending, call)
                read, written = call.cache_read_tokens, call.cache_write_tokens
                prompt = call.input_tokens + read + written
                call.cache_write_wasted_tokens = self.waste.observe(
                    trace.channel, read, written, prompt
                )
            trace.calls.append(call)
        return trace

    @property
    def prices(self) -> dict[str, Price]:
        return self._prices

    @prices.setter
    def prices(self, prices: dict[str, Price]) -> None:  # a config reload sets new ones
        self._prices = prices
        self._price_of.clear()

    def _price(self, model: str) -> Price | None:
        """``price_for`` walks the whole table: remembered per model."""
        if model not in self._price_of:
            self._price_of[model] = price_for(model, self.prices)
            if len(self._price_of) > _MODELS:
                self._price_of.popitem(last=False)
        return self._price_of[model]

    async def prune(self) -> None:
        """Keep traces within their age and size bounds (supervised by the app)."""
        while True:
            gone = await self.store.prune_traces(
                max_age=self.settings.max_age_days * 86400,
                max_bytes=int(self.settings.max_megabytes * 1_000_000),
                now=time.time(),
            )
            if gone:
                logger.info("pruned %d old traces", gone)
            await asyncio.sleep(_PRUNE_EVERY)


def _call_trace(pending: PendingCall, price: Price | None) -> CallTrace:
    request, usage = pending.request, pending.usage
    sent = request_as_sent(pending.provider, request)
    return CallTrace(
        kind=pending.kind,
        provider=pending.provider.name,
        model=request.model,
        request=sent,
        started_at=pending.started_at,
        first_token_ms=pending.first_token_ms,
        total_ms=pending.total_ms,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cost=call_cost(
            price,
            usage,
            write_factor=pending.provider.traits.cache_write_factor,
        ),
        stop_reason=pending.stop_reason,
        error=pending.error,
        thinking=_cut(pending.thinking, _THINKING_CHARS),
        cache_ttls=_cache_ttls(sent),
        cache_reason=cache_reason(pending.provider, request),
    )


def _cache_ttls(body: dict[str, Any]) -> list[str]:
    """Each cache marker of a request as sent (Anthropic's form), "<where> <ttl>" in
    prompt order; a marker without a ttl lives the API's default 5 minutes. Only block
    lists can carry markers: a message whose content is a string is passed over without
    naming it (most of a long chat's turns, on every trace)."""
    found: list[str] = []
    system = body.get("system")
    _markers(found, "tools", body.get("tools"))
    _markers(found, "system", system)
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            _markers(found, f"messages.{index}.content", content)
    return found


def _markers(found: list[str], where: str, blocks: Any) -> None:
    if not isinstance(blocks, list):
        return
    for index, block in enumerate(blocks):
        control = block.get("cache_control") if isinstance(block, dict) else None
        if isinstance(control, dict):
            found.append(f"{where}.{index} {control.get('ttl', '5m')}")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …[cut for the trace]"
