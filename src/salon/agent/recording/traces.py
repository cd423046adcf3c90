"""From a recorder's notes to a stored trace: requests as sent, cost, cache diagnosis.

``TraceWriter`` takes finished recorders from a bounded queue (an answer never waits for
its trace; under extreme load the oldest waiting traces are dropped, counted and logged),
builds each ``Trace`` and writes them in batches. ``CacheDiagnosis``
(``salon.agent.recording.diagnosis``) says of every call where its prompt first differs
from the previous call's in the channel and why, how much of it the provider could read
from its cache, and why a call was billed well below that.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from salon.agent.recording.alarm import CacheWatch, SpanEvent
from salon.agent.recording.diagnosis import CacheDiagnosis
from salon.agent.recording.export import TraceSink, finished
from salon.agent.recording.recorder import PendingCall, Recorder
from salon.config import Price, TracesConfig
from salon.config.prices import call_cost, price_for
from salon.llm.base import request_as_sent
from salon.llm.cache_plan import WriteWatch
from salon.store.base import Store
from salon.trace import CallTrace, Trace

__all__ = ["CacheDiagnosis", "TraceWriter"]

logger = logging.getLogger(__name__)

_BATCH = 50
_MODELS = 256  # models whose price is remembered
_PRUNE_EVERY = 600.0  # seconds
# The pipeline's calls and the memory digest: prompts of their own.
_SIDE_CALLS = frozenset({"evaluate", "gate", "digest"})
_THINKING_CHARS = 100_000  # of a call's reasoning kept in its trace


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
        # Only a provider that marks the prefix (Anthropic's) sends markers to list.
        cache_ttls=_cache_ttls(sent) if pending.provider.traits.cache_markers else [],
        cache_reason=pending.provider.cache_reason(request),
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
