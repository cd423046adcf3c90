"""Past tool calls in a request: where each goes among the messages, and how it reads.

A call comes back in the bot's turn: as native tool turns where the request offers tools
natively, else as the text protocol's form. A turn that thought carries its thoughts (on
its first call's record); natively they go first on that turn again, and the calls of the
turn are one assistant turn as the model made them, so a restart in the middle of a tool
loop sends the vendor what it checks. Thoughts never become text.

What the turn said before its calls (``ToolRecord.said``) goes back before them, as the
loop sent it, so every later request carries the turn as the loop's follow-up did and the
prompt cache reads through it; the chat messages those words went out as are left out
where the record goes (the model reads them once).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, Protocol

from salon.context.textproto import format_calls, format_results
from salon.llm.base import ThinkingPart, ToolResultPart, ToolUsePart
from salon.model import Message, ToolRecord

__all__ = ["Turns", "add_record", "placeholder", "record_id", "record_text", "weave"]

Role = Literal["user", "assistant"]


class Turns(Protocol):
    """Chat turns being built (``salon.context.builder``): each a role and its pieces."""

    turns: list[tuple[Role, list[Any]]]

    def pieces(self, role: Role) -> list[Any]: ...

    def add(self, role: Role, *pieces: Any) -> None: ...


def weave(messages: Sequence[Message], records: Sequence[ToolRecord]) -> list[Message | ToolRecord]:
    """Put each past tool call right after the message it followed, leaving out the
    messages its words went out as (``ToolRecord.posted_as``).

    A call whose message is gone goes after the last message older than the call; calls
    older than every message in context were dropped by the tool log already.
    """
    if not records:
        return list(messages)
    posted = {message_id for record in records for message_id in record.posted_as}
    if posted:  # the words a record carries, as the loop sent them, stand for these
        messages = [m for m in messages if m.id not in posted]
    by_message: dict[str, list[ToolRecord]] = {}
    positions = {m.id for m in messages}
    loose: list[ToolRecord] = []
    for record in records:
        if record.after_message_id in positions:
            by_message.setdefault(record.after_message_id or "", []).append(record)
        else:
            loose.append(record)
    woven: list[Message | ToolRecord] = []
    pending = sorted(loose, key=lambda r: r.time)
    for message in messages:
        while pending and pending[0].time < message.created_at:
            woven.append(pending.pop(0))
        woven.append(message)
        woven.extend(by_message.get(message.id, ()))
    woven.extend(pending)
    return woven


def placeholder(record: ToolRecord) -> ToolRecord:
    """The call as someone who may not read its reach sees it: no arguments, and its
    fixed line (``Reach.shown``) for a result; the same text whoever reads, so it does
    not move the prompt cache's prefix from one reader to the next."""
    if record.reach is None:
        return record
    shown = replace(record.result, content=record.reach.shown, is_error=False, attachments=())
    return replace(record, call=replace(record.call, arguments={}), result=shown)


def record_text(record: ToolRecord) -> str:
    """A past tool call as the model would have written it, after what its turn said
    first, with its result."""
    calls = [record.call]
    return f"{record.said}{format_calls(calls)}\n{format_results(calls, [record.result])}"


def record_id(record: ToolRecord) -> str:
    """A stable id for a past call: vendors' own ids may repeat across restarts."""
    digest = hashlib.sha1(f"{record.time.isoformat()}|{record.call.id}".encode()).hexdigest()
    return f"past_{digest[:16]}"


def add_record(turns: Turns, record: ToolRecord, *, native: bool) -> None:
    if not native:
        turns.add("assistant", record_text(record))
        return
    call_id = record_id(record)
    used = ToolUsePart(replace(record.call, id=call_id))
    answered = ToolResultPart(replace(record.result, call_id=call_id))
    if _joins(record, turns):
        # A later call of the turn: that turn's calls are one assistant turn again, as
        # the model made them (the loop sent them so; a vendor checks a tool loop's last).
        (asked, made), (role, results) = turns.turns[-2:]
        turns.turns[-2:] = [(asked, [*made, used]), (role, [*results, answered])]
        return
    if record.thoughts:  # the turn's reasoning goes first on it, as the model wrote it
        turns.pieces("assistant")[:0] = [
            ThinkingPart(replace(t, call_id=call_id) if t.call_id == record.call.id else t)
            for t in record.thoughts
        ]
    turns.add("assistant", *([record.said] if record.said else []), used)
    turns.add("user", answered)


def _joins(record: ToolRecord, turns: Turns) -> bool:
    """Whether ``record`` goes on the call-making turn just built, with nothing after that
    turn's results yet: a later call of the same turn (a record written before that was
    noted joins a turn that thought)."""
    if record.thoughts or record.said or len(turns.turns) < 2:
        return False
    (asked, made), (role, results) = turns.turns[-2:]
    opened = record.same_turn or (bool(made) and isinstance(made[0], ThinkingPart))
    return (
        asked == "assistant"
        and role == "user"
        and opened
        and any(isinstance(p, ToolUsePart) for p in made)
        and all(isinstance(p, ToolResultPart) for p in results)
    )
