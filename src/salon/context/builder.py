"""From the room's history to an LLM request.

``select_context`` decides which messages the model sees (visibility and the recency
budgets); ``render_chat`` maps them to roles. Both are on the hot path of every
activation, so each walks the history once.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Literal

from salon.config import BotConfig
from salon.llm.base import ChatMessage, ImagePart, LLMRequest, TextPart
from salon.model import TAG_REPLY_CHAIN, Message, Participant
from salon.tools.log import ToolRecord
from salon.tools.textproto import format_calls, format_results

__all__ = [
    "TRUNCATION_MARK",
    "is_visible",
    "m_command",
    "record_text",
    "render_chat",
    "select_context",
    "weave",
]

TRUNCATION_MARK = " …[truncated]"


_M_COMMAND = re.compile(r"^\s*(?:@\S+\s+)?m\s+(\w+)\s*$", re.IGNORECASE)


def m_command(text: str) -> str | None:
    """The word of an ``m`` command (``m continue``, optionally after a mention)."""
    found = _M_COMMAND.match(text)
    return found[1].lower() if found else None


def is_visible(message: Message, config: BotConfig) -> bool:
    """Dot messages are commands and tool logs: no bot reads them as conversation; a
    message someone marked with a hiding reaction (🫥) is treated the same, and so is an
    ``m`` command."""
    if config.ignore_dot_messages and message.text.startswith("."):
        return False
    if message.text[:1] in "mM@ " and m_command(message.text):
        return False
    return not (message.reactions and set(message.reactions) & set(config.hiding_reactions))


def select_context(
    history: Sequence[Message], config: BotConfig, *, monitored_at: datetime | None = None
) -> list[Message]:
    """Newest visible messages within both budgets, oldest first.

    Whichever budget is reached first stops the walk. The newest message is always kept,
    cut to the character budget if it alone exceeds it. In a monitored channel (the bot
    reads every message) ``monitored_at`` is now, and the tighter monitor rule applies too:
    at most ``monitor_context_messages`` messages, none older than ``monitor_context_age``.
    """
    max_messages = config.recency_window_messages
    max_chars = config.recency_window_characters
    oldest: datetime | None = None
    if monitored_at is not None:
        max_messages = min(max_messages, config.monitor_context_messages)
        oldest = monitored_at - timedelta(seconds=config.monitor_context_age)
    picked: list[Message] = []
    used = 0
    for message in reversed(history):
        if not is_visible(message, config):
            continue
        if oldest is not None and message.created_at < oldest and picked:
            break
        size = len(message.text)
        if used + size > max_chars:
            if not picked:
                picked.append(_truncated(message, max_chars))
            break
        picked.append(message)
        used += size
        if len(picked) >= max_messages:
            break
    picked.reverse()
    return picked


def _truncated(message: Message, max_chars: int) -> Message:
    keep = max(max_chars - len(TRUNCATION_MARK), 0)
    return replace(message, text=message.text[:keep] + TRUNCATION_MARK)


def weave(messages: Sequence[Message], records: Sequence[ToolRecord]) -> list[Message | ToolRecord]:
    """Put each past tool call right after the message it followed.

    A call whose message is gone goes after the last message older than the call; calls
    older than every message in context were dropped by the tool log already.
    """
    if not records:
        return list(messages)
    by_message: dict[str, list[ToolRecord]] = {}
    positions = {m.id for m in messages}
    loose: list[ToolRecord] = []
    for record in records:
        if record.after_message_id in positions:
            by_message.setdefault(record.after_message_id or "", []).append(record)
        else:
            loose.append(record)
    woven: list[Message | ToolRecord] = []
    pending = sorted(loose, key=lambda r: r.time)
    for message in messages:
        while pending and pending[0].time < message.created_at:
            woven.append(pending.pop(0))
        woven.append(message)
        woven.extend(by_message.get(message.id, ()))
    woven.extend(pending)
    return woven


def record_text(record: ToolRecord) -> str:
    """A past tool call as the model would have written it, with its result."""
    calls = [record.call]
    return f"{format_calls(calls)}\n{format_results(calls, [record.result])}"


REPLIED_TO_MARK = "(earlier message, replied to) "
"""Marks a message the reply chain brought in from beyond the recency window."""


def _role_and_line(
    item: Message | ToolRecord, me: Participant
) -> tuple[Literal["user", "assistant"], str]:
    if isinstance(item, ToolRecord):
        return "assistant", record_text(item)
    mark = REPLIED_TO_MARK if item.tags and TAG_REPLY_CHAIN in item.tags else ""
    text = item.text + _file_texts(item) if item.attachments else item.text
    if item.author.id == me.id:
        return "assistant", f"{mark}{text}"
    return "user", f"{mark}{item.author.name}: {text}"


def _file_texts(message: Message) -> str:
    """Text files a platform loaded, appended to the message they came with."""
    return "".join(
        f"\n[file {a.filename}]\n{a.data.decode('utf-8', errors='replace')}"
        for a in message.attachments
        if a.data is not None and not a.content_type.startswith("image/")
    )


def _images(item: Message | ToolRecord) -> list[ImagePart]:
    if isinstance(item, ToolRecord) or not item.attachments:
        return []
    return [
        ImagePart(a.content_type, a.data)
        for a in item.attachments
        if a.data is not None and a.content_type.startswith("image/")
    ]


class _Breakpoint:
    """Where the cache breakpoint goes: the text before it ends a marked part."""


_BREAK = _Breakpoint()
Piece = str | ImagePart | _Breakpoint


def _parts(pieces: list[Piece]) -> tuple[TextPart | ImagePart, ...]:
    """Runs of text lines become one text part; images stay where they were; the text up
    to the cache breakpoint ends a part marked as the breakpoint."""
    parts: list[TextPart | ImagePart] = []
    lines: list[str] = []
    glue = ""  # text right after the breakpoint starts on a new line

    def flush(*, cache_breakpoint: bool = False) -> None:
        nonlocal lines, glue
        if lines or cache_breakpoint:
            parts.append(TextPart(glue + "\n".join(lines), cache_breakpoint=cache_breakpoint))
            glue = "\n" if cache_breakpoint else ""
        lines = []

    for piece in pieces:
        if isinstance(piece, str):
            lines.append(piece)
        elif isinstance(piece, _Breakpoint):
            flush(cache_breakpoint=True)
        else:
            flush()
            parts.append(piece)
    flush()
    return tuple(parts)


def _same_bot(previous: Message | ToolRecord | None, item: Message | ToolRecord) -> bool:
    return (
        isinstance(previous, Message)
        and isinstance(item, Message)
        and item.author.is_bot
        and previous.author.id == item.author.id
    )


def render_chat(
    messages: Sequence[Message],
    me: Participant,
    config: BotConfig,
    model: str,
    records: Sequence[ToolRecord] = (),
    *,
    breakpoint_id: str | None = None,
    breakpoints: Collection[str] = (),
) -> LLMRequest:
    """Chat mode: the bot's messages are assistant turns, everyone else's user turns.

    User lines carry their author's name; consecutive turns of one role are merged, and a
    bot's run of messages becomes one message. Past tool calls are part of the bot's turns,
    in the text protocol's form. Images a platform loaded follow the line they came with.
    The messages ``breakpoint_id`` and ``breakpoints`` end text parts marked as
    prompt-cache breakpoints.
    """
    marked = {*breakpoints, *([breakpoint_id] if breakpoint_id else [])}
    turns: list[tuple[Literal["user", "assistant"], list[Piece]]] = []
    pictured: set[int] = set()  # turns holding images; the rest are plain text
    previous: Message | ToolRecord | None = None
    for item in weave(messages, records):
        role, line = _role_and_line(item, me)
        extra: list[Piece] = list(_images(item))
        if marked and isinstance(item, Message) and item.id in marked:
            extra.insert(0, _BREAK)  # right after the line, before any image
        if not (turns and turns[-1][0] == role):
            turns.append((role, []))
        pieces = turns[-1][1]
        if pieces and _same_bot(previous, item) and isinstance(pieces[-1], str):
            pieces[-1] += " " + line  # one bot's run of messages is one message
        else:
            pieces.append(line)
        if extra:
            pieces.extend(extra)
            pictured.add(len(turns) - 1)
        previous = item
    chat = tuple(
        ChatMessage(
            role,
            _parts(pieces) if i in pictured else (TextPart("\n".join(pieces)),),  # type: ignore[arg-type]
        )
        for i, (role, pieces) in enumerate(turns)
    )
    return LLMRequest(
        model=model,
        messages=chat,
        system=config.system_prompt,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        stop=tuple(config.stop_sequences),
        cache_system=config.prompt_caching,
    )
