"""What a finished activation hands to an exporter besides the stored trace.

A ``TraceSink`` (OpenTelemetry's, in ``salon.otel``) receives each activation's
``Finished``: the trace as stored, plus what only the recorder knew — when each phase ran,
the span id each call went out under, the W3C trace context of the activation, and the
events to put on its span (the cache alarm's, ``salon.agent.recording.alarm``). The
trace writer calls ``export`` on its own task, after the answer: a sink only queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from salon.agent.recording.alarm import SpanEvent
from salon.agent.recording.recorder import Recorder
from salon.trace import Trace

__all__ = ["Finished", "TraceSink", "finished"]


@dataclass(frozen=True, slots=True)
class Finished:
    trace: Trace
    phases: tuple[tuple[str, float, float], ...]  # (name, start, end) in epoch seconds
    call_spans: tuple[int, ...]  # per call of ``trace.calls``: its span id, 0 when none
    trace_id: int  # 0: no context travelled with the calls (the sink picks one)
    parent_span_id: int  # the span an inbound event continued, else 0
    sampled: bool
    events: tuple[SpanEvent, ...] = ()  # on the activation's root span


class TraceSink(Protocol):
    """Takes finished activations; ``export`` must not block (it queues)."""

    traceparent: bool  # whether the activation's calls carry a W3C trace context

    def sampled(self, trace_id: int) -> bool: ...

    def export(self, done: Finished) -> None: ...


def finished(recorder: Recorder, trace: Trace, events: tuple[SpanEvent, ...] = ()) -> Finished:
    to_epoch = recorder.perf_to_epoch
    phases = tuple((name, to_epoch(a), to_epoch(b)) for name, a, b in recorder.marks)
    return Finished(
        trace=trace,
        phases=phases,
        call_spans=tuple(call.span_id for call in recorder.calls),
        trace_id=recorder.trace_id,
        parent_span_id=recorder.parent_span_id,
        sampled=recorder.sampled,
        events=events,
    )
