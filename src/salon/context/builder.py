"""From the room's history to an LLM request.

``select_context`` decides which messages the model sees (visibility and the recency
budgets); ``render_chat`` maps them to roles. Both are on the hot path of every
activation, so each walks the history once.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence
from typing import Literal
from zoneinfo import ZoneInfo

from salon.config.views import RenderSettings
from salon.context.names import Labels, with_mentions
from salon.context.records import add_record, record_text, weave
from salon.context.sources import source_of
from salon.llm.base import (
    ChatMessage,
    ContentPart,
    ImagePart,
    LLMRequest,
    TextPart,
    Thinking,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from salon.model import Message, Participant, Tag, ToolRecord

__all__ = [
    "HELD_MESSAGE_BYTES",
    "REPLIED_TO_MARK",
    "ChatMemo",
    "RenderMemo",
    "continues_run",
    "images_of",
    "message_text",
    "record_text",
    "render_chat",
    "reply_mark",
    "requested_thinking",
    "run_joiner",
    "spoken",
    "weave",
]

# What a memo or view holds per message besides its text, estimated for their byte bounds:
# the entries of their lists and indexes (the message objects are mostly the platform's).
HELD_MESSAGE_BYTES = 128


REPLIED_TO_MARK = "(earlier message, replied to) "
"""Marks a message the reply chain brought in from beyond the recency window."""

_SIZE_CUT = 0.9
"""A piece this close to the platform's size limit was cut for size, inside a paragraph."""


def continues_run(previous: Message | ToolRecord | None, item: Message | ToolRecord) -> bool:
    """Whether ``item`` continues a bot's run of messages: a bot's answer arrives in pieces
    (a paragraph each, or cut at the size limit), and a run reads as one message."""
    return (
        isinstance(previous, Message)
        and isinstance(item, Message)
        and item.author.is_bot
        and previous.author.id == item.author.id
    )


def run_joiner(
    previous: Message, message_limit: int | None, join: Literal["paragraph", "space"] = "paragraph"
) -> str:
    """What goes between two pieces of a run: a paragraph break, as answers are sent a
    paragraph at a time; a space after a piece cut for size (it ends mid-paragraph), or
    always with ``join="space"`` (ChapterX joins a bot's messages so)."""
    if join == "space" or (message_limit and len(previous.text) >= message_limit * _SIZE_CUT):
        return " "
    return "\n\n"


def message_text(message: Message) -> str:
    """A message's text with the text files a platform loaded for it."""
    return message.text + _file_texts(message) if message.attachments else message.text


def spoken(
    message: Message,
    position: int,
    me: Participant,
    name: str,
    labels: Labels,
    *,
    at_line_start: bool = False,
) -> str:
    """What ``message`` (at ``position`` in the render) says in the context: its text
    (``message_text``) with the bot's mentions under its configured ``name``; in others'
    messages, a line that begins with a label is marked as quoted (``at_line_start``: its
    first line starts a line of the context too)."""
    text = message.text + _file_texts(message) if message.attachments else message.text
    if message.mentions:
        text = with_mentions(text, message, me, name, labels)
    if ":" not in text or message.author.id == me.id:  # no line of it can read as a turn
        return text
    return labels.quoted(text, position, at_line_start=at_line_start)


def reply_mark(message: Message) -> str:
    """What goes before a message's label: where it came from (``context_sources``), or
    that the reply chain brought it in."""
    if not message.tags:
        return ""
    if Tag.SOURCED in message.tags:
        return f"[{source_of(message)}] "
    return REPLIED_TO_MARK if Tag.REPLY_CHAIN in message.tags else ""


def _file_texts(message: Message) -> str:
    """Text files a platform loaded, appended to the message they came with."""
    return "".join(
        f"\n[file {a.filename}]\n{a.data.decode('utf-8', errors='replace')}"
        for a in message.attachments
        if a.data is not None and not a.content_type.startswith("image/")
    )


def images_of(message: Message) -> list[ImagePart]:
    if not message.attachments:
        return []
    return [
        ImagePart(a.content_type, a.data)
        for a in message.attachments
        if a.data is not None and a.content_type.startswith("image/")
    ]


class _Breakpoint:
    """Where the cache breakpoint goes: the text before it ends a marked part."""


_BREAK = _Breakpoint()


class _Cont(str):
    """The rest of a line whose start was flushed (by a breakpoint or an image)."""


Piece = str | ImagePart | ToolUsePart | ToolResultPart | ThinkingPart | _Breakpoint


def _parts(pieces: list[Piece]) -> tuple[ContentPart, ...]:
    """Runs of text lines become one text part; images and tool parts stay where they
    were; the text up to the cache breakpoint ends a part marked as the breakpoint."""
    parts: list[ContentPart] = []
    lines: list[str] = []
    glue = ""  # text right after the breakpoint starts on a new line

    def flush(*, cache_breakpoint: bool = False) -> None:
        nonlocal lines, glue
        if lines or cache_breakpoint:
            parts.append(TextPart(glue + "\n".join(lines), cache_breakpoint=cache_breakpoint))
            glue = "\n" if cache_breakpoint else ""
        lines = []

    for piece in pieces:
        if isinstance(piece, _Cont):
            if lines:
                lines[-1] += piece
            else:
                lines.append(piece)
                glue = ""  # the rest of a line goes on where it stopped
        elif isinstance(piece, str):
            lines.append(piece)
        elif isinstance(piece, _Breakpoint):
            flush(cache_breakpoint=True)
        else:
            flush()
            parts.append(piece)
    flush()
    return tuple(parts)


class _Turns:
    """Chat turns being built: consecutive pieces of one role share a turn."""

    def __init__(self) -> None:
        self.turns: list[tuple[Literal["user", "assistant"], list[Piece]]] = []
        self.structured: set[int] = set()  # turns holding more than plain lines

    def pieces(self, role: Literal["user", "assistant"]) -> list[Piece]:
        if not (self.turns and self.turns[-1][0] == role):
            self.turns.append((role, []))
        return self.turns[-1][1]

    def line(self, role: Literal["user", "assistant"], text: str) -> None:
        self.pieces(role).append(text)

    def add(self, role: Literal["user", "assistant"], *pieces: Piece) -> None:
        into = self.pieces(role)
        into.extend(pieces)
        if any(type(p) is not str for p in pieces):
            self.structured.add(len(self.turns) - 1)

    def continue_line(self, role: Literal["user", "assistant"], text: str) -> None:
        into = self.pieces(role)
        if into and type(into[-1]) is str:
            into[-1] += text
        else:
            self.add(role, _Cont(text))

    def resume(self, memo: ChatMemo, turn: int) -> None:
        """Go on from ``memo``'s turns before ``turn``, plus ``turn`` itself when it is
        the last (only the last can still grow, so only it is copied)."""
        self.turns = memo.turns[:turn]
        if turn < len(memo.turns):
            role, pieces = memo.turns[turn]
            self.turns.append((role, list(pieces)))
        self.structured = {t for t in memo.structured if t <= turn}

    def messages(self, reused: tuple[ChatMessage, ...] = ()) -> tuple[ChatMessage, ...]:
        """The turns as chat messages; the first ``len(reused)`` were built before."""
        return (
            reused
            + tuple(
                ChatMessage(
                    role,
                    _parts(pieces) if i in self.structured else (TextPart("\n".join(pieces)),),  # type: ignore[arg-type]  # all str here
                )
                for i, (role, pieces) in enumerate(self.turns[len(reused) :], start=len(reused))
            )
        )


class RenderMemo:
    """What a render made last time in one channel, to go on from.

    Between two answers a channel's context mostly grows at its end (a rolled window keeps
    its start) and its breakpoints move near the end, so rendering again from the first
    change keeps an activation's cost off the window's size. A message is the same when it
    is the same object: platforms make a new one for an edit.
    """

    __slots__ = ("chars", "grown", "items", "key", "labels", "marks", "positions")

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.items: tuple[Message, ...] = ()
        self.positions: dict[str, int] = {}  # message id -> index in ``items``
        self.marks: set[str] = set()  # ids in ``items`` that carried a breakpoint
        self.labels: Labels | None = None  # the participants' labels, decided over ``items``
        self.grown = False  # the last ``unchanged``: ``items`` begin with the last ones
        self.chars = 0  # the text size of ``items``

    def labels_from(
        self, start: int, items: Sequence[Message], me: Participant, reserved: tuple[str, ...]
    ) -> Labels:
        """The labels to go on with from item ``start`` of this render: the memo's, when
        the channel only grew since (they decided every item before ``start`` already);
        else new ones (``reserved``: the bot's names), told the authors before ``start``."""
        if start and self.grown and self.labels is not None:
            return self.labels
        return labels_until(start, items, me, Labels(reserved))

    @property
    def size(self) -> int:
        """How many messages the memo holds on to (for the bound on all memos)."""
        return len(self.items)

    @property
    def nbytes(self) -> int:
        """An estimate of the memory it holds on to: the messages and their texts."""
        return len(self.items) * HELD_MESSAGE_BYTES + self.chars

    def unchanged(
        self, key: tuple[object, ...], items: tuple[Message, ...], marked: set[str]
    ) -> int:
        """How many of ``items``, from the first, render as they did last time."""
        done = self.items
        self.grown = False
        if not done or self.key != key:
            return 0
        if len(items) >= len(done) and items[: len(done)] == done:  # compared by identity
            same = len(done)
        else:
            same = _common_prefix(items, done)
        self.grown = same == len(done)
        for moved in self.marks.symmetric_difference(i for i in marked if i in self.positions):
            same = min(same, self.positions[moved])
        return same

    def remember(
        self, key: tuple[object, ...], items: tuple[Message, ...], marked: set[str], resumed_at: int
    ) -> None:
        """Remember the items of a render; those before ``resumed_at`` were there before."""
        if resumed_at == 0:
            self.positions, self.chars = {}, 0
        else:
            for message in self.items[resumed_at:]:
                self.positions.pop(message.id, None)
                self.chars -= len(message.text)
        for index in range(resumed_at, len(items)):
            self.positions[items[index].id] = index
            self.chars += len(items[index].text)
        self.key, self.items = key, items
        self.marks = {i for i in marked if i in self.positions}


class ChatMemo(RenderMemo):
    """``render_chat``'s memo: its turns, where each began, and the messages built."""

    __slots__ = ("built", "starts", "structured", "turns")

    def __init__(self) -> None:
        super().__init__()
        self.turns: list[tuple[Literal["user", "assistant"], list[Piece]]] = []
        self.structured: set[int] = set()
        self.built: tuple[ChatMessage, ...] = ()
        self.starts: list[int] = []  # the index in ``items`` where each turn began

    @property
    def nbytes(self) -> int:
        """The messages, and the turns built of them (their texts again)."""
        return super().nbytes + len(self.built) * HELD_MESSAGE_BYTES + self.chars

    def resume_point(
        self, key: tuple[object, ...], items: tuple[Message, ...], marked: set[str]
    ) -> tuple[int, int]:
        """Where a render of ``items`` can go on from: the index of the first item to
        render, and the last turn to keep (copied, as it may grow). (0, 0): start over."""
        same = self.unchanged(key, items, marked)
        if not same:
            return 0, 0
        turn = max(bisect.bisect_right(self.starts, same) - 1, 0)  # the turn of item `same`
        if same == len(self.items):  # grown at the end: the last turn goes on
            return same, turn
        if turn == 0:
            return 0, 0
        # The turn holding the first change is made again; the one before may grow.
        return self.starts[turn], turn - 1

    def keep(
        self,
        key: tuple[object, ...],
        items: tuple[Message, ...],
        turns: _Turns,
        *,
        built: tuple[ChatMessage, ...],
        starts: list[int],
        marked: set[str],
        resumed_at: int,
    ) -> None:
        """Remember a render; ``resumed_at``: the items before it were rendered before."""
        self.remember(key, items, marked, resumed_at)
        self.built, self.starts = built, starts
        self.turns, self.structured = turns.turns, turns.structured


def labels_until(start: int, items: Sequence[Message], me: Participant, labels: Labels) -> Labels:
    """``labels`` told the authors of ``items[:start]``, in order, as a render would."""
    for position in range(start):
        author = items[position].author
        if author.id != me.id:
            labels.author(author, position)
    return labels


def _common_prefix(a: tuple[Message, ...], b: tuple[Message, ...]) -> int:
    """The length of the longest common prefix of two tuples, by bisection on slices."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def render_chat(
    messages: Sequence[Message],
    me: Participant,
    settings: RenderSettings,
    model: str,
    records: Sequence[ToolRecord] = (),
    *,
    breakpoint_id: str | None = None,
    breakpoints: Collection[str] = (),
    native_tools: bool = False,
    message_limit: int | None = None,
    memo: ChatMemo | None = None,
    preamble: str = "",
) -> LLMRequest:
    """Chat mode: the bot's messages are assistant turns, everyone else's user turns.

    User lines carry their author's name; consecutive turns of one role are merged, and a
    bot's run of messages reads as one message under one label (``run_joiner``). Past tool
    calls are native tool turns when ``native_tools`` (the request offers tools natively),
    else part of the bot's turns in the text protocol's form. Images a platform loaded
    follow the line they came with. The messages ``breakpoint_id`` and ``breakpoints`` end
    text parts marked as prompt-cache breakpoints. ``memo`` (one per channel) lets a render
    go on from the previous one instead of starting over. ``preamble`` (the linked
    channels, ``salon.agent.links``) opens the first user turn, before the room's history.
    """
    marked = {*breakpoints, *([breakpoint_id] if breakpoint_id else [])}
    items = tuple(messages)
    name = settings.name
    key = (me, name, native_tools, message_limit, preamble, settings)
    turns = _Turns()
    start, starts = 0, []
    reused: tuple[ChatMessage, ...] = ()
    if memo is not None and not records:
        start, kept = memo.resume_point(key, items, marked)
        if start:
            turns.resume(memo, kept)
            starts, reused = memo.starts[: kept + 1], memo.built[:kept]
    reserved = (name, me.name)  # the bot's names: no one else goes by them
    labels = memo.labels_from(start, items, me, reserved) if memo is not None else Labels(reserved)
    if start == 0 and preamble:
        turns.line("user", preamble)
        starts = [0]
    sequence = weave(items, records) if start == 0 else items[start:]
    previous: Message | ToolRecord | None = items[start - 1] if start else None
    for offset, item in enumerate(sequence, start=start):
        before = len(turns.turns)
        if isinstance(item, ToolRecord):
            add_record(turns, item, native=native_tools)
        else:
            _add_message(
                turns, item, offset, previous, me, labels=labels, limit=message_limit,
                settings=settings,
            )  # fmt: skip
            extra: list[Piece] = list(images_of(item))
            if marked and item.id in marked:
                extra.insert(0, _BREAK)  # right after the line, before any image
            if extra:
                turns.add("assistant" if item.author.id == me.id else "user", *extra)
        starts += [offset] * (len(turns.turns) - before)
        previous = item
    built = turns.messages(reused)
    if memo is not None:
        rendered = items if not records else ()
        memo.keep(key, rendered, turns, built=built, starts=starts, marked=marked, resumed_at=start)
        memo.labels = labels
    return LLMRequest(
        model=model,
        messages=built,
        system=settings.system_prompt,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        stop=tuple(settings.stop_sequences),
        cache_system=settings.prompt_caching,
        thinking=requested_thinking(settings),
    )


def requested_thinking(settings: RenderSettings) -> Thinking | None:
    """The reasoning the bot's config asks of the model, or None when thinking is off."""
    wanted = settings.thinking
    if not wanted.enabled:
        return None
    return Thinking(budget_tokens=wanted.budget_tokens, effort=wanted.effort)


def _add_message(
    turns: _Turns,
    message: Message,
    position: int,
    previous: Message | ToolRecord | None,
    me: Participant,
    *,
    labels: Labels,
    limit: int | None,
    settings: RenderSettings,
) -> None:
    name = settings.name
    mine = message.author.id == me.id
    role: Literal["user", "assistant"] = "assistant" if mine else "user"
    who = message.author
    label = (
        ""
        if mine
        else labels.decided.get((who.id, who.name, who.borrowed)) or labels.author(who, position)
    )
    joiner = ""  # what joins a piece of a bot's run to the one before
    if continues_run(previous, message):
        assert isinstance(previous, Message)
        joiner = run_joiner(previous, limit, settings.bot_run_join)
    text = message.text
    if message.attachments or message.mentions or ":" in text:  # else spoken() gives it back
        text = spoken(message, position, me, name, labels, at_line_start=joiner.endswith("\n"))
    if joiner:
        turns.continue_line(role, joiner + text)
    else:
        mark = reply_mark(message)
        if mine:
            turns.line(role, f"{mark}{text}")
        elif settings.line_format == "irc":  # Terrarium's chat log lines
            stamp = message.created_at.astimezone(ZoneInfo(settings.timezone))
            turns.line(role, f"{mark}[{stamp:%Y-%m-%d %H:%M:%S}] <{label}> {text}")
        else:
            turns.line(role, f"{mark}{label}: {text}")
