"""A scripted provider for tests and benchmarks: replays queued replies, records requests."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from salon.errors import ProviderError
from salon.llm.base import (
    BaseProvider,
    LLMRequest,
    ProviderTraits,
    StopEvent,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThoughtEvent,
    ToolCallEvent,
    UsageEvent,
)
from salon.model import Thought, ToolCall, Usage

__all__ = ["FakeProvider", "FakeReply"]


@dataclass(frozen=True)
class FakeReply:
    """One scripted answer: text chunks to stream, or an error to raise before streaming
    (or after ``error_after`` chunks). ``stop`` is the finish reason; ``None`` ends the
    stream without one, as a dropped connection does. ``thinking`` streams as reasoning
    before the text, then ``thoughts`` come as the vendor's replayable form of it."""

    chunks: tuple[str, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    error: ProviderError | None = None
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=10, output_tokens=5))
    error_after: int | None = None
    stop: str | None = "end_turn"
    thinking: tuple[str, ...] = ()
    thoughts: tuple[Thought, ...] = ()

    @classmethod
    def text(cls, text: str, *, chunk_size: int = 0) -> FakeReply:
        if chunk_size <= 0:
            return cls((text,))
        return cls(tuple(text[i : i + chunk_size] for i in range(0, len(text), chunk_size)))


class FakeProvider(BaseProvider):
    """Replays ``FakeReply`` objects in order; with none left, answers ``default``."""

    def __init__(self, replies: Iterable[FakeReply | str] = (), *, default: str = "ok") -> None:
        self.name = "fake"
        self.traits = ProviderTraits()
        self.requests: list[LLMRequest] = []
        self._replies: deque[FakeReply] = deque(
            FakeReply.text(r) if isinstance(r, str) else r for r in replies
        )
        self._default = FakeReply.text(default)

    def queue(self, *replies: FakeReply | str) -> None:
        self._replies.extend(FakeReply.text(r) if isinstance(r, str) else r for r in replies)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        reply = self._replies.popleft() if self._replies else self._default
        if reply.error is not None and reply.error_after is None:
            raise reply.error
        for piece in reply.thinking:
            yield ThinkingDelta(piece)
        for thought in reply.thoughts:
            yield ThoughtEvent(thought)
        for index, chunk in enumerate(reply.chunks):
            if reply.error is not None and index == reply.error_after:
                raise reply.error
            yield TextDelta(chunk)
        for call in reply.calls:
            yield ToolCallEvent(call)
        yield UsageEvent(reply.usage)
        if reply.stop is not None:
            yield StopEvent(reply.stop)

    async def aclose(self) -> None:
        return None
