"""The pipeline in front of the model: what decides whether and how an activation answers.

In order: a keyword (``!help`` answered at once; ``!weather Seattle`` calls its tool), a
pause left by the loop breaker, the room (``Room.scene``), the loop breaker by rate, the
speak gate (messages that did not address the bot), limits and budgets (admitted or
refused as a whole), the context evaluator, then the conversation. Each step is optional
and configured per bot, guild and channel like everything else; with none configured an
activation goes straight from the room to the conversation. The conversation does not
know which steps ran; the trace does (``Trace.pipeline``).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from salon.agent.activation import Activation, Scene
from salon.agent.conversation.answer import Conversation, Reply
from salon.agent.conversation.output import ParagraphStream
from salon.agent.conversation.sidecall import side_call, side_config, side_request
from salon.agent.conversation.toolrunner import ToolRunner
from salon.agent.pipeline.evaluator import evaluator_prompt, parse_keep, select, split
from salon.agent.pipeline.gate import (
    GateStats,
    addressed,
    bot_runs_last_minute,
    gate_prompt,
    gate_says_yes,
    room_choice,
    room_prompt,
)
from salon.agent.pipeline.keywords import (
    KeywordMatch,
    help_text,
    keyword_call,
    match_keyword,
    with_reply,
)
from salon.agent.pipeline.limits import Hold, Limits
from salon.agent.pipeline.turns import Ask, Taken, Turns, unaddressed
from salon.agent.recording.recorder import Recorder
from salon.agent.room import Room
from salon.config import BotConfig, Redactor
from salon.errors import ProviderError
from salon.llm.base import LLMRequest, Provider
from salon.model import Message, Participant, ToolCall, ToolRecord, ToolResult
from salon.platforms.base import Platform
from salon.store.base import Store
from salon.store.limits import LimitStore, Refusal
from salon.trace import (
    CallKind,
    EvaluatorStep,
    GateStep,
    KeywordStep,
    LimitRefusal,
    LoopBreak,
    RoomStep,
)

__all__ = ["Attempt", "Pipeline"]

logger = logging.getLogger(__name__)

_PAUSES = 4096  # channels whose loop-breaker pause is remembered in memory
# The phase a side call of the pipeline is timed under (a span of its own when exported).
_STAGES = {"gate": "speak_gate", "evaluate": "evaluator"}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One activation on its way through the pipeline."""

    platform: Platform
    activation: Activation
    config: BotConfig
    provider: Provider
    recorder: Recorder
    rolling: bool


def configured(config: BotConfig) -> bool:
    """Whether any step of the pipeline is on (else the plain path, with no cost)."""
    return bool(
        config.keywords
        or config.limits.any
        or config.loop_breaker.bot_messages_per_minute
        or config.speak_gate.enabled
        or config.context_evaluator.enabled
        or config.room.shared_decision
    )


class Pipeline:
    def __init__(
        self,
        *,
        bot: str,
        store: Store,
        room: Room,
        conversation: Conversation,
        redactor: Redactor,
        provider_for: Callable[[BotConfig], Provider],
        clock: Callable[[], float] = time.time,
        turns: Turns | None = None,
        limits: LimitStore | None = None,
    ) -> None:
        """``turns``: the room's turns, where bots share the store (None: always alone);
        ``limits``: where limits and pauses are kept (None: no limits, pauses in memory)."""
        self.bot = bot
        self.turns = turns
        self.store = store
        self.room = room
        self.conversation = conversation
        self._redact = redactor
        self._provider_for = provider_for
        self._clock = clock
        self._marks = limits
        self.limits = Limits(bot, limits, clock) if limits is not None else None
        self.gate_stats = GateStats()
        self._pauses: OrderedDict[str, float] = OrderedDict()
        self._calls = 0

    def wants(self, message: Message, me: Participant, config: BotConfig) -> bool:
        """A keyword addresses the bot wherever it is written (as IRC's commands do)."""
        if message.author.id == me.id or (
            message.author.is_bot and not config.allow_bot_interactions
        ):
            return False
        return match_keyword(message, me, config) is not None

    async def run(self, attempt: Attempt) -> bool:
        """Answer, or stop for a reason the trace names; False when nothing was answered.
        A message nobody addressed is answered only with the room's turn (``turns``)."""
        taken = await self._turn(attempt) if not configured(attempt.config) else None
        if taken is False:
            return False
        try:
            return await self._run(attempt)
        finally:
            if isinstance(taken, Taken) and self.turns is not None:
                await self.turns.finish(taken)

    async def _turn(self, attempt: Attempt, scene: Scene | None = None) -> Taken | bool | None:
        """The room's turn for a message nobody addressed; False: another bot took it (or
        the room's decision chose another, when ``room.shared_decision`` is on)."""
        if self.turns is None:
            return None
        activation, me = attempt.activation, attempt.platform.self_participant
        await self.turns.arrive(activation.channel.platform, me)
        message = unaddressed(activation, me, attempt.config)
        if message is None:
            return None
        room = attempt.config.room
        ask = self._asking(attempt, scene) if room.shared_decision and scene else None
        with attempt.recorder.phase("room"):
            taken = await self.turns.take(activation, message, room, me, ask)
        if isinstance(taken, list):
            decided = self.turns.decided if room.shared_decision else ""
            step = RoomStep("passed", answered_by=tuple(taken), decided_by=decided)
            attempt.recorder.trace.pipeline.room = step
            logger.info("%s: passed, %s answered", activation.channel.key, ", ".join(taken))
            return False
        attempt.recorder.trace.pipeline.room = RoomStep("took", slot=taken.slot)
        return taken

    async def _run(self, attempt: Attempt) -> bool:
        if not configured(attempt.config):
            scene = await self._scene(attempt)
            return scene is not None and await self._answer(attempt, scene, self.conversation)
        config, trigger = attempt.config, attempt.activation.trigger
        match = None
        if trigger is not None and config.keywords:
            with attempt.recorder.phase("keywords"):
                match = match_keyword(trigger, attempt.platform.self_participant, config)
        if match is not None and match.is_help:
            await self._note(attempt, help_text(config))
            attempt.recorder.trace.pipeline.keyword = KeywordStep(match.word)
            return True
        # Steps that are off are not entered: this runs on every activation.
        breaker = config.loop_breaker.bot_messages_per_minute
        if breaker and await self._paused(attempt):
            return False
        scene = None
        if match is None or match.keyword.final_pass:
            scene = await self._scene(attempt)
            if scene is None or (breaker and await self._breaker_trips(attempt, scene)):
                return False
            shared = config.room.shared_decision  # the room's one call, instead of the gate
            gate = match is None and config.speak_gate.enabled and not shared
            if gate and not await self._speak_gate(attempt, scene):
                return False
        if match is None:  # a keyword addresses the bot; the rest may need the room's turn
            turn = await self._turn(attempt, scene)
            if turn is False:
                return False
            if isinstance(turn, Taken):
                try:
                    return await self._limited(attempt, scene, match)
                finally:
                    if self.turns is not None:
                        await self.turns.finish(turn)
        return await self._limited(attempt, scene, match)

    async def _limited(
        self, attempt: Attempt, scene: Scene | None, match: KeywordMatch | None
    ) -> bool:
        hold = await self._admit(attempt, scene)
        if hold is None:
            return False
        try:
            if match is not None:
                await self._keyword(attempt, match, scene)
            elif scene is not None:
                evaluate = attempt.config.context_evaluator.enabled
                await self._answer(attempt, scene, self.conversation, evaluate=evaluate)
        finally:
            if self.limits is not None:
                await self.limits.settle(hold, attempt.config, attempt.recorder)
        return True

    async def _admit(self, attempt: Attempt, scene: Scene | None) -> Hold | None:
        """The activation's hold on its budgets, or None when a limit refused it (said once)."""
        if self.limits is None or not attempt.config.limits.any:
            return Hold(None)
        activation = attempt.activation
        with attempt.recorder.phase("limits"):
            verdict = await self.limits.admit(
                activation, attempt.config, scene, model_calls=scene is not None
            )
        if not isinstance(verdict, Refusal):
            return verdict
        attempt.recorder.trace.pipeline.refused = LimitRefusal(
            verdict.kind, verdict.key, verdict.reset_at
        )
        logger.info("%s refused in %s: %s", verdict.kind, activation.channel.key, verdict.key)
        await self.limits.tell_once(
            platform=attempt.platform,
            channel=activation.channel,
            requester=activation.requester,
            refusal=verdict,
            recorder=attempt.recorder,
            config=attempt.config,
        )
        return None

    async def _scene(self, attempt: Attempt) -> Scene | None:
        return await self.room.scene(
            attempt.platform,
            attempt.activation,
            attempt.config,
            rolling=attempt.rolling,
            recorder=attempt.recorder,
        )

    async def _answer(
        self,
        attempt: Attempt,
        scene: Scene,
        conversation: Conversation,
        *,
        evaluate: bool = False,
    ) -> bool:
        answered = await self._evaluated(attempt, scene) if evaluate else scene
        try:
            await conversation.answer(answered, attempt.provider, attempt.recorder)
        finally:
            await self.room.remember(scene)
        return True

    # Keywords

    async def _keyword(self, attempt: Attempt, match: KeywordMatch, scene: Scene | None) -> None:
        called = await self._call_tool(attempt, match)
        if called is None:
            return
        call, result = called
        if scene is None:
            await self._say(attempt, result.content)
            return
        channel = attempt.activation.channel
        record = ToolRecord(datetime.now(UTC), channel.key, scene.after, call, result)
        final = replace(scene, records=(*scene.records, record))
        evaluate = match.keyword.context_evaluator
        if evaluate is None:
            evaluate = attempt.config.context_evaluator.enabled
        await self._final_pass(attempt, final, result.content, evaluate=evaluate)

    async def _call_tool(
        self, attempt: Attempt, match: KeywordMatch
    ) -> tuple[ToolCall, ToolResult] | None:
        """The keyword's call and its result; None when it could not be made or failed
        (said in the channel)."""
        tool = match.keyword.tool or ""
        attempt.recorder.trace.pipeline.keyword = KeywordStep(match.word, tool)
        runner = self._runner(attempt.config)
        spec = runner.tools.get(tool) if runner is not None else None
        if runner is None or spec is None:
            logger.error("keyword !%s: its tool %s is not available", match.word, tool)
            await self._note(attempt, f"(!{match.word}: its tool {tool} is not available here)")
            return None
        self._calls += 1
        trigger = attempt.activation.trigger
        if trigger is not None:
            match = await with_reply(match, attempt.platform, trigger)
        call = keyword_call(match, spec, f"kw-{self._calls}")
        if isinstance(call, str):
            await self._note(attempt, f"({call})")
            return None
        activation, recorder = attempt.activation, attempt.recorder
        with recorder.phase("tools"):
            outcome = await runner.run(
                attempt.platform,
                activation.channel,
                activation.requester,
                [call],
                trigger.id if trigger is not None else None,
                recorder=recorder,
                askers=activation.askers,
            )
        if outcome.cancelled is not None:
            await self._note(attempt, f"(cancelled: {outcome.cancelled} was not run)")
            return None
        result = outcome.results[0]
        if result.is_error or not result.content.strip():
            said = result.content.strip() or "it returned nothing"
            await self._note(attempt, f"(!{match.word} failed: {said})")
            return None
        return call, result

    async def _final_pass(
        self, attempt: Attempt, scene: Scene, raw: str, *, evaluate: bool
    ) -> None:
        """The model turns the raw result into an answer once; if it cannot, the raw result
        is the answer."""
        attempt.recorder.trace.pipeline.final_pass = True
        final = Conversation(
            bot=self.bot,
            store=self.store,
            tools=None,
            redactor=self._redact,
            max_tool_depth=1,
            chatlog=self.conversation.chatlog,
        )
        shown = attempt.recorder.trace.answer
        try:
            await self._answer(attempt, scene, final, evaluate=evaluate)
        except ProviderError as exc:
            logger.warning("the final pass failed (%s); sending the raw result", exc)
            attempt.recorder.trace.pipeline.final_pass_error = str(exc)
            if attempt.recorder.trace.answer == shown:
                await self._say(attempt, raw)

    def _runner(self, config: BotConfig) -> ToolRunner | None:
        runner = self.conversation.tools
        return runner.with_config(config) if runner is not None else None

    async def _say(self, attempt: Attempt, text: str) -> None:
        reply = self._reply(attempt)
        await reply.write(text)
        await reply.flush()

    async def _note(self, attempt: Attempt, text: str) -> None:
        await self._reply(attempt).note(text)

    def _reply(self, attempt: Attempt) -> Reply:
        limit = attempt.platform.max_message_chars
        channel = attempt.activation.channel
        return Reply(
            attempt.platform, channel, self._redact, ParagraphStream(limit), attempt.recorder
        )

    # The loop breaker by rate

    async def _paused(self, attempt: Attempt) -> bool:
        if not attempt.config.loop_breaker.bot_messages_per_minute:
            return False
        key = attempt.activation.channel.key
        if key not in self._pauses and self._marks is not None:
            self._remember_pause(key, await self._marks.mark(self.bot, f"pause:{key}") or 0.0)
        paused = self._pauses.get(key, 0.0) > self._clock()
        if paused:
            attempt.recorder.trace.pipeline.paused_until = self._pauses[key]
        return paused

    async def _breaker_trips(self, attempt: Attempt, scene: Scene) -> bool:
        breaker = attempt.config.loop_breaker
        if not breaker.bot_messages_per_minute:
            return False
        runs = bot_runs_last_minute(scene.messages, datetime.now(UTC))
        if runs <= breaker.bot_messages_per_minute:
            return False
        now = self._clock()
        until = now + breaker.pause
        key = attempt.activation.channel.key
        self._remember_pause(key, until)
        attempt.recorder.trace.pipeline.loop_breaker = LoopBreak(runs, until)
        if self._marks is not None:
            await self._marks.set_mark(self.bot, f"pause:{key}", until)
        logger.warning("%s: %d bot messages in a minute; pausing", key, runs)
        minutes = max(1, round(breaker.pause / 60))
        await self._note(
            attempt,
            f"(bots are writing faster than {breaker.bot_messages_per_minute} messages a "
            f"minute here: {attempt.config.name} pauses for {minutes} min)",
        )
        return True

    def _remember_pause(self, key: str, until: float) -> None:
        self._pauses[key] = until
        self._pauses.move_to_end(key)
        while len(self._pauses) > _PAUSES:
            self._pauses.popitem(last=False)

    # The speak gate and the context evaluator: short calls of their own

    async def _speak_gate(self, attempt: Attempt, scene: Scene) -> bool:
        config = attempt.config
        settings = config.speak_gate
        me = attempt.platform.self_participant
        if not settings.enabled or addressed(attempt.activation, me, config):
            return True
        side = side_config(config, settings.provider, settings.model)
        system, text = gate_prompt(scene.messages, config.name, settings)
        request = side_request(side, system, text, settings.max_tokens)
        try:
            answer = await self._side(attempt, side, request, "gate")
        except ProviderError as exc:
            self.gate_stats.failed += 1
            logger.warning("speak gate failed in %s (%s); staying quiet", scene.channel.key, exc)
            attempt.recorder.trace.pipeline.speak_gate = GateStep("failed")
            return False
        decision = gate_says_yes(answer, config.name, settings)
        if decision:
            self.gate_stats.yes += 1
        else:
            self.gate_stats.no += 1
        pending = attempt.recorder.calls[-1]
        self.gate_stats.tokens += pending.usage.input_tokens + pending.usage.output_tokens
        verdict: Literal["speak", "quiet", "unreadable"] = (
            "speak" if decision else ("quiet" if decision is False else "unreadable")
        )
        attempt.recorder.trace.pipeline.speak_gate = GateStep(verdict, answer[:80])
        logger.info("speak gate in %s: %s (%r)", scene.channel.key, verdict, answer[:80])
        return bool(decision)

    def _asking(self, attempt: Attempt, scene: Scene) -> Ask:
        """The room's decision as one side call on this bot's scene (kind ``gate``)."""
        config = attempt.config
        settings = config.speak_gate

        async def ask(bots: Mapping[str, tuple[str, str]]) -> str | None:
            system, text = room_prompt(scene.messages, bots, settings)
            side = side_config(config, settings.provider, settings.model)
            request = side_request(side, system, text, max(settings.max_tokens, 10))
            try:
                answer = await self._side(attempt, side, request, "gate")
            except ProviderError as exc:
                logger.warning("the room's decision failed (%s); nobody speaks", exc)
                return None
            chosen = room_choice(answer, bots)
            logger.info("room decision in %s: %s (%r)", scene.channel.key, chosen, answer[:80])
            return chosen

        return ask

    async def _evaluated(self, attempt: Attempt, scene: Scene) -> Scene:
        """The scene with off-topic messages dropped; the whole scene when the evaluator
        fails or its answer cannot be read."""
        config = attempt.config
        settings = config.context_evaluator
        # scene.messages are already shaped (other bots' lines gone when they are left out):
        # the evaluator judges only what the answer's context holds.
        judged = split(scene.messages, scene.breakpoints if attempt.rolling else (), settings)
        if len(judged.eligible) <= settings.min_depth:
            # All it may judge is kept anyway: no call to pay for, only the max_depth cut.
            return _with(scene, select(scene.messages, judged, set(), settings)[0])
        trigger = attempt.activation.trigger
        asked = trigger.text if trigger is not None else judged.eligible[0].text
        side = side_config(config, settings.provider, settings.model)
        prompt = evaluator_prompt(judged, asked, settings)
        request = side_request(side, settings.system_prompt, prompt, settings.max_tokens)
        trace = attempt.recorder.trace.pipeline
        try:
            answer = await self._side(attempt, side, request, "evaluate")
        except ProviderError as exc:
            logger.warning("context evaluator failed (%s); the whole context is used", exc)
            trace.evaluator = EvaluatorStep(error=str(exc))
            return scene
        keep = parse_keep(answer, len(judged.eligible))
        if keep is None:
            logger.warning("context evaluator answered %r; the whole context is used", answer[:200])
            trace.evaluator = EvaluatorStep(error="unreadable answer", answer=answer[:200])
            return scene
        chosen, dropped = select(scene.messages, judged, keep, settings)
        trace.evaluator = EvaluatorStep(kept=len(chosen), dropped=tuple(dropped))
        return _with(scene, chosen)

    async def _side(
        self, attempt: Attempt, side: BotConfig, request: LLMRequest, kind: CallKind
    ) -> str:
        provider = self._provider_for(side)
        with attempt.recorder.phase(_STAGES.get(kind, kind)):
            return await side_call(
                provider, request, attempt.recorder, kind, store=self.store, bot=self.bot
            )


def _with(scene: Scene, chosen: tuple[Message, ...]) -> Scene:
    """The scene holding only ``chosen``, with the breakpoints that are still in it."""
    kept = {m.id for m in chosen}
    marks = tuple(b for b in scene.breakpoints if b in kept)
    return replace(scene, messages=chosen, breakpoints=marks)
