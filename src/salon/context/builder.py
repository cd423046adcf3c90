"""From the room's history to an LLM request.

``select_context`` decides which messages the model sees (visibility and the recency
budgets); ``render_chat`` maps them to roles. Both are on the hot path of every
activation, so each walks the history once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from salon.config import BotConfig
from salon.llm.base import ChatMessage, LLMRequest, TextPart
from salon.model import Message, Participant

__all__ = ["TRUNCATION_MARK", "is_visible", "render_chat", "select_context"]

TRUNCATION_MARK = " …[truncated]"


def is_visible(message: Message, config: BotConfig) -> bool:
    """Dot messages are commands and tool logs: no bot reads them as conversation."""
    return not (config.ignore_dot_messages and message.text.startswith("."))


def select_context(history: Sequence[Message], config: BotConfig) -> list[Message]:
    """Newest visible messages within both budgets, oldest first.

    Whichever budget is reached first stops the walk. The newest message is always kept,
    cut to the character budget if it alone exceeds it.
    """
    max_messages = config.recency_window_messages
    max_chars = config.recency_window_characters
    picked: list[Message] = []
    used = 0
    for message in reversed(history):
        if not is_visible(message, config):
            continue
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


def render_chat(
    messages: Sequence[Message], me: Participant, config: BotConfig, model: str
) -> LLMRequest:
    """Chat mode: the bot's messages are assistant turns, everyone else's user turns.

    User lines carry their author's name; consecutive turns of one role are merged.
    """
    turns: list[tuple[Literal["user", "assistant"], list[str]]] = []
    for message in messages:
        role: Literal["user", "assistant"] = "assistant" if message.author.id == me.id else "user"
        line = message.text if role == "assistant" else f"{message.author.name}: {message.text}"
        if turns and turns[-1][0] == role:
            turns[-1][1].append(line)
        else:
            turns.append((role, [line]))
    chat = tuple(ChatMessage(role, (TextPart("\n".join(lines)),)) for role, lines in turns)
    return LLMRequest(
        model=model,
        messages=chat,
        system=config.system_prompt,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        stop=tuple(config.stop_sequences),
    )
