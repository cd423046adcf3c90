"""The agent's dispatch: events in, activations out.

Events wait in a bounded queue. Each iteration drains a batch, decides which channels the
batch activates, and schedules one activation per channel. A channel's activations run one
at a time in order; while one runs, further triggers for that channel join the single
activation waiting behind it (it will read the room afresh anyway, so one answer covers
them). Different channels run concurrently, at most ``max_concurrent_activations`` at once.

The activation boundary is here: whatever goes wrong inside an activation is logged and
told in the channel as a note, never propagated; a schedule's occurrence is completed in
the store once its activation has ended (not when it is cancelled by a stop, so the next
start answers it, unless the first message of its answer went out: salon.agent.answerkey).
A message delivered twice is handled once (``submit``), also across a restart (the store's
traces).
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

from salon.agent.activation import Activation, should_activate
from salon.agent.answerkey import FirstSend
from salon.agent.conversation.answer import ChannelLogs, Conversation
from salon.agent.conversation.toolrunner import ToolRunner
from salon.agent.delivery import Delivery, DeliveryBook
from salon.agent.pipeline.steps import Attempt, Pipeline
from salon.agent.pipeline.turns import TurnBook, Turns
from salon.agent.recording.recorder import Recorder
from salon.agent.recording.traces import TraceWriter
from salon.agent.room import Room
from salon.agent.telling import ERROR_TEXT_LIMIT, log_reply, log_request, public_text
from salon.config import BotConfig, ChannelConfigs, Redactor
from salon.errors import SalonError, StoreError
from salon.llm.base import Provider
from salon.model import ChannelRef, Event, FireStatus, Message, MessageEvent, ScheduledEvent, Tag
from salon.notes import NoteStore
from salon.platforms.base import Platform
from salon.store.base import Store
from salon.store.limits import LimitStore
from salon.tools.outputs import save_beside
from salon.trace import ACTIVATION

__all__ = ["TOLD_IN_CHANNEL", "Agent", "AgentStats"]

logger = logging.getLogger(__name__)

TOLD_IN_CHANNEL = "told_in_channel"
"""Log-record attribute: the people in the channel were told of this failure already."""

_TAKEN_MESSAGES = 10_000  # message ids remembered against a platform's redelivery
# Between the platform's timestamps and ours: a message stamped up to this long after the
# start may still be one an earlier process answered. Each such message costs a store
# lookup, so the margin is small: a restart takes longer than it (the supervisor waits a
# second or more), and synchronised clocks differ by far less.
_CLOCK_SKEW = timedelta(seconds=1)
_FIND_SECONDS = 10.0  # asking the platform for a stored channel's guild


class AnswerBook(Protocol):
    """What the store says of messages an earlier process handled (its traces)."""

    async def answered(self, bot: str, platform: str, message_id: str) -> bool: ...


@dataclass
class AgentStats:
    """Counts since start: events taken from the queue, activations ended (answered, or
    their failure told), the events those activations answered, and failures."""

    events: int = 0
    activations: int = 0
    triggers: int = 0
    failures: int = 0


@dataclass
class _Lane:
    """A channel's activations: one running (holding the lock), at most one waiting."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pending: Activation | None = None


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
        traces: TraceWriter | None = None,
        delivery: DeliveryBook | None = None,
        rooms: TurnBook | None = None,
        answers: AnswerBook | None = None,
        limits: LimitStore | None = None,
        notes: NoteStore | None = None,
        chatlog: ChannelLogs | None = None,
    ) -> None:
        """The parts of the store beyond ``store``, each None where it has none:
        ``delivery``: where marks and owed answers are kept (no catch-up without);
        ``rooms``: where bots sharing a channel take turns (without: always alone);
        ``answers``: which messages an earlier process answered (without: none);
        ``limits``: limits, budgets and pauses (without: no limits, pauses in memory);
        ``notes``: the memory notes (without: no memory block); ``chatlog``: the chat log
        with joins and parts, for ``irc_logs`` (without: no such block)."""
        self.bot = bot
        self.traces = traces
        self.config = config
        self.configs = configs or ChannelConfigs(config)
        self.provider = provider
        self._providers = providers
        self.platforms = dict(platforms)
        self.store = store
        self._redact = redactor or Redactor()
        self._rng = rng or random.Random()
        self.room = Room(
            bot=bot,
            configs=self.configs,
            store=store,
            notes=notes,
            tool_log=tools.log if tools is not None else None,
        )
        self.conversation = Conversation(
            bot=bot,
            store=store,
            tools=tools,
            redactor=self._redact,
            max_tool_depth=config.max_tool_depth,
            chatlog=chatlog,
        )
        self.pipeline = Pipeline(
            bot=bot,
            store=store,
            room=self.room,
            conversation=self.conversation,
            redactor=self._redact,
            provider_for=self._provider_for,
            turns=Turns(bot=bot, book=rooms, resubmit=self.submit) if rooms is not None else None,
            limits=limits,
        )
        # Events with when they arrived (time.perf_counter), for the queue wait in traces.
        self._queue: asyncio.Queue[tuple[float, Event]] = asyncio.Queue(
            maxsize=config.event_queue_size
        )
        self._lanes: dict[str, _Lane] = {}
        self._slots = asyncio.Semaphore(config.max_concurrent_activations)
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.stats = AgentStats()
        # Platforms deliver at least once (Discord's gateway around a RESUME): a message id
        # seen before never starts a second activation. Messages older than this process
        # may have been answered by the one before it: the store's traces tell.
        self._taken: OrderedDict[str, None] = OrderedDict()
        self._started = datetime.now(UTC)
        self._answers = answers
        self.last_event_at: float | None = None  # time.time() of the newest event
        self.last_answer_at: float | None = None  # of the newest answered activation
        self.delivery: Delivery | None = None
        if delivery is not None:
            self.delivery = Delivery(
                bot=bot,
                bot_name=config.name,
                book=delivery,
                settings=config.catch_up,
                submit=self.submit,
                lease=config.process_lease,
            )

    def reconfigure(self, config: BotConfig, configs: ChannelConfigs) -> None:
        """Take a reloaded config: from the next activation on, everything reads it."""
        self.config = config
        self.configs = self.room.configs = configs
        self.conversation.max_tool_depth = config.max_tool_depth
        if self.delivery is not None:
            self.delivery.settings = config.catch_up
        if self.tools is not None:
            self.tools.config = config

    async def close(self) -> None:
        """The stop: catch-ups and watches end, the marks are written."""
        if self.pipeline.turns is not None:
            await self.pipeline.turns.close()
        if self.delivery is not None:
            await self.delivery.close()

    @property
    def tools(self) -> ToolRunner | None:
        return self.conversation.tools

    @tools.setter
    def tools(self, runner: ToolRunner | None) -> None:
        self.conversation.tools = runner
        self.room.tool_log = runner.log if runner is not None else None

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    async def submit(self, event: Event) -> None:
        """The platforms' event sink; waits when the queue is full (back-pressure). A
        message delivered again is dropped here."""
        if isinstance(event, MessageEvent) and not event.owed and self._taken_before(event.message):
            logger.info(
                "message %s in %s delivered again; dropped",
                event.message.id,
                event.channel.key,
            )
            return
        self.last_event_at = time.time()
        await self._queue.put((time.perf_counter(), event))

    def _taken_before(self, message: Message) -> bool:
        """Whether this process was handed the message already (the newest
        ``_TAKEN_MESSAGES`` ids); remembers it otherwise."""
        key = f"{message.channel.platform}:{message.id}"
        if key in self._taken:
            return True
        self._taken[key] = None
        if len(self._taken) > _TAKEN_MESSAGES:
            self._taken.popitem(last=False)
        return False

    async def _answered_before(self, message: Message) -> bool:
        """For a message older than this process: whether an earlier process answered it.
        Newer ones cost no store round trip (only this process can have seen them)."""
        if self._answers is None or message.created_at >= self._started + _CLOCK_SKEW:
            return False
        try:
            return await self._answers.answered(self.bot, message.channel.platform, message.id)
        except Exception:  # answering twice is better than not answering
            logger.exception("could not look up whether %s was answered", message.id)
            return False

    async def run(self) -> None:
        """Process events until cancelled; activations in flight are cancelled with it."""
        async with asyncio.TaskGroup() as tasks:
            while True:
                batch = await self._next_batch()
                try:
                    for activation in await self._plan(batch):
                        self._schedule(tasks, activation)
                finally:
                    for _ in batch:
                        self._queue.task_done()

    async def wait_idle(self) -> None:
        """Return once every submitted event has been handled and nothing is running."""
        while True:
            await self._queue.join()
            await self._idle.wait()
            if self._queue.empty() and self._active == 0:
                return

    async def _next_batch(self) -> list[tuple[float, Event]]:
        batch = [await self._queue.get()]
        while len(batch) < self.config.event_batch_max:
            try:
                batch.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        self.stats.events += len(batch)
        return batch

    async def _plan(self, batch: list[tuple[float, Event]]) -> list[Activation]:
        """One activation per channel that any event of the batch activates. Channels are
        judged side by side (a config lookup may wait on the platform), each in order."""
        by_channel: dict[str, list[tuple[float, Event]]] = {}
        for arrived, event in batch:
            if event.channel.platform not in self.platforms:
                logger.warning("event from unknown platform %s dropped", event.channel.platform)
                await self._complete_schedules([event], FireStatus.DROPPED)
                continue
            by_channel.setdefault(event.channel.key, []).append((arrived, event))
        channels = list(by_channel.values())
        if len(channels) == 1:  # most batches: judged here, without a task of its own
            judged = [await self._judge(channels[0])]
        else:
            judged = await asyncio.gather(*(self._judge(events) for events in channels))
        activations = [activation for activation in judged if activation is not None]
        await self._owe(activations, batch)
        return activations

    async def _owe(self, activations: list[Activation], batch: list[tuple[float, Event]]) -> None:
        """Before any of them runs: the messages they answer are owed (a crash from here on
        leaves them to the next start), and the batch's messages are seen."""
        if self.delivery is None:
            return
        for _, event in batch:
            if isinstance(event, MessageEvent):
                self.delivery.seen(event.message)
        owed = [m for activation in activations for m in _messages(activation.triggers)]
        await self.delivery.owe(owed)

    async def _judge(self, events: list[tuple[float, Event]]) -> Activation | None:
        """The activation one channel's events of a batch make, if any of them activates."""
        activation: Activation | None = None
        platform = self.platforms[events[0][1].channel.platform]
        found: ChannelRef | None = None
        for arrived, stored in events:
            event = stored
            if stored.channel.bare:
                found = found or await self._complete(platform, stored.channel)
                event = _in_channel(stored, found)
            if isinstance(event, MessageEvent) and not await self._activates(platform, event):
                await self._drop_owed(event)
                continue
            if isinstance(event, MessageEvent) and await self._answered_before(event.message):
                logger.info("message %s was answered before a restart; dropped", event.message.id)
                await self._drop_owed(event)
                continue
            if isinstance(event, ScheduledEvent) and await self._shown_before(platform, event):
                await self._complete_schedules([event], FireStatus.DONE)
                continue
            if activation is None:
                activation = Activation(event.channel, [event], queued_at=arrived)
            else:
                activation.triggers.append(event)
        return activation

    async def _drop_owed(self, event: MessageEvent) -> None:
        """An owed answer taken over from a stopped process, found not to be owed now."""
        if event.owed and self.delivery is not None:
            await self.delivery.settle([event.message])

    async def _complete(self, platform: Platform, channel: ChannelRef) -> ChannelRef:
        """A channel rebuilt from a stored key (a schedule, an event from outside) as the
        platform knows it: its guild decides the config layers, note scopes and budgets,
        and which channels a pinned config may link. Not found: the bare one, as before."""
        try:
            async with asyncio.timeout(_FIND_SECONDS):
                found = await platform.find_channel(channel.id)
        except Exception as exc:
            logger.warning("could not look %s up (%s); its guild is not known", channel.key, exc)
            return channel
        if found is None or found.key != channel.key:
            logger.info("%s is not known to its platform; its guild is not known", channel.key)
            return channel
        return found

    async def _activates(self, platform: Platform, event: MessageEvent) -> bool:
        """Whether this message calls for an answer; a failure to tell drops the event
        (logged), never the loop."""
        try:
            config = await self.room.config_in(platform, event.channel)
            return should_activate(
                event.message,
                platform.self_participant,
                config,
                monitored=Tag.MONITORED in event.message.tags,
                rng=self._rng,
            ) or self.pipeline.wants(event.message, platform.self_participant, config)
        except Exception:
            logger.exception("could not judge a message in %s; ignored", event.channel.key)
            return False

    def _schedule(self, tasks: asyncio.TaskGroup, activation: Activation) -> None:
        key = activation.channel.key
        lane = self._lanes.setdefault(key, _Lane())
        if lane.pending is not None:
            lane.pending.triggers.extend(activation.triggers)
            return
        lane.pending = activation
        self._active += 1
        self._idle.clear()
        tasks.create_task(self._run_in_turn(key, lane, activation))

    async def _run_in_turn(self, key: str, lane: _Lane, activation: Activation) -> None:
        try:
            async with lane.lock:
                lane.pending = None  # no trigger joins it from here on
                activation.first_send = self._first_send(activation)
                if self.delivery is not None:
                    self.delivery.answering(activation.channel)
                async with self._slots:
                    await self._activate_guarded(activation)
                self.stats.activations += 1
                self.stats.triggers += len(activation.triggers)
                # Not reached when a stop cancels it: the claim stays open for the next
                # start, and so do the answers it owes.
                await self._complete_schedules(activation.triggers, FireStatus.DONE)
                if self.delivery is not None:
                    await self.delivery.settle(_messages(activation.triggers))
        finally:
            if lane.pending is None and not lane.lock.locked():
                self._lanes.pop(key, None)
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def _activate_guarded(self, activation: Activation) -> None:
        """The activation boundary: a failure is logged and told, never propagated; every
        activation leaves a trace, whatever its outcome."""
        platform = self.platforms[activation.channel.platform]
        recorder = Recorder(self.bot, activation, platform, queued_at=activation.queued_at)
        recorder.trace.activation = secrets.token_hex(6)
        token = ACTIVATION.set(recorder.trace.activation)  # on every log line from here
        try:
            await self._activate_traced(activation, recorder)
        finally:
            ACTIVATION.reset(token)

    async def _activate_traced(self, activation: Activation, recorder: Recorder) -> None:
        if self.traces is not None:
            self.traces.begin(recorder)
        log_request(activation)
        try:
            answered = await self.activate(activation, recorder)
        except asyncio.CancelledError as exc:
            recorder.finish("cancelled", exc, "stopped before the answer was complete")
            self._trace(recorder)
            raise
        except Exception as exc:
            if recorder.answer_shown:
                self._failed_after_answer(activation, recorder, exc)
                self._trace(recorder)
                return
            self.stats.failures += 1
            reason = self._reason(exc)
            if self._answer_when_store_is_back(activation, exc):
                reason = "its database cannot be reached now; it will answer once it is back"
            told = await self._report_failure(activation.channel, reason, recorder)
            logger.exception(
                "activation in %s failed", activation.channel.key, extra={TOLD_IN_CHANNEL: told}
            )
            recorder.finish("error", exc, reason)
        else:
            recorder.finish("answered" if answered else "stopped")
            log_reply(activation, recorder.trace.answer)
            if answered:
                self.last_answer_at = time.time()
                await self._save_text(recorder)
        self._trace(recorder)

    def _answer_when_store_is_back(self, activation: Activation, exc: Exception) -> bool:
        """A question that failed because the store was away is kept to be answered when
        it is back (``Delivery.when_store_is_back``)."""
        if not isinstance(exc, StoreError) or self.delivery is None:
            return False
        messages = _messages(activation.triggers)
        return bool(messages) and self.delivery.when_store_is_back(messages)

    async def _save_text(self, recorder: Recorder) -> None:
        """``outputs.save_text``: the answer beside the files its tools made."""
        trace = recorder.trace
        files = [path for tool in trace.tools for path in tool.files]
        if not self.config.outputs.save_text or not files:
            return
        try:
            owner = trace.requester.get("name", "")
            await asyncio.to_thread(save_beside, files, owner, trace.answer)
        except OSError:
            logger.exception("could not save the answer beside its files")

    def _failed_after_answer(
        self, activation: Activation, recorder: Recorder, exc: Exception
    ) -> None:
        """The answer is out: a failure of what comes after it (storing the rolling state,
        settling budgets…) is no failure to answer. Logged and traced, never told."""
        logger.exception(
            "after the answer was shown in %s, its bookkeeping failed", activation.channel.key
        )
        recorder.finish("answered", exc, self._reason(exc))
        self.last_answer_at = time.time()

    def _trace(self, recorder: Recorder) -> None:
        if self.traces is not None:
            self.traces.submit(recorder)

    async def activate(self, activation: Activation, recorder: Recorder) -> bool:
        """Answer in the activation's channel; False when the loop guard or a step of the
        pipeline stopped it."""
        platform = self.platforms[activation.channel.platform]
        with recorder.phase("config"):
            resolved = await self.room.resolve(platform, activation.channel)
        recorder.trace.layers = list(resolved.layers)
        config = resolved.config
        provider = self._provider_for(config)
        rolling = config.prompt_caching and provider.traits.prefix_cache
        # The room, the pipeline's steps (salon.agent.pipeline.steps), then the conversation.
        attempt = Attempt(platform, activation, config, provider, recorder, rolling)
        return await self.pipeline.run(attempt)

    def _provider_for(self, config: BotConfig) -> Provider:
        if self._providers is None or config.provider == self.config.provider:
            return self.provider
        return self._providers(config)

    def _first_send(self, activation: Activation) -> FirstSend | None:
        """For an answer owed in the store (schedule occurrences, messages): the key of its
        first message, recorded with what it answers."""
        fires = [
            (event.schedule.id, event.due)
            for event in activation.triggers
            if isinstance(event, ScheduledEvent)
        ]
        delivery = self.delivery
        messages = _messages(activation.triggers) if delivery is not None else []
        if not fires and not messages:
            return None
        store = self.store

        async def record(key: str) -> None:
            if fires:
                await store.answering(fires, key)
            if messages and delivery is not None:
                await delivery.owe_key(messages, key)

        return FirstSend(record)

    async def _shown_before(self, platform: Platform, event: ScheduledEvent) -> bool:
        """Whether the answer a stopped process began for this occurrence reached the
        channel (its first message, under the recorded key): then it is not answered again.
        Where the platform cannot tell, or asking fails, it is answered again."""
        if event.answer_key is None:
            return False
        schedule = event.schedule
        note = (
            f"({self.config.name} restarted while answering scheduled task #{schedule.id}; "
            "answering it now)"
        )
        try:
            shown = await platform.sent_before(event.channel, event.answer_key, note=note)
        except Exception:
            logger.exception("schedule #%d: could not ask whether its answer went out", schedule.id)
            return False
        if shown is None:
            logger.info(
                "schedule #%d: %s cannot tell if its answer went out", schedule.id, platform.name
            )
        elif shown:
            logger.info("schedule #%d: its answer went out before the restart", schedule.id)
        return bool(shown)

    async def _complete_schedules(self, events: list[Event], status: FireStatus) -> None:
        for event in events:
            if not isinstance(event, ScheduledEvent):
                continue
            try:
                await self.store.complete_fire(event.schedule.id, event.due, status)
            except Exception:  # the occurrence will be answered again after a restart
                logger.exception("could not complete schedule #%d", event.schedule.id)

    def _reason(self, exc: Exception) -> str:
        """A failure in one line people may read: our own errors' words, else the type;
        never an address or a path (the log has them)."""
        reason = str(exc) if isinstance(exc, SalonError) else type(exc).__name__
        return self._redact(public_text(reason))[:ERROR_TEXT_LIMIT]

    async def _report_failure(self, channel: ChannelRef, reason: str, recorder: Recorder) -> bool:
        """Tell the channel, in one line, as a note; returns whether it was told."""
        if not self.config.error_replies:
            return False
        custom = self.config.error_message
        text = (
            f"⚠️ {self.config.name} could not answer: {reason}"
            if custom is None
            else custom.replace("{reason}", reason)
        )
        try:
            await self.platforms[channel.platform].send(channel, text, note=True)
        except Exception:
            logger.exception("could not report the failure in %s", channel.key)
            return False
        recorder.said(text, note=True)
        return True


def _messages(events: list[Event]) -> list[Message]:
    return [event.message for event in events if isinstance(event, MessageEvent)]


def _in_channel(event: Event, channel: ChannelRef) -> Event:
    """``event`` with its channel completed (the same key)."""
    if isinstance(event, ScheduledEvent):
        return replace(event, schedule=replace(event.schedule, channel=channel))
    return replace(event, message=replace(event.message, channel=channel))
