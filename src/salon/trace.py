"""Traces: what one activation saw, sent, cost and did, for the operator.

A ``Trace`` is written to the store once per activation (answered, failed, cancelled, or
stopped by the loop guard). Its summary fields are columns (for listing, filtering, cost
totals and metrics); its body (the requests as sent, the answer, tool calls, timings) is
compressed JSON. Every text in a trace has passed the redactor before it is stored.

The cache diagnosis compares each call's request with the previous call in the same
channel: ``Divergence`` says where their prefixes first differ and, where Salon knows it,
why (a roll, a config change, a memory or linked block change, an edited, deleted or
inserted message, a past tool call sent otherwise, a tool-list change, a model change, the
old model's thoughts dropped on one). The expected read share is the part of the request
the provider could have read from its cache (none below its minimum cacheable prompt); the
billed one is what it reported. A call billed well below it names why (``MISS_CAUSES``).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ACTIVATION",
    "CAUSES",
    "MISS_CAUSES",
    "MONEY_FLOOR",
    "OUTCOMES",
    "BotHealth",
    "CallKind",
    "CallTrace",
    "CostRow",
    "Divergence",
    "EvaluatorStep",
    "GateStep",
    "InboxEvent",
    "KeywordStep",
    "LimitRefusal",
    "LoopBreak",
    "PipelineRecord",
    "ToolTrace",
    "Trace",
    "TraceSummary",
    "money",
]

# The answer's calls, and the pipeline's own: the context evaluator and the speak gate.
CallKind = Literal["answer", "plan", "retry", "evaluate", "gate", "digest"]
Outcome = Literal["answered", "error", "cancelled", "stopped"]
OUTCOMES: tuple[Outcome, ...] = ("answered", "error", "cancelled", "stopped")

# A call billed well below its expected read share though its prompt kept the prefix:
# the cache's lifetime passed, or Salon cannot tell (the divergence's detail says what differed).
MISS_CAUSES: tuple[str, ...] = ("expired", "unexplained")
CAUSES: tuple[str, ...] = (
    "first call",
    "roll",
    "config change",
    "memory change",  # the memory block: a roll, an edited or forgotten note, the operator
    "linked change",  # the linked channels' block
    "edited message",
    "deleted message",
    "inserted message",  # a message placed among those the previous call sent
    "tool call changed",  # a past tool call sent otherwise than before, or left out
    "tool-list change",
    "model change",
    "thinking dropped",  # a model change, and the old model's thoughts were left out
    "new messages",
    "unknown",
    *MISS_CAUSES,
)


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a call's request first differs from the previous call in its channel."""

    index: int  # position among the context's messages and past tool calls; -1: before them
    message_id: str | None  # a message's id, or a past tool call's (its record's)
    cause: str  # one of CAUSES
    detail: str = ""  # for a call billed below its expected read share: why, what differed


@dataclass(slots=True)
class CallTrace:
    """One LLM call: the request as sent (images as size and hash), usage and timing."""

    kind: CallKind
    provider: str
    model: str
    request: dict[str, Any]
    started_at: float  # epoch seconds
    first_token_ms: float | None = None
    total_ms: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0  # the part of output_tokens spent thinking
    # The channel's previous write that this call shows unread (salon.llm.cache_plan.WriteWatch).
    cache_write_wasted_tokens: int = 0
    cost: float | None = None  # USD, when the model has a price
    stop_reason: str | None = None
    error: str | None = None
    divergence: Divergence | None = None
    expected_read_share: float | None = None
    flags: list[str] = field(default_factory=list)  # e.g. "cache write larger than expected"
    # Each cache marker as sent, "<where> <ttl>" ("system.0 1h"), and why it got that ttl.
    cache_ttls: list[str] = field(default_factory=list)
    cache_reason: str | None = None
    thinking: str = ""  # the model's reasoning as it streamed: never shown in a channel

    @property
    def billed_read_share(self) -> float | None:
        prompt = self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.cache_read_tokens / prompt if prompt else None


@dataclass(slots=True)
class ToolTrace:
    call_id: str
    name: str
    arguments: dict[str, Any]
    result: str
    is_error: bool
    duration_ms: float
    verdict: str  # salon.model.Verdict: run, deny, cancel
    approval: dict[str, Any] | None = None  # {"answer", "by", "at"} when a person was asked
    started_at: float = 0.0  # epoch seconds, when the tool was started (0: not run)
    span_id: int = 0  # the span its trace context named, when one travelled with the call
    files: tuple[str, ...] = ()  # where the files of its result were saved
    # a server's questions while it ran: {"server", "message", "answer", "by", "at"} each
    asked: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class KeywordStep:
    word: str
    tool: str | None = None  # None for !help, answered as a note


@dataclass(frozen=True, slots=True)
class LimitRefusal:
    limit: str  # the kind of limit: rate, cooldown, budget
    key: str
    reset_at: float | None


@dataclass(frozen=True, slots=True)
class LoopBreak:
    bot_messages: int  # bot messages in the last minute
    until: float  # the pause's end (epoch seconds)


@dataclass(frozen=True, slots=True)
class GateStep:
    decision: Literal["speak", "quiet", "unreadable", "failed"]
    answer: str | None = None  # the start of the gate's answer, when it gave one


@dataclass(frozen=True, slots=True)
class RoomStep:
    """Several bots in the room: this bot took the turn (its slot), or passed and who
    answered instead."""

    decision: Literal["took", "passed"]
    slot: int | None = None
    answered_by: tuple[str, ...] = ()
    decided_by: str = ""  # the bot whose one call chose (``room.shared_decision``)

    def __str__(self) -> str:
        if self.decision == "passed":
            by = f" (the room's decision, by {self.decided_by})" if self.decided_by else ""
            return f"passed: {', '.join(self.answered_by)} answered{by}"
        return f"took the turn (slot {self.slot})"


@dataclass(frozen=True, slots=True)
class EvaluatorStep:
    kept: int | None = None
    dropped: tuple[str, ...] | None = None  # ids of the messages left out
    error: str | None = None  # why the whole context was used instead
    answer: str | None = None  # the start of an unreadable answer


@dataclass(slots=True)
class PipelineRecord:
    """What the steps before the model decided in one activation; a step that did not act
    stays None. Stored in the trace's body as a mapping of the steps that acted."""

    keyword: KeywordStep | None = None
    refused: LimitRefusal | None = None
    paused_until: float | None = None
    loop_breaker: LoopBreak | None = None
    speak_gate: GateStep | None = None
    room: RoomStep | None = None
    evaluator: EvaluatorStep | None = None
    final_pass: bool = False
    final_pass_error: str | None = None  # the final pass failed: the raw result was sent

    def body(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in ("keyword", "refused", "loop_breaker", "speak_gate", "room", "evaluator"):
            step = getattr(self, name)
            if step is not None:
                data[name] = _set_fields(step)
        if self.paused_until is not None:
            data["paused_until"] = self.paused_until
        if self.final_pass:
            error = self.final_pass_error
            data["final_pass"] = True if error is None else f"failed: {error}"
        return data


# The running activation's id (12 hex digits), set at the activation boundary
# (salon.agent.dispatch) so that every log line it causes carries it (salon.logsetup).
ACTIVATION: ContextVar[str] = ContextVar("salon_activation", default="")


@dataclass(slots=True)
class Trace:
    bot: str
    platform: str
    channel: str  # channel key
    channel_name: str
    started_at: float
    ended_at: float = 0.0
    outcome: Outcome = "answered"
    error: str | None = None
    error_kind: str | None = None  # provider, rate_limited, platform, tool, store, internal
    triggers: list[dict[str, Any]] = field(default_factory=list)  # id, author, text, link
    requester: dict[str, str] = field(default_factory=dict)  # id, name
    layers: list[str] = field(default_factory=list)  # config files and pinned configs applied
    calls: list[CallTrace] = field(default_factory=list)
    tools: list[ToolTrace] = field(default_factory=list)
    answer: str = ""  # what the bot said, as shown
    notes: list[str] = field(default_factory=list)  # Salon's own words in the channel
    timings: dict[str, float] = field(default_factory=dict)  # phase -> milliseconds
    # What the pipeline decided: keyword, limits, speak gate, messages the evaluator dropped.
    pipeline: PipelineRecord = field(default_factory=PipelineRecord)
    activation: str = ""  # the id its log lines carry (ACTIVATION)

    def totals(self) -> dict[str, float]:
        usage: dict[str, float] = {
            "input_tokens": sum(c.input_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "cache_read_tokens": sum(c.cache_read_tokens for c in self.calls),
            "cache_write_tokens": sum(c.cache_write_tokens for c in self.calls),
            "reasoning_tokens": sum(c.reasoning_tokens for c in self.calls),
            "cache_write_wasted_tokens": sum(c.cache_write_wasted_tokens for c in self.calls),
        }
        usage["cost"] = sum(c.cost for c in self.calls if c.cost is not None)
        return usage

    def body(self) -> dict[str, Any]:
        """Everything of the trace, as JSON-ready data. Shallow: the requests are JSON
        data already, and copying them deeply cost more than the rest of a trace."""
        data = _fields(self)
        data["calls"] = [_call_body(call) for call in self.calls]
        data["tools"] = [_fields(tool) for tool in self.tools]
        data["pipeline"] = self.pipeline.body()
        return data


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__slots__}


def _set_fields(value: Any) -> dict[str, Any]:
    """The fields that are set (not None), tuples as lists: JSON as the trace stores it."""
    data: dict[str, Any] = {}
    for name in value.__slots__:
        item = getattr(value, name)
        if item is not None:
            data[name] = list(item) if isinstance(item, tuple) else item
    return data


def _call_body(call: CallTrace) -> dict[str, Any]:
    data = _fields(call)
    if call.divergence is not None:
        data["divergence"] = _fields(call.divergence)
    return data


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """A trace as ``salon trace list`` and the activity timeline show it."""

    id: int
    bot: str
    platform: str
    channel: str
    started_at: float
    ended_at: float
    outcome: str
    error: str | None
    requester: str
    trigger_id: str | None
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    read_share: float | None  # billed cache read share
    expected_read_share: float | None
    cache_break: str | None  # the cause, when this activation's cache was broken
    first_token_ms: float | None
    total_ms: float
    reasoning_tokens: int = 0  # of output_tokens, spent thinking


@dataclass(frozen=True, slots=True)
class CostRow:
    """Totals for one bot, channel, user or day."""

    key: str
    activations: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float
    cache_write_wasted_tokens: int = 0  # written, and shown unread by the next call


@dataclass(frozen=True, slots=True)
class BotHealth:
    """What a bot process reports about itself every few seconds (the heartbeat)."""

    bot: str
    pid: int
    host: str
    started_at: float
    updated_at: float
    platforms: dict[str, bool]  # platform name -> connected
    last_event_at: float | None
    last_answer_at: float | None
    queue_depth: int
    tasks: dict[str, dict[str, Any]]  # supervised task -> {running, restarts, last_error}
    reload_error: str | None = None  # the config edit that could not be applied


@dataclass(frozen=True, slots=True)
class InboxEvent:
    """An event pushed in from outside (``POST /bots/<name>/events``), for a bot to take."""

    id: int
    bot: str
    channel: str  # channel key
    text: str
    author: str
    created_at: float
    traceparent: str = ""  # the W3C trace context it was pushed with


MONEY_FLOOR = 1e-9  # below a billionth of a dollar, digits say nothing


def money(value: float | None) -> str:
    """Dollars to three significant digits below a dollar (a cheap model's call costs a
    few millionths: ``$0.0000234``), at least to the cent; ``$0`` for nothing."""
    if value is None:
        return "-"
    if value == 0:
        return "$0"
    if abs(value) < MONEY_FLOOR:
        return f"<${MONEY_FLOOR:.9f}"
    rounded = float(f"{value:.3g}")  # so that 0.9996 is $1.00, not $1.000
    if abs(rounded) >= 1:
        return f"${value:,.2f}"
    places = 2 - math.floor(math.log10(abs(rounded)))
    whole, _, cents = f"{rounded:.{places}f}".partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"
