"""Keyword routing: ``!weather Seattle`` calls a tool with ``Seattle``, no model asked.

A keyword is the first word of a message, written with ``!`` (after a mention of the bot:
``@Bob !weather``, ``bob: !weather``), matched case-insensitively; the config may name it
with or without the ``!``. The rest of the line
fills one argument of the keyword's tool. ``help`` is built in: it lists the keywords.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from salon.config import BotConfig
from salon.config.pipeline import KeywordConfig, normalize_keyword
from salon.model import Message, Participant, ToolCall, ToolSpec
from salon.platforms.base import Capability, Platform

__all__ = [
    "KeywordMatch",
    "argument_for",
    "help_text",
    "keyword_call",
    "match_keyword",
    "with_reply",
]


@dataclass(frozen=True, slots=True)
class KeywordMatch:
    word: str  # normalized: lower case, no "!"
    keyword: KeywordConfig
    rest: str  # the line after the keyword

    @property
    def is_help(self) -> bool:
        return self.keyword.tool is None


def match_keyword(message: Message, me: Participant, config: BotConfig) -> KeywordMatch | None:
    """The keyword the message starts with, if it is one of the bot's."""
    # Every message of a keyword-routed bot comes here: most have no "!" at all.
    if not config.keywords or "!" not in message.text:
        return None
    text = _without_mention(message.text, (config.name, me.name))
    first, _, rest = text.strip().partition(" ")
    if not first.startswith("!"):  # in a message, a keyword always has its "!"
        return None
    word = normalize_keyword(first)
    keyword = config.keywords.get(word)
    if keyword is None:
        return None
    return KeywordMatch(word, keyword, rest.strip())


async def with_reply(match: KeywordMatch, platform: Platform, trigger: Message) -> KeywordMatch:
    """``reply_context``: the text of the message ``trigger`` replies to, then the rest of
    the line (one level, as Bob Bot's image prompts take it); the match as it was when
    there is none, or it is gone."""
    if not (match.keyword.reply_context and trigger.reply_to_id):
        return match
    if not platform.can(Capability.REPLIES):
        return match
    chain = await platform.reply_chain(trigger)
    replied = next((m for m in reversed(chain) if m.id == trigger.reply_to_id), None)
    if replied is None or not replied.text.strip():
        return match
    rest = "\n".join(part for part in (replied.text.strip(), match.rest) if part)
    return replace(match, rest=rest)


def _without_mention(text: str, names: tuple[str, ...]) -> str:
    for name in names:
        stripped = _mention(name).sub("", text, count=1)
        if stripped != text:
            return stripped
    return text


@functools.lru_cache(maxsize=256)
def _mention(name: str) -> re.Pattern[str]:
    return re.compile(rf"^\s*@?{re.escape(name)}(?![\w-])[:,]?\s*", re.IGNORECASE)


def help_text(config: BotConfig) -> str:
    lines = [f"{config.name} answers these keywords:"]
    for word, keyword in sorted(config.keywords.items()):
        if keyword.tool is None:
            what = "this list"
        else:
            what = keyword.description or f"calls {keyword.tool}"
        lines.append(f"!{word}: {what}")
    return "\n".join(lines)


def argument_for(keyword: KeywordConfig, spec: ToolSpec) -> str | None:
    """The argument the rest of the line fills: the configured one, else the tool's first
    required string argument, else its first string argument."""
    if keyword.argument is not None:
        return keyword.argument
    properties: dict[str, Any] = spec.input_schema.get("properties") or {}
    required = _required(spec)
    strings = [
        n for n, s in properties.items() if isinstance(s, dict) and s.get("type") == "string"
    ]
    for name in required:
        if name in strings:
            return name
    return strings[0] if strings else None


def _required(spec: ToolSpec) -> list[str]:
    return [str(n) for n in spec.input_schema.get("required") or ()]


def keyword_call(match: KeywordMatch, spec: ToolSpec, call_id: str) -> ToolCall | str:
    """The tool call, or why it cannot be made (one line for the channel)."""
    arguments: dict[str, Any] = dict(match.keyword.arguments)
    name = argument_for(match.keyword, spec)
    if match.rest:
        if name is None:
            return f"!{match.word} takes nothing after it"
        arguments[name] = match.rest
    elif name is not None and name not in arguments and name in _required(spec):
        return f"!{match.word} needs something after it (its {name})"
    return ToolCall(call_id, spec.name, arguments)
