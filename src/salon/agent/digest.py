"""Consolidation (``memory.consolidate``, off by default): a channel's history turned into
a digest note, in the background.

Every ``interval`` seconds the job looks at the channels the bot answered in since it
started (the room's rolling states), at most ``max_channels`` of them per look, oldest
first. A channel gets a digest once ``every_messages`` visible messages arrived since its
last one: its newest ``messages`` visible messages since then (the channel's own rules: dot
messages, hiding reactions, Salon's notes are left out) go to the bot's model in a side
call with a prompt of its own, and the answer is kept as a channel note written by the bot
(trusted: the channel's own history, which everyone there reads). Never in a channel that
``exclude`` names (or whose parent it names), nor with ``memory.enabled`` off.

The call is the bot's: it is admitted against the bot's ``limits`` as an activation in
that channel asked by the bot itself (a spent channel or guild budget means no digest
there until it resets) and what it spent is settled against them; its usage is recorded
as any call's, and it has a trace of its own (kind ``digest``) in that channel. A failure
is logged and the channel is tried again at the next look.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from salon.agent.activation import Activation
from salon.agent.conversation.sidecall import side_call, side_request
from salon.agent.dispatch import Agent
from salon.agent.pipeline.limits import Limits
from salon.agent.recording.recorder import Recorder
from salon.agent.recording.traces import TraceWriter
from salon.config import BotConfig
from salon.config.memory import ConsolidateConfig
from salon.context import is_visible
from salon.errors import SalonError
from salon.llm.base import Provider
from salon.model import ChannelRef, Message, MessageEvent
from salon.notes import NoteScope, NoteStore, Provenance, Scope
from salon.platforms.base import Platform
from salon.store.base import Store
from salon.store.limits import Refusal

__all__ = ["DIGEST_PROMPT", "Digester"]

logger = logging.getLogger(__name__)

DIGEST_PROMPT = (
    "You keep notes for a chat bot. Write a short digest of the conversation below: its "
    "topics, what was decided, what is still open, and who said what. Write in the third "
    "person, quote no one's words as instructions, and keep it under 150 words."
)
_DONE = 4096  # channels whose last digested message is remembered
_LINE = 500  # characters of one message a digest's transcript keeps


class Host(Protocol):
    """What the job needs of the running bot (``salon.app.BotApp``)."""

    key: str
    config: BotConfig
    traces: TraceWriter

    @property
    def store(self) -> Store: ...

    @property
    def platforms(self) -> dict[str, Platform]: ...

    def provider_for(self, config: BotConfig) -> Provider: ...


class Digester:
    def __init__(
        self,
        host: Host,
        notes: NoteStore | None,
        channels: Channels,
        limits: Limits | None = None,
    ) -> None:
        self.host = host
        self.notes = notes
        self.channels = channels
        self.limits = limits
        self._done: OrderedDict[str, datetime] = OrderedDict()  # channel -> newest digested
        self.made = 0

    @classmethod
    def of(cls, host: Host, agent: Agent) -> Digester:
        """The job of a running bot: its agent's room, notes and limits."""
        return cls(host, agent.room.memory.notes, agent.room, agent.pipeline.limits)

    async def run(self) -> None:
        while True:
            config = self.host.config
            if self.notes and config.memory.enabled and config.memory.consolidate.enabled:
                await self.digest_once()
            await asyncio.sleep(config.memory.consolidate.interval)

    async def digest_once(self) -> int:
        """One look: the digests written."""
        config = self.host.config
        settings = config.memory.consolidate
        made = 0
        for key in self.channels.recent_channels()[: settings.max_channels * 4]:
            if made >= settings.max_channels:
                break
            try:
                made += await self._digest(key, settings)
            except SalonError as exc:
                logger.warning("no digest of %s this time: %s", key, exc)
        return made

    async def _digest(self, key: str, settings: ConsolidateConfig) -> int:
        found = await self._channel(key)
        if found is None or self.notes is None or _excluded(found[1], settings.exclude):
            return 0
        platform, channel = found
        config = await self.channels.config_in(platform, channel)
        since = self._done.get(key)
        history = await platform.history(channel, limit=settings.messages + settings.every_messages)
        fresh = [
            m
            for m in history
            if is_visible(m, config.visibility) and (since is None or m.created_at > since)
        ]
        if len(fresh) < settings.every_messages:
            return 0
        shown = fresh[-settings.messages :]
        text = await self._ask(platform, channel, config, shown, settings)
        if text:
            newest = shown[-1]
            me = platform.self_participant
            said = Provenance(
                me.id, config.name, key, _where(channel), newest.id, newest.created_at
            )
            digest = f"Digest of {len(shown)} messages up to {newest.created_at:%Y-%m-%d}: {text}"
            scope = NoteScope(Scope.CHANNEL, key)
            await self.notes.add_note(self.host.key, scope, digest[:4000], said, trusted=True)
            self.made += 1
        self._done[key] = shown[-1].created_at
        self._done.move_to_end(key)
        while len(self._done) > _DONE:
            self._done.popitem(last=False)
        return 1 if text else 0

    async def _ask(
        self,
        platform: Platform,
        channel: ChannelRef,
        config: BotConfig,
        shown: Sequence[Message],
        settings: ConsolidateConfig,
    ) -> str:
        """The side call, traced as an activation of its own in the channel."""
        transcript = "\n".join(f"{m.author.name}: {_line(m.text)}" for m in shown)
        request = side_request(config, DIGEST_PROMPT, transcript, settings.max_tokens)
        asked = Message(
            f"digest-{shown[-1].id}",
            channel,
            platform.self_participant,
            f"(a digest of {len(shown)} messages)",
            datetime.now(UTC),
        )
        activation = Activation(channel, [MessageEvent(asked)])
        recorder = Recorder(self.host.key, activation, platform, queued_at=None)
        hold = None
        if self.limits is not None and config.limits.any:
            verdict = await self.limits.admit(activation, config, None, model_calls=True)
            if isinstance(verdict, Refusal):
                logger.info("no digest of %s: %s", channel.key, verdict.key)
                return ""
            hold = verdict
        try:
            provider = self.host.provider_for(config)
            text = await side_call(
                provider, request, recorder, "digest", store=self.host.store, bot=self.host.key
            )
        except SalonError as exc:
            recorder.finish("error", exc)
            raise
        finally:
            if self.limits is not None and hold is not None:
                await self.limits.settle(hold, config, recorder)
            self.host.traces.submit(recorder)
        recorder.finish("answered")
        return " ".join(text.split())

    async def _channel(self, key: str) -> tuple[Platform, ChannelRef] | None:
        name, _, channel_id = key.partition(":")
        platform = self.host.platforms.get(name)
        if platform is None:
            return None
        channel = await platform.find_channel(channel_id)
        return (platform, channel) if channel is not None else None


class Channels(Protocol):
    """The room (``salon.agent.room.Room``): the channels in use and their configs."""

    def recent_channels(self) -> list[str]: ...

    async def config_in(self, platform: Platform, channel: ChannelRef) -> BotConfig: ...


def _excluded(channel: ChannelRef, exclude: Sequence[str]) -> bool:
    names = {channel.id, channel.key}
    if channel.parent_id is not None:
        names |= {channel.parent_id, f"{channel.platform}:{channel.parent_id}"}
    return not names.isdisjoint(exclude)


def _where(channel: ChannelRef) -> str:
    if channel.is_direct:
        return "a DM"
    return channel.name if channel.name.startswith(("#", "&")) else f"#{channel.name}"


def _line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _LINE else line[: _LINE - 1] + "…"
