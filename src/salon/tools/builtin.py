"""Salon's own tools, as a native tool set.

The hub calls them in-process, directly; ``salon tools serve`` wraps the same set into an
MCP server over stdio for any MCP client. The chat-log tools read the
store's log for the terminal and IRC and the platform's own history elsewhere (see
``salon.tools.chatlog``); the channel they read is the caller's (``salon.tools.caller``),
the one the call was made in. Another channel (``in_channel``) is read only when the bot
is in it and the person asking could read it there themselves (``ChannelAccess``). Served
over MCP, the tools take the caller as the arguments each names (``channel`` and so on).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal, TypeVar

from pydantic import Field

from salon.errors import ToolError
from salon.model import ChannelRef, ChatLine, Participant, Schedule
from salon.tools.base import OPERATOR
from salon.tools.caller import CALLER_ARGUMENTS, Caller
from salon.tools.chatlog import CONVERSATION, ChannelHistory, ChannelLog, ChatLogQueries, log_only
from salon.tools.memory import MemoryBook, add_memory_tools
from salon.tools.native import Annotations, ToolSet
from salon.tools.schedules import ScheduleStore
from salon.tools.timing import ParsedWhen, next_occurrence, parse_when, shortest_gap, zone

__all__ = [
    "HIDDEN_ARGUMENTS",
    "OPERATOR",
    "ChatLogQueries",
    "MemoryBook",
    "ScheduleBook",
    "TargetCheck",
    "build_builtin_server",
]

_T = TypeVar("_T")

HIDDEN_ARGUMENTS = frozenset(CALLER_ARGUMENTS)
"""What the model neither sees nor passes: the caller as plain arguments (served)."""
_READ_ONLY = Annotations(read_only=True, destructive=False)
_ASKER = ("channel", "requester_id", "requester_name")  # the chat-log tools' caller, served
_CREATOR = (*_ASKER, "requester_roles", "requester_identity")  # a schedule's
_MAX_LIMIT = 200


UsersOf = Callable[[str], Awaitable[Sequence[str]]]
ChannelAccess = Callable[[Participant, ChannelRef], Awaitable[bool]]
"""(person, channel) -> whether the bot is in that channel and the person may read it
there (``Platform.can_read``)."""
LineType = Literal["messages", "joins", "parts", "quits", "kicks", "nicks", "notices"]
_KINDS: dict[str, tuple[str, ...]] = {
    "messages": CONVERSATION,
    "joins": ("join",),
    "parts": ("part",),
    "quits": ("quit",),
    "kicks": ("kick",),
    "nicks": ("nick",),
    "notices": ("notice",),
}
_InChannel = Annotated[
    str | None,
    Field(description="another channel of this platform to read (IRC: #name; Discord: its id)"),
]


async def nobody_reads(person: Participant, channel: ChannelRef) -> bool:
    """Without platforms (``salon tools serve``), no other channel can be checked: none."""
    return False


TargetCheck = Callable[[str, str, Participant], str | None]
"""(channel the request came from, target channel key, requester) -> why the schedule
may not go there, or None when it may."""


class ScheduleBook:
    """What the schedule tools need: the store, the clock, who to tell of a change, and
    the rule for where a schedule may post."""

    def __init__(
        self,
        store: ScheduleStore,
        *,
        timezone: str,
        now: Callable[[], datetime],
        changed: Callable[[], None],
        check_target: TargetCheck | None = None,
        min_interval: float = 60.0,
        max_recurring: int = 5,
    ) -> None:
        self.store = store
        self.timezone = timezone
        self.now = now
        self.changed = changed
        self.check_target = check_target
        self.min_interval = min_interval  # seconds between a cron's occurrences, at least
        self.max_recurring = max_recurring  # active cron schedules per person (not operator)

    async def check_recurring(self, bot: str, parsed: ParsedWhen, tz: str, who: str) -> None:
        """Refuse a cron that fires too often, or one more than its creator may hold: a
        schedule calls the model every time it fires."""
        if parsed.cron is None:
            return
        gap = _checked(lambda: shortest_gap(parsed.cron or "", tz, self.now()))
        if gap.total_seconds() < self.min_interval:
            raise ToolError(
                f"{parsed.cron!r} would fire as often as every {_span(gap.total_seconds())}; "
                f"a schedule may fire at most every {_span(self.min_interval)}"
            )
        if who == OPERATOR:
            return
        held = [s for s in await self.store.find(bot) if s.cron and s.created_by.id == who]
        if len(held) >= self.max_recurring:
            raise ToolError(
                f"you already have {len(held)} recurring schedules, the most one person may "
                "have: cancel one first (schedule_list, then schedule_cancel)"
            )


def _span(seconds: float) -> str:
    """A duration as people say it: whole hours or minutes where it is one."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


def _since(hours: float | None) -> datetime | None:
    return None if hours is None or hours <= 0 else datetime.now(UTC) - timedelta(hours=hours)


def _format(lines: Sequence[ChatLine]) -> str:
    if not lines:
        return "no messages found"
    return "\n".join(_line(ln) for ln in lines)


def _line(line: ChatLine) -> str:
    why = f" ({line.text})" if line.text else ""
    said = {
        "action": f"* {line.user} {line.text}",
        "join": f"-> {line.user} joined",
        "part": f"<- {line.user} left{why}",
        "quit": f"<- {line.user} quit{why}",
        "kick": f"<- {line.user} kicked {line.text}",
        "nick": f"* {line.user} is now known as {line.text}",
        "notice": f"-{line.user}- {line.text}",
    }.get(line.kind, f"<{line.user}> {line.text}")
    return f"[{line.time:%Y-%m-%d %H:%M:%S}] {said}"


def _need_channel(channel: str) -> None:
    if not channel:
        raise ToolError("channel is required (e.g. terminal:local or irc:#salon)")


async def _readable(access: ChannelAccess, caller: Caller, in_channel: str | None) -> str:
    """The channel a chat-log tool reads: the one it is asked in, or ``in_channel`` of the
    same platform when the asker could read it there and the bot is in it (what is read
    is shown where the question was asked, so the asker's own rights decide)."""
    here = caller.asked_in()
    channel = here.key
    wanted = (in_channel or "").strip()
    if not wanted or wanted in {channel, here.id}:
        return channel
    there = ChannelRef.from_key(wanted if ":" in wanted else f"{here.platform}:{wanted}")
    if there.platform != here.platform:
        raise ToolError(f"only channels of {here.platform} can be read from here")
    asker = caller.requester
    if not asker.id:  # an answer to several people reads only what all of them may
        raise ToolError(
            f"{wanted} cannot be read from here: this answer is for several people; "
            "another channel is read when one person asks"
        )
    person = Participant(asker.id, asker.name or "someone")
    if asker.id != OPERATOR and not await access(person, there):
        raise ToolError(
            f"{wanted} cannot be read from here: the bot is not in it, or you could not "
            "read it yourself"
        )
    return there.key


def _creator(caller: Caller) -> Participant:
    """Who sets a schedule: the requester, with their roles and identity."""
    who = caller.requester
    return Participant(
        who.id or "unknown", who.name or "someone", roles=who.roles, identity=who.identity
    )


def _checked(check: Callable[[], _T]) -> _T:
    """Run a check whose ValueError is a mistake the model should read and fix."""
    try:
        return check()
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def build_builtin_server(
    bot: str,
    log: ChatLogQueries,
    users_of: UsersOf,
    book: ScheduleBook | None = None,
    *,
    history: ChannelHistory = log_only,
    memory: MemoryBook | None = None,
    access: ChannelAccess = nobody_reads,
) -> ToolSet:
    """``history`` reads channels of platforms that keep their own (``log`` holds the
    terminal's and IRC's); without it, the chat-log tools refuse those channels.
    ``memory``: the notes tools (``salon.tools.memory``), when the bot's memory is on.
    ``access``: who may read which other channel through the chat-log tools."""
    server = ToolSet("salon", instructions="Salon's built-in tools: time, chat log, schedules.")
    _add_chat_tools(server, bot, ChannelLog(log, history), users_of, access)
    if book is not None:
        _add_schedule_tools(server, bot, book)
    if memory is not None:
        add_memory_tools(server, bot, memory)
    return server


def _add_chat_tools(
    server: ToolSet, bot: str, log: ChatLogQueries, users_of: UsersOf, access: ChannelAccess
) -> None:
    @server.tool(annotations=_READ_ONLY)
    def get_current_time(timezone: str = "UTC") -> str:
        """The current date and time in an IANA timezone such as Europe/Paris."""
        now = datetime.now(_checked(lambda: zone(timezone)))
        return f"{now:%A %Y-%m-%d %H:%M:%S} {timezone} (UTC{now:%z})"

    @server.tool(annotations=_READ_ONLY, caller_arguments=_ASKER)
    async def search_chat_logs(
        query: str,
        user: str | None = None,
        hours: float | None = None,
        limit: int = 20,
        in_channel: _InChannel = None,
        *,
        caller: Caller,
    ) -> str:
        """Find past messages of this channel (or ``in_channel``) containing every word of
        the query."""
        where = await _readable(access, caller, in_channel)
        limit = max(1, min(limit, _MAX_LIMIT))
        found = await log.search_chat(
            bot, where, query, user=user, since=_since(hours), limit=limit
        )
        return _format(found[::-1])

    @server.tool(annotations=_READ_ONLY, caller_arguments=_ASKER)
    async def get_recent_messages(
        limit: int = 50,
        hours: float | None = None,
        types: Annotated[
            list[LineType] | None,
            Field(description="kinds of lines (default: messages); joins etc. on IRC only"),
        ] = None,
        in_channel: _InChannel = None,
        *,
        caller: Caller,
    ) -> str:
        """The latest lines of this channel (or ``in_channel``), oldest first: messages, or
        the kinds of lines ``types`` names."""
        where = await _readable(access, caller, in_channel)
        limit = max(1, min(limit, _MAX_LIMIT))
        kinds = [k for t in types or ["messages"] for k in _KINDS[t]]
        lines = await log.recent_chat(bot, where, limit=limit, since=_since(hours), kinds=kinds)
        return _format(lines)

    @server.tool(annotations=_READ_ONLY, caller_arguments=_ASKER)
    async def get_channel_stats(
        in_channel: _InChannel = None,
        *,
        caller: Caller,
    ) -> dict[str, object]:
        """How many messages and people this channel (or ``in_channel``) has seen, and who
        talks most."""
        where = await _readable(access, caller, in_channel)
        return await log.channel_stats(bot, where)

    @server.tool(annotations=_READ_ONLY, caller_arguments=_ASKER)
    async def get_current_users(
        in_channel: _InChannel = None,
        *,
        caller: Caller,
    ) -> str:
        """Who is in this channel (or ``in_channel``) right now."""
        where = await _readable(access, caller, in_channel)
        users = await users_of(where)
        return ", ".join(users) if users else "nobody is known to be here"


def _add_schedule_tools(server: ToolSet, bot: str, book: ScheduleBook) -> None:
    @server.tool(caller_arguments=_CREATOR)
    async def schedule_create(
        when: str,
        prompt: str,
        timezone: str | None = None,
        target_channel: str | None = None,
        *,
        caller: Caller,
    ) -> str:
        """Schedule a reminder or a recurring task. `when` is a cron expression ("0 9 * * 1-5")
        or an ISO date-time ("2026-12-24T09:00"); `prompt` is what you will be asked to do
        then, in this channel unless `target_channel` names another."""
        tz = timezone or book.timezone
        now = book.now()
        parsed = _checked(lambda: parse_when(when, tz, now))
        channel = caller.channel_key
        where = target_channel or channel
        _need_channel(where)
        requester = _creator(caller)
        problem = book.check_target(channel, where, requester) if book.check_target else None
        if problem is not None:
            raise ToolError(problem)
        await book.check_recurring(bot, parsed, tz, requester.id)
        due = next_occurrence(parsed.cron, tz, now) if parsed.cron else parsed.at
        schedule = Schedule(
            id=0,
            bot=bot,
            channel=ChannelRef.from_key(where),
            prompt=prompt,
            timezone=tz,
            cron=parsed.cron,
            at=parsed.at,
            created_by=requester,
            next_due=due.astimezone(UTC) if due else None,
        )
        created = await book.store.create_schedule(schedule)
        book.changed()
        return f"scheduled {created.describe()}"

    @server.tool(annotations=_READ_ONLY, caller_arguments=("channel",))
    async def schedule_list(*, caller: Caller) -> str:
        """The active schedules of this channel."""
        found = await book.store.find(bot, channel_key=caller.channel_key or None)
        return "\n".join(s.describe() for s in found) or "no schedules"

    @server.tool()
    async def schedule_cancel(schedule_id: int) -> str:
        """Cancel a schedule by its number."""
        if not await book.store.cancel_schedule(bot, schedule_id):
            raise ToolError(f"no active schedule #{schedule_id}")
        book.changed()
        return f"cancelled schedule #{schedule_id}"
