"""Why an activation ended without an answer, in words, from its trace's pipeline record
(``salon.trace.PipelineRecord``): what users of other runtimes ask as "why did my bot
pass?"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["silence_words"]

_LIMITS = {"rate": "a rate limit", "cooldown": "a cooldown", "budget": "a budget"}


def silence_words(outcome: str, pipeline: dict[str, Any]) -> str | None:
    """Why the bot stayed silent, or None when it answered (or failed: its error says why)."""
    if outcome != "stopped":
        return None
    for step, words in (
        ("speak_gate", _gate),
        ("refused", _refused),
        ("loop_breaker", _breaker),
        ("room", _room),
    ):
        if isinstance(found := pipeline.get(step), dict):
            return words(found)
    if isinstance(until := pipeline.get("paused_until"), int | float):
        return f"the bot was paused in this channel by the loop breaker until {_at(until)}"
    return "it stopped before answering, and no step of the pipeline recorded why"


def _gate(step: dict[str, Any]) -> str:
    said = f' ("{step["answer"]}")' if step.get("answer") else ""
    decision = step.get("decision")
    if decision == "failed":
        return "the speak gate's call failed, and a failed gate keeps the bot quiet"
    if decision == "unreadable":
        return f"the speak gate's answer could not be read{said}, so the bot kept quiet"
    return f"the speak gate said no{said}: nobody asked the bot, and it judged the talk not its"


def _refused(step: dict[str, Any]) -> str:
    limit = _LIMITS.get(str(step.get("limit")), f"the limit {step.get('limit')}")
    until = f" until {_at(step['reset_at'])}" if step.get("reset_at") else ""
    return f"{limit} refused it ({step.get('key', '')}){until}"


def _breaker(step: dict[str, Any]) -> str:
    return (
        f"the loop breaker tripped: {step.get('bot_messages')} bot messages in the last "
        f"minute; paused until {_at(step.get('until'))}"
    )


def _room(step: dict[str, Any]) -> str:
    others = ", ".join(str(b) for b in step.get("answered_by") or []) or "another bot"
    return f"another bot took the turn: {others} answered"


def _at(epoch: Any) -> str:
    if not isinstance(epoch, int | float):
        return "later"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
