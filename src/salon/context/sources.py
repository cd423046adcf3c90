"""Which of the room's messages a context holds, and the mark of where each came from
(Bob Bot's way): other bots' words left out, no history at all, and ``[reply]``,
``[channel]``, ``[thread]`` or ``[dm]`` before each message of someone else; and
Terrarium's ``<irc_logs>`` block, the channel's log with its comings and goings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from zoneinfo import ZoneInfo

from salon.config.views import Shaping
from salon.model import ChatLine, Message, Participant, Tag

__all__ = ["irc_logs_block", "shaped", "source_of"]


def shaped(
    chain: Sequence[Message],
    chosen: Sequence[Message],
    extra: Sequence[Message],
    trigger: Message | None,
    *,
    me: Participant,
    shaping: Shaping,
) -> tuple[Message, ...]:
    """The context's messages: the reply chain, the window, then what asked from outside
    it. The message that asked is always kept, even a bot's (it is what is answered)."""
    asked = trigger.id if trigger is not None else None
    if not shaping.context_history:
        chain, chosen = (), [m for m in chosen if m.id == asked]
    messages = [*chain, *chosen, *extra]
    if not shaping.other_bots_in_context:
        messages = [m for m in messages if m.id == asked or not _other_bot(m, me)]
    if shaping.context_sources:
        # Not the bot's own: a mark in its turns would teach it to write one.
        sourced = Tag.SOURCED
        messages = [m if m.author.id == me.id else _tagged(m, sourced) for m in messages]
    return tuple(messages)


def source_of(message: Message) -> str:
    """Where a message came from: the reply chain, a DM, a thread or the channel."""
    if Tag.REPLY_CHAIN in message.tags:
        return "reply"
    if message.channel.is_direct:
        return "dm"
    return "thread" if message.channel.parent_id else "channel"


def _other_bot(message: Message, me: Participant) -> bool:
    return message.author.is_bot and message.author.id != me.id


def _tagged(message: Message, tag: Tag) -> Message:
    return replace(message, tags=message.tags | {tag})


_EVENTS = {
    "join": "{user} joined",
    "part": "{user} left",
    "quit": "{user} quit",
    "kick": "{user} kicked",
    "nick": "{user} is now known as {text}",
    "notice": "{user} noticed: {text}",
}


def irc_logs_block(lines: Sequence[ChatLine], timezone: str) -> str:
    """The lines as ``[time] <nick> text``, with ``* nick joined`` (left, quit, ...) for
    the rest, in an ``<irc_logs>`` block; empty when there are none."""
    if not lines:
        return ""
    zone = ZoneInfo(timezone)
    shown = [f"[{line.time.astimezone(zone):%Y-%m-%d %H:%M:%S}] {_logged(line)}" for line in lines]
    return "<irc_logs>\n" + "\n".join(shown) + "\n</irc_logs>"


def _logged(line: ChatLine) -> str:
    text = " ".join(line.text.split())  # one line each: a line break would forge another
    if line.kind == "message":
        return f"<{line.user}> {text}"
    if line.kind == "action":
        return f"* {line.user} {text}"
    event = _EVENTS.get(line.kind, "{user} " + line.kind).format(user=line.user, text=text)
    has_reason = text and "{text}" not in _EVENTS.get(line.kind, "")
    return f"* {event} ({text})" if has_reason else f"* {event}"
