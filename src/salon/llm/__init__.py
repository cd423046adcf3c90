"""LLM providers behind one streaming protocol."""

from salon.llm.base import (
    BaseProvider,
    ChatMessage,
    ImagePart,
    LLMRequest,
    Provider,
    ProviderTraits,
    StopEvent,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCallEvent,
    ToolDefinition,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
)
from salon.llm.fake import FakeProvider, FakeReply
from salon.llm.retry import RetryingProvider

__all__ = [
    "BaseProvider",
    "ChatMessage",
    "FakeProvider",
    "FakeReply",
    "ImagePart",
    "LLMRequest",
    "Provider",
    "ProviderTraits",
    "RetryingProvider",
    "StopEvent",
    "StreamEvent",
    "TextDelta",
    "TextPart",
    "ToolCallEvent",
    "ToolDefinition",
    "ToolResultPart",
    "ToolUsePart",
    "UsageEvent",
]
