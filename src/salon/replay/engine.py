"""The replay itself: each recorded line, in order, through each arm.

For every line and arm: the activation rules decide (``should_activate`` with the arm's
effective config), then, for a message nobody addressed to the bot, the speak gate when
the arm enables it. Where the bot speaks, the request is built as the bot builds it
(visible history, ``select_context``, ``roll`` with the arm's rolling state, the context
evaluator when enabled, ``render_chat``/``render_prefill`` with the channel's tempo for
``cache_ttl: auto``) and asked through the arm's calls (``salon.replay.calls``): a dry
run's canned model billed by the vendor's rules at the line's own time, or the real
provider. No tool is offered or run, and no platform is built.

Frozen: the room stays as recorded (the played person's lines are the bot's turns, its
replayed answers are not added). Live: the played person's lines are gone and each
replayed answer joins the room, so the room the bot sees next diverges as a deployment's
would.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from salon.agent.activation import should_activate
from salon.agent.conversation.sidecall import side_config, side_request
from salon.agent.pipeline.evaluator import evaluator_prompt, parse_keep, select, split
from salon.agent.pipeline.gate import gate_prompt, gate_says_yes
from salon.agent.pipeline.keywords import match_keyword
from salon.config import BotConfig
from salon.context import ChatMemo, is_visible, m_command, render_chat, render_prefill, roll
from salon.context.prefill import PrefillMemo
from salon.context.rolling import activation_gaps
from salon.context.selection import select_context
from salon.llm.base import LLMRequest
from salon.model import ChannelRef, Message, Participant, RollState, Usage
from salon.replay.arms import Arm
from salon.replay.calls import CANNED_ANSWER, ArmCalls, Spoken
from salon.replay.sources import Line, Recorded

__all__ = ["CANNED_ANSWER", "ArmState", "Replay", "Row", "me_for"]

_KEEP = 4000  # visible messages an arm keeps: far more than a window, so memory stays flat
_SEED = 45  # the random rule's draws, the same in every run


@dataclass(frozen=True, slots=True)
class Row:
    """One line through one arm. ``usage`` and ``cost_usd`` count every call the line
    cost (the gate's and the evaluator's too); ``side_cost_usd`` is theirs alone."""

    arm: str
    line: Line
    decision: str  # "speak" or "silent"
    why: str
    answer: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    ceiling_usd: float | None = 0.0  # the cost had every answer run to max_tokens
    side_cost_usd: float | None = 0.0
    first_token_s: float | None = None  # a real provider's, for the answer
    error: str = ""  # a real provider's failure


def me_for(recorded: Recorded, config: BotConfig, nick: str | None) -> Participant:
    """Who the bot is in the room: the played person (``--as``), else its own name."""
    name = nick or config.name
    if recorded.platform == "irc":
        return Participant(f"irc:{name.lower()}", name, is_bot=True)
    for line in recorded.lines:
        if nick and line.author.lower() == nick.lower():
            return Participant(line.author_id, line.author, is_bot=True)
    return Participant(f"{recorded.platform}:{name.lower()}", name, is_bot=True)


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


@dataclass(frozen=True, slots=True)
class _Side:
    """The short calls before an answer, summed, and what they decided in words."""

    words: str = ""
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    ceiling_usd: float | None = 0.0

    def plus(self, words: str, spoken: Spoken | None = None) -> _Side:
        joined = "; ".join(w for w in (self.words, words) if w)
        if spoken is None:
            return replace(self, words=joined)
        return _Side(
            joined,
            self.usage + spoken.usage,
            _plus(self.cost_usd, spoken.cost_usd),
            _plus(self.ceiling_usd, spoken.ceiling_usd),
        )


class ArmState:
    """What one arm carries from line to line: its room, rolling state, memos, calls."""

    def __init__(self, arm: Arm, me: Participant, calls: ArmCalls) -> None:
        self.arm, self.config, self.me, self.calls = arm, arm.config, me, calls
        settings = arm.config.provider_config()
        self.traits_markers = settings.type in ("anthropic", "bedrock")
        self.visible: list[Message] = []
        self.rolled: RollState | None = None
        self.chat_memo, self.prefill_memo = ChatMemo(), PrefillMemo()
        self.rng = random.Random(_SEED)

    def see(self, message: Message) -> None:
        if is_visible(message, self.config.visibility):
            self.visible.append(message)
            if len(self.visible) > 2 * _KEEP:
                del self.visible[:-_KEEP]

    async def gate(self, trigger: Message, side: _Side) -> tuple[bool, _Side]:
        """The speak gate's verdict on an unaddressed message; quiet when it fails or
        cannot be read, as the pipeline has it."""
        config = self.config
        settings = config.speak_gate
        asked = side_config(config, settings.provider, settings.model)
        window = select_context(self.visible, config.window, visible=True)
        system, text = gate_prompt(window, config.name, settings)
        request = side_request(asked, system, text, settings.max_tokens)
        canned = config.name if settings.style == "next_speaker" else "yes"
        spoken = await self.calls.call("gate", asked, request, trigger.created_at, canned)
        if spoken.error:
            return False, side.plus(f"speak gate failed ({spoken.error}): quiet", spoken)
        said = gate_says_yes(spoken.text, config.name, settings)
        verdict = "yes" if said else ("no" if said is False else "unreadable: quiet")
        shown = " (the canned model, dry run)" if self.calls.dry else f" ({spoken.text[:40]!r})"
        return bool(said), side.plus(f"speak gate: {verdict}{shown}", spoken)

    async def answer(self, trigger: Message, side: _Side) -> tuple[Spoken, _Side]:
        """Build and ask the request the bot would send now (after the evaluator, when
        the arm enables it)."""
        window = select_context(self.visible, self.config.window, visible=True)
        rolled = roll(self.visible, self.rolled, self.config.window, window, self.me.id)
        self.rolled = rolled.state
        messages, marks = rolled.messages, rolled.breakpoints
        if self.config.context_evaluator.enabled:
            messages, marks, side = await self._evaluated(trigger, messages, marks, side)
        request = self._render(messages, marks)
        spoken = await self.calls.call(
            "answer", self.config, request, trigger.created_at, CANNED_ANSWER
        )
        return spoken, side

    async def _evaluated(
        self, trigger: Message, messages: list[Message], marks: tuple[str, ...], side: _Side
    ) -> tuple[list[Message], tuple[str, ...], _Side]:
        """The context with the evaluator's choice applied; the whole context when its
        call fails or its answer cannot be read."""
        settings = self.config.context_evaluator
        judged = split(messages, marks, settings)
        if len(judged.eligible) <= settings.min_depth:  # all it may judge is kept anyway
            return (*_kept(messages, marks, select(messages, judged, set(), settings)[0]), side)
        config = side_config(self.config, settings.provider, settings.model)
        prompt = evaluator_prompt(judged, trigger.text, settings)
        request = side_request(config, settings.system_prompt, prompt, settings.max_tokens)
        canned = json.dumps({"keep": list(range(1, len(judged.eligible) + 1))})
        spoken = await self.calls.call("evaluate", config, request, trigger.created_at, canned)
        keep = None if spoken.error else parse_keep(spoken.text, len(judged.eligible))
        if keep is None:
            failed = spoken.error or "unreadable answer"
            return messages, marks, side.plus(f"evaluator: {failed}: whole context", spoken)
        chosen, _ = select(messages, judged, keep, settings)
        shown = " (the canned model keeps all, dry run)" if self.calls.dry else ""
        words = f"evaluator kept {len(chosen)} of {len(messages)}{shown}"
        return (*_kept(messages, marks, chosen), side.plus(words, spoken))

    def _render(self, messages: list[Message], breakpoints: tuple[str, ...]) -> LLMRequest:
        config, model = self.config, self.config.model_name()
        if config.mode == "prefill":
            request = render_prefill(
                messages, self.me, config.render, model,
                breakpoints=breakpoints, memo=self.prefill_memo,
            )  # fmt: skip
        else:
            request = render_chat(
                messages, self.me, config.render, model,
                breakpoints=breakpoints, memo=self.chat_memo,
            )  # fmt: skip
        if breakpoints and self.traits_markers:
            request = replace(request, activation_gaps=activation_gaps(messages, self.me.id))
        return request

    async def aclose(self) -> None:
        await self.calls.aclose()


def _kept(
    messages: list[Message], marks: tuple[str, ...], chosen: Sequence[Message]
) -> tuple[list[Message], tuple[str, ...]]:
    ids = {m.id for m in chosen}
    return list(chosen), tuple(b for b in marks if b in ids)


def dry_calls(arm: Arm) -> ArmCalls:
    return ArmCalls(None)


class Replay:
    """Runs the arms over a recorded room, one line at a time; ``calls`` gives each arm
    its calls (default: a dry run's)."""

    def __init__(
        self,
        recorded: Recorded,
        arms: Sequence[Arm],
        me: Participant,
        *,
        frozen: bool,
        calls: Callable[[Arm], ArmCalls] = dry_calls,
    ) -> None:
        self.recorded, self.me, self.frozen = recorded, me, frozen
        self.channel = ChannelRef(recorded.platform, recorded.channel.lower(), recorded.channel)
        self.states = [ArmState(arm, me, calls(arm)) for arm in arms]
        self._authors: dict[str, str] = {}  # message id -> author id, for replies

    async def rows(self) -> AsyncIterator[list[Row]]:
        """Per line, one row per arm."""
        for line in self.recorded.lines:
            yield await self.step(line)

    async def step(self, line: Line) -> list[Row]:
        if line.kind == "system":
            return [Row(s.arm.name, line, "silent", "system line") for s in self.states]
        message = self._message(line)
        self._authors[line.id] = line.author_id
        return [await self._through(state, line, message) for state in self.states]

    async def _through(self, state: ArmState, line: Line, message: Message) -> Row:
        if message.author.id == self.me.id:
            if self.frozen:
                state.see(message)  # the recorded room: the played person's line stays
            return Row(state.arm.name, line, "silent", "own line")
        state.see(message)
        why = _rule(message, self.me, state)
        if why is None:
            return Row(state.arm.name, line, "silent", _why_silent(message, self.me, state.config))
        side = _Side(why)
        if state.config.speak_gate.enabled and why.startswith("random"):
            spoke, side = await state.gate(message, side)
            if not spoke:
                return _silent_after(state.arm.name, line, side)
        spoken, side = await state.answer(message, side)
        if not self.frozen and spoken.text and not spoken.error:
            when = message.created_at + timedelta(seconds=1)
            state.see(Message(f"replay-{line.id}", self.channel, self.me, spoken.text, when))
        return _spoke(state.arm.name, line, side, spoken)

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


def _silent_after(arm: str, line: Line, side: _Side) -> Row:
    """Silent after the gate: its call is billed all the same."""
    cost = side.cost_usd
    return Row(arm, line, "silent", side.words, "", side.usage, cost, side.ceiling_usd, cost)


def _spoke(arm: str, line: Line, side: _Side, spoken: Spoken) -> Row:
    why = side.words + (f"; provider failed: {spoken.error}" if spoken.error else "")
    return Row(
        arm,
        line,
        "speak",
        why,
        spoken.text,
        side.usage + spoken.usage,
        _plus(side.cost_usd, spoken.cost_usd),
        _plus(side.ceiling_usd, spoken.ceiling_usd),
        side.cost_usd,
        spoken.first_token_s,
        spoken.error,
    )


def _rule(message: Message, me: Participant, state: ArmState) -> str | None:
    """Why the rules would have the bot answer, or None; a keyword as the pipeline's
    ``wants`` (its tool is not run)."""
    config = state.config
    if should_activate(message, me, config, rng=state.rng):
        return _why_spoke(message, me, config)
    keyword = match_keyword(message, me, config)
    return None if keyword is None else f"keyword !{keyword.word} (its tool is not run)"


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
