"""Config of the pipeline in front of the model: keywords, limits, the context evaluator,
the loop breaker by rate and the speak gate. Every part is optional and off by default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, model_validator

from salon.config._common import MAX_OUTPUT_TOKENS, MAX_WAIT_SECONDS, _Strict

__all__ = [
    "DEFAULT_EVALUATOR_PROMPT",
    "DEFAULT_GATE_PROMPT",
    "Budget",
    "ContextEvaluatorConfig",
    "KeywordConfig",
    "LimitsConfig",
    "LoopBreakerConfig",
    "RateLimit",
    "RoomConfig",
    "SpeakGateConfig",
    "internal_tools",
    "normalize_keyword",
]

DEFAULT_EVALUATOR_PROMPT = (
    "You pick the context a chat assistant needs. You get numbered chat messages (1 is the "
    "newest) and the newest request. Messages marked [reply chain] were replied to: weigh "
    "them more. Keep the messages on the same topic as the newest request; when the topic "
    "changed, keep only the newest topic. Answer with JSON only, like "
    '{"keep": [1, 2, 5]}.'
)
DEFAULT_GATE_PROMPT = (
    "You watch a group chat. Given its last messages, would {name} reply next? {name} "
    "speaks when addressed, asked something it can help with, or when the talk invites it, "
    "and stays quiet otherwise. Answer yes or no."
)


def normalize_keyword(word: str) -> str:
    """``!Weather`` and ``weather`` are one keyword: lower case, without the ``!``."""
    return word.strip().lstrip("!").lower()


class KeywordConfig(_Strict):
    """``!word rest``: the rest of the line fills one argument of a tool, no model asked."""

    tool: str | None = Field(
        default=None, description="the tool to call; unset only for the built-in help"
    )
    argument: str | None = Field(
        default=None,
        description="the argument the rest of the line fills; default: the tool's first "
        "required string argument",
    )
    arguments: dict[str, object] = Field(
        default_factory=dict, description="fixed arguments added to every call"
    )
    description: str = Field(default="", description="shown by !help")
    final_pass: bool = Field(
        default=False, description="give the raw result to the model once for the answer"
    )
    internal: bool = Field(
        default=False, description="never offered to the model as a tool; the keyword only"
    )
    context_evaluator: bool | None = Field(
        default=None, description="filter the history of the final pass; unset: the bot's"
    )
    reply_context: bool = Field(
        default=False, description="in a reply, the replied-to message's text goes first"
    )


def internal_tools(keywords: Mapping[str, KeywordConfig]) -> frozenset[str]:
    """Tools reached only through ``internal`` keywords: never offered to the model."""
    return frozenset(k.tool for k in keywords.values() if k.internal and k.tool)


class ContextEvaluatorConfig(_Strict):
    """A short call before the answer that picks the on-topic messages."""

    enabled: bool = Field(default=False, description="for ordinary answers (keywords: their own)")
    provider: str | None = Field(default=None, description="a key of `providers`; default: bot's")
    model: str | None = Field(default=None, description="default: the provider's model")
    system_prompt: str = DEFAULT_EVALUATOR_PROMPT
    min_depth: int = Field(default=1, ge=1, description="newest messages always kept")
    max_depth: int = Field(default=30, ge=1, description="newest messages that may be kept")
    max_tokens: int = Field(default=200, gt=0, le=MAX_OUTPUT_TOKENS)
    message_chars: int = Field(default=500, gt=0, description="of each message shown to it")

    @model_validator(mode="after")
    def _depths(self) -> ContextEvaluatorConfig:
        if self.min_depth > self.max_depth:
            raise ValueError("min_depth is larger than max_depth")
        return self


class RateLimit(_Strict):
    """At most ``requests`` answers per person in any ``per_seconds`` (a sliding window)."""

    requests: int = Field(ge=1)
    per_seconds: float = Field(default=3600.0, gt=0, le=MAX_WAIT_SECONDS)


class Budget(_Strict):
    """Spend per UTC day, in tokens (input + output + cache) or US dollars."""

    tokens: int | None = Field(default=None, ge=1)
    cost: float | None = Field(default=None, gt=0, description="US dollars")

    @model_validator(mode="after")
    def _one_unit(self) -> Budget:
        if (self.tokens is None) == (self.cost is None):
            raise ValueError("set exactly one of `tokens` or `cost`")
        return self


class LimitsConfig(_Strict):
    """Requests and spend per person, channel and guild; stored, so a restart keeps them."""

    user_rate: RateLimit | None = None
    user_budget: Budget | None = None
    channel_budget: Budget | None = None
    guild_budget: Budget | None = None
    channel_cooldown: float = Field(
        default=0.0, ge=0, le=86400, description="seconds between answers in one channel"
    )
    exempt_authorized: bool = Field(
        default=True, description="members of authorized_roles are not limited"
    )

    @property
    def any(self) -> bool:
        return bool(
            self.user_rate
            or self.user_budget
            or self.channel_budget
            or self.guild_budget
            or self.channel_cooldown
        )


class LoopBreakerConfig(_Strict):
    """Bots answering each other fast: pause in the channel when they write too much."""

    bot_messages_per_minute: int = Field(
        default=0, ge=0, description="bot messages in the last minute that pause; 0 = off"
    )
    pause: float = Field(default=600.0, gt=0, le=86400, description="seconds")


class SpeakGateConfig(_Strict):
    """A cheap call that decides whether to answer a message that did not address the bot."""

    enabled: bool = False
    provider: str | None = Field(default=None, description="a key of `providers`; default: bot's")
    model: str | None = Field(default=None, description="default: the provider's model")
    style: Literal["question", "next_speaker"] = Field(
        default="question",
        description="ask yes/no, or let the model write the next speaker's name",
    )
    prompt: str = Field(default=DEFAULT_GATE_PROMPT, description="{name} is the bot's name")
    messages: int = Field(default=10, ge=1, le=200, description="recent messages it reads")
    max_tokens: int = Field(default=5, gt=0, le=MAX_OUTPUT_TOKENS)
    message_chars: int = Field(default=300, gt=0)


class RoomConfig(_Strict):
    """Several bots of one deployment in a channel: who answers a message that addressed
    none of them (see docs/CONFIGURATION.md, "Several bots in one room")."""

    max_answers: int = Field(
        default=1, ge=1, le=20, description="bots that answer one unaddressed message, at most"
    )
    policy: Literal["least_recent", "round_robin", "first"] = Field(
        default="least_recent",
        description="who goes first: the bot whose last turn is oldest, the one with the "
        "fewest turns today, or whoever is ready first",
    )
    stagger: float = Field(
        default=0.2,
        ge=0,
        le=10,
        description="seconds each place in the policy's order waits before it may take the turn",
    )
    claim_ttl: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="seconds a turn stays taken by a bot that does not finish (a crash); "
        "then another may take it",
    )
    present_within: float = Field(
        default=3600.0,
        gt=0,
        description="seconds: bots that read the channel this recently share it",
    )
    shared_decision: bool = Field(
        default=False,
        description="one call decides which bot (if any) speaks next, instead of each "
        "bot's speak gate (the gate's provider, model and messages)",
    )
    description: str = Field(
        default="", max_length=300, description="how the room's decision describes this bot"
    )
    max_bot_run: int | None = Field(
        default=None,
        ge=1,
        description="bot messages in a row, whichever bots wrote them, after which bots stop "
        "answering bots (🔁); default: max_bot_reply_chain_depth",
    )
    decision_wait: float = Field(
        default=15.0, gt=0, le=120, description="seconds a bot waits for a decision made elsewhere"
    )


def keywords_validator(value: dict[str, KeywordConfig]) -> dict[str, KeywordConfig]:
    """Keys are normalized; two spellings of one keyword are an error."""
    normalized: dict[str, KeywordConfig] = {}
    for word, keyword in value.items():
        key = normalize_keyword(word)
        if not key or any(c.isspace() for c in key):
            raise ValueError(f"keyword {word!r} must be one word")
        if key in normalized:
            raise ValueError(f"keyword {word!r} is given twice (with and without '!')")
        if keyword.tool is None and key != "help":
            raise ValueError(f"keyword {word!r} needs a `tool` (only `help` is built in)")
        normalized[key] = keyword
    return normalized


def keyword_problems(
    config_keywords: dict[str, KeywordConfig],
    known: set[str],
    *,
    has_mcp_servers: bool,
) -> list[tuple[str, str, bool]]:
    """(key path, reason, fatal) for each keyword whose tool Salon does not serve: an error,
    or a warning when an MCP server (not started by the check) may offer it."""
    found = []
    for word, keyword in config_keywords.items():
        if keyword.tool is None or keyword.tool in known:
            continue
        if has_mcp_servers:
            reason = (
                f"tool {keyword.tool} is not a built-in or integration tool: "
                "an MCP server must offer it"
            )
            found.append((f"keywords.{word}.tool", reason, False))
        else:
            reason = (
                f"no tool {keyword.tool}: it is not a built-in or integration tool "
                "and no MCP server is configured"
            )
            found.append((f"keywords.{word}.tool", reason, True))
    return found
