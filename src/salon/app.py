"""Composition root: builds one bot from its config and owns its tasks and shutdown."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from types import TracebackType

from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.agent.delivery import Delivery
from salon.agent.digest import Digester
from salon.agent.recording.traces import TraceWriter
from salon.bot_channels import BotChannels
from salon.bot_commands import BotCommands
from salon.bots import data_dir, database_url, load_bot, local_model_problems, store_for
from salon.config import BotConfig, ChannelConfigs, ConfigSet, Secrets
from salon.llm.base import Provider
from salon.llm.factory import build_provider
from salon.model import Event
from salon.otel import otel_export
from salon.platforms import registry
from salon.platforms.adapter import BuildContext
from salon.platforms.base import Platform
from salon.scheduler import Clock, Scheduler
from salon.tasks import TaskState, supervise
from salon.tools.builtin import MemoryBook, ScheduleBook, build_builtin_server
from salon.tools.hub import ServerSpec, ToolHub
from salon.tools.log import ToolLog
from salon.tools.outputs import OutputDir
from salon.tools.servers import builtin_spec, configured_specs
from salon.upkeep import Upkeep, Vitals

__all__ = ["BotApp", "data_dir", "database_url", "load_bot", "local_model_problems", "store_for"]

logger = logging.getLogger(__name__)

TRACES_FLUSH = 4.0  # seconds the last traces get to be written at a stop
CONFIGURED = -1.0  # ``serve``'s grace: the config's ``shutdown_grace``


class BotApp:
    """One running bot: store, provider, agent and platforms, closed in reverse order."""

    def __init__(
        self,
        *,
        key: str,
        config: BotConfig,
        root: Path,
        secrets: Secrets,
        provider: Provider | None = None,
        extra_servers: Sequence[ServerSpec] = (),
        clock: Clock | None = None,
        channel_configs: ChannelConfigs | None = None,
        watch_config: bool = False,
    ) -> None:
        """``watch_config``: ``root`` is the bot's config directory, and edits to its files
        apply while the bot runs."""
        self.key = key
        self.config = config
        self.channel_configs = channel_configs or ChannelConfigs(config)
        self.root = root
        self.secrets = secrets
        owner = uuid.uuid4().hex[:12]  # this process, in the store's claims and leases
        self.store = store_for(root, config, owner=owner, secrets=secrets)
        self.provider = provider or build_provider(config, secrets, deferred=True)
        self._providers: dict[str, Provider] = {config.provider: self.provider}
        self.platforms: dict[str, Platform] = {}
        self.channels = BotChannels(self.platforms, lambda: self.config)
        self.scheduler = Scheduler(
            bot=key,
            store=self.store.schedules,
            sink=self._submit,
            clock=clock,
            misfire_grace=timedelta(seconds=config.misfire_grace),
            owner=owner,
            lease=config.process_lease,
            serves=self.channels.serves,
        )
        self.outputs = OutputDir(data_dir(root, config), config.outputs, timezone=config.timezone)
        self.schedule_book: ScheduleBook | None = None  # the schedule tools' rules
        self.memory_book: MemoryBook | None = None  # the notes tools' (memory.enabled)
        specs = self._server_specs(extra_servers)
        self.hub = ToolHub(specs, redact=secrets.redactor(), outputs=self.outputs)
        self.commands = BotCommands(
            bot=key,
            schedules=self.store.schedules,
            changed=self.scheduler.changed,
            config=lambda: self.config,
            secrets=secrets,
            platforms=self.platforms,
            runner=lambda: self._agent.tools if self._agent else None,
            generates="comfyui" in {s.name for s in specs},
        )
        self.tool_log = ToolLog(data_dir(root, config) / "tools", key)
        self.otel = otel_export(key, config, secrets)
        self.traces = TraceWriter(
            store=self.store, settings=config.traces, prices=config.prices, sink=self.otel
        )
        self._stack = AsyncExitStack()
        self._agent: Agent | None = None
        self.tasks: dict[str, TaskState] = {}  # supervised tasks, for health
        self.upkeep = Upkeep(
            bot=key,
            heartbeats=self.store.health,
            inbox=self.store.inbox,
            vitals=Vitals(
                platforms=lambda: self.platforms,
                queue_depth=lambda: self.agent.queue_depth if self._agent else 0,
                last_event_at=lambda: self._agent.last_event_at if self._agent else None,
                last_answer_at=lambda: self._agent.last_answer_at if self._agent else None,
                tasks=self._task_states,
            ),
            sink=self._submit,
            owner=self.scheduler.owner,
            root=root if watch_config else None,
            apply=self.reconfigure,
            current=lambda: self.config,
            notes=self.store.notes,
        )

    @property
    def agent(self) -> Agent:
        if self._agent is None:
            raise RuntimeError("BotApp is not started")
        return self._agent

    def build_context(self) -> BuildContext:
        """What the bot's platforms are built from (``salon.platforms.registry``)."""
        return BuildContext(
            bot=self.key,
            config=self.config,
            current=lambda: self.config,
            secrets=self.secrets,
            data_dir=data_dir(self.root, self.config),
            chat_log=self.store.chatlog,
            monitors=self.store.channels,
            cursors=self.store.delivery,
            commands=self.commands.answers(),
            memory=self.memory_book,
        )

    def _integration_specs(self) -> list[ServerSpec]:
        if not self.config.integrations.configured():
            return []  # the vendors' servers (and what they import) load only when used
        from salon.integrations import integration_specs

        return integration_specs(self.config, self.secrets, root=self.root)

    def _server_specs(self, extra: Sequence[ServerSpec]) -> list[ServerSpec]:
        specs = [
            *configured_specs(self.config, self.secrets, self.store.tokens, self.key),
            *self._integration_specs(),
            *extra,
        ]
        if self.config.builtin_tools:
            book = ScheduleBook(
                self.store.schedules,
                timezone=self.config.timezone,
                now=self.scheduler.clock.now,
                changed=self.scheduler.changed,
                check_target=self.channels.schedule_target,
                min_interval=self.config.schedule_min_interval,
                max_recurring=self.config.schedule_max_recurring,
            )
            self.schedule_book = book
            builtin = build_builtin_server(
                self.key,
                self.store.chatlog,
                self.channels.users_of,
                book,
                history=self.channels.history_of,
                memory=self._memory_book(),
                access=self.channels.readable,
            )
            specs.append(builtin_spec(builtin))
        return specs

    def _memory_book(self) -> MemoryBook | None:
        """The notes tools' rules (``memory.enabled``); the settings are read at each call."""
        if not self.config.memory.enabled:
            return None
        self.memory_book = MemoryBook(
            self.store.notes,
            settings=lambda: self.config.memory,
            authorized_roles=lambda: self.config.authorized_roles,
        )
        return self.memory_book

    def provider_for(self, config: BotConfig) -> Provider:
        """The provider a guild or channel config names (built once, closed at the end)."""
        if config.provider not in self._providers:
            provider = build_provider(config, self.secrets, deferred=True)
            self._providers[config.provider] = provider
            self._stack.push_async_callback(provider.aclose)
        return self._providers[config.provider]

    async def _submit(self, event: Event) -> None:
        await self.agent.submit(event)

    def unattended_platforms(self) -> list[Platform]:
        """The platforms of the config that run unattended (``salon run``)."""
        return registry.unattended(self.build_context())

    async def __aenter__(self) -> BotApp:
        await self.store.open()
        self._stack.push_async_callback(self.store.close)
        if self.otel is not None:
            stop = self.otel.shutdown
            self._stack.push_async_callback(asyncio.to_thread, stop)
        self._stack.push_async_callback(self.provider.aclose)
        seeded = self.tool_log.seed(self.config.tool_log_seed_hours)
        logger.info("bot %s: %d recent tool calls loaded", self.key, seeded)
        await self.hub.start()
        self._stack.push_async_callback(self.hub.stop)
        runner = ToolRunner(
            bot=self.key,
            config=self.config,
            tools=self.hub,
            store=self.store,
            log=self.tool_log,
            redactor=self.secrets.redactor(),
        )
        self._agent = Agent(
            bot=self.key,
            config=self.config,
            provider=self.provider,
            platforms=self.platforms,
            store=self.store,
            tools=runner,
            redactor=self.secrets.redactor(),
            configs=self.channel_configs,
            providers=self.provider_for,
            traces=self.traces,
            delivery=self.store.delivery,
            rooms=self.store.rooms,
            answers=self.store.traces,
            limits=self.store.limits,
            notes=self.store.notes,
            chatlog=self.store.chatlog,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def serve(
        self,
        until: asyncio.Event,
        platforms: Sequence[Platform] = (),
        *,
        grace: float | None = CONFIGURED,
    ) -> None:
        """Run the agent and the platforms until ``until`` is set, then shut down, giving
        answers in progress ``grace`` seconds (None: as long as they take; by default the
        config's ``shutdown_grace``)."""
        for platform in platforms:
            self.platforms[platform.name] = platform
        agent = self.agent
        agent.platforms.update(self.platforms)
        if grace == CONFIGURED:
            grace = self.config.shutdown_grace
        delivery = agent.delivery
        running = [
            self._supervised("agent", agent.run),
            self._supervised("scheduler", self.scheduler.run),
            self._supervised("schedule-watch", self.scheduler.watch),
            self._supervised("lease", self.scheduler.keep_lease),
            self._supervised("traces", self.traces.run),
            self._supervised("trace-pruning", self.traces.prune),
            self._supervised("heartbeat", self.upkeep.heartbeat),
            self._supervised("inbox", self.upkeep.take_events),
            self._supervised("config-watch", self.upkeep.watch_config),
            self._supervised("note-pruning", self.upkeep.prune_notes),
            self._supervised("digests", Digester.of(self, agent).run),
        ]
        if delivery is not None:
            await self._begin_delivery(delivery)
            running.append(self._supervised("delivery-marks", delivery.run))
        try:
            for platform in self.platforms.values():
                if delivery is not None:
                    platform.on_gap(delivery.after_gap)
                await platform.start(agent.submit)
                logger.info("bot %s is on %s", self.key, platform.name)
            await self.channels.close_stale_approvals(self.store.approvals, self.key)
            if delivery is not None:  # what was missed while stopped, in the background
                running.append(asyncio.create_task(self._catch_up(delivery), name="catch-up"))
            # Ready: the provider's SDK loads now, before the first answer needs it.
            running.append(asyncio.create_task(self._warm(), name=f"warm-{self.key}"))
            await until.wait()
            await self._drain(grace)
            await self._flush_traces()
            await agent.close()
            await self.upkeep.last_beat()
        finally:
            for platform in self.platforms.values():
                await platform.stop()
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await self._release_lease()

    async def _begin_delivery(self, delivery: Delivery) -> None:
        try:
            await delivery.begin()
        except Exception:  # the gap's length is not known; the read-back goes on
            logger.exception("bot %s: could not read when it last ran", self.key)

    async def _catch_up(self, delivery: Delivery) -> None:
        try:
            await delivery.at_start(self.platforms)
        except Exception:  # the next gap tries again; nothing else depends on it
            logger.exception("bot %s: could not catch up on what it missed", self.key)

    async def _warm(self) -> None:
        try:
            await self.provider.warm()
        except Exception:  # the first request builds it again and says what fails
            logger.exception("bot %s: could not load its provider ahead of use", self.key)

    def reconfigure(self, configs: ConfigSet) -> None:
        """A reloaded config directory: the bot's new config applies from the next activation
        (keys of the whole process need a restart, which the heartbeat says)."""
        self.config = configs.bots[self.key]
        self.channel_configs = configs.channel_configs(self.key)
        self.traces.settings, self.traces.prices = self.config.traces, dict(self.config.prices)
        self.scheduler.misfire_grace = timedelta(seconds=self.config.misfire_grace)
        if self.schedule_book is not None:
            self.schedule_book.min_interval = self.config.schedule_min_interval
            self.schedule_book.max_recurring = self.config.schedule_max_recurring
        if self._agent is not None:
            self._agent.reconfigure(self.config, self.channel_configs)

    def _task_states(self) -> dict[str, TaskState]:
        states = dict(self.tasks)
        states["chat-log writer"] = self.store.chatlog.writer_state
        if self.otel is not None:
            states["otel export"] = self.otel.task_state()
        for platform in self.platforms.values():
            if platform.connection is not None:
                states[platform.connection.name] = platform.connection
        return states

    def _supervised(self, name: str, run: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        state = self.tasks[name] = TaskState(name)
        backoff = (self.config.restart_backoff_initial, self.config.restart_backoff_max)
        work = supervise(
            f"{self.key}: {name}",
            run,
            state=state,
            backoff_initial=min(backoff[0], 1.0),
            backoff_max=min(backoff[1], 30.0),
        )
        return asyncio.create_task(work, name=f"{name}-{self.key}")

    async def _release_lease(self) -> None:
        """What this process leaves open is taken over by another at once, not after its
        lease runs out."""
        try:
            await self.store.schedules.release_lease()
        except Exception:
            logger.exception("bot %s: could not give its lease back", self.key)

    async def _flush_traces(self) -> None:
        try:
            async with asyncio.timeout(TRACES_FLUSH):
                await self.traces.flush()
        except TimeoutError:
            logger.warning("bot %s: some traces were not written before the stop", self.key)

    async def _drain(self, grace: float | None) -> None:
        try:
            async with asyncio.timeout(grace):
                await self.agent.wait_idle()
        except TimeoutError:
            logger.warning("bot %s: gave up waiting for answers in progress", self.key)
