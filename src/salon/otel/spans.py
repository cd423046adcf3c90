"""A finished activation as OpenTelemetry spans and GenAI metric points (plain data).

The spans follow the GenAI semantic conventions of semantic-conventions v1.41.0 (the last
release that held them; ``GENAI_CONVENTIONS``):

- the root, ``invoke_agent {bot}`` (INTERNAL): the activation, with the bot as
  ``gen_ai.agent.name`` and the channel key as ``gen_ai.conversation.id``;
- one span per phase the recorder timed (``salon.config``, ``salon.history``,
  ``salon.keywords``, ``salon.limits``, ``salon.speak_gate``, ``salon.evaluator``,
  ``salon.render``, ``salon.tools``, ``salon.send``), children of the root;
- ``chat {model}`` (CLIENT) per model call, and ``execute_tool {name}`` (INTERNAL) per tool
  call, each the child of the phase it ran in (the speak gate's call under
  ``salon.speak_gate``, a tool under ``salon.tools``), else of the root.

Salon's own attributes are under ``salon.*``. Message content (requests, answers, tool
arguments and results) is on the spans only with ``capture_content``, and every string that
leaves passes ``redact`` first.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from salon.agent.recording.export import Finished
from salon.trace import CallTrace, ToolTrace, Trace

__all__ = [
    "DURATION_BUCKETS",
    "GENAI_CONVENTIONS",
    "TOKEN_BUCKETS",
    "CallPoint",
    "SpanRecord",
    "call_points",
    "is_sampled",
    "provider_name",
    "spans_of",
]

GENAI_CONVENTIONS = "1.41.0"
# The conventions' advised bucket boundaries for the two client metrics.
TOKEN_BUCKETS: tuple[int, ...] = tuple(4**n for n in range(14))  # 1, 4, 16, ... 67108864
DURATION_BUCKETS: tuple[float, ...] = tuple(round(0.01 * 2**n, 2) for n in range(14))

Value = str | bool | int | float | tuple[str, ...]
_CONTENT_CHARS = 65_536  # a content attribute longer than this is cut (collectors cap them)
_SLACK = 0.002  # seconds a child may stick out of its phase (clocks read at two moments)

# ``gen_ai.provider.name`` of each provider type (the conventions' well-known values); an
# OpenAI-compatible server that is not OpenAI's own is still spoken to in OpenAI's API.
_PROVIDERS = {
    "anthropic": "anthropic",
    "bedrock": "aws.bedrock",
    "google": "gcp.gemini",
    "openai": "openai",
    "local": "salon.local",
}


@dataclass(frozen=True, slots=True)
class SpanRecord:
    name: str
    span_id: int
    parent_id: int  # 0: a root with no remote parent
    kind: Literal["internal", "client"]
    start: float  # epoch seconds
    end: float
    attributes: dict[str, Value]
    error: str | None = None  # error.type; the span's status is then ERROR
    events: tuple[tuple[str, float, Mapping[str, Value]], ...] = ()  # (name, epoch s, attributes)


@dataclass(frozen=True, slots=True)
class CallPoint:
    """One model call for the GenAI client metrics."""

    attributes: dict[str, str]  # operation, provider, request model (and error.type)
    input_tokens: int  # prompt tokens, cache reads and writes included (as the conventions say)
    output_tokens: int
    seconds: float | None


def provider_name(provider_type: str) -> str:
    return _PROVIDERS.get(provider_type, provider_type)


def is_sampled(trace_id: int, ratio: float) -> bool:
    """The trace-id ratio rule of the OpenTelemetry SDK (``TraceIdRatioBased``): sampled
    when the id's low 64 bits fall below ``ratio`` of their range."""
    bound = round(ratio * (1 << 64))
    return (trace_id & ((1 << 64) - 1)) < bound


def spans_of(
    done: Finished,
    *,
    provider_types: Mapping[str, str],
    capture_content: bool = False,
    redact: Callable[[str], str] = str,
) -> tuple[int, list[SpanRecord]]:
    """The trace id and the spans of one activation, root first."""
    trace = done.trace
    trace_id = done.trace_id or random.getrandbits(128) or 1
    root_id = random.getrandbits(64) or 1
    kinds = {call.provider: provider_types.get(call.provider, "") for call in trace.calls}
    root = _root(trace, root_id, done.parent_span_id, kinds, capture_content, redact)
    spans = [replace(root, events=tuple(done.events))]
    phases = [
        SpanRecord(f"salon.{name}", random.getrandbits(64) or 1, root_id, "internal", a, b, {})
        for name, a, b in done.phases
    ]
    spans += phases
    for call, span_id in zip(trace.calls, done.call_spans, strict=False):
        parent = _container(phases, call.started_at, call.started_at + _seconds(call), root_id)
        record = _chat(call, span_id or random.getrandbits(64) or 1, parent, kinds, redact)
        if capture_content:
            _chat_content(record, call, redact)
        spans.append(record)
    for tool in trace.tools:
        if not tool.started_at:  # refused before it ran: no span of its own
            continue
        end = tool.started_at + tool.duration_ms / 1000
        parent = _container(phases, tool.started_at, end, root_id)
        spans.append(_tool(tool, parent, capture_content, redact))
    return trace_id, spans


def call_points(trace: Trace, provider_types: Mapping[str, str]) -> list[CallPoint]:
    points: list[CallPoint] = []
    for call in trace.calls:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(provider_types.get(call.provider, "")),
            "gen_ai.request.model": call.model,
        }
        if call.error:
            attributes["error.type"] = _error_type(call.error)
        prompt = call.input_tokens + call.cache_read_tokens + call.cache_write_tokens
        seconds = call.total_ms / 1000 if call.total_ms is not None else None
        points.append(CallPoint(attributes, prompt, call.output_tokens, seconds))
    return points


def _root(  # noqa: PLR0917 - the root's ids and the export's settings
    trace: Trace,
    span_id: int,
    parent_id: int,
    kinds: dict[str, str],
    capture_content: bool,
    redact: Callable[[str], str],
) -> SpanRecord:
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": trace.bot,
        "gen_ai.conversation.id": trace.channel,
        "salon.platform": trace.platform,
        "salon.channel.name": redact(trace.channel_name),
        "salon.outcome": trace.outcome,
    }
    answer = next((c for c in trace.calls if c.kind in ("answer", "retry")), None)
    if answer is not None:
        attributes["gen_ai.provider.name"] = provider_name(kinds.get(answer.provider, ""))
        attributes["gen_ai.request.model"] = answer.model
    totals = trace.totals()
    attributes["salon.cost_usd"] = float(totals["cost"])
    if trace.requester:
        attributes["salon.requester.id"] = trace.requester.get("id", "")
    if capture_content and trace.answer:
        output = [{"role": "assistant", "parts": [{"type": "text", "content": trace.answer}]}]
        attributes["gen_ai.output.messages"] = _content(output, redact)
    error = trace.error_kind if trace.outcome == "error" else None
    end = trace.ended_at or trace.started_at
    name = f"invoke_agent {trace.bot}"
    return SpanRecord(
        name, span_id, parent_id, "internal", trace.started_at, end, attributes, error
    )


def _chat(
    call: CallTrace,
    span_id: int,
    parent_id: int,
    kinds: dict[str, str],
    redact: Callable[[str], str],
) -> SpanRecord:
    request = call.request
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(kinds.get(call.provider, "")),
        "gen_ai.request.model": call.model,
        "gen_ai.usage.input_tokens": (
            call.input_tokens + call.cache_read_tokens + call.cache_write_tokens
        ),
        "gen_ai.usage.output_tokens": call.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": call.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": call.cache_write_tokens,
        "salon.call.kind": call.kind,
        "salon.provider": call.provider,
    }
    max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
    if isinstance(max_tokens, int):
        attributes["gen_ai.request.max_tokens"] = max_tokens
    temperature = request.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool):
        attributes["gen_ai.request.temperature"] = float(temperature)
    if call.stop_reason:
        attributes["gen_ai.response.finish_reasons"] = (call.stop_reason,)
    if call.cost is not None:
        attributes["salon.cost_usd"] = call.cost
    if call.first_token_ms is not None:
        attributes["salon.first_token_ms"] = call.first_token_ms
    if call.divergence is not None:
        attributes["salon.cache.break_cause"] = call.divergence.cause
    if call.expected_read_share is not None:
        attributes["salon.cache.expected_read_share"] = call.expected_read_share
    billed = call.billed_read_share
    if billed is not None:
        attributes["salon.cache.billed_read_share"] = billed
    if call.flags:
        attributes["salon.flags"] = tuple(redact(f) for f in call.flags)
    start = call.started_at
    error = _error_type(call.error) if call.error else None
    name = f"chat {call.model}"
    return SpanRecord(
        name, span_id, parent_id, "client", start, start + _seconds(call), attributes, error
    )


def _chat_content(record: SpanRecord, call: CallTrace, redact: Callable[[str], str]) -> None:
    request = call.request
    messages = request.get("messages") or request.get("contents") or request.get("prompt")
    if messages is not None:
        record.attributes["gen_ai.input.messages"] = _content(messages, redact)
    system = request.get("system") or request.get("system_instruction")
    if system:
        record.attributes["gen_ai.system_instructions"] = _content(system, redact)


def _tool(
    tool: ToolTrace, parent_id: int, capture_content: bool, redact: Callable[[str], str]
) -> SpanRecord:
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool.name,
        "gen_ai.tool.call.id": tool.call_id,
        "gen_ai.tool.type": "function",
        "salon.tool.verdict": tool.verdict,
    }
    approval = tool.approval or {}
    if approval:
        attributes["salon.approval.answer"] = str(approval.get("answer", ""))
        attributes["salon.approval.by"] = redact(str(approval.get("by", "")))
    if capture_content:
        attributes["gen_ai.tool.call.arguments"] = _content(tool.arguments, redact)
        attributes["gen_ai.tool.call.result"] = _content(tool.result, redact)
    end = tool.started_at + tool.duration_ms / 1000
    error = "tool_error" if tool.is_error else None
    span_id = tool.span_id or random.getrandbits(64) or 1
    name = f"execute_tool {tool.name}"
    return SpanRecord(name, span_id, parent_id, "internal", tool.started_at, end, attributes, error)


def _container(phases: Sequence[SpanRecord], start: float, end: float, root_id: int) -> int:
    """The innermost phase that holds [start, end], else the root."""
    best: SpanRecord | None = None
    for phase in phases:
        holds = phase.start - _SLACK <= start and end <= phase.end + _SLACK
        if holds and (best is None or phase.end - phase.start < best.end - best.start):
            best = phase
    return best.span_id if best is not None else root_id


def _seconds(call: CallTrace) -> float:
    return (call.total_ms or 0.0) / 1000


def _error_type(error: str) -> str:
    """A short class of a call's failure for ``error.type``: an HTTP status where the
    message starts with one, else the conventions' fallback."""
    head = error.split(maxsplit=1)[0] if error else ""
    return head if head.isdigit() else "_OTHER"


def _content(value: object, redact: Callable[[str], str]) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = redact(text)
    return text if len(text) <= _CONTENT_CHARS else text[:_CONTENT_CHARS] + "…"
