"""The replay itself: each recorded line, in order, through each arm.

For every line and arm: the activation rules decide (``should_activate`` with the arm's
effective config), and where the bot speaks, the request is built as the bot builds it
(visible history, ``select_context``, ``roll`` with the arm's rolling state,
``render_chat``/``render_prefill`` with the channel's tempo for ``cache_ttl: auto``, the
provider's own body with its cache markers), billed by the vendor's cache rules
(``salon.replay.billing``) at the line's own time, and priced from the price table.
Answers come from a canned model: nothing is sent to a provider and no platform is built.

Frozen: the room stays as recorded (the played person's lines are the bot's turns, its
replayed answers are not added). Live: the played person's lines are gone and each
replayed answer joins the room, so the room the bot sees next diverges as a deployment's
would.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from salon.agent.activation import should_activate
from salon.agent.pipeline.keywords import match_keyword
from salon.config import BotConfig, Secrets
from salon.config.prices import call_cost, price_for
from salon.context import ChatMemo, is_visible, m_command, render_chat, render_prefill, roll
from salon.context.prefill import PrefillMemo
from salon.context.rolling import activation_gaps
from salon.context.selection import select_context
from salon.llm.base import LLMRequest, Provider, wire_body
from salon.llm.factory import build_provider
from salon.model import ChannelRef, Message, Participant, RollState, Usage
from salon.replay.arms import Arm
from salon.replay.billing import Billing, billing_for
from salon.replay.sources import Line, Recorded

__all__ = ["CANNED_ANSWER", "ArmState", "Replay", "Row", "me_for"]

CANNED_ANSWER = "(canned answer: a dry run asks no model)"
_KEEP = 4000  # visible messages an arm keeps: far more than a window, so memory stays flat
_SEED = 45  # the random rule's draws, the same in every run
_ADDRESSED = {"mention", "reply", "direct message", "m continue"}  # never gated


@dataclass(frozen=True, slots=True)
class Row:
    """One line through one arm."""

    arm: str
    line: Line
    decision: str  # "speak" or "silent"
    why: str
    answer: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0


def me_for(recorded: Recorded, config: BotConfig, nick: str | None) -> Participant:
    """Who the bot is in the room: the played person (``--as``), else its own name."""
    name = nick or config.name
    if recorded.platform == "irc":
        return Participant(f"irc:{name.lower()}", name, is_bot=True)
    for line in recorded.lines:
        if nick and line.author.lower() == nick.lower():
            return Participant(line.author_id, line.author, is_bot=True)
    return Participant(f"{recorded.platform}:{name.lower()}", name, is_bot=True)


class _Neutral:
    """A provider seen only for its request's form (a local model has no wire)."""


class ArmState:
    """What one arm carries from line to line: its room, rolling state, memos, cache."""

    def __init__(self, arm: Arm, channel: ChannelRef, me: Participant) -> None:
        self.arm, self.config, self.me, self.channel = arm, arm.config, me, channel
        self.model = arm.config.model_name()
        settings = arm.config.provider_config()
        self.billing: Billing = billing_for(settings.type, self.model)
        self.provider: Any = _Neutral() if settings.type == "local" else _wire_only(arm.config)
        self.traits_markers = settings.type in ("anthropic", "bedrock")
        self.price = price_for(self.model, arm.config.prices)
        self.visible: list[Message] = []
        self.rolled: RollState | None = None
        self.chat_memo, self.prefill_memo = ChatMemo(), PrefillMemo()
        self.rng = random.Random(_SEED)

    def see(self, message: Message) -> None:
        if is_visible(message, self.config.visibility):
            self.visible.append(message)
            if len(self.visible) > 2 * _KEEP:
                del self.visible[:-_KEEP]

    def answer(self, trigger: Message) -> tuple[Usage, float | None]:
        """Build and bill the request the bot would send now; the canned answer's usage."""
        window = select_context(self.visible, self.config.window, visible=True)
        rolled = roll(self.visible, self.rolled, self.config.window, window, self.me.id)
        self.rolled = rolled.state
        body = wire_body(self.provider, self._render(rolled.messages, rolled.breakpoints))
        usage = self.billing.bill(body, self.model, trigger.created_at)
        usage = replace(usage, output_tokens=math.ceil(len(CANNED_ANSWER) / 4))
        return usage, call_cost(self.price, usage)

    def _render(self, messages: list[Message], breakpoints: tuple[str, ...]) -> LLMRequest:
        config = self.config
        if config.mode == "prefill":
            request = render_prefill(
                messages, self.me, config.render, self.model,
                breakpoints=breakpoints, memo=self.prefill_memo,
            )  # fmt: skip
        else:
            request = render_chat(
                messages, self.me, config.render, self.model,
                breakpoints=breakpoints, memo=self.chat_memo,
            )  # fmt: skip
        if breakpoints and self.traits_markers:
            request = replace(request, activation_gaps=activation_gaps(messages, self.me.id))
        return request

    async def aclose(self) -> None:
        close = getattr(self.provider, "aclose", None)
        if close is not None:
            await close()


def _wire_only(config: BotConfig) -> Provider:
    """The arm's provider, built to render bodies only: it is never asked to stream, and
    its key is a stand-in (a dry run needs none)."""
    settings = config.provider_config()
    stand_in = {
        name: "dry-run"
        for name in (settings.api_key_env, settings.aws_access_key_env, settings.aws_secret_key_env)
        if name
    }
    return build_provider(config, Secrets(stand_in), deferred=True)


class Replay:
    """Runs the arms over a recorded room, one line at a time."""

    def __init__(
        self, recorded: Recorded, arms: Sequence[Arm], me: Participant, *, frozen: bool
    ) -> None:
        self.recorded, self.me, self.frozen = recorded, me, frozen
        self.channel = ChannelRef(recorded.platform, recorded.channel.lower(), recorded.channel)
        self.states = [ArmState(arm, self.channel, me) for arm in arms]
        self._authors: dict[str, str] = {}  # message id -> author id, for replies

    def rows(self) -> Iterator[list[Row]]:
        """Per line, one row per arm."""
        for line in self.recorded.lines:
            yield self.step(line)

    def step(self, line: Line) -> list[Row]:
        if line.kind == "system":
            return [Row(s.arm.name, line, "silent", "system line") for s in self.states]
        message = self._message(line)
        self._authors[line.id] = line.author_id
        return [self._through(state, line, message) for state in self.states]

    def _through(self, state: ArmState, line: Line, message: Message) -> Row:
        if message.author.id == self.me.id:
            if self.frozen:
                state.see(message)  # the recorded room: the played person's line stays
            return Row(state.arm.name, line, "silent", "own line")
        state.see(message)
        config = state.config
        if should_activate(message, self.me, config, rng=state.rng):
            why = _why_spoke(message, self.me, config)
        elif (keyword := match_keyword(message, self.me, config)) is not None:
            why = f"keyword !{keyword.word} (its tool is not run)"
        else:
            return Row(state.arm.name, line, "silent", _why_silent(message, self.me, config))
        if config.speak_gate.enabled and why not in _ADDRESSED:
            why += "; speak gate not asked (dry run)"
        usage, cost = state.answer(message)
        if not self.frozen:
            when = message.created_at + timedelta(seconds=1)
            state.see(Message(f"replay-{line.id}", self.channel, self.me, CANNED_ANSWER, when))
        return Row(state.arm.name, line, "speak", why, CANNED_ANSWER, usage, cost)

    def _message(self, line: Line) -> Message:
        me = self.me
        is_me = line.author_id == me.id
        author = me if is_me else Participant(line.author_id, line.author, line.author_is_bot)
        addressed = me.id in line.mentions or (
            self.recorded.platform == "irc"
            and line.kind == "message"
            and _irc_names(line.text, me.name)
        )
        return Message(
            line.id,
            self.channel,
            author,
            line.text,
            line.time,
            mentions=(me,) if addressed else (),
            reply_to_id=line.reply_to_id,
            reply_to_author_id=self._authors.get(line.reply_to_id or ""),
        )

    async def aclose(self) -> None:
        for state in self.states:
            await state.aclose()


def _irc_names(text: str, nick: str) -> bool:
    """As Salon's IRC adapter tells a line addressed to it (``Incoming._addressed``): the
    nick as a word of its own, nick characters ([]\\`^{}|-) not ending it."""
    pattern = rf"(?<![\w\[\]\\`^{{}}|-]){re.escape(nick)}(?![\w\[\]\\`^{{}}|-])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _why_spoke(message: Message, me: Participant, config: BotConfig) -> str:
    """Which rule made ``should_activate`` say yes, in its order."""
    if m_command(message.text) is not None:
        return "m continue"
    if message.channel.is_direct:
        return "direct message"
    if message.mentions_id(me.id):
        return "mention"
    if message.reply_to_author_id == me.id:
        return "reply"
    if config.reply_on_name and _names(message.text, (config.name, me.name)):
        return "name"
    return f"random (1 in {config.reply_on_random})"


def _why_silent(message: Message, me: Participant, config: BotConfig) -> str:
    if message.author.is_bot and not config.allow_bot_interactions:
        return "a bot (allow_bot_interactions is off)"
    if m_command(message.text) is not None:
        return "m command"
    if not is_visible(message, config.visibility):
        return "not visible"
    if config.reply_on_random > 0:
        return "not addressed; the random draw said no"
    return "not addressed"


def _names(text: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text, re.IGNORECASE) for n in names)


def first_time(recorded: Recorded) -> datetime | None:
    return recorded.lines[0].time if recorded.lines else None
