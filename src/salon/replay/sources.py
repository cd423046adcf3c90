"""What a replay reads: a recorded room as ``Line``s, oldest first.

Three sources: an IRC log (``[HH:MM] <nick> text``, ``[HH:MM:SS]``, ``* nick action``,
``=== nick has joined`` and the like; a line may start with ``channel date`` as the
irc-disentanglement corpus's new-domains files do), a DiscordChatExporter JSON export, and
a channel of the bot's own store (``salon.replay.stored``). A line's ``index`` is its line
number in the log counted from 0 (system lines included, as reply links count them); a
line without a time takes the last one seen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from salon.errors import ConfigError, ConfigProblem

__all__ = ["Line", "Recorded", "read_discord", "read_irc", "read_source_file"]

Kind = Literal["message", "action", "system"]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a recorded room."""

    index: int
    id: str
    time: datetime
    author: str  # a nick or display name ("" for a system line)
    author_id: str
    text: str
    kind: Kind = "message"
    author_is_bot: bool = False
    reply_to_id: str | None = None
    mentions: tuple[str, ...] = ()  # author ids the platform says the line mentions


@dataclass(frozen=True, slots=True)
class Recorded:
    """A room: where it was and what was said there."""

    platform: str  # "irc", "discord" or a store channel's platform
    channel: str  # its name, e.g. "#ubuntu"
    lines: tuple[Line, ...]


_STAMP = r"\[(\d{1,2}):(\d{2})(?::(\d{2}))?\]"
_PREFIX = re.compile(rf"^(?:(\S+) (\d{{4}}-\d{{2}}-\d{{2}}) )?{_STAMP}\s?(.*)$")
_SAY = re.compile(r"^<[@+%&~]?([^>\s]+)>\s?(.*)$")
_ACT = re.compile(r"^\*\s+(\S+)\s?(.*)$")
_SYSTEM = re.compile(r"^(?:===|-!-|\*\*\*|-->|<--)\s*(\S+)?\s?(.*)$")
_DATE_IN_NAME = re.compile(r"(\d{4}-\d{2}-\d{2})")


def read_irc(path: Path, *, channel: str = "") -> Recorded:
    """An IRC log; its day comes from the line, else from a date in the file's name, else
    1 January 2000, and passes midnight when the clock goes back."""
    found = _DATE_IN_NAME.search(path.name)
    start = date.fromisoformat(found.group(1)) if found else date(2000, 1, 1)
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = tuple(_irc_lines(text.splitlines(), start))
    name = channel or _channel_of(text) or f"#{path.stem.split('.')[0]}"
    if not channel and (first := _PREFIX.match(text[:500])) is not None and first.group(1):
        name = f"#{first.group(1)}"  # "rust 2018-05-29 [21:20:37] <nick> …"
    return Recorded("irc", name, lines)


def _irc_lines(raw: list[str], day: date) -> Iterator[Line]:
    last = datetime.combine(day, datetime.min.time(), UTC)
    for index, row in enumerate(raw):
        stamp = _PREFIX.match(row)
        body = row
        if stamp is not None:
            given, hour, minute, second, body = stamp.groups()[1:]
            when = _at(date.fromisoformat(given) if given else last.date(), hour, minute, second)
            if not given and when < last - timedelta(hours=1):
                when += timedelta(days=1)  # the clock went back: past midnight
            last = when
        yield _irc_line(index, last, body.rstrip())


def _at(day: date, hour: str, minute: str, second: str | None) -> datetime:
    clock = datetime.combine(day, datetime.min.time(), UTC)
    return clock + timedelta(hours=int(hour), minutes=int(minute), seconds=int(second or 0))


def _irc_line(index: int, when: datetime, body: str) -> Line:
    line_id = str(index)
    if said := _SAY.match(body):
        nick, text = said.groups()
        return Line(index, line_id, when, nick, f"irc:{nick.lower()}", text)
    if acted := _ACT.match(body):
        nick, text = acted.groups()
        return Line(index, line_id, when, nick, f"irc:{nick.lower()}", f"/me {text}", "action")
    system = _SYSTEM.match(body)
    nick = (system.group(1) or "") if system else ""
    return Line(index, line_id, when, nick, f"irc:{nick.lower()}" if nick else "", body, "system")


def _channel_of(text: str) -> str:
    found = re.search(r"(#[\w.-]+)", text[:20_000])
    return found.group(1) if found else ""


def read_discord(path: Path) -> Recorded:
    """A DiscordChatExporter JSON export (``guild``, ``channel``, ``messages``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        channel = data.get("channel") or {}
        raw = data["messages"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        reason = f"not a DiscordChatExporter JSON export: {exc}"
        raise ConfigError([ConfigProblem(str(path), "SOURCE", reason)]) from exc
    lines = tuple(_discord_line(index, entry) for index, entry in enumerate(raw))
    return Recorded("discord", "#" + str(channel.get("name") or channel.get("id") or "?"), lines)


def _discord_line(index: int, entry: dict[str, Any]) -> Line:
    author = entry.get("author") or {}
    name = str(author.get("nickname") or author.get("name") or "?")
    kind: Kind = "message" if entry.get("type") in ("Default", "Reply", None) else "system"
    reference = entry.get("reference") or {}
    return Line(
        index=index,
        id=str(entry.get("id", index)),
        time=_discord_time(str(entry.get("timestamp", ""))),
        author=name,
        author_id=f"discord:{author.get('id', name)}",
        text=str(entry.get("content", "")),
        kind=kind,
        author_is_bot=bool(author.get("isBot", False)),
        reply_to_id=str(reference["messageId"]) if reference.get("messageId") else None,
        mentions=tuple(f"discord:{m.get('id')}" for m in entry.get("mentions") or ()),
    )


def _discord_time(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return datetime(2000, 1, 1, tzinfo=UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def read_source_file(path: Path) -> Recorded:
    """A log file: a ``.json`` is a Discord export, anything else an IRC log."""
    if not path.is_file():
        raise ConfigError([ConfigProblem(str(path), "SOURCE", "no such file")])
    return read_discord(path) if path.suffix.lower() == ".json" else read_irc(path)
