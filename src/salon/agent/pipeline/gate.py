"""Who speaks: the loop breaker by rate, and the speak gate.

The breaker counts bot messages in the channel's last minute (a run of one bot's messages,
an answer sent a paragraph at a time, counts once); above ``bot_messages_per_minute`` the
bot pauses there for ``pause`` seconds and says so once.

The speak gate is a cheap call for a message that did not address the bot (a monitored
channel, ``reply_on_random``): would the bot reply next? Mentions, replies, DMs, ``/ask``
questions, schedules and keywords always pass. A failed call or an unreadable answer keeps
the bot quiet: in a conversation it was not asked into, silence is the safe mistake.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from salon.agent.activation import Activation
from salon.config import BotConfig
from salon.config.pipeline import SpeakGateConfig
from salon.model import Message, Participant, Tag

__all__ = [
    "GateStats",
    "addressed",
    "bot_runs_last_minute",
    "gate_prompt",
    "gate_says_yes",
    "room_choice",
    "room_prompt",
]


@dataclass
class GateStats:
    """Speak-gate decisions since start, and what the gate's calls cost (tokens)."""

    yes: int = 0
    no: int = 0
    failed: int = 0
    tokens: int = 0


def bot_runs_last_minute(messages: Sequence[Message], now: datetime) -> int:
    since = now - timedelta(minutes=1)
    runs = 0
    previous: str | None = None
    for message in messages:
        author = message.author
        counted = author.is_bot and message.created_at >= since
        if counted and author.id != previous:
            runs += 1
        previous = author.id if counted else None
    return runs


def addressed(activation: Activation, me: Participant, config: BotConfig) -> bool:
    """Whether the newest trigger asked the bot itself (the gate does not apply)."""
    trigger = activation.trigger
    if trigger is None or activation.channel.is_direct or Tag.ASKED in trigger.tags:
        return True
    if trigger.mentions_id(me.id) or trigger.reply_to_author_id == me.id:
        return True
    if config.reply_on_name and any(_names(trigger.text, n) for n in (config.name, me.name)):
        return True
    return not activation.monitored and config.reply_on_random == 0


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def gate_prompt(
    messages: Sequence[Message], name: str, settings: SpeakGateConfig
) -> tuple[str, str]:
    """(system, user) of the gate's call."""
    recent = messages[-settings.messages :]
    lines = [
        f"{m.author.name}: {m.text.replace(chr(10), ' ')[: settings.message_chars]}" for m in recent
    ]
    transcript = "\n".join(lines)
    if settings.style == "next_speaker":
        system = "Continue the chat log: write only the name of whoever speaks next."
        return system, f"{transcript}\n\nNext speaker:"
    return settings.prompt.replace("{name}", name), transcript


def room_prompt(
    messages: Sequence[Message], bots: Mapping[str, tuple[str, str]], settings: SpeakGateConfig
) -> tuple[str, str]:
    """(system, user) of the room's one decision: which of ``bots`` (key -> name,
    description) speaks next, or nobody."""
    recent = messages[-settings.messages :]
    lines = [
        f"{m.author.name}: {m.text.replace(chr(10), ' ')[: settings.message_chars]}" for m in recent
    ]
    listed = "\n".join(
        f"- {name}" + (f": {about}" if about else "") for name, about in bots.values()
    )
    system = (
        "You watch a group chat that these bots share:\n"
        f"{listed}\n"
        "Given its last messages, which bot should speak next? A bot speaks when it is "
        "asked something it can help with or the talk invites it; when a person should "
        "speak next, or no bot is needed, answer nobody. Answer with one name or nobody."
    )
    return system, "\n".join(lines)


def room_choice(answer: str, bots: Mapping[str, tuple[str, str]]) -> str | None:
    """The key of the bot the answer names first, or None (nobody, or unreadable)."""
    text = answer.strip().lower().lstrip("\"'*- ")
    for key, (name, _) in sorted(bots.items(), key=lambda kv: -len(kv[1][0])):
        if name and text.startswith(name.lower()):
            return key
    return None


def gate_says_yes(answer: str, name: str, settings: SpeakGateConfig) -> bool | None:
    """True, False, or None when the answer cannot be read."""
    text = answer.strip().lower().lstrip("\"'*")
    if settings.style == "next_speaker":
        return text.startswith(name.lower()) if text else None
    if text.startswith("yes"):
        return True
    if text.startswith("no"):
        return False
    return None
