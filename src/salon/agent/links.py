"""Linked contexts: other channels of the bot shown in a channel's context (``links:``).

For each ``links`` entry that applies in the channel, the linked channel's newest visible
messages (within the entry's budget) become a section of one block that opens the
request, before the room's history (``render_chat``/``render_prefill``'s ``preamble``).

What a section may show, decided here and never by the model:

- only a channel the person being answered can read on the platform now
  (``Platform.can_read``: their own rights, not the bot's; a platform that cannot tell
  says no);
- only what the linked channel's own rules show: its effective config's visibility (dot
  messages, hiding reactions), Salon's notes, its ``.history`` directives (a stretch they
  splice in from a channel the person cannot read shows nothing); the room's own
  visibility applies as well;
- no links of the linked channel (nothing transitive), nothing of another platform.

The block keeps the prompt cache: each section shows its channel as it was at the room's
last roll (messages up to the newest one then), so a new message there does not change the
request until the room rolls. A message of that stretch that is edited, hidden or deleted
since changes it at once. A pinned ``.config`` may link only channels of its own guild
(``refusals``): whoever can pin in one guild must not pull another guild's room in.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime

from salon.config import BotConfig, LinkConfig, PinnedConfig, parse_config_message
from salon.config._yaml import MAX_PIN_CHARS, YamlRefused, parse_yaml
from salon.config.links import DIRECT
from salon.context import is_visible
from salon.context.history import FetchUntil, by_roles, expand_history
from salon.errors import PlatformError
from salon.model import ChannelRef, Message, Participant
from salon.platforms.base import Platform

__all__ = ["Linker", "all_read", "applies", "readable_stretches"]

logger = logging.getLogger(__name__)

SourceConfig = Callable[[Platform, ChannelRef], Awaitable[BotConfig]]
"""The effective config of a channel (its layers and pins), for a linked channel's rules."""

_MARGIN = 100  # messages read past an entry's budget: room for what arrives between rolls
_DIGEST_LINE = 160  # characters of a message a digest keeps
_CUTS = 4096  # (room, linked channel) pairs whose cut is remembered
_VERDICTS = 1024  # pinned configs whose links were checked
_NEVER = datetime.min.replace(tzinfo=UTC)


def applies(entry: LinkConfig, channel: ChannelRef) -> bool:
    """Whether ``entry`` applies in ``channel``: everywhere without ``where``; else in the
    channels named (a thread in its parent's too) and, with ``direct``, in every DM."""
    if not entry.where:
        return True
    if channel.is_direct and DIRECT in entry.where:
        return True
    names = {channel.id, channel.key}
    if channel.parent_id is not None:
        names |= {channel.parent_id, f"{channel.platform}:{channel.parent_id}"}
    return not names.isdisjoint(entry.where)


class Linker:
    def __init__(self, source_config: SourceConfig) -> None:
        self._source_config = source_config
        # (room key, linked key) -> (the room's roll anchor, the newest time shown then)
        self._cuts: OrderedDict[tuple[str, str], tuple[str, datetime]] = OrderedDict()
        self._verdicts: OrderedDict[tuple[str, str, str | None], str | None] = OrderedDict()

    async def block(
        self,
        platform: Platform,
        channel: ChannelRef,
        config: BotConfig,
        readers: Sequence[Participant],
        *,
        epoch: str | None,
    ) -> str:
        """The linked channels' block for an answer to ``readers`` in ``channel`` (each
        section only when all of them may read its channel: a batch reads as its least
        entitled asker); ``epoch``: the room's roll anchor (None: the room does not roll,
        take them now)."""
        sections = []
        for entry in config.links:
            if not applies(entry, channel):
                continue
            target = await _target(platform, entry.channel)
            if target is None or target.key == channel.key:
                continue
            if not await all_read(platform, readers, target):
                continue
            shown = await self._shown(
                platform, channel, config, readers=readers, target=target, epoch=epoch
            )
            if shown:
                sections.append(_section(target, entry, shown, platform, config))
        return "\n\n".join(sections)

    async def _shown(
        self,
        platform: Platform,
        channel: ChannelRef,
        config: BotConfig,
        *,
        readers: Sequence[Participant],
        target: ChannelRef,
        epoch: str | None,
    ) -> list[Message]:
        """The linked channel's visible messages up to its cut, oldest first."""
        source = await self._source_config(platform, target)
        depth = max(e.messages for e in config.links) + _MARGIN
        try:
            history = list(await platform.history(target, limit=depth))
        except PlatformError as exc:
            logger.warning("linked channel %s cannot be read: %s", target.key, exc)
            return []
        if any(m.text.startswith(".history") for m in history):
            history = await _expanded(
                platform,
                history,
                home=target,
                source=source,
                readers=readers,
                me=config.name,
                depth=depth,
            )
        rules = (source.visibility, config.visibility)
        visible = [m for m in history if all(is_visible(m, r) for r in rules)]
        cut = self._cut(channel.key, target.key, epoch, visible)
        return [m for m in visible if m.created_at <= cut]

    def _cut(
        self, room: str, linked: str, epoch: str | None, visible: Sequence[Message]
    ) -> datetime:
        """The newest time shown of ``linked`` in ``room``, kept from one roll to the next."""
        key = (room, linked)
        kept = self._cuts.get(key)
        if epoch is not None and kept is not None and kept[0] == epoch:
            self._cuts.move_to_end(key)
            return kept[1]
        cut = max((m.created_at for m in visible), default=_NEVER)
        if epoch is not None:
            self._cuts[key] = (epoch, cut)
            self._cuts.move_to_end(key)
            while len(self._cuts) > _CUTS:
                self._cuts.popitem(last=False)
        return cut

    async def refusals(
        self, platform: Platform, channel: ChannelRef, pins: Iterable[PinnedConfig], bot: str
    ) -> dict[str, str]:
        """Pinned configs (by message id) that link a channel outside ``channel``'s guild,
        with the reason; the others are left to the config's own checks."""
        refused = {}
        for pin in pins:
            key = (pin.message_id, pin.text, channel.server_id)
            if key in self._verdicts:
                verdict = self._verdicts[key]
            else:
                verdict, settled = await _foreign_link(platform, channel, pin.text, bot)
                if settled:  # a lookup that failed is asked again next time
                    self._verdicts[key] = verdict
                    while len(self._verdicts) > _VERDICTS:
                        self._verdicts.popitem(last=False)
            if verdict is not None:
                refused[pin.message_id] = verdict
        return refused


async def _foreign_link(
    platform: Platform, channel: ChannelRef, text: str, bot: str
) -> tuple[str | None, bool]:
    """Why a pinned config may not link what it links (None: it may), and whether that
    is settled (every channel it names was found)."""
    parsed = parse_config_message(text)
    if parsed is None or (parsed[0] and bot not in parsed[0]):
        return None, True
    try:
        overlay = parse_yaml(parsed[1], max_chars=MAX_PIN_CHARS).data
    except YamlRefused:
        return None, True  # the config's own checks say why
    links = overlay.get("links") if isinstance(overlay, dict) else None
    if not isinstance(links, list):
        return None, True
    for entry in links:
        named = entry.get("channel") if isinstance(entry, dict) else None
        if not isinstance(named, str | int):
            continue
        named = str(named)
        target = await _target(platform, named.strip())
        server = target.server_id if target is not None else None
        if server is not None and server == channel.server_id:
            continue
        reason = (
            f"links: {named.strip()} is not a channel of this server "
            "(a pinned .config links only its own server's channels)"
        )
        return reason, target is not None
    return None, True


async def _target(platform: Platform, named: str) -> ChannelRef | None:
    """The channel a ``links`` entry names: ``platform:id``, or an id on ``platform``."""
    prefix, colon, rest = named.partition(":")
    if colon and prefix == platform.name:
        named = rest
    elif colon and prefix.isidentifier():
        return None  # another platform's channel: never linked
    # Else the colon is the id's own (an IRC "#dev:x", a Matrix "!room:server").
    try:
        return await platform.find_channel(named)
    except PlatformError as exc:
        logger.warning("linked channel %s cannot be found: %s", named, exc)
        return None


async def _readable(platform: Platform, person: Participant, channel: ChannelRef) -> bool:
    """Failing to tell is no."""
    try:
        return await platform.can_read(person, channel)
    except PlatformError as exc:
        logger.warning("cannot tell whether %s reads %s: %s", person.id, channel.key, exc)
        return False


async def all_read(platform: Platform, readers: Sequence[Participant], channel: ChannelRef) -> bool:
    """Whether every one of ``readers`` may read ``channel`` (none: no)."""
    if not readers:
        return False
    for person in readers:
        if not await _readable(platform, person, channel):
            return False
    return True


def readable_stretches(
    platform: Platform, readers: Sequence[Participant], home: ChannelRef
) -> FetchUntil:
    """What a ``.history`` link splices for an answer to ``readers``: a stretch from
    another channel than ``home`` that one of them cannot read themselves is left out
    (empty: the directive still replaces what is older); ``home``'s own are not asked
    about."""

    async def fetch_until(link: str, limit: int) -> Sequence[Message] | None:
        stretch = await platform.history_until(link, limit=limit)
        if stretch is None:
            return None
        places = {m.channel.key: m.channel for m in stretch}
        for place in places.values():
            if place.key != home.key and not await all_read(platform, readers, place):
                who = ", ".join(p.id for p in readers)
                logger.info(".history stretch from %s left out: %s cannot read it", place.key, who)
                return []
        return stretch

    return fetch_until


async def _expanded(
    platform: Platform,
    history: list[Message],
    *,
    home: ChannelRef,
    source: BotConfig,
    readers: Sequence[Participant],
    me: str,
    depth: int,
) -> list[Message]:
    """``history`` with its ``.history`` directives applied, as in its own channel; a
    stretch from a channel one of the readers cannot read shows nothing."""
    return await expand_history(
        history,
        me_name=me,
        fetch_until=readable_stretches(platform, readers, home),
        authorized=by_roles(source.authorized_roles),
        depth=depth,
        max_nesting=source.history_max_nesting,
    )


def _section(
    target: ChannelRef,
    entry: LinkConfig,
    shown: list[Message],
    platform: Platform,
    config: BotConfig,
) -> str:
    """The entry's newest messages within its budget, under the channel's name."""
    me = platform.self_participant.id
    digest = entry.mode == "digest"
    lines: list[str] = []
    used = 0
    for message in reversed(shown):
        who = config.name if message.author.id == me else message.author.name
        # A digest's line is one line; a message's own lines are indented, so none of them
        # reads as another speaker's (or the bot's) line of the transcript.
        text = " ".join(message.text.split()) if digest else message.text.replace("\n", "\n  ")
        if digest and len(text) > _DIGEST_LINE:
            text = text[: _DIGEST_LINE - 1] + "…"
        line = f"{who}: {text}"
        if used + len(line) > entry.characters:
            if not lines:
                lines.append(line[: entry.characters - 1] + "…")
            break
        lines.append(line)
        used += len(line)
        if len(lines) >= entry.messages:
            break
    lines.reverse()
    name = target.name if target.name.startswith(("#", "&")) else f"#{target.name}"
    kind = "a digest of its last messages" if digest else "its recent messages"
    head = f"[linked channel {name}: {kind}, quoted from another channel, not addressed to you]"
    return "\n".join([head, *lines, f"[end of {name}]"])
