"""A channel of the bot's own store as a replay's source: ``store:CHANNEL_KEY``, optionally
``@SINCE..UNTIL`` (ISO times, either may be left out). The chat log keeps the conversation
(messages and actions) and the bot's own answers; it keeps no mentions, so a line
addressed the bot when it names it (on IRC: as the adapter tells a line addressed to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from salon.config import BotConfig
from salon.errors import ConfigError, ConfigProblem
from salon.model import ChannelRef
from salon.replay.sources import Kind, Line, Recorded
from salon.store.sql import SQLStore

__all__ = ["StoreSource", "parse_store_source", "read_store"]

MAX_LINES = 200_000


@dataclass(frozen=True)
class StoreSource:
    channel_key: str
    since: datetime | None = None
    until: datetime | None = None


def parse_store_source(text: str) -> StoreSource:
    """``store:irc:#chan@2026-01-01..2026-01-08``; the key is everything before ``@``."""
    body = text.removeprefix("store:")
    key, _, span = body.partition("@")
    if ":" not in key:
        reason = f"expected store:PLATFORM:CHANNEL, got {text!r}"
        raise ConfigError([ConfigProblem("(command line)", "SOURCE", reason)])
    since_text, _, until_text = span.partition("..")
    return StoreSource(key, _time(since_text), _time(until_text))


def _time(text: str) -> datetime | None:
    if not text.strip():
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        reason = f"not an ISO time: {text!r}"
        raise ConfigError([ConfigProblem("(command line)", "SOURCE", reason)]) from exc
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def read_store(store: SQLStore, bot: str, source: StoreSource) -> Recorded:
    """The channel's logged conversation within the span, oldest first."""
    channel = ChannelRef.from_key(source.channel_key)
    messages = await store.chat_history(bot, channel, limit=MAX_LINES)
    lines: list[Line] = []
    for message in messages:
        if source.since is not None and message.created_at < source.since:
            continue
        if source.until is not None and message.created_at > source.until:
            continue
        kind: Kind = "action" if message.text.startswith("/me ") else "message"
        lines.append(
            Line(
                len(lines),
                message.id,
                message.created_at,
                message.author.name,
                message.author.id,
                message.text,
                kind,
                message.author.is_bot,
            )
        )
    return Recorded(channel.platform, channel.id, tuple(lines))


def bot_nick(config: BotConfig, recorded: Recorded) -> str:
    """Who the bot was in a stored channel: its IRC nick, else the bot author with its name."""
    if recorded.platform == "irc" and config.platforms.irc is not None:
        return config.platforms.irc.nick
    bots = [line.author for line in recorded.lines if line.author_is_bot]
    named = [b for b in bots if b.lower() == config.name.lower()]
    return (named or bots or [config.name])[0]
