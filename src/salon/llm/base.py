"""The Provider protocol and the vendor-neutral request and stream-event types."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from salon.model import UNPARSED_ARGUMENTS, ToolCall, ToolResult, Usage

__all__ = [
    "UNPARSED_ARGUMENTS",
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
    "ToolCallEvent",
    "ToolDefinition",
    "ToolResultPart",
    "ToolUsePart",
    "UsageEvent",
    "parse_arguments",
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


ContentPart = TextPart | ImagePart | ToolUsePart | ToolResultPart


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as offered to the model: its name, what it does, its JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


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


StreamEvent = TextDelta | ToolCallEvent | UsageEvent | StopEvent


@dataclass(frozen=True, slots=True)
class ProviderTraits:
    """What a provider's server does with a request, as far as Salon's choices go.

    ``prefix_cache``: the server reuses a stable prompt prefix (Anthropic, OpenAI, xAI,
    DeepSeek, Gemini, vLLM and llama.cpp all do), so rolling the context in steps pays off.
    ``cache_markers``: it also needs the prefix marked (Anthropic's ``cache_control``).
    """

    prefix_cache: bool = True
    cache_markers: bool = False


class Provider(Protocol):
    """An LLM endpoint. ``stream`` raises only ``ProviderError`` (or ``RateLimited``)."""

    name: str
    traits: ProviderTraits

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...
