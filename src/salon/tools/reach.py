"""What a tool call read with the rights of the people it was made for (its ``Reach``).

Salon decides it from the tool and its arguments, never from what the model says: the
chat-log tools reading another channel (``in_channel``) reached that channel; the memory
tools reached notes (a ``recall`` returns what is in view for its asker, a ``remember``'s
arguments hold a note that may be refused, untrusted or forgotten later). A later request
built for someone who may not read a call's reach gets its ``Reach.shown`` line instead of
its arguments and result (``salon.context.records.placeholder``), and so does the channel
when the call is shown (``ToolRunner``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from salon.model import ChannelRef, Participant, Reach, ToolCall, ToolRecord, ToolResult

__all__ = [
    "BUILTIN_SERVER",
    "CHAT_LOG_TOOLS",
    "MEMORY_TOOLS",
    "derived",
    "other_channel",
    "reach_of",
    "who",
]

BUILTIN_SERVER = "salon"
"""The built-in tools' server (``salon.tools.servers.BUILTIN_SERVER``, which is this)."""
CHAT_LOG_TOOLS = frozenset(
    {"search_chat_logs", "get_recent_messages", "get_channel_stats", "get_current_users"}
)
"""The built-in tools that read a channel, another one with ``in_channel``."""
MEMORY_TOOLS = frozenset({"remember", "recall", "forget"})
_DID = {"remember": "had a note kept", "forget": "had a note forgotten"}


def who(askers: Sequence[Participant]) -> str:
    """The people a call was made for, as its placeholder names them."""
    names = list(dict.fromkeys(p.name for p in askers if p.name))
    if not names:
        return "someone"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def other_channel(tool: str, arguments: Mapping[str, object], here: str) -> str | None:
    """The key of the channel a chat-log call reads besides ``here`` (None: only here),
    as the tool itself resolves ``in_channel``: an id of the same platform, or a key."""
    if tool not in CHAT_LOG_TOOLS:
        return None
    wanted = str(arguments.get("in_channel") or "").strip()
    home = ChannelRef.from_key(here)
    if not wanted or wanted in {here, home.id}:
        return None
    return wanted if ":" in wanted else f"{home.platform}:{wanted}"


def reach_of(
    tool: str | None,
    call: ToolCall,
    result: ToolResult,
    *,
    channel: ChannelRef,
    askers: Sequence[Participant],
    names: Mapping[str, str] | None = None,
) -> Reach | None:
    """The reach of a call of the built-in ``tool`` (None for another server's) made in
    ``channel`` for ``askers``; ``names``: channels' names by key, for the placeholder."""
    ids = tuple(dict.fromkeys(p.id for p in askers))
    if tool in MEMORY_TOOLS:
        return Reach(ids, _memory_line(tool, result, who(askers)), personal=True, notes=True)
    other = other_channel(tool or "", call.arguments, channel.key)
    if other is None or result.is_error:  # refused: it read nothing
        return None
    where = (names or {}).get(other) or f"#{ChannelRef.from_key(other).id}"
    return Reach(ids, f"({who(askers)} looked something up in {where})", channels=(other,))


def _memory_line(tool: str, result: ToolResult, name: str) -> str:
    if tool != "recall":
        return f"({name} {_DID[tool]})"
    if result.is_error:
        return f"({name} tried to look up notes)"
    found = sum(1 for line in result.content.splitlines() if line.startswith("Note "))
    return f"({name} looked up {found} note{'' if found == 1 else 's'})"


def derived(record: ToolRecord) -> ToolRecord:
    """A record kept before reaches were: its reach worked out again from the call (a
    built-in tool's name as the model saw it), for no one known by name."""
    if record.reach is not None:
        return record
    channel = ChannelRef.from_key(record.channel)
    reach = reach_of(record.call.name, record.call, record.result, channel=channel, askers=())
    if reach is None:
        return record
    return replace(record, reach=reach)  # every other field kept as it was
