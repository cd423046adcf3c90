"""The agent loop: events in, activations out.

Events wait in a bounded queue. Each iteration drains a batch, decides which channels the
batch activates, and schedules one activation per channel. A channel's activations run one
at a time in order; while one runs, further triggers for that channel join the single
activation waiting behind it (it will fetch the room afresh anyway, so one answer covers
them). Different channels run concurrently, at most ``max_concurrent_activations`` at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime

from salon.agent.activation import should_activate
from salon.agent.output import ParagraphStream
from salon.agent.planner import answer_request, parse_plan, planning_request
from salon.agent.tools import ToolRunner, Turn
from salon.config import BotConfig, ChannelConfigs, PinnedConfig, Redactor
from salon.context import (
    RollState,
    is_visible,
    m_command,
    render_chat,
    render_prefill,
    roll,
    select_context,
)
from salon.context.history import expand_history
from salon.errors import PlatformError, ProviderError, SalonError
from salon.llm.base import LLMRequest, Provider, TextDelta, ToolCallEvent, UsageEvent
from salon.model import (
    TAG_ASKED,
    TAG_MONITORED,
    TAG_REPLY_CHAIN,
    ChannelRef,
    Event,
    Message,
    MessageEvent,
    Participant,
    ScheduledEvent,
    ToolCall,
    Usage,
)
from salon.platforms.base import Platform
from salon.store.base import Store
from salon.tools.log import ToolRecord
from salon.tools.textproto import CallTextFilter, parse_calls

__all__ = ["Agent"]

logger = logging.getLogger(__name__)

LOOP_EMOJI = "\U0001f501"  # 🔁: "we bots have talked enough"
WARNING_EMOJI = "\u26a0\ufe0f"  # ⚠️ on a pinned config that was skipped

_ERROR_TEXT_LIMIT = 300


@dataclass
class _Activation:
    channel: ChannelRef
    triggers: list[Event]


@dataclass
class _Reply:
    """An answer on its way to a channel: paragraphs go out as soon as they are complete."""

    platform: Platform
    channel: ChannelRef
    paragraphs: ParagraphStream
    tools: ToolRunner | None = None  # as the channel's config has them
    usage: Usage = field(default_factory=Usage)
    sent: int = 0

    async def write(self, text: str) -> None:
        for piece in self.paragraphs.feed(text):
            await self.say(piece)

    async def flush(self) -> None:
        for piece in self.paragraphs.finish():
            await self.say(piece)

    async def say(self, text: str) -> None:
        await self.platform.send(self.channel, text)
        self.sent += 1

    async def finish(self) -> None:
        await self.flush()
        if self.sent == 0:
            logger.warning("the model returned no text in %s", self.channel.key)


@dataclass
class _ChannelState:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: _Activation | None = None


class Agent:
    def __init__(
        self,
        *,
        bot: str,
        config: BotConfig,
        provider: Provider,
        platforms: Mapping[str, Platform],
        store: Store,
        tools: ToolRunner | None = None,
        redactor: Redactor | None = None,
        rng: random.Random | None = None,
        configs: ChannelConfigs | None = None,
        providers: Callable[[BotConfig], Provider] | None = None,
    ) -> None:
        self.bot = bot
        self.config = config
        self.configs = configs or ChannelConfigs(config)
        self.provider = provider
        self._providers = providers
        self.platforms = dict(platforms)
        self.store = store
        self.tools = tools
        self._redact = redactor or Redactor()
        self._rng = rng or random.Random()
        self._queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=config.event_queue_size)
        self._channels: dict[str, _ChannelState] = {}
        self._slots = asyncio.Semaphore(config.max_concurrent_activations)
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._undeletable: set[str] = set()  # channels where m commands cannot be deleted
        self._flagged: set[tuple[str, str]] = set()  # (message id, text) of skipped configs
        self._plans = 0

    async def submit(self, event: Event) -> None:
        """The platforms' event sink; waits when the queue is full (back-pressure)."""
        await self._queue.put(event)

    async def run(self) -> None:
        """Process events until cancelled; activations in flight are cancelled with it."""
        async with asyncio.TaskGroup() as tasks:
            while True:
                batch = await self._next_batch()
                for activation in await self._plan(batch):
                    self._schedule(tasks, activation)
                for _ in batch:
                    self._queue.task_done()

    async def wait_idle(self) -> None:
        """Return once every submitted event has been handled and nothing is running."""
        while True:
            await self._queue.join()
            await self._idle.wait()
            if self._queue.empty() and self._active == 0:
                return

    async def _next_batch(self) -> list[Event]:
        batch = [await self._queue.get()]
        while len(batch) < self.config.event_batch_max:
            try:
                batch.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        return batch

    async def _plan(self, batch: list[Event]) -> list[_Activation]:
        """One activation per channel that any event of the batch activates, in order."""
        by_channel: dict[str, _Activation] = {}
        for event in batch:
            platform = self.platforms.get(event.channel.platform)
            if platform is None:
                logger.warning("event from unknown platform %s dropped", event.channel.platform)
                continue
            if isinstance(event, MessageEvent) and not await self._activates(platform, event):
                continue
            key = event.channel.key
            if key in by_channel:
                by_channel[key].triggers.append(event)
            else:
                by_channel[key] = _Activation(event.channel, [event])
        return list(by_channel.values())

    async def _activates(self, platform: Platform, event: MessageEvent) -> bool:
        """Whether this message calls for an answer; a failure to tell drops the event
        (logged), never the loop."""
        try:
            config = await self._config_in(platform, event.channel)
            return should_activate(
                event.message,
                platform.self_participant,
                config,
                monitored=TAG_MONITORED in event.message.tags,
                rng=self._rng,
            )
        except Exception:
            logger.exception("could not judge a message in %s; ignored", event.channel.key)
            return False

    def _schedule(self, tasks: asyncio.TaskGroup, activation: _Activation) -> None:
        key = activation.channel.key
        state = self._channels.setdefault(key, _ChannelState())
        if state.pending is not None:
            state.pending.triggers.extend(activation.triggers)
            return
        state.pending = activation
        self._active += 1
        self._idle.clear()
        tasks.create_task(self._run_in_turn(key, state, activation))

    async def _run_in_turn(self, key: str, state: _ChannelState, activation: _Activation) -> None:
        try:
            async with state.lock:
                state.pending = None
                async with self._slots:
                    await self._activate_guarded(activation)
        finally:
            if state.pending is None and not state.lock.locked():
                self._channels.pop(key, None)
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def _activate_guarded(self, activation: _Activation) -> None:
        """The activation boundary: a failure is logged and told, never propagated."""
        triggers = activation.triggers
        extra = [_extra_message(e) for e in triggers if _is_extra(e)]
        last = triggers[-1]
        monitored = isinstance(last, MessageEvent) and TAG_MONITORED in last.message.tags
        monitored_at = datetime.now(UTC) if monitored else None
        try:
            trigger = last.message if isinstance(last, MessageEvent) else None
            await self.activate(
                activation.channel, _requester(triggers), extra, monitored_at, trigger
            )
        except Exception as exc:
            logger.exception("activation in %s failed", activation.channel.key)
            await self._report_failure(activation.channel, exc)

    async def activate(
        self,
        channel: ChannelRef,
        requester: Participant,
        extra: Sequence[Message] = (),
        monitored_at: datetime | None = None,
        trigger: Message | None = None,
    ) -> None:
        """Answer in ``channel``. ``extra`` messages (a schedule's prompt, a /ask question)
        end the context for this activation only; ``monitored_at`` applies the monitored
        channels' tighter context rule."""
        platform = self.platforms[channel.platform]
        config = await self._config_in(platform, channel)
        if trigger is not None and m_command(trigger.text) == "continue":
            await self._remove_command(platform, trigger)
        rolling = _rolls(config) and monitored_at is None
        depth = config.recency_window_messages
        depth += config.rolling_threshold if rolling else 0
        history = await self._history(platform, channel, config, depth)
        chosen = select_context(history, config, monitored_at=monitored_at)
        me = platform.self_participant
        if trigger is not None and _bot_chain_too_long(history, trigger, config):
            await platform.react(channel, trigger.id, LOOP_EMOJI)
            return
        marks: tuple[str, ...] = ()
        if rolling:
            chosen, marks = await self._roll(channel, history, chosen, me, config)
        chain = await self._reply_chain(platform, chosen, trigger, config)
        messages = [*chain, *chosen, *extra]
        records = self._records(channel, messages)
        model = config.model_name()
        if config.mode == "prefill":
            request = render_prefill(messages, me, config, model, records, breakpoints=marks)
        else:
            request = render_chat(messages, me, config, model, records, breakpoints=marks)
        tools = self.tools.with_config(config) if self.tools is not None else None
        if tools is not None:
            request = tools.prepare(request)
        after = messages[-1].id if messages else None
        reply = _Reply(platform, channel, ParagraphStream(platform.max_message_chars), tools)
        provider = self._provider_for(config)
        await self._converse(reply, provider, request, requester, after)
        await reply.finish()
        await self.store.record_usage(
            self.bot, channel.key, provider.name, request.model, reply.usage
        )

    def _provider_for(self, config: BotConfig) -> Provider:
        if self._providers is None or config.provider == self.config.provider:
            return self.provider
        return self._providers(config)

    async def _config_in(self, platform: Platform, channel: ChannelRef) -> BotConfig:
        """The bot's config in ``channel``: its guild's layers and the pinned configs."""
        try:
            pinned_messages = await platform.pinned(channel)
        except PlatformError as exc:  # unreadable pins: the guild's config still applies
            logger.warning("cannot read the pins of %s: %s", channel.key, exc)
            pinned_messages = []
        pins = [m for m in pinned_messages if m.text.startswith(".config")]
        pinned = [PinnedConfig(m.id, m.text) for m in pins]
        resolved = self.configs.resolve(channel.guild_id, pinned)
        for message_id, reason in resolved.rejected:
            message = next(m for m in pins if m.id == message_id)
            if (message_id, message.text) in self._flagged:
                continue
            self._flagged.add((message_id, message.text))
            logger.warning(
                "pinned .config %s in %s skipped: %s", message_id, message.channel.key, reason
            )
            try:
                await platform.react(message.channel, message_id, WARNING_EMOJI)
            except PlatformError as exc:
                logger.warning("could not flag the pinned config %s: %s", message_id, exc)
        return resolved.config

    async def _history(
        self, platform: Platform, channel: ChannelRef, config: BotConfig, depth: int
    ) -> list[Message]:
        """The channel's recent messages with ``.history`` messages applied."""
        history = list(await platform.history(channel, limit=depth))
        if not any(m.text.startswith(".history") for m in history):
            return history
        roles = set(config.authorized_roles)

        def authorized(author: Participant) -> bool:
            return not roles or bool(roles & set(author.roles))

        async def fetch_until(link: str, limit: int) -> Sequence[Message] | None:
            return await platform.history_until(link, limit=limit)

        return await expand_history(
            history,
            me_name=config.name,
            fetch_until=fetch_until,
            authorized=authorized,
            depth=depth,
            max_nesting=config.history_max_nesting,
        )

    async def _remove_command(self, platform: Platform, command: Message) -> None:
        """The bot takes its ``m`` command out of the room; a refusal is logged once."""
        try:
            await platform.delete_message(command.channel, command.id)
        except PlatformError as exc:
            if command.channel.key not in self._undeletable:
                self._undeletable.add(command.channel.key)
                logger.warning("cannot delete m commands in %s: %s", command.channel.key, exc)

    async def _roll(
        self,
        channel: ChannelRef,
        history: Sequence[Message],
        window: list[Message],
        me: Participant,
        config: BotConfig,
    ) -> tuple[list[Message], tuple[str, ...]]:
        visible = [m for m in history if is_visible(m, config)]
        saved = await self.store.rolling_state(self.bot, channel.key)
        state = RollState(**saved) if saved else None
        rolled = roll(visible, state, config, window, me.id)
        if rolled.state != state:
            await self.store.save_rolling_state(self.bot, channel.key, asdict(rolled.state))
        return rolled.messages, rolled.breakpoints

    async def _reply_chain(
        self,
        platform: Platform,
        chosen: list[Message],
        trigger: Message | None,
        config: BotConfig,
    ) -> list[Message]:
        """Messages the trigger replies to that fell out of the window, marked as such."""
        if trigger is None or trigger.reply_to_id is None:
            return []
        ids = {m.id for m in chosen}
        if trigger.reply_to_id in ids:
            return []
        chain = await platform.reply_chain(trigger)
        return [
            replace(m, tags=m.tags | {TAG_REPLY_CHAIN})
            for m in chain
            if m.id not in ids and is_visible(m, config)
        ]

    def _records(self, channel: ChannelRef, messages: list[Message]) -> list[ToolRecord]:
        if self.tools is None or self.tools.log is None:
            return []
        oldest = messages[0].created_at if messages else None
        return self.tools.log.for_channel(channel.key, oldest)

    async def _converse(
        self,
        reply: _Reply,
        provider: Provider,
        request: LLMRequest,
        requester: Participant,
        after: str | None,
    ) -> None:
        """The tool loop: complete, run the calls, feed the results back, until done."""
        if reply.tools is not None and reply.tools.planner and reply.tools.offered():
            await self._plan_then_answer(reply, provider, request, requester, after)
            return
        calls_made = 0
        while True:
            turn, request = await self._complete_or_without_tools(reply, provider, request)
            if not turn.calls or reply.tools is None:
                return
            await reply.flush()  # what the bot said before the call appears before its log
            if calls_made + len(turn.calls) > self.config.max_tool_depth:
                limit = self.config.max_tool_depth
                await reply.say(f"(stopped: this answer reached the limit of {limit} tool calls)")
                return
            calls_made += len(turn.calls)
            outcome = await reply.tools.run(
                reply.platform, reply.channel, requester, turn.calls, after
            )
            if outcome.cancelled is not None:
                await reply.say(f"(cancelled: {outcome.cancelled} was not run)")
                return
            request = reply.tools.follow_up(request, turn, outcome.results)

    async def _plan_then_answer(
        self,
        reply: _Reply,
        provider: Provider,
        request: LLMRequest,
        requester: Participant,
        after: str | None,
    ) -> None:
        """Planner mode: ask for a JSON plan (not shown), run its tool, then answer."""
        tools = reply.tools
        assert tools is not None
        specs = tools.offered()
        planning = planning_request(request, specs)
        text = ""
        async with reply.platform.typing(reply.channel):
            async for event in provider.stream(planning):
                if isinstance(event, TextDelta):
                    text += event.text
                elif isinstance(event, UsageEvent):
                    reply.usage += event.usage
        plan = parse_plan(text, {s.name for s in specs})
        if plan is None:
            logger.info("planner: no usable plan in %r; answering directly", text[:200])
        elif plan.use_tool:
            self._plans += 1
            call = ToolCall(f"plan-{self._plans}", plan.tool, plan.args or {})
            outcome = await tools.run(reply.platform, reply.channel, requester, [call], after)
            if outcome.cancelled is not None:
                await reply.say(f"(cancelled: {outcome.cancelled} was not run)")
                return
            request = answer_request(request, call, outcome.results[0])
        await self._complete(reply, provider, request)

    async def _complete_or_without_tools(
        self, reply: _Reply, provider: Provider, request: LLMRequest
    ) -> tuple[Turn, LLMRequest]:
        """Some OpenAI-compatible servers refuse any request that offers tools (a model
        without tool support): then this bot stops offering them, says so once in the
        log, and asks again."""
        try:
            return await self._complete(reply, provider, request), request
        except ProviderError as exc:
            if not (request.tools and exc.status == 400 and reply.sent == 0):
                raise
            for runner in (self.tools, reply.tools):
                if runner is not None:
                    runner.refused_by_provider = True
            logger.warning(
                "the provider refused a request with tools (%s); continuing without tools", exc
            )
            plain = replace(request, tools=())
            return await self._complete(reply, provider, plain), plain

    async def _complete(self, reply: _Reply, provider: Provider, request: LLMRequest) -> Turn:
        text_mode = reply.tools is not None and reply.tools.text_mode
        hold_back = CallTextFilter() if text_mode else None
        turn = Turn()
        async with reply.platform.typing(reply.channel):  # while the model writes, not longer
            async for event in provider.stream(request):
                if isinstance(event, TextDelta):
                    visible = hold_back.feed(event.text) if hold_back else event.text
                    turn.text += visible
                    await reply.write(visible)
                elif isinstance(event, ToolCallEvent):
                    turn.calls.append(event.call)
                elif isinstance(event, UsageEvent):
                    reply.usage += event.usage
        if hold_back is not None and reply.tools is not None:
            rest = hold_back.flush()
            turn.text += rest
            await reply.write(rest)
            parsed = parse_calls(hold_back.full, reply.tools.schemas(), id_prefix=f"t{id(turn)}-")
            turn.raw, turn.calls = hold_back.full, parsed.calls
        return turn

    async def _report_failure(self, channel: ChannelRef, exc: Exception) -> None:
        if not self.config.error_replies:
            return
        reason = str(exc) if isinstance(exc, SalonError) else type(exc).__name__
        reason = self._redact(reason)[:_ERROR_TEXT_LIMIT]
        text = f"⚠️ {self.config.name} could not answer: {reason}"
        try:
            await self.platforms[channel.platform].send(channel, text)
        except Exception:
            logger.exception("could not report the failure in %s", channel.key)


SCHEDULER = Participant("scheduler", "Scheduler")


def _rolls(config: BotConfig) -> bool:
    """Rolling pays off where the provider caches prompt prefixes (Anthropic)."""
    return config.prompt_caching and config.provider_config().type in {"anthropic", "bedrock"}


def _bot_chain_too_long(history: Sequence[Message], trigger: Message, config: BotConfig) -> bool:
    """Bots answering bots: cut the chain once it is ``max_bot_reply_chain_depth`` long."""
    if not trigger.author.is_bot:
        return False
    chain = 0
    for message in reversed(history):
        if not is_visible(message, config):
            continue
        if not message.author.is_bot:
            break
        chain += 1
    return chain >= config.max_bot_reply_chain_depth


def _is_extra(event: Event) -> bool:
    return isinstance(event, ScheduledEvent) or TAG_ASKED in event.message.tags


def _extra_message(event: Event) -> Message:
    return _scheduler_message(event) if isinstance(event, ScheduledEvent) else event.message


def _scheduler_message(event: ScheduledEvent) -> Message:
    schedule = event.schedule
    text = f"(scheduled task #{schedule.id}, set by {schedule.created_by.name}) {schedule.prompt}"
    stamp = int(event.due.timestamp())
    return Message(f"schedule-{schedule.id}-{stamp}", schedule.channel, SCHEDULER, text, event.due)


def _requester(triggers: Sequence[Event]) -> Participant:
    """Who answers approvals: the last person who asked, or whoever set the schedule."""
    for event in reversed(triggers):
        if isinstance(event, MessageEvent):
            return event.message.author
    last = triggers[-1]
    assert isinstance(last, ScheduledEvent)
    return last.schedule.created_by
