"""The one loop over a provider's stream, and the usage row a call leaves.

Every call the agent makes (the answer, the planner's plan, the pipeline's side calls)
reads its stream here: the first event, text, tool calls, usage and the finish reason
are noted on the call's trace as they come. The answer's text goes on as it streams,
except its first paragraph, held until it ends: a ``</think>`` with no block open before it
has ended makes the text so far reasoning (a chat template opened the block itself, so
the reasoning came with no opening tag). A stream that breaks after it had begun is an
``IncompleteStream``; what to do about it (ask again, or say the answer was cut off) is the
caller's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from salon.agent.recording.recorder import PendingCall
from salon.errors import ProviderError
from salon.llm.base import (
    LLMRequest,
    Provider,
    StopEvent,
    StreamEvent,
    TextDelta,
    ThinkingClosed,
    ThinkingDelta,
    ThoughtEvent,
    ToolCallEvent,
    UsageEvent,
)
from salon.model import Thought, ToolCall, Usage
from salon.store.base import Store

__all__ = ["IncompleteStream", "Streamed", "read_stream", "record_usage"]

logger = logging.getLogger(__name__)

NOT_FINISHED = "the stream ended before the model finished"
_HOLD_CHARS = 2000  # about one chat message: the agent would post a longer paragraph


class IncompleteStream(ProviderError):
    """The stream broke after it had begun, or ended without the model's finish reason.
    (Failures before the first event are the provider wrapper's to retry.)"""


@dataclass
class Streamed:
    """What a stream gave, as far as it went (kept by the caller when it breaks)."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    thinking: str = ""  # the reasoning's readable text, never part of the answer
    thoughts: list[Thought] = field(default_factory=list)  # what the vendor wants back
    began: bool = False
    shown: bool = False  # the text went on to ``on_text`` (until then it may be reasoning)
    finished: bool = False  # the model's finish reason came


async def read_stream(
    provider: Provider,
    pending: PendingCall,
    into: Streamed,
    on_text: Callable[[str], Awaitable[None]] | None = None,
) -> None:
    """Read the call's stream into ``into``, handing each piece of text to ``on_text``.
    A provider's failure after the first event is raised as an ``IncompleteStream``.
    What goes out is ``pending.request``: the request as the recorder noted it (with a
    trace context's header where the activation carries one)."""
    try:
        async for event in provider.stream(pending.request):
            if not into.began:
                into.began = True
                pending.first_event()
            if isinstance(event, TextDelta | ThinkingDelta | ThinkingClosed):
                await _take_text(event, into, on_text)
            else:
                _take(event, into, pending)
        if on_text is not None and not into.shown and into.text:  # all of it one paragraph
            into.shown = True
            await on_text(into.text)
    except ProviderError as exc:
        pending.ended(str(exc))
        if not into.began or isinstance(exc, IncompleteStream):
            raise
        raise IncompleteStream(
            str(exc), provider=exc.provider, status=exc.status, retryable=exc.retryable
        ) from exc
    else:
        pending.ended(None if into.finished else NOT_FINISHED)
    finally:
        pending.thinking += into.thinking  # the trace's copy, once the stream is read
        if pending.total_ms is None:  # cancelled, or a failure of our own on the way
            pending.ended("interrupted")


async def _take_text(
    event: TextDelta | ThinkingDelta | ThinkingClosed,
    into: Streamed,
    on_text: Callable[[str], Awaitable[None]] | None,
) -> None:
    """Note the answer's text or reasoning. A ``</think>`` with no block open while none of
    the text was shown makes it reasoning, whose opening tag the chat template wrote."""
    if isinstance(event, ThinkingDelta):  # a reasoning model's many small pieces
        into.thinking += event.text
    elif isinstance(event, ThinkingClosed):
        if not into.shown:
            into.thinking += into.text
            into.text = ""
    else:
        into.text += event.text
        if on_text is not None:
            await _hand_on(into, event.text, on_text)


async def _hand_on(into: Streamed, piece: str, on_text: Callable[[str], Awaitable[None]]) -> None:
    """Hand ``piece`` on; the answer's start is held until its first paragraph ends (the
    agent would hold it anyway) or grows past a message."""
    if into.shown:
        await on_text(piece)
        return
    start = into.text.lstrip()
    ended = start.find("\n\n", max(len(start) - len(piece) - 1, 0)) > 0
    if ended or len(start) > _HOLD_CHARS:
        into.shown = True
        await on_text(into.text)


def _take(event: StreamEvent, into: Streamed, pending: PendingCall) -> None:
    """Note an event other than the answer's text on ``into`` and the call's trace."""
    if isinstance(event, ToolCallEvent):
        into.calls.append(event.call)
    elif isinstance(event, ThoughtEvent):
        into.thoughts.append(event.thought)
    elif isinstance(event, UsageEvent):
        into.usage += event.usage
        pending.usage += event.usage
    elif isinstance(event, StopEvent):
        into.finished = True
        pending.stop_reason = event.reason


async def record_usage(  # noqa: PLR0917 - one row's columns
    store: Store,
    bot: str,
    channel_key: str,
    provider: Provider,
    request: LLMRequest,
    usage: Usage,
) -> None:
    """Store one call's (or one answer's) usage; a failure is logged, never raised: what
    the call was for has happened, and losing one usage row must not undo it."""
    if usage == Usage():
        return
    try:
        await store.record_usage(bot, channel_key, provider.name, request.model, usage)
    except Exception:
        logger.exception("could not record usage in %s", channel_key)
