"""A running bot's upkeep: its heartbeat, events pushed in from outside, config reload.

Each is a loop the app runs under supervision:

- ``heartbeat``: every ``HEARTBEAT_SECONDS`` the bot writes how it is (platforms connected,
  last event and answer, queue depth, supervised tasks) to the store, where the web
  process reads it for ``/health`` and ``/metrics``; a stop writes a last beat marked down.
- ``take_events``: events pushed with ``POST /bots/<name>/events`` wait in the store's inbox;
  the bot takes them every second and answers them like a ``/ask`` question.
- ``watch_config``: the bot's config files are looked at every second; an edit (from the
  web configurator or by hand) is loaded and applied without a restart. An edit that does
  not load leaves the running config in place, and its reason is in the heartbeat; keys
  that belong to the whole process (providers, platforms, MCP servers…) need a restart,
  which the heartbeat says.
- ``prune_notes``: every ``NOTES_PRUNE_SECONDS`` (and at start) the bot's notes not changed
  for ``memory.max_age_days`` are deleted, whether memory is on or not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from salon.config import BotConfig, ConfigSet, load_config_dir
from salon.config.channels import PROCESS_KEYS
from salon.errors import ConfigError
from salon.logsetup import set_level
from salon.model import ChannelRef, Message, MessageEvent, Participant, Tag
from salon.platforms.base import EventSink, Platform
from salon.tasks import TaskState
from salon.trace import BotHealth, InboxEvent

__all__ = ["HEARTBEAT_SECONDS", "Upkeep"]

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 2.0
INBOX_SECONDS = 1.0
CONFIG_SECONDS = 1.0
NOTES_PRUNE_SECONDS = 600.0


class Heartbeats(Protocol):
    """The store's health part."""

    async def beat(self, health: BotHealth) -> None: ...


class Inbox(Protocol):
    """The store's inbox part."""

    async def take_events(self, bot: str, owner: str, *, limit: int = 100) -> list[InboxEvent]: ...


class NotePruning(Protocol):
    """The store's notes part."""

    async def prune_notes(self, bot: str, *, max_age: float, now: float | None = None) -> int: ...


@dataclass
class Vitals:
    """What the heartbeat reads from the running bot."""

    platforms: Callable[[], Mapping[str, Platform]]
    queue_depth: Callable[[], int]
    last_event_at: Callable[[], float | None]
    last_answer_at: Callable[[], float | None]
    tasks: Callable[[], Mapping[str, TaskState]]


class Upkeep:
    def __init__(
        self,
        *,
        bot: str,
        heartbeats: Heartbeats,
        inbox: Inbox,
        vitals: Vitals,
        sink: EventSink,
        owner: str,
        root: Path | None = None,
        apply: Callable[[ConfigSet], None] | None = None,
        current: Callable[[], BotConfig] | None = None,
        notes: NotePruning | None = None,
    ) -> None:
        self.bot = bot
        self.heartbeats = heartbeats
        self.inbox = inbox
        self.vitals = vitals
        self.sink = sink
        self.owner = owner
        self.root = root
        self._apply = apply
        self._current = current
        self.notes = notes
        self.started_at = time.time()
        self.reload_error: str | None = None
        self.reloads = 0
        self._reloaded = asyncio.Condition()
        self.beats = 0
        self._beaten = asyncio.Condition()

    # -- heartbeat -----------------------------------------------------------------------

    def health(self, *, down: bool = False) -> BotHealth:
        platforms = self.vitals.platforms()
        return BotHealth(
            bot=self.bot,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=self.started_at,
            updated_at=0.0 if down else time.time(),
            platforms={name: (not down and p.connected) for name, p in platforms.items()},
            last_event_at=self.vitals.last_event_at(),
            last_answer_at=self.vitals.last_answer_at(),
            queue_depth=self.vitals.queue_depth(),
            tasks={
                name: {
                    "running": state.running,
                    "restarts": state.restarts,
                    "last_error": state.last_error,
                    **state.counts,
                }
                for name, state in self.vitals.tasks().items()
            },
            reload_error=self.reload_error,
        )

    async def heartbeat(self) -> None:
        while True:
            await self.heartbeats.beat(self.health())
            async with self._beaten:
                self.beats += 1
                self._beaten.notify_all()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def wait_beats(self, count: int) -> None:
        """Wait until ``count`` heartbeats have been written in all."""
        async with self._beaten:
            await self._beaten.wait_for(lambda: self.beats >= count)

    async def last_beat(self) -> None:
        """A stop: the bot says it is down, so health need not wait for the beat to age."""
        try:
            await asyncio.wait_for(self.heartbeats.beat(self.health(down=True)), 5)
        except Exception:  # stopping goes on; health will see the beat age instead
            logger.exception("could not write the last heartbeat")

    # -- inbox ---------------------------------------------------------------------------

    async def take_events(self) -> None:
        while True:
            for event in await self.inbox.take_events(self.bot, self.owner):
                await self._deliver(event)
            await asyncio.sleep(INBOX_SECONDS)

    async def _deliver(self, event: InboxEvent) -> None:
        channel = ChannelRef.from_key(event.channel)
        platform = self.vitals.platforms().get(channel.platform)
        if platform is None:
            logger.warning(
                "event #%d for %s dropped: %s is not running here",
                event.id,
                event.channel,
                channel.platform,
            )
            return
        author = Participant(f"outside:{event.author}", event.author)
        message = Message(
            f"inbox-{event.id}",
            channel,
            author,
            event.text,
            datetime.fromtimestamp(event.created_at, UTC),
            mentions=(platform.self_participant,),
            tags=frozenset({Tag.ASKED}),
        )
        logger.info("event #%d from %s for %s", event.id, event.author, event.channel)
        await self.sink(MessageEvent(message, traceparent=event.traceparent))

    # -- notes' retention ----------------------------------------------------------------

    async def prune_notes(self) -> None:
        if self.notes is None or self._current is None:
            await asyncio.Event().wait()  # no notes to keep within an age
        while True:
            await self.prune_notes_once()
            await asyncio.sleep(NOTES_PRUNE_SECONDS)

    async def prune_notes_once(self) -> int:
        """Delete the bot's notes older than ``memory.max_age_days``; returns how many."""
        if self.notes is None or self._current is None:
            return 0
        max_age = self._current().memory.max_age_days * 86400
        gone = await self.notes.prune_notes(self.bot, max_age=max_age)
        if gone:
            logger.info("deleted %d notes older than %g days", gone, max_age / 86400)
        return gone

    # -- config reload -------------------------------------------------------------------

    def _files(self) -> dict[Path, tuple[int, int]]:
        """The config files of this bot, with their modification times and sizes."""
        assert self.root is not None
        found: dict[Path, tuple[int, int]] = {}
        candidates = [self.root / "shared.yaml", *sorted((self.root / "guilds").glob("*.yaml"))]
        candidates += sorted((self.root / "bots").glob(f"{self.bot}*.yaml"))
        for path in candidates:
            try:
                stat = path.stat()
            except OSError:
                continue
            found[path] = (stat.st_mtime_ns, stat.st_size)
        return found

    async def watch_config(self) -> None:
        if self.root is None or self._apply is None:
            await asyncio.Event().wait()  # nothing to watch: the bot was not built from files
        seen = self._files()
        while True:
            await asyncio.sleep(CONFIG_SECONDS)
            files = self._files()
            if files != seen:
                seen = files
                await self._reload()

    async def _reload(self) -> None:
        assert self.root is not None
        assert self._apply is not None
        try:
            configs = await asyncio.to_thread(load_config_dir, self.root)
            configs.bot(self.bot)  # a ConfigError naming the known bots, if this one went
        except ConfigError as exc:
            self.reload_error = "\n".join(str(p) for p in exc.problems)
            logger.error("config edit not applied, the running config stays: %s", exc)
        else:
            fresh = configs.bots[self.bot]
            changed = self._process_keys_changed(fresh)
            if "log_level" in changed:  # the one process key applied live (debug toggle)
                changed.remove("log_level")
                set_level(fresh.log_level)
                logger.info("log level now %s", fresh.log_level)
            self._apply(configs)
            self.reload_error = (
                f"restart the bot to apply: {', '.join(changed)}" if changed else None
            )
            logger.info("config reloaded%s", f" (restart needed for {changed})" if changed else "")
        async with self._reloaded:
            self.reloads += 1
            self._reloaded.notify_all()

    def _process_keys_changed(self, new: BotConfig) -> list[str]:
        if self._current is None:
            return []
        old: dict[str, Any] = self._current().model_dump(include=set(PROCESS_KEYS))
        fresh: dict[str, Any] = new.model_dump(include=set(PROCESS_KEYS))
        return sorted(k for k in PROCESS_KEYS if old.get(k) != fresh.get(k))

    async def wait_reloads(self, count: int) -> None:
        """Wait until the config has been looked at again ``count`` times in all."""
        async with self._reloaded:
            await self._reloaded.wait_for(lambda: self.reloads >= count)
