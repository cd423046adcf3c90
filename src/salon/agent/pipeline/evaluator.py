"""The context evaluator: a short call before the answer that picks the on-topic messages.

It sees the newest ``max_depth`` messages numbered from the newest (1), reply-chain
messages marked as more important, and the newest request; it answers ``{"keep": [..]}``.
The newest ``min_depth`` are always kept; older than ``max_depth`` go. A failed call or an
answer that cannot be read keeps the whole context: context is never dropped silently.

With rolling context (the prompt cache), messages up to the roll's breakpoint are never
judged: that prefix stays byte-identical, and only the messages after it can be dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from salon.config.pipeline import ContextEvaluatorConfig
from salon.model import Message, Tag

__all__ = ["Judged", "evaluator_prompt", "parse_keep", "select", "split"]


@dataclass(frozen=True, slots=True)
class Judged:
    """The messages the evaluator may judge (newest first) and those it may not touch."""

    protected: tuple[Message, ...]  # oldest first: up to the roll's breakpoint
    eligible: tuple[Message, ...]  # newest first, at most max_depth; older ones go


def split(
    messages: Sequence[Message], breakpoints: Sequence[str], settings: ContextEvaluatorConfig
) -> Judged:
    cut = 0
    if breakpoints:
        ids = [m.id for m in messages]
        if breakpoints[0] in ids:
            cut = ids.index(breakpoints[0]) + 1
    protected, rest = tuple(messages[:cut]), list(messages[cut:])
    newest_first = tuple(reversed(rest))
    return Judged(protected, newest_first[: settings.max_depth])


def evaluator_prompt(judged: Judged, request: str, settings: ContextEvaluatorConfig) -> str:
    lines = []
    for number, message in reversed(list(enumerate(judged.eligible, 1))):
        mark = " [reply chain]" if Tag.REPLY_CHAIN in message.tags else ""
        text = message.text.replace("\n", " ")[: settings.message_chars]
        lines.append(f"{number}.{mark} {message.author.name}: {text}")
    listing = "\n".join(lines)
    return f"Messages (1 is the newest):\n{listing}\n\nNewest request: {request}"


def parse_keep(answer: str, count: int) -> set[int] | None:
    """The numbers the evaluator kept, or None when its answer cannot be read."""
    found = re.search(r"\{.*\}", answer, re.DOTALL)
    if found is None:
        return None
    try:
        data = json.loads(found.group(0))
    except json.JSONDecodeError:
        return None
    keep = data.get("keep") if isinstance(data, dict) else None
    if not isinstance(keep, list) or not all(isinstance(n, int) for n in keep):
        return None
    return {n for n in keep if 1 <= n <= count}


def select(
    messages: Sequence[Message],
    judged: Judged,
    keep: set[int],
    settings: ContextEvaluatorConfig,
) -> tuple[tuple[Message, ...], list[str]]:
    """The context with the evaluator's choice applied, and the ids it dropped."""
    kept_ids = {m.id for m in judged.protected}
    for number, message in enumerate(judged.eligible, 1):
        if number <= settings.min_depth or number in keep:
            kept_ids.add(message.id)
    chosen = tuple(m for m in messages if m.id in kept_ids)
    dropped = [m.id for m in messages if m.id not in kept_ids]
    return chosen, dropped
