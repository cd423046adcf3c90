"""The room: from an activation to what the model will see.

A ``Scene`` is everything one answer needs: the channel's effective config (file layers
and pinned ``.config`` messages), the messages chosen from its history (``.history``
applied, rolled for the prompt cache, the reply chain brought in, a schedule's prompt or a
``/ask`` question at the end), the past tool calls that belong among them, and who asked.
Reading the room also means acting on what is there: an ``m continue`` is taken out of the
channel, a pinned config that had to be skipped is flagged once, and bots that keep
answering each other are stopped (the loop guard).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from salon.agent.activation import Activation, Scene, joint
from salon.agent.links import Linker, all_read, readable_stretches
from salon.agent.memoryblock import MemoryBlocks
from salon.agent.recording.recorder import Recorder
from salon.config import BotConfig, ChannelConfigs, PinnedConfig, Resolved
from salon.context import RollState, is_visible, m_command, roll, select_context
from salon.context.history import by_roles, expand_history
from salon.context.records import placeholder
from salon.context.selection import chain_first
from salon.context.sources import shaped
from salon.context.view import ChannelView, channel_views
from salon.errors import PlatformError
from salon.model import ChannelRef, Message, Participant, Tag, ToolRecord
from salon.notes import NoteStore
from salon.platforms.base import Capability, Platform
from salon.store.base import Store
from salon.tools.log import ToolLog

__all__ = ["LOOP_EMOJI", "WARNING_EMOJI", "Room"]

logger = logging.getLogger(__name__)

LOOP_EMOJI = "\U0001f501"  # 🔁: "we bots have talked enough"
WARNING_EMOJI = "\u26a0\ufe0f"  # ⚠️ on a pinned config that was skipped
_FLAGGED_LIMIT = 4096  # skipped pinned configs remembered, so each is flagged once
_STATE_CACHE = 4096  # channels whose rolling state is kept in memory


class Room:
    def __init__(
        self,
        *,
        bot: str,
        configs: ChannelConfigs,
        store: Store,
        notes: NoteStore | None = None,
        tool_log: ToolLog | None = None,
    ) -> None:
        """``notes``: the memory notes shown in the prompt (None: no memory block)."""
        self.bot = bot
        self.configs = configs
        self.store = store
        self.tool_log = tool_log
        self._undeletable: set[str] = set()  # channels where m commands cannot be deleted
        self._flagged: dict[tuple[str, str], None] = {}  # (message id, text) already flagged
        # Rolling states by channel, read from the store once, written after each answer.
        self._states: OrderedDict[str, RollState | None] = OrderedDict()
        self._views = channel_views()
        self.links = Linker(self._source_config)
        self.memory = MemoryBlocks(bot, notes)

    async def config_in(self, platform: Platform, channel: ChannelRef) -> BotConfig:
        """The bot's config in ``channel``: its guild's layers and the pinned configs."""
        return (await self.resolve(platform, channel)).config

    async def resolve(
        self, platform: Platform, channel: ChannelRef, *, flag: bool = True
    ) -> Resolved:
        """``config_in``, with the layers it was made of; ``flag``: mark skipped pins."""
        try:
            pinned_messages = await platform.pinned(channel)
        except PlatformError as exc:  # unreadable pins: the guild's config still applies
            logger.warning("cannot read the pins of %s: %s", channel.key, exc)
            pinned_messages = ()
        pins = [m for m in pinned_messages if m.text.startswith(".config")]
        pinned = [PinnedConfig(m.id, m.text) for m in pins]
        name = self.configs.for_guild(channel.guild_id).name
        foreign = await self.links.refusals(platform, channel, pinned, name) if pins else {}
        resolved = self.configs.resolve(
            channel.guild_id, [p for p in pinned if p.message_id not in foreign]
        )
        for message_id, reason in [*foreign.items(), *resolved.rejected]:
            message = next(m for m in pins if m.id == message_id)
            if flag:
                await self._flag(platform, message, reason)
        return resolved

    async def _source_config(self, platform: Platform, channel: ChannelRef) -> BotConfig:
        """A linked channel's own config (its pins are not flagged from here)."""
        return (await self.resolve(platform, channel, flag=False)).config

    async def _flag(self, platform: Platform, message: Message, reason: str) -> None:
        """Mark a skipped pinned config once (⚠️ where the platform has reactions)."""
        key = (message.id, message.text)
        if key in self._flagged:
            return
        self._flagged[key] = None
        if len(self._flagged) > _FLAGGED_LIMIT:
            del self._flagged[next(iter(self._flagged))]
        logger.warning(
            "pinned .config %s in %s skipped: %s", message.id, message.channel.key, reason
        )
        if not platform.can(Capability.REACTIONS):
            return
        try:
            await platform.react(message.channel, message.id, WARNING_EMOJI)
        except PlatformError as exc:
            logger.warning("could not flag the pinned config %s: %s", message.id, exc)

    async def scene(
        self,
        platform: Platform,
        activation: Activation,
        config: BotConfig,
        *,
        rolling: bool,
        recorder: Recorder,
    ) -> Scene | None:
        """What the model sees for ``activation``; None when the loop guard stops it."""
        channel, trigger, askers = activation.channel, activation.trigger, activation.askers
        if trigger is not None and m_command(trigger.text) == "continue":
            await self._remove_command(platform, trigger)
        monitored_at = datetime.now(UTC) if activation.monitored else None
        rolling = rolling and monitored_at is None
        depth = config.recency_window_messages + (config.rolling_threshold if rolling else 0)
        with recorder.phase("history"):
            history, view = await self._history(platform, channel, config, depth, askers)
        if trigger is not None and _bot_chain_too_long(history, trigger, config):
            if platform.can(Capability.REACTIONS):
                await platform.react(channel, trigger.id, LOOP_EMOJI)
            return None
        if view is not None:
            visible, chosen = view.visible, view.select(config.window, monitored_at)
        else:
            visible = [m for m in history if is_visible(m, config.visibility)]
            chosen = select_context(visible, config.window, monitored_at=monitored_at, visible=True)
        marks: tuple[str, ...] = ()
        rolled: RollState | None = None
        cut = False
        if rolling:
            chosen, marks, rolled, cut = await self._roll(
                channel, visible, chosen, platform, config, view=view
            )
        with recorder.phase("history"):
            chain, chosen = await self._reply_chain(platform, chosen, trigger, config, view)
            epoch = self._epoch(channel, rolled, rolling=rolling)
            linked = await self._linked(platform, activation, config, epoch)
            memory = await self.memory.block(channel, config, joint(askers), epoch=epoch)
        me, extra = platform.self_participant, activation.extra()
        messages = shaped(chain, chosen, extra, trigger, me=me, shaping=config.shaping)
        records = await self._records(platform, channel, messages, config, askers)
        scene = recorder.scene = Scene(
            platform=platform,
            channel=channel,
            config=config,
            messages=messages,
            requester=activation.requester,
            breakpoints=marks,
            records=records,
            rolled=rolled,
            cut=cut,
            linked=linked,
            memory=memory,
            askers=askers,
        )
        return scene

    def _epoch(self, channel: ChannelRef, rolled: RollState | None, *, rolling: bool) -> str | None:
        """The room's roll anchor: the linked and memory blocks are kept until it changes
        (the anchor and the newest message of a roll change only then); None when the
        room does not roll."""
        state = (rolled or self._states.get(channel.key)) if rolling else None
        return f"{state.anchor_id} {state.head_id}" if state is not None else None

    async def _linked(
        self, platform: Platform, activation: Activation, config: BotConfig, epoch: str | None
    ) -> str:
        """The linked channels' block, kept until the room's next roll."""
        if not config.links:
            return ""
        channel = activation.channel
        return await self.links.block(platform, channel, config, activation.askers, epoch=epoch)

    def recent_channels(self) -> list[str]:
        """The channels answered in with rolling on since the start, least recent first."""
        return list(self._states)

    async def remember(self, scene: Scene) -> None:
        """Store the scene's new rolling state (after the answer, off its path)."""
        if scene.rolled is None:
            return
        key = scene.channel.key
        self._states[key] = scene.rolled
        self._states.move_to_end(key)
        while len(self._states) > _STATE_CACHE:
            self._states.popitem(last=False)
        await self.store.save_rolling_state(self.bot, key, scene.rolled)

    async def _history(
        self,
        platform: Platform,
        channel: ChannelRef,
        config: BotConfig,
        depth: int,
        askers: Sequence[Participant],
    ) -> tuple[Sequence[Message], ChannelView | None]:
        """The channel's recent messages with ``.history`` messages applied, and its view
        when there were none to apply (the view then holds what was read). A stretch from
        another channel that one of ``askers`` cannot read is left out, as for links."""
        recent = await platform.history(channel, limit=depth)
        view = self._views.get(channel.key)
        view.update(recent, config.visibility)
        self._views.settle(view)
        if not view.has_history_links:
            return recent, view
        expanded = await expand_history(
            list(recent),
            me_name=config.name,
            fetch_until=readable_stretches(platform, askers, channel),
            authorized=by_roles(config.authorized_roles),
            depth=depth,
            max_nesting=config.history_max_nesting,
        )
        return expanded, None

    async def _remove_command(self, platform: Platform, command: Message) -> None:
        """The bot takes its ``m`` command out of the room; a refusal is logged once."""
        if not platform.can(Capability.DELETE):
            return
        try:
            await platform.delete_message(command.channel, command.id)
        except PlatformError as exc:
            if command.channel.key not in self._undeletable:
                self._undeletable.add(command.channel.key)
                logger.warning("cannot delete m commands in %s: %s", command.channel.key, exc)

    async def _roll(
        self,
        channel: ChannelRef,
        visible: list[Message],
        window: list[Message],
        platform: Platform,
        config: BotConfig,
        *,
        view: ChannelView | None,
    ) -> tuple[list[Message], tuple[str, ...], RollState | None, bool]:
        """The rolled context, its breakpoints, its new state when that changed, and
        whether the window was cut back."""
        state = await self._state(channel.key)
        me = platform.self_participant.id
        rolled = roll(visible, state, config.window, window, me, index=view)
        changed = rolled.state if rolled.state != state else None
        return rolled.messages, rolled.breakpoints, changed, rolled.rolled and state is not None

    async def _state(self, key: str) -> RollState | None:
        if key in self._states:
            self._states.move_to_end(key)
            return self._states[key]
        saved = await self.store.rolling_state(self.bot, key)
        state = self._states[key] = saved
        return state

    async def _reply_chain(
        self,
        platform: Platform,
        chosen: list[Message],
        trigger: Message | None,
        config: BotConfig,
        view: ChannelView | None,
    ) -> tuple[list[Message], list[Message]]:
        """The messages the trigger replies to that fell out of the window, marked as such,
        and the window: with ``reply_chain_marks: all`` its messages of the chain are
        marked too; with ``reply_chain_budget: shared`` the chain took the budgets first."""
        if trigger is None or trigger.reply_to_id is None or not platform.can(Capability.REPLIES):
            return [], chosen
        in_window = _window_test(chosen, view)
        mark_all = config.reply_chain_marks == "all"
        shared = config.reply_chain_budget == "shared"
        if in_window(trigger.reply_to_id) and not (mark_all or shared):
            return [], chosen
        chain = [m for m in await platform.reply_chain(trigger) if is_visible(m, config.visibility)]
        inside = {m.id for m in chain if in_window(m.id)}
        outside = [_in_chain(m) for m in chain if m.id not in inside]
        if mark_all:  # the bot's own carry no mark, as in context_sources
            me = platform.self_participant.id
            chosen = [_in_chain(m) if m.id in inside and m.author.id != me else m for m in chosen]
        if not shared:
            return outside, chosen
        return chain_first(
            outside,
            chosen,
            in_chain=inside,
            keep=trigger.id,
            # A rolled window may hold more than the budgets: the chain then takes its places.
            max_messages=max(config.recency_window_messages, len(chosen)),
            max_chars=max(config.recency_window_characters, sum(len(m.text) for m in chosen)),
        )

    async def _records(
        self,
        platform: Platform,
        channel: ChannelRef,
        messages: Sequence[Message],
        config: BotConfig,
        readers: Sequence[Participant],
    ) -> tuple[ToolRecord, ...]:
        """The channel's past tool calls among ``messages``, each as ``readers`` may see
        it: whole, or its placeholder when it reached what one of them may not read."""
        if self.tool_log is None:
            return ()
        oldest = messages[0].created_at if messages else None
        found = self.tool_log.for_channel(channel.key, oldest, config.tool_result_context_chars)
        return tuple([await self._as_read(platform, r, readers) for r in found])

    async def _as_read(
        self, platform: Platform, record: ToolRecord, readers: Sequence[Participant]
    ) -> ToolRecord:
        """A record whose reach one reader may not read is sealed: its placeholder from
        then on, for everyone (the prefix changes once, not with each reader)."""
        reach, log = record.reach, self.tool_log
        if reach is None or log is None:
            return record
        if reach.notes or log.sealed(record):
            return placeholder(record)
        mine = not reach.personal or all(p.id in reach.askers for p in readers)
        if mine and await _reads_all(platform, readers, reach.channels):
            return record
        log.seal(record)
        return placeholder(record)


async def _reads_all(
    platform: Platform, readers: Sequence[Participant], keys: Sequence[str]
) -> bool:
    """Whether every reader may read every channel of ``keys`` on ``platform``."""
    for key in keys:
        there = ChannelRef.from_key(key)
        if there.platform != platform.name or not await all_read(platform, readers, there):
            return False
    return True


def _window_test(chosen: list[Message], view: ChannelView | None) -> Callable[[str], bool]:
    """Whether a message id is in the window ``chosen`` (by its position in ``view``)."""
    if view is None:
        return lambda message_id: any(m.id == message_id for m in chosen)
    chosen_from = view.count - len(chosen)

    def in_window(message_id: str) -> bool:
        at = view.position(message_id)
        return at is not None and at >= chosen_from  # the window ends the visible ones

    return in_window


def _in_chain(message: Message) -> Message:
    return replace(message, tags=message.tags | {Tag.REPLY_CHAIN})


def _bot_chain_too_long(history: Sequence[Message], trigger: Message, config: BotConfig) -> bool:
    """Bots answering bots: cut the run of bot messages (whichever bots wrote them) once it
    is ``room.max_bot_run`` long (default ``max_bot_reply_chain_depth``)."""
    if not trigger.author.is_bot:
        return False
    chain = 0
    for message in reversed(history):
        if not is_visible(message, config.visibility):
            continue
        if not message.author.is_bot:
            break
        chain += 1
    return chain >= (config.room.max_bot_run or config.max_bot_reply_chain_depth)
