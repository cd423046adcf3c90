"""When schedules fire: parsing what the model asks for, and the next and last occurrence.

Cron expressions are read in the schedule's own timezone, so "0 9 * * *" stays at nine in
the morning local time across daylight-saving changes (on a spring-forward day a time that
does not exist fires at the first moment after the gap).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from croniter import croniter

__all__ = [
    "CRON_FIELDS",
    "ParsedWhen",
    "latest_occurrence",
    "next_occurrence",
    "parse_when",
    "shortest_gap",
    "zone",
]

CRON_FIELDS = 5  # minute hour day month weekday: schedules go to the minute
_GAP_SAMPLES = 1000  # occurrences looked at for the shortest gap ...
_GAP_SPAN = timedelta(days=366)  # ... or this much time, whichever ends first


@dataclass(frozen=True)
class ParsedWhen:
    cron: str | None
    at: datetime | None  # aware, in the schedule's timezone


def _croniter() -> type[croniter]:
    """croniter (with dateutil) loads at the first schedule, not with every bot."""
    from croniter import croniter

    return croniter


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {name!r}: use an IANA name like Europe/Paris") from None


def parse_when(when: str, timezone: str, now: datetime) -> ParsedWhen:
    """A cron expression or an ISO date-time; raises ValueError saying what is wrong.

    Cron has five fields: schedules go to the minute. croniter would also read a sixth
    field (seconds) and a seventh (years); a seconds field let one schedule call the
    model every second, so both are refused."""
    text = when.strip()
    tz = zone(timezone)
    fields = len(text.split())
    if fields in (6, 7) and not text[:4].isdigit():
        raise ValueError(
            f"{text!r} has {fields} fields; a cron expression has five fields (min hour day "
            "month weekday): schedules go to the minute, with no seconds or years field"
        )
    if fields == CRON_FIELDS and not text[:4].isdigit():
        if not _croniter().is_valid(text):
            raise ValueError(
                f"invalid cron expression {text!r} (five fields: min hour day month weekday)"
            )
        return ParsedWhen(cron=text, at=None)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a cron expression nor an ISO date-time like 2026-12-24T09:00"
        ) from None
    moment = moment.replace(tzinfo=tz) if moment.tzinfo is None else moment.astimezone(tz)
    if moment <= now:
        local_now = now.astimezone(tz)
        raise ValueError(
            f"{moment:%Y-%m-%d %H:%M %Z} is in the past (now {local_now:%Y-%m-%d %H:%M %Z})"
        )
    return ParsedWhen(cron=None, at=moment)


def next_occurrence(cron: str, timezone: str, after: datetime) -> datetime:
    """The first occurrence strictly after ``after``, in UTC."""
    start = after.astimezone(zone(timezone))
    found: datetime = _croniter()(cron, start).get_next(datetime)
    return found.astimezone(UTC)


def latest_occurrence(cron: str, timezone: str, at_or_before: datetime) -> datetime:
    """The last occurrence at or before ``at_or_before``, in UTC."""
    following = next_occurrence(cron, timezone, at_or_before)
    start = following.astimezone(zone(timezone))
    found: datetime = _croniter()(cron, start).get_prev(datetime)
    return found.astimezone(UTC)


def shortest_gap(cron: str, timezone: str, after: datetime) -> timedelta:
    """The shortest time between two occurrences of ``cron`` on the clock of its timezone,
    looked for among the next ``_GAP_SAMPLES`` occurrences within a year. Every allowed
    day has the same times, so the closest times of a day show on the first day and the
    closest across midnight within a year; that bounds the search without expanding the
    fields by hand. On the clock, a daily time stays a day apart across daylight saving
    (an hour shorter in real time), and the hour that repeats when clocks go back (croniter
    fires it twice) is not taken for a gap."""
    it = _croniter()(cron, after.astimezone(zone(timezone)))
    previous: datetime = it.get_next(datetime)
    end = previous + _GAP_SPAN
    shortest: timedelta | None = None
    for _ in range(_GAP_SAMPLES):
        current: datetime = it.get_next(datetime)
        gap = current.replace(tzinfo=None) - previous.replace(tzinfo=None)
        if gap > timedelta(0):
            shortest = gap if shortest is None else min(shortest, gap)
        if current > end:
            break
        previous = current
    return shortest if shortest is not None else _GAP_SPAN
