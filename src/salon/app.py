"""Composition root: builds one bot from its config and owns its tasks and shutdown."""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from salon.agent import Agent
from salon.agent.conversation.toolrunner import ToolRunner
from salon.agent.delivery import Delivery
from salon.agent.digest import Digester
from salon.agent.recording.traces import TraceWriter
from salon.bots import data_dir, database_url, load_bot, local_model_problems, store_for
from salon.config import BotConfig, ChannelConfigs, ConfigSet, Secrets
from salon.errors import PlatformError, ToolError
from salon.llm.base import Provider
from salon.llm.factory import build_provider, warm_provider
from salon.model import Approval, ChannelRef, Event, Message, Participant, Schedule, ToolCall
from salon.otel import otel_export
from salon.platforms.base import Platform, readable_through
from salon.platforms.slack import build as build_slack
from salon.scheduler import Clock, Scheduler
from salon.tasks import TaskState, supervise
from salon.tools.builtin import OPERATOR, MemoryBook, ScheduleBook, build_builtin_server
from salon.tools.chatlog import log_only
from salon.tools.hub import ServerSpec, ToolHub
from salon.tools.log import ToolLog
from salon.tools.outputs import OutputDir
from salon.tools.servers import builtin_spec, configured_specs
from salon.upkeep import Upkeep, Vitals

if TYPE_CHECKING:
    from salon.platforms.terminal import TerminalPlatform

__all__ = ["BotApp", "data_dir", "database_url", "load_bot", "local_model_problems", "store_for"]

logger = logging.getLogger(__name__)

GENERATE_TOOL = "generate_image"  # the comfyui integration's tool, run by /generate
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
        self.scheduler = Scheduler(
            bot=key,
            store=self.store.schedules,
            sink=self._submit,
            clock=clock,
            misfire_grace=timedelta(seconds=config.misfire_grace),
            owner=owner,
            lease=config.process_lease,
            serves=self._serves,
        )
        self.outputs = OutputDir(data_dir(root, config), config.outputs, timezone=config.timezone)
        self.schedule_book: ScheduleBook | None = None  # the schedule tools' rules
        self.memory_book: MemoryBook | None = None  # the notes tools' (memory.enabled)
        specs = self._server_specs(extra_servers)
        self._server_names = {s.name for s in specs}
        self.hub = ToolHub(specs, redact=secrets.redactor(), outputs=self.outputs)
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

    def terminal(self, **kwargs: object) -> TerminalPlatform:
        from salon.platforms.terminal import TerminalPlatform

        terminal = TerminalPlatform(
            bot=self.key,
            bot_name=self.config.name,
            user_name=self.config.platforms.terminal.user_name,
            chat_log=self.store.chatlog,
            commands={"/schedules": self.schedules_command},
            memory=self.memory_book,
            **kwargs,  # type: ignore[arg-type]
        )
        self.platforms[terminal.name] = terminal
        return terminal

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
                check_target=self.check_schedule_target,
                min_interval=self.config.schedule_min_interval,
                max_recurring=self.config.schedule_max_recurring,
            )
            self.schedule_book = book
            builtin = build_builtin_server(
                self.key,
                self.store.chatlog,
                self._users_of,
                book,
                history=self._history_of,
                memory=self._memory_book(),
                access=functools.partial(readable_through, self.platforms),
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

    def platform_names(self) -> list[str]:
        """The platforms this bot's config puts it on (whether started here or not)."""
        names = ["terminal", *self.platforms]
        platforms = self.config.platforms
        kinds = ("discord", "irc", "matrix", "slack")
        names += [n for n in kinds if getattr(platforms, n) is not None]
        return sorted(set(names))

    def check_schedule_target(self, source: str, target: str, requester: Participant) -> str | None:
        """Where a schedule may post: a channel of a platform this bot is on; another
        channel than the one it is set in only for the operator (the terminal,
        ``salon tools call``) and people holding one of ``authorized_roles``."""
        platform, colon, channel_id = target.partition(":")
        if not colon or not channel_id:
            example = source or "irc:#salon"
            return f"{target!r} is not a channel: write platform:channel, e.g. {example}"
        known = self.platform_names()
        if platform not in known:
            return f"this bot is not on {platform!r} (it is on: {', '.join(known)})"
        irc = self.config.platforms.irc
        if platform == "irc" and irc is not None and channel_id.startswith(("#", "&")):
            joined = {c.lower() for c in irc.channels}
            if channel_id.lower() not in joined:
                return f"this bot is not in {channel_id} (it joins: {', '.join(irc.channels)})"
        if platform == "discord" and not channel_id.isdigit():
            return f"{target!r} is not a Discord channel: use the channel's id, discord:123…"
        if target == source or requester.id == OPERATOR or source.startswith("terminal:"):
            return None
        roles = set(self.config.authorized_roles)
        if roles and not roles.isdisjoint(requester.roles):
            return None
        return (
            "a schedule can only post in the channel it is set in; posting elsewhere needs "
            "one of the authorized roles"
        )

    async def _submit(self, event: Event) -> None:
        await self.agent.submit(event)

    async def schedules_command(
        self,
        channel: ChannelRef,
        words: str,
        *,
        requester: Participant | None = None,
        others: str = "",
    ) -> str:
        """``/schedules`` lists the channel's schedules; ``/schedules cancel N`` cancels one:
        with ``requester``, only one they set (``others``: who else may, for the refusal)."""
        parts = words.split()
        if len(parts) == 2 and parts[0] == "cancel" and parts[1].lstrip("#").isdigit():
            number = int(parts[1].lstrip("#"))
            if requester is not None:
                asked = {s.id: s for s in await self.store.schedules.find(self.key)}.get(number)
                if asked is not None and asked.created_by.id != requester.id:
                    who = f"they or {others}" if others else "they"
                    by = asked.created_by.name
                    return f"Schedule #{number} was set by {by}: only {who} can cancel it."
            if await self.store.schedules.cancel_schedule(self.key, number):
                self.scheduler.changed()
                return f"cancelled schedule #{number}"
            return f"no active schedule #{number}"
        if parts:
            return "usage: /schedules, or /schedules cancel NUMBER"
        found = await self.store.schedules.find(self.key, channel_key=channel.key)
        return "\n".join(s.describe() for s in found) or "no schedules here"

    def offers_generate(self) -> bool:
        """Whether ``/generate`` is offered: the comfyui integration is configured."""
        return "comfyui" in self._server_names

    async def generate_command(
        self, channel: ChannelRef, requester: Participant, arguments: dict[str, Any]
    ) -> str:
        """``/generate``: the image tool for ``requester`` in ``channel``, gated, shown
        and logged like the model's calls; returns one line on how it went."""
        platform = self.platforms.get(channel.platform)
        runner = self.agent.tools
        if platform is None or runner is None:
            return "Image generation is not available here."
        call = ToolCall(f"generate-{uuid.uuid4().hex[:12]}", GENERATE_TOOL, arguments)
        outcome = await runner.run(platform, channel, requester, [call], None)
        if outcome.cancelled is not None:
            return "Not generated: the approval was refused or timed out."
        (result,) = outcome.results
        if result.is_error:
            return f"Not generated: {result.content.splitlines()[0][:300]}"
        return "Done: the image is in the channel."

    def activity_answer(self) -> str:
        """What ``/activity`` answers: a link to the web server's activity page that signs
        its holder in for ``web.link_minutes``, or what is missing for one."""
        web = self.config.web
        key = self.secrets.get(web.activity_key_env)
        if not web.public_url:
            return "The activity page has no public address: set web.public_url in the config."
        if not key:
            return f"The activity page is off: {web.activity_key_env} is not set for this bot."
        from salon.web.links import activity_link  # itsdangerous: off a bot's start

        link = activity_link(web.public_url, key, web.link_minutes)
        minutes = f"{web.link_minutes:g} minutes"
        return f"Activity page (the link works for {minutes}; keep it to yourself): {link}"

    async def _users_of(self, channel_key: str) -> Sequence[str]:
        channel = ChannelRef.from_key(channel_key)
        platform = self.platforms.get(channel.platform)
        return [] if platform is None else await platform.current_users(channel)

    async def _history_of(self, channel: ChannelRef, limit: int) -> Sequence[Message]:
        """A channel as its platform keeps it (Discord), for the chat-log tools (who may read
        which: ``readable_through``); a refusal (a missing permission) is the tool's error."""
        platform = self.platforms.get(channel.platform)
        if platform is None:  # salon tools call --channel discord:…: not connected
            return await log_only(channel, limit)
        try:
            return await platform.history(channel, limit=limit)
        except PlatformError as exc:
            raise ToolError(str(exc)) from exc

    def unattended_platforms(self) -> list[Platform]:
        """The platforms of the config that run without a terminal (``salon run``)."""
        platforms: list[Platform] = []
        discord_config = self.config.platforms.discord
        if discord_config is not None:
            from salon.platforms.discord import DiscordPlatform  # each SDK only when used

            platforms.append(
                DiscordPlatform(
                    bot=self.key,
                    bot_name=self.config.name,
                    config=discord_config,
                    secrets=self.secrets,
                    monitors=self.store.channels,
                    schedules=self.schedules_command,
                    generate=self.generate_command if self.offers_generate() else None,
                    authorized_roles=self.config.authorized_roles,
                    activity=self.activity_answer,
                    memory=self.memory_book,
                )
            )
        irc = self.config.platforms.irc
        if irc is not None:
            from salon.platforms.irc import IrcPlatform

            platforms.append(
                IrcPlatform(
                    bot=self.key,
                    bot_name=self.config.name,
                    config=irc,
                    secrets=self.secrets,
                    chat_log=self.store.chatlog,
                    memory=self.memory_book,
                )
            )
        if (matrix := self.config.platforms.matrix) is not None:
            from salon.platforms.matrix import MatrixPlatform
            from salon.platforms.matrix.kept import Kept

            where = data_dir(self.root, self.config)
            kept = Kept(self.store.delivery, self.key, lambda: self.config.catch_up.max_age)
            platforms.append(
                MatrixPlatform(self.config.name, matrix, self.secrets, where, kept=kept)
            )
        platforms += build_slack(self.key, self.config, self.secrets, self.store.channels)
        return platforms

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
            await self._close_stale_approvals()
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
            await warm_provider(self.provider)
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
            connection = getattr(platform, "connection", None)
            if isinstance(connection, TaskState):
                states[connection.name] = connection
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

    async def _serves(self, schedule: Schedule) -> bool:
        """Whether this process fires ``schedule``: a sharded Discord bot's process fires
        those of the guilds on its own shards."""
        platform = self.platforms.get(schedule.channel.platform)
        if platform is None or platform.name != "discord":
            return True
        from salon.platforms.discord import DiscordPlatform  # loaded: the platform runs

        assert isinstance(platform, DiscordPlatform)
        return await platform.serves(schedule.channel)

    async def _release_lease(self) -> None:
        """What this process leaves open is taken over by another at once, not after its
        lease runs out."""
        try:
            await self.store.schedules.release_lease()
        except Exception:
            logger.exception("bot %s: could not give its lease back", self.key)

    async def _close_stale_approvals(self) -> None:
        """Approvals left open by a process that crashed or stopped are closed, and the
        channel is told; those of living processes stay theirs to answer."""
        for approval_id, channel_key, tool in await self.store.approvals.stale_approvals(self.key):
            await self.store.approvals.close_approval(approval_id, Approval.CLOSED)
            channel = ChannelRef.from_key(channel_key)
            platform = self.platforms.get(channel.platform)
            if platform is None:
                continue
            text = (
                f"(the approval asked for {tool} was still open when {self.config.name} "
                "restarted; it is closed and the tool was not run: ask again if needed)"
            )
            try:
                await platform.send(channel, text)
            except Exception:
                logger.exception("could not tell %s about the closed approval", channel_key)

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
