"""From a recorder's notes to a stored trace: requests as sent, cost, cache diagnosis.

``TraceWriter`` takes finished recorders from a bounded queue (an answer never waits for
its trace; under extreme load the oldest waiting traces are dropped, counted and logged),
builds each ``Trace`` and writes them in batches. ``CacheDiagnosis`` compares every call
with the previous call in the same channel, message by message:

- where the two first differ: the index and id of that message, and why, as far as Salon
  knows it: ``roll`` (the context was cut back this time), ``config change``, ``edited
  message``, ``deleted message``, ``tool-list change``, ``model change``; ``new messages``
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from salon.agent.recording import PendingCall, Recorder
from salon.config import BotConfig, Price, TracesConfig
from salon.config.prices import call_cost, price_for
from salon.llm.base import request_as_sent
from salon.model import Message
from salon.store.base import Store
from salon.trace import CallTrace, Divergence, Trace

__all__ = ["CacheDiagnosis", "TraceWriter"]

logger = logging.getLogger(__name__)

_BATCH = 50
_CHANNELS = 4096  # channels whose previous call is remembered for the diagnosis
_PRUNE_EVERY = 600.0  # seconds
_SIDE_CALLS = frozenset({"evaluate", "gate"})  # the pipeline's calls with prompts of their own
_CHARS_PER_TOKEN = 4  # for telling a large cache write: rough, as tokenizers differ
_WRITE_SLACK = 512  # tokens a cache write may exceed its estimate by before it is flagged
_MODELS = 256  # models whose price is remembered


@dataclass(frozen=True, slots=True)
class _Seen:
    """What a call's request was made of, entry by entry (context messages, then turns the
    tool loop or the planner added)."""

    model: str
    system: int
    tools: int
    config: BotConfig | None
    ids: tuple[str | None, ...]
    hashes: tuple[int, ...]
    sizes: tuple[int, ...]
    marks: frozenset[int]  # entries that end a cache block
    fixed: int  # characters before the messages: system prompt and tool definitions
    messages: tuple[Message, ...] = ()  # the context's, for the next call's shared prefix


class CacheDiagnosis:
    def __init__(self, max_channels: int = _CHANNELS) -> None:
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._max = max_channels

    def observe(
        self, channel: str, recorder: Recorder, pending: PendingCall, call: CallTrace
    ) -> None:
        """Fill in the call's divergence, expected read share and flags."""
        scene = recorder.scene
        if scene is None:
            return
        previous = self._seen.get(channel)
        seen, same = _fingerprint(recorder, pending, previous)
        markers = pending.provider.traits.cache_markers
        divergence, readable = _compare(previous, seen, cut=scene.cut, markers=markers, same=same)
        call.divergence = divergence
        total = seen.fixed + sum(seen.sizes)
        if previous is not None and total:
            call.expected_read_share = readable / total
            _flag_large_write(call, seen, readable, markers)
        self._seen[channel] = seen
        self._seen.move_to_end(channel)
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)


def _shared(previous: _Seen | None, messages: tuple[Message, ...]) -> int:
    """How many leading context messages are the very objects of the previous call's."""
    if previous is None:
        return 0
    same = 0
    for old, new in zip(previous.messages, messages, strict=False):
        if old is not new:
            break
        same += 1
    return same


def _fingerprint(
    recorder: Recorder, pending: PendingCall, previous: _Seen | None
) -> tuple[_Seen, int]:
    """The call's fingerprint, and how many leading entries are those of ``previous``
    (taken from it, not computed again: a channel's context changes at its end)."""
    scene = recorder.scene
    assert scene is not None
    request = pending.request
    same = _shared(previous, scene.messages)
    ids: list[str | None] = list(previous.ids[:same]) if previous else []
    hashes: list[int] = list(previous.hashes[:same]) if previous else []
    sizes: list[int] = list(previous.sizes[:same]) if previous else []
    for message in scene.messages[same:]:  # no tuple per message: a long chat's trace
        ids.append(message.id)  # would hand the collector hundreds of objects
        hashes.append(hash(message.text) * 31 + hash(message.author.id))
        sizes.append(len(message.text) + len(message.author.name) + 2)
    first = recorder.calls[0].request if recorder.calls else request
    for turn in request.messages[len(first.messages) :]:  # tool turns, a planning turn
        ids.append(None)
        hashes.append(hash((turn.role, turn.plain_text)))
        sizes.append(len(turn.plain_text))
    marked = set(scene.breakpoints)
    marks = frozenset(i for i, m in enumerate(scene.messages) if m.id in marked)
    tools = hash(tuple((t.name, repr(t.input_schema)) for t in request.tools))
    tools_size = sum(
        len(t.name) + len(t.description) + len(repr(t.input_schema)) for t in request.tools
    )
    seen = _Seen(
        model=request.model,
        system=hash(request.system),
        tools=hash((tools, request.tool_listing)),
        config=scene.config,
        ids=tuple(ids),
        hashes=tuple(hashes),
        sizes=tuple(sizes),
        marks=marks,
        fixed=len(request.system) + tools_size + len(request.tool_listing),
        messages=scene.messages,
    )
    return seen, same


def _compare(
    previous: _Seen | None, seen: _Seen, *, cut: bool, markers: bool, same: int = 0
) -> tuple[Divergence, int]:
    """Where ``seen`` first differs from ``previous`` (their first ``same`` entries are
    known equal), why, and how many of its characters the provider could read from its
    cache."""
    if previous is None:
        return Divergence(-1, None, "first call"), 0
    for changed, cause in (
        (previous.model != seen.model, "model change"),
        (previous.tools != seen.tools, "tool-list change"),
        (previous.system != seen.system, "config change"),
    ):
        if changed:
            return Divergence(-1, None, cause), 0
    index = _first_difference(previous, seen, same)
    cause = _cause(previous, seen, index, cut=cut)
    upto = index
    if markers:  # the cache holds prefixes that end at a marker of the previous request
        marked = [m + 1 for m in previous.marks if m < index]
        upto = max(marked, default=0)
    message_id = seen.ids[index] if index < len(seen.ids) else None
    return Divergence(index, message_id, cause), previous.fixed + sum(seen.sizes[:upto])


def _first_difference(previous: _Seen, seen: _Seen, start: int = 0) -> int:
    end = min(len(previous.hashes), len(seen.hashes))
    for index in range(start, end):
        if previous.hashes[index] != seen.hashes[index] or previous.ids[index] != seen.ids[index]:
            return index
    return end


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
    ) -> None:
        self.store = store
        self.settings = settings
        self.prices = dict(prices)
        self._price_of: dict[str, Price | None] = {}  # by model: the lookup sorts the tables
        self.diagnosis = CacheDiagnosis()
        self._queue: asyncio.Queue[Recorder] = asyncio.Queue(maxsize=queue_size)
        self.dropped = 0
        self.written = 0

    def submit(self, recorder: Recorder) -> None:
        if not self.settings.enabled:
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
        await self.store.write_traces(traces)
        self.written += len(traces)

    def build(self, recorder: Recorder) -> Trace:
        trace = recorder.trace
        for pending in recorder.calls:
            call = _call_trace(pending, self._price(pending.request.model))
            if pending.kind not in _SIDE_CALLS:  # their own prompts: no prefix to compare
                self.diagnosis.observe(trace.channel, recorder, pending, call)
            trace.calls.append(call)
        return trace

    def _price(self, model: str) -> Price | None:
        if model not in self._price_of:
            if len(self._price_of) >= _MODELS:
                self._price_of.clear()
            self._price_of[model] = price_for(model, self.prices)
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
    return CallTrace(
        kind=pending.kind,
        provider=pending.provider.name,
        model=request.model,
        request=request_as_sent(pending.provider, request),
        started_at=pending.started_at,
        first_token_ms=pending.first_token_ms,
        total_ms=pending.total_ms,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost=call_cost(
            price,
            usage,
            write_factor=pending.provider.traits.cache_write_factor,
        ),
        stop_reason=pending.stop_reason,
        error=pending.error,
    )
