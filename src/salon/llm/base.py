"""The Provider protocol and the vendor-neutral request and stream-event types."""

from __future__ import annotations

import base64
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Any, Literal, Protocol

from salon.llm._convert import Converted
from salon.model import UNPARSED_ARGUMENTS, Thought, ToolCall, ToolResult, Usage, clean_text

__all__ = [
    "UNPARSED_ARGUMENTS",
    "BaseProvider",
    "ChatMessage",
    "ContentPart",
    "ImagePart",
    "LLMRequest",
    "Provider",
    "ProviderTraits",
    "StopEvent",
    "StreamEvent",
    "TextDelta",
    "TextPart",
    "Thinking",
    "ThinkingClosed",
    "ThinkingDelta",
    "ThinkingPart",
    "ThoughtEvent",
    "ToolCallEvent",
    "ToolDefinition",
    "ToolResultPart",
    "ToolUsePart",
    "UsageEvent",
    "anthropic_traits",
    "clean_event",
    "close_stream",
    "parse_arguments",
    "request_as_sent",
    "shown_images",
    "transcript_text",
    "turn_bytes",
]


def parse_arguments(raw: str) -> dict[str, Any]:
    """JSON arguments of a tool call; unparseable text is kept for the error message."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return {UNPARSED_ARGUMENTS: raw}
    return value if isinstance(value, dict) else {UNPARSED_ARGUMENTS: raw}


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    cache_breakpoint: bool = False


@dataclass(frozen=True, slots=True)
class ImagePart:
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ToolUsePart:
    """The model asked for a tool (native tool calling); lives in an assistant turn."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """A tool's answer to a ``ToolUsePart``; lives in the following user turn."""

    result: ToolResult


@dataclass(frozen=True, slots=True)
class ThinkingPart:
    """The model's reasoning on an assistant turn, sent back only to the vendor and model
    that wrote it (``thought.vendor``/``thought.model``); every other provider skips it."""

    thought: Thought


ContentPart = TextPart | ImagePart | ToolUsePart | ToolResultPart | ThinkingPart


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as offered to the model: its name, what it does, its JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True, weakref_slot=True)  # weak: the turn memos' keys
class ChatMessage:
    role: Literal["user", "assistant"]
    parts: tuple[ContentPart, ...]

    @classmethod
    def text(cls, role: Literal["user", "assistant"], text: str) -> ChatMessage:
        return cls(role, (TextPart(text),))

    @property
    def plain_text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True, slots=True)
class Thinking:
    """Reasoning asked of the model: a token budget, or an effort where the vendor takes
    one (``low``, ``medium``, ``high``); a provider maps it to its own field."""

    budget_tokens: int | None = None
    effort: Literal["low", "medium", "high"] | None = None


@dataclass(frozen=True, slots=True)
class LLMRequest:
    model: str
    messages: tuple[ChatMessage, ...]
    system: str = ""
    max_tokens: int = 1024
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()
    cache_system: bool = False  # mark the system prompt for the provider's prompt cache
    extra: dict[str, Any] = field(default_factory=dict)  # extra JSON fields of the request
    headers: dict[str, str] = field(default_factory=dict)  # extra HTTP headers
    prefill: bool = False  # the last assistant turn is a transcript for the model to continue
    # The text tool protocol's tool list, when tools are offered that way: it also opens
    # the first user turn; a provider sending a raw transcript puts it on top instead.
    tool_listing: str = ""
    thinking: Thinking | None = None  # None: the model is not asked to reason
    # Seconds between the channel's recent activations, oldest first: its tempo, from
    # which a provider may choose how long its cache entries live (``cache_ttl: auto``).
    activation_gaps: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of the model's reasoning as it streams (never part of the answer)."""

    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ThinkingClosed:
    """A ``</think>`` in the text with no block open (it is not passed on as text). Some
    chat templates open the block themselves, so the text before it may have been
    reasoning: a reader that has shown none of it yet takes it as reasoning."""

    kind: Literal["thinking_closed"] = "thinking_closed"


@dataclass(frozen=True, slots=True)
class ThoughtEvent:
    """A finished piece of reasoning in the form its vendor wants back (signature and all);
    it belongs on the assistant turn, in the order the events came."""

    thought: Thought
    kind: Literal["thought"] = "thought"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    usage: Usage
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class StopEvent:
    reason: str
    kind: Literal["stop"] = "stop"


StreamEvent = (
    TextDelta
    | ThinkingDelta
    | ThinkingClosed
    | ThoughtEvent
    | ToolCallEvent
    | UsageEvent
    | StopEvent
)


@dataclass(frozen=True, slots=True)
class ProviderTraits:
    """What a provider's server does with a request, as far as Salon's choices go.

    ``prefix_cache``: the server reuses a stable prompt prefix (Anthropic, OpenAI, xAI,
    DeepSeek, Gemini, vLLM and llama.cpp all do), so rolling the context in steps pays off.
    ``cache_markers``: it also needs the prefix marked (Anthropic's ``cache_control``).
    """

    prefix_cache: bool = True
    cache_markers: bool = False
    cache_write_factor: float = 1.0  # cache writes cost this times the price table's rate


def clean_event(event: StreamEvent) -> StreamEvent:
    """``event`` with every lone surrogate in the model's words (text, a tool's name, id and
    arguments) replaced by U+FFFD, as ``clean_text`` does for inbound texts. A vendor's JSON
    may carry one as an escape (``"\\ud800"``) and no encoder takes it: left in, the tool
    log, the trace and every later request showing it would fail. The same event comes back
    when nothing needed cleaning."""
    if isinstance(event, TextDelta | ThinkingDelta):
        text = clean_text(event.text)
        return event if text is event.text else type(event)(text)
    if isinstance(event, ToolCallEvent):
        call = event.call
        name, call_id = clean_text(call.name), clean_text(call.id)
        arguments = _clean_json(call.arguments)
        if name is call.name and call_id is call.id and arguments is call.arguments:
            return event
        return ToolCallEvent(ToolCall(call_id, name, arguments))
    return event


def _clean_json(value: Any) -> Any:
    """A JSON value with its strings (keys too) cleaned; the same object if all were clean."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        pairs = [(_clean_json(k), _clean_json(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)
    if isinstance(value, list):
        items = [_clean_json(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


class Provider(Protocol):
    """An LLM endpoint. ``stream`` raises only ``ProviderError`` (or ``RateLimited``).
    A wrapper (retry, deadline, lazy build) passes ``wire``, ``cache_reason`` and
    ``warm`` on to the provider it wraps."""

    name: str
    traits: ProviderTraits

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]: ...

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``, images and all."""
        ...

    def cache_reason(self, request: LLMRequest) -> str | None:
        """Why the request's cache markers got their lifetimes (None: it sets none)."""
        ...

    async def warm(self) -> None:
        """Get ready for the first request now (a deferred vendor SDK loads)."""
        ...

    async def aclose(self) -> None: ...


class BaseProvider(ABC):
    """A provider with the neutral abilities: Salon's own form of the request as its
    body, no cache lifetimes to explain, nothing to warm."""

    name: str
    traits: ProviderTraits

    @abstractmethod
    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        return _neutral(request)

    def cache_reason(self, request: LLMRequest) -> str | None:
        return None

    async def warm(self) -> None:
        return None


def anthropic_traits(cache_ttl: str | None) -> ProviderTraits:
    """An Anthropic server's traits; 1-hour cache writes cost 2x input where the price
    table holds the 5-minute 1.25x (``auto`` mixes both: the usage's ``cache_creation``
    says which writes were 1-hour ones, and ``call_cost`` prices those)."""
    return ProviderTraits(cache_markers=True, cache_write_factor=1.6 if cache_ttl == "1h" else 1.0)


async def close_stream(stream: object) -> None:
    """Close an SDK stream or async generator, releasing its connection."""
    close = getattr(stream, "aclose", None) or getattr(stream, "close", None)
    if close is not None:
        await close()


_PARTS = attrgetter("parts")


def request_as_sent(provider: Provider, request: LLMRequest) -> dict[str, Any]:
    """The body ``provider`` sends for ``request``, with images as their size and hash."""
    body = provider.wire(request)
    if not _may_carry_images(request):  # the walk costs as much as the body: skip it
        return body
    shown: dict[str, Any] = shown_images(body)
    return shown


def _may_carry_images(request: LLMRequest) -> bool:
    # Walked with map() in C: over a long chat the Python loop cost about 100 µs a trace.
    kinds = map(type, chain.from_iterable(map(_PARTS, request.messages)))
    return any(map(_IMAGE_CARRIERS.__contains__, kinds))


_IMAGE_CARRIERS = frozenset({ImagePart, ToolResultPart})  # parts that may hold an image


def _neutral(request: LLMRequest) -> dict[str, Any]:
    return {
        "model": request.model,
        "system": request.system,
        "messages": [_NEUTRAL_TURNS(m) for m in request.messages],
        "tools": [t.name for t in request.tools],
        "stop": list(request.stop),
        "max_tokens": request.max_tokens,
    }


def _neutral_turn(message: ChatMessage) -> dict[str, Any]:
    return {"role": message.role, "content": [_neutral_part(p) for p in message.parts]}


def _neutral_part(p: ContentPart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"text": p.text, **({"cache_breakpoint": True} if p.cache_breakpoint else {})}
    if isinstance(p, ImagePart):
        return {"image": {"media_type": p.media_type, "data": p.data}}
    if isinstance(p, ToolUsePart):
        return {"tool_use": {"id": p.call.id, "name": p.call.name, "input": p.call.arguments}}
    if isinstance(p, ThinkingPart):
        return {"thinking": {"vendor": p.thought.vendor, "chars": len(p.thought.text)}}
    return {"tool_result": {"id": p.result.call_id, "content": p.result.content}}


_TURN_OVERHEAD = 850  # bytes of a turn and its converted form besides their contents


def turn_bytes(message: ChatMessage) -> int:
    """An estimate of the memory a turn and its converted form hold: the contents twice
    (the turn's, and the form's copy or base64) and the objects around them."""
    held = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            held += len(part.text)
        elif isinstance(part, ImagePart):
            held += len(part.data)
        elif isinstance(part, ToolResultPart):
            held += len(part.result.content)
        elif isinstance(part, ThinkingPart):
            thought = part.thought
            held += len(thought.text) + len(thought.signature) + len(thought.redacted)
        else:
            held += 256  # a tool call's name and arguments: small
    return _TURN_OVERHEAD + 2 * held


# Salon's own form of each turn, made once per turn object (render memos reuse them): a
# trace of a long chat would otherwise build thousands of objects for the collector.
_NEUTRAL_TURNS = Converted(_neutral_turn, weigh=turn_bytes, weak=True)


def shown_images(value: Any) -> Any:
    """``value`` (JSON-like) with every image's bytes (base64, a data URL, or raw bytes)
    replaced by their size and SHA-256: a trace keeps what was sent, not the picture."""
    if isinstance(value, dict):
        return {k: _shown_image(k, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [shown_images(v) for v in value]
    return value


def _shown_image(key: str, value: Any) -> Any:
    if isinstance(value, bytes):
        return _digest(value)
    if isinstance(value, str) and key in {"url", "data"} and len(value) > 256:
        head, comma, data = value.partition(",") if value.startswith("data:") else ("", "", value)
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            return value
        return f"{head}{comma}{_digest(raw)}"
    return shown_images(value)


def _digest(data: bytes) -> str:
    return f"<image: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}>"


def transcript_text(request: LLMRequest) -> str:
    """A prefill request as one raw text: the transcript (its assistant turns, in order).
    The chat framing around it (system prompt, the opening user turn) means nothing to a
    base model, and images cannot travel as text. With the text tool protocol on, its tool
    list (which opens the first user turn) goes on top: the model must see the tools."""
    transcript = "".join(
        part.text
        for message in request.messages
        if message.role == "assistant"
        for part in message.parts
        if isinstance(part, TextPart)
    )
    return request.tool_listing + transcript
