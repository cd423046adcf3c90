"""What one activation does, noted as it happens, for its trace.

The recorder is on the path of every answer, so it only keeps references and timestamps:
the request objects, the scene, the provider. Turning them into a stored ``Trace``
(rendering requests as sent, comparing with the previous call, pricing, redacting) is the
trace writer's work, done after the answer (``salon.agent.recording.traces``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Literal

from salon.agent.activation import Activation, Scene
from salon.errors import (
    ConfigError,
    PlatformError,
    ProviderError,
    RateLimited,
    StoreError,
    ToolError,
)
from salon.llm.base import LLMRequest, Provider
from salon.model import Event, MessageEvent, ScheduledEvent, Usage
from salon.platforms.base import Platform
from salon.trace import CallKind, ToolTrace, Trace

__all__ = ["PendingCall", "Recorder"]

_TRIGGER_TEXT = 500  # characters of a triggering message kept in its trace


@dataclass(slots=True)
class PendingCall:
    """One LLM call as it happens; the writer makes a ``CallTrace`` of it."""

    kind: CallKind
    provider: Provider
    request: LLMRequest
    started_at: float  # epoch seconds
    clock: float  # perf_counter at the start
    first_token_ms: float | None = None
    total_ms: float | None = None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    error: str | None = None
    span_id: int = 0  # the call's span, when the activation carries a trace id
    thinking: str = ""  # the reasoning as it streamed, for the trace alone

    def first_event(self) -> None:
        if self.first_token_ms is None:
            self.first_token_ms = (time.perf_counter() - self.clock) * 1000

    def ended(self, error: str | None = None) -> None:
        self.total_ms = (time.perf_counter() - self.clock) * 1000
        self.error = error


class Recorder:
    """Notes of one activation; ``trace`` is filled in as it goes."""

    def __init__(
        self, bot: str, activation: Activation, platform: Platform, *, queued_at: float | None
    ) -> None:
        channel = activation.channel
        self.trace = Trace(
            bot=bot,
            platform=channel.platform,
            channel=channel.key,
            channel_name=channel.name,
            started_at=time.time(),
        )
        self._clock = time.perf_counter()
        if queued_at is not None:
            self.trace.timings["queue_wait"] = (self._clock - queued_at) * 1000
        self.activation = activation
        self.platform = platform
        self.scene: Scene | None = None
        self.calls: list[PendingCall] = []
        # The answer is complete in the channel: what fails after it is bookkeeping, logged
        # and traced but never told as a failure to answer.
        self.answer_shown = False
        # Each phase as it ran (name, start, end: perf_counter), for exported spans.
        self.marks: list[tuple[str, float, float]] = []
        # W3C trace context, when traces are exported with ``traceparent`` on: the
        # activation's trace id (an inbound event's, or new), the span it continues, and
        # whether it was sampled. 0: no trace context travels with the calls.
        self.trace_id = 0
        self.parent_span_id = 0
        self.sampled = True

    def start_trace(self, trace_id: int = 0, parent_span_id: int = 0) -> None:
        """Carry a W3C trace context on this activation's provider calls: ``trace_id``
        (continued from an inbound ``traceparent``) or a new one."""
        self.trace_id = trace_id or random.getrandbits(128) or 1
        self.parent_span_id = parent_span_id

    def inbound_context(self) -> tuple[int, int, bool]:
        """(trace id, parent span id, sampled) of the W3C ``traceparent`` a triggering
        event came with (a pushed event), or (0, 0, True) when none did."""
        for event in self.activation.triggers:
            header = getattr(event, "traceparent", "")
            if header:
                _, trace_id, span_id, flags = header.split("-")
                return int(trace_id, 16), int(span_id, 16), bool(int(flags, 16) & 1)
        return 0, 0, True

    def perf_to_epoch(self, clock: float) -> float:
        """A ``perf_counter`` reading of this activation as epoch seconds."""
        return self.trace.started_at + (clock - self._clock)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a phase (history, render, tools, send…); repeated phases add up."""
        started = time.perf_counter()
        try:
            yield
        finally:
            ended = time.perf_counter()
            self.marks.append((name, started, ended))
            spent = (ended - started) * 1000
            self.trace.timings[name] = self.trace.timings.get(name, 0.0) + spent

    def call(self, kind: CallKind, provider: Provider, request: LLMRequest) -> PendingCall:
        """A call about to be made; its ``request`` is what to send (with the trace
        context's ``traceparent`` header added, when the activation carries one)."""
        pending = PendingCall(kind, provider, request, time.time(), time.perf_counter())
        if self.trace_id:
            pending.span_id = random.getrandbits(64) or 1
            flags = "01" if self.sampled else "00"
            parent = f"00-{self.trace_id:032x}-{pending.span_id:016x}-{flags}"
            pending.request = replace(request, headers={**request.headers, "traceparent": parent})
        self.calls.append(pending)
        return pending

    def tool(self, used: ToolTrace) -> None:
        self.trace.tools.append(used)

    def said(self, text: str, *, note: bool = False) -> None:
        if note:
            self.trace.notes.append(text)
        else:
            self.trace.answer += ("\n\n" if self.trace.answer else "") + text

    def finish(
        self,
        outcome: Literal["answered", "error", "cancelled", "stopped"],
        error: BaseException | None = None,
        reason: str | None = None,
    ) -> None:
        self.trace.outcome = outcome
        self.trace.ended_at = time.time()
        timings = self.trace.timings
        timings["total"] = (time.perf_counter() - self._clock) * 1000
        firsts = [c.first_token_ms for c in self.calls if c.first_token_ms is not None]
        if firsts:
            timings["first_token"] = sum(firsts)
            timings["generation"] = sum(
                (c.total_ms or 0.0) - (c.first_token_ms or 0.0) for c in self.calls
            )
        if error is not None:
            self.trace.error = reason or type(error).__name__
            self.trace.error_kind = error_kind(error)
        requester = self.activation.requester
        self.trace.requester = {"id": requester.id, "name": requester.name}
        self.trace.triggers = [_trigger(e, self.platform) for e in self.activation.triggers]


def error_kind(error: BaseException) -> str:
    """A short label for what failed, for metrics (errors by kind)."""
    for kind, label in (
        (RateLimited, "rate_limited"),
        (ProviderError, "provider"),
        (PlatformError, "platform"),
        (ToolError, "tool"),
        (StoreError, "store"),
        (ConfigError, "config"),
    ):
        if isinstance(error, kind):
            return label
    return "internal"


def _caught_up(event: MessageEvent) -> dict[str, str]:
    """How a message read back after a gap came (salon.agent.delivery)."""
    if event.gap is None:
        return {}
    length = f" of {event.gap:.0f} s" if event.gap >= 0 else ""
    owed = " (its answer was cut off by a stop)" if event.owed else ""
    return {"delivery": f"caught up after a gap{length}{owed}"}


def _trigger(event: Event, platform: Platform) -> dict[str, str]:
    if isinstance(event, MessageEvent):
        message = event.message
        return {
            "id": message.id,
            "author": message.author.name,
            "author_id": message.author.id,
            "text": message.text[:_TRIGGER_TEXT],
            "kind": "message",
            "link": platform.link(message) or "",
        } | _caught_up(event)
    assert isinstance(event, ScheduledEvent)
    schedule = event.schedule
    return {
        "id": f"schedule-{schedule.id}-{int(event.due.timestamp())}",
        "author": schedule.created_by.name,
        "author_id": schedule.created_by.id,
        "text": schedule.prompt[:_TRIGGER_TEXT],
        "kind": "schedule",
    }
