"""Why a call read less of its prompt from the provider's cache than the previous call left.

``CacheDiagnosis`` compares every call with the previous call in the same channel, entry by
entry: each context message, each past tool call among them (under the id its record
keeps, as every request names it, after what its turn said first; in the text protocol,
as the text the loop wrote), then the turns the tool loop or the planner added.

- Where the two first differ: the index and id of that entry, and why, as far as Salon
  knows it (``salon.trace.CAUSES``): ``roll`` (the context was cut back this time),
  ``config change``, ``memory change`` and ``linked change`` (the memory or linked block
  before the history), ``edited message``, ``deleted message``, ``inserted message``,
  ``tool call changed`` (a past tool call sent otherwise than the tool loop sent it),
  ``tool-list change``, ``model change`` (``thinking dropped`` when the request carries the
  old model's thoughts, which the provider leaves out for the new one); ``new messages``
  when the previous request is a prefix of this one (nothing broken).
- The expected read share: the part of this request the provider could read from its
  cache (up to the divergence, and for providers with cache markers up to the last marker
  the previous request sent before it), by characters, beside the share the provider
  billed. A part shorter than the provider's minimum cacheable prompt
  (``salon.llm.cache_plan.min_cacheable``) is never cached: the expected share is then 0.
- A call billed well below that share (``MISS_GAP``) is explained (``salon.agent.recording.
  misses``): ``expired`` when the time since the previous call is past the cache's
  lifetime, else ``unexplained`` with what differed.
- A cache write well above what arrived since the previous call is flagged with the cause.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from operator import add, attrgetter
from typing import NamedTuple

from salon.agent.recording.misses import Previous, explain, lifetime
from salon.agent.recording.recorder import PendingCall, Recorder
from salon.config import BotConfig
from salon.context.records import record_id, record_text, weave
from salon.context.textproto import CALLS_CLOSE
from salon.llm.base import ChatMessage, LLMRequest, ThinkingPart, ToolResultPart, ToolUsePart
from salon.llm.cache_plan import min_cacheable
from salon.model import Message, Thought, ToolCall, ToolRecord, ToolResult
from salon.trace import CallTrace, Divergence

__all__ = ["MISS_GAP", "CacheDiagnosis"]

_CHANNELS = 4096  # channels whose previous call is remembered for the diagnosis
_MESSAGES = 200_000  # messages those calls may hold between them (as the views do)
DIAGNOSIS_BYTES = 64 * 1024 * 1024  # their estimated memory (as the views' CACHE_BYTES)
_ENTRY_BYTES = 128  # per entry besides its text: its id, hash and size (the message is shared)
_CHARS_PER_TOKEN = 4  # for telling a large cache write: rough, as tokenizers differ
_WRITE_SLACK = 512  # tokens a cache write may exceed its estimate by before it is flagged
_SLIDE = 64  # how far a window may have slid for the previous call's entries to be reused
# Billed this far below the expected read share: a miss the trace explains. Rounding (a
# vendor reads in steps of 128 tokens) and the estimate by characters stay well within it.
MISS_GAP = 0.1


class _Entries(NamedTuple):
    ids: tuple[str | None, ...]
    hashes: tuple[int, ...]
    sizes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Seen:
    """What a call's request was made of, entry by entry (context messages and the past
    tool calls among them, then turns the tool loop or the planner added)."""

    model: str
    system: int
    tools: int
    config: BotConfig | None
    messages: tuple[Message, ...]  # the scene's
    ids: tuple[str | None, ...]  # every entry, in the request's order
    hashes: tuple[int, ...]
    sizes: tuple[int, ...]
    marks: frozenset[int]  # entries that end a cache block
    fixed: int  # characters before the messages: system prompt, tools, preamble blocks
    memory: int = 0  # the memory block's hash (salon.agent.memoryblock)
    linked: int = 0  # the linked block's
    dropped: bool = False  # it carries thoughts of another model, which are not sent
    calls: frozenset[int] = frozenset()  # entries that are tool calls
    # The scene messages' own entries where past tool calls sit among them (else the
    # first len(messages) entries are theirs): what the next call may reuse.
    own: _Entries | None = None
    previous: Previous | None = None  # when it ran, what it sent and was billed


class CacheDiagnosis:
    """The previous call of each recent channel, bounded by channels and by the messages
    their calls hold between them (each holds its scene's message objects)."""

    def __init__(
        self,
        max_channels: int = _CHANNELS,
        max_messages: int = _MESSAGES,
        max_bytes: int = DIAGNOSIS_BYTES,
    ) -> None:
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._max = max_channels
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self.messages_held = 0
        self.nbytes = 0  # the estimate of what the calls hold: see _weight

    @property
    def channels(self) -> list[str]:
        """The channels remembered, least recent first."""
        return list(self._seen)

    def observe(
        self, channel: str, recorder: Recorder, pending: PendingCall, call: CallTrace
    ) -> None:
        """Fill in the call's divergence, expected read share and flags."""
        scene = recorder.scene
        if scene is None:
            return
        previous = self._seen.get(channel)
        seen = _fingerprint(recorder, pending, previous)
        seen = replace(seen, previous=Previous.of(call))
        markers = pending.provider.traits.cache_markers
        divergence, readable = _compare(previous, seen, cut=scene.cut, markers=markers)
        call.divergence = divergence
        total = seen.fixed + sum(seen.sizes)
        if previous is not None and total:
            kind, minimum = _vendor(scene.config, call.provider, call.model)
            readable = _cacheable(readable, total, call, minimum)
            if markers and previous.previous is not None and not previous.previous.ttls:
                readable = 0  # the previous request marked nothing: nothing was cached
            call.expected_read_share = readable / total
            _explain_miss(call, previous, kind)
            _flag_large_write(call, seen, readable, markers)
        self._remember(channel, seen)

    def _remember(self, channel: str, seen: _Seen) -> None:
        if (replaced := self._seen.pop(channel, None)) is not None:
            self._forget(replaced)
        self._seen[channel] = seen
        self.messages_held += len(seen.ids)
        self.nbytes += _weight(seen)
        while len(self._seen) > 1 and (
            len(self._seen) > self._max
            or self.messages_held > self._max_messages
            or self.nbytes > self._max_bytes
        ):
            self._forget(self._seen.popitem(last=False)[1])

    def _forget(self, seen: _Seen) -> None:
        self.messages_held -= len(seen.ids)
        self.nbytes -= _weight(seen)


def _weight(seen: _Seen) -> int:
    """An estimate of the memory a call's entries hold: each entry, and the texts of its
    messages (kept alive while the entry is); the request as sent, about as much again."""
    return len(seen.ids) * _ENTRY_BYTES + 2 * (seen.fixed + sum(seen.sizes))


def _vendor(config: BotConfig | None, provider: str, model: str) -> tuple[str, int]:
    """The provider's type (``ProviderConfig.type``; "" when unknown) and the fewest
    prompt tokens it caches for ``model``."""
    found = config.providers.get(provider) if config is not None else None
    if found is None:
        return "", 0
    return found.type, min_cacheable(found.type, model, found.cache_min_tokens)


def _cacheable(readable: int, total: int, call: CallTrace, minimum: int) -> int:
    """``readable`` characters, or none when they come to fewer tokens than ``minimum``
    (by the billed prompt's tokens where the provider reported them)."""
    if not minimum or not readable:
        return readable
    prompt = call.input_tokens + call.cache_read_tokens + call.cache_write_tokens
    tokens = readable * prompt / total if prompt else readable / _CHARS_PER_TOKEN
    return readable if tokens >= minimum else 0


def _explain_miss(call: CallTrace, previous: _Seen, kind: str) -> None:
    """A call billed well below its expected read share says why, or that Salon cannot
    tell and what differed."""
    billed, expected = call.billed_read_share, call.expected_read_share
    found, before = call.divergence, previous.previous
    if billed is None or expected is None or found is None or before is None:
        return
    if expected - billed < MISS_GAP:
        return
    cause, detail = explain(before, call, lifetime(kind, before), kind)
    said = f"read {billed:.0%} against {expected:.0%} expected: {detail}"
    if found.cause == "new messages":  # nothing in the prompt broke: the miss is the cause
        call.divergence = Divergence(-1, None, cause, said)
    else:
        call.divergence = replace(found, detail=f"and {cause}: {said}")


_ID, _TEXT, _AUTHOR, _NAME = (attrgetter(n) for n in ("id", "text", "author", "name"))


def _fingerprint(recorder: Recorder, pending: PendingCall, previous: _Seen | None) -> _Seen:
    scene = recorder.scene
    assert scene is not None
    request = pending.request
    messages = scene.messages
    own = _message_entries(previous, messages)
    entries, calls = own, set[int]()
    records = getattr(scene, "records", ())
    if records:
        text = not request.tools and bool(request.tool_listing)
        entries, calls = _with_records(own, messages, records, text=text)
    ids, hashes, sizes = list(entries.ids), list(entries.hashes), list(entries.sizes)
    first = recorder.calls[0].request if recorder.calls else request
    added = _turn_entries(request.messages[len(first.messages) :])
    for entry_id, entry_hash, size, call in added:
        if call:
            calls.add(len(ids))
        ids.append(entry_id)
        hashes.append(entry_hash)
        sizes.append(size)
    schemas = [repr(t.input_schema) for t in request.tools]  # once each: dicts to walk
    tools = hash(tuple(zip((t.name for t in request.tools), schemas, strict=True)))
    tools_size = sum(len(t.name) + len(t.description) for t in request.tools)
    tools_size += sum(map(len, schemas))
    return _Seen(
        model=request.model,
        system=hash(request.system),
        tools=hash((tools, request.tool_listing)),
        config=scene.config,
        messages=messages,
        ids=tuple(ids),
        hashes=tuple(hashes),
        sizes=tuple(sizes),
        marks=frozenset(_positions(ids, scene.breakpoints)),
        fixed=len(request.system) + tools_size + len(request.tool_listing) + len(scene.preamble),
        memory=hash(scene.memory),
        linked=hash(scene.linked),
        dropped=previous is not None and previous.model != request.model and _foreign(request),
        calls=frozenset(calls),
        own=own if records else None,
    )


def _message_entries(previous: _Seen | None, messages: tuple[Message, ...]) -> _Entries:
    """The scene messages' entries, the previous call's reused for the same objects."""
    start, count = _reusable(previous, messages)
    ids: list[str | None] = []
    hashes: list[int] = []
    sizes: list[int] = []
    if previous is not None and count:  # the same message objects: the same entries
        reused = _own(previous)
        ids += reused.ids[start : start + count]
        hashes += reused.hashes[start : start + count]
        sizes += reused.sizes[start : start + count]
    # Walked with map() in C: a Python loop over a long chat was most of a trace's cost.
    new = messages[count:]
    ids += map(_ID, new)
    texts = list(map(_TEXT, new))
    authors = list(map(_AUTHOR, new))
    hashes += map(hash, zip(texts, map(_ID, authors), strict=True))
    names = map(len, map(_NAME, authors))
    sizes += map(add, map(len, texts), map(add, names, repeat(2)))
    return _Entries(tuple(ids), tuple(hashes), tuple(sizes))


def _own(seen: _Seen) -> _Entries:
    """The scene messages' entries of a call (its tool loop's turns come after them)."""
    if seen.own is not None:
        return seen.own
    return _Entries(seen.ids, seen.hashes, seen.sizes)


def _with_records(
    own: _Entries, messages: tuple[Message, ...], records: Sequence[ToolRecord], *, text: bool
) -> tuple[_Entries, set[int]]:
    """The messages' entries with each past tool call where the request puts it
    (``salon.context.records.weave``, which leaves out the messages a call's words went
    out as), and which entries are calls (``text``: in the text protocol's form)."""
    ids: list[str | None] = []
    hashes: list[int] = []
    sizes: list[int] = []
    calls: set[int] = set()
    index = 0
    for item in weave(messages, records):
        if isinstance(item, Message):
            while messages[index] is not item:  # left out: the call carries its words
                index += 1
            ids.append(own.ids[index])
            hashes.append(own.hashes[index])
            sizes.append(own.sizes[index])
            index += 1
            continue
        for entry_id, entry_hash, size in _record_entries(item, text=text):
            calls.add(len(ids))
            ids.append(entry_id)
            hashes.append(entry_hash)
            sizes.append(size)
    return _Entries(tuple(ids), tuple(hashes), tuple(sizes)), calls


def _record_entries(record: ToolRecord, *, text: bool) -> list[tuple[str | None, int, int]]:
    """A past call's entries, as the tool loop's turn has them (``_turn_entries``): in the
    text protocol, one turn of text; natively, what its turn said first, then the call."""
    if text:  # the loop's turn ends a line after the results; the next message follows
        written = f"{record_text(record)}\n"
        return [(None, hash(("assistant", written)), len(written))]
    named = record_id(record)
    call_hash = _call_hash(named, record.call, record.result, record.thoughts)
    entries: list[tuple[str | None, int, int]] = []
    if record.said:
        entries.append((None, hash(("assistant", record.said)), len(record.said)))
    entries.append((named, call_hash, _call_size(record.call, record.result)))
    return entries


def _turn_entries(turns: Sequence[ChatMessage]) -> Iterator[tuple[str | None, int, int, bool]]:
    """(id, hash, size, part of a call) of each turn the tool loop or the planner added:
    a call with its result as one entry under the call's id (as a past call's record is),
    anything said beside the calls as an entry of its own (id None; part of the calls, as
    their record carries it); a turn in the text protocol's form is all text."""
    results = {
        part.result.call_id: part.result
        for turn in turns
        for part in turn.parts
        if isinstance(part, ToolResultPart)
    }
    for turn in turns:
        calls = [p.call for p in turn.parts if isinstance(p, ToolUsePart)]
        text = turn.plain_text
        if text or not (calls or results):
            yield None, hash((turn.role, text)), len(text), bool(calls) or CALLS_CLOSE in text
        thoughts = tuple(p.thought for p in turn.parts if isinstance(p, ThinkingPart))
        for n, made in enumerate(calls):
            result = results.get(made.id, ToolResult(made.id, ""))
            yield (
                made.id,
                _call_hash(made.id, made, result, thoughts if n == 0 else ()),
                (_call_size(made, result)),
                True,
            )


def _call_hash(
    named: str, call: ToolCall, result: ToolResult, thoughts: tuple[Thought, ...]
) -> int:
    """A past call as a request carries it: under ``named``, with its result."""
    arguments = repr(call.arguments)
    return hash((named, call.name, arguments, result.content, result.is_error, thoughts))


def _call_size(call: ToolCall, result: ToolResult) -> int:
    return len(call.name) + len(repr(call.arguments)) + len(result.content)


def _foreign(request: LLMRequest) -> bool:
    """Whether ``request`` carries thoughts another model wrote (asked on a model change)."""
    return any(
        isinstance(part, ThinkingPart) and part.thought.model != request.model
        for message in request.messages
        for part in message.parts
    )


def _reusable(previous: _Seen | None, messages: tuple[Message, ...]) -> tuple[int, int]:
    """(where, how many): ``messages`` starts with that many of the previous call's scene
    messages, from that index on (a window slides: the oldest go). The previous entries
    for them hold, as a message object never changes. (0, 0) when nothing is reusable."""
    if previous is None or not messages or not previous.messages:
        return 0, 0
    old = previous.messages
    try:  # ids compare in C; an edit or a roll makes the check below fail
        start = _own(previous).ids.index(messages[0].id, 0, min(len(old), _SLIDE))
    except ValueError:
        return 0, 0
    count = min(len(old) - start, len(messages))
    # Tuples compare item by item, identity first: the same objects cost no __eq__.
    if messages[:count] != old[start : start + count]:
        return 0, 0
    return start, count


def _positions(ids: list[str | None], wanted: Iterable[str]) -> Iterator[int]:
    for message_id in wanted:
        try:
            yield ids.index(message_id)
        except ValueError:
            continue


def _compare(
    previous: _Seen | None, seen: _Seen, *, cut: bool, markers: bool
) -> tuple[Divergence, int]:
    """Where ``seen`` first differs from ``previous``, why, and how many of its characters
    the provider could read from its cache."""
    if previous is None:
        return Divergence(-1, None, "first call"), 0
    for changed, cause in (
        (previous.model != seen.model, "thinking dropped" if seen.dropped else "model change"),
        (previous.tools != seen.tools, "tool-list change"),
        (previous.system != seen.system, "config change"),
        (previous.linked != seen.linked, "linked change"),
        (previous.memory != seen.memory, "memory change"),
    ):
        if changed:
            return Divergence(-1, None, cause), 0
    index = _first_difference(previous, seen)
    cause = _cause(previous, seen, index, cut=cut)
    upto = index
    if markers:  # the cache holds prefixes that end at a marker of the previous request
        marked = [m + 1 for m in previous.marks if m < index]
        upto = max(marked, default=0)
    message_id = seen.ids[index] if index < len(seen.ids) else None
    return Divergence(index, message_id, cause), previous.fixed + sum(seen.sizes[:upto])


def _first_difference(previous: _Seen, seen: _Seen) -> int:
    common = min(len(previous.hashes), len(seen.hashes))
    if previous.hashes[:common] == seen.hashes[:common] and (
        previous.ids[:common] == seen.ids[:common]
    ):  # the usual case, compared in C
        return common
    for index, (a, b) in enumerate(zip(previous.hashes, seen.hashes, strict=False)):
        if a != b or previous.ids[index] != seen.ids[index]:
            return index
    return min(len(previous.hashes), len(seen.hashes))


def _cause(previous: _Seen, seen: _Seen, index: int, *, cut: bool) -> str:
    if index >= len(previous.ids):
        return "new messages"  # the previous request is a prefix of this one
    if cut:
        return "roll"
    if previous.config is not seen.config and previous.config != seen.config:
        return "config change"
    if index in previous.calls or (index in seen.calls and previous.ids[index] is None):
        return "tool call changed"
    if previous.ids[index] is None:  # a turn of its own (a plan) that later requests leave
        return "new messages"
    if index < len(seen.ids) and previous.ids[index] == seen.ids[index]:
        return "edited message"
    if index in seen.calls:
        return "tool call changed"
    if previous.ids[index] not in set(seen.ids):
        return "deleted message"
    if index < len(seen.ids) and seen.ids[index] not in set(previous.ids):
        return "inserted message"
    return "unknown"


def _flag_large_write(call: CallTrace, seen: _Seen, readable: int, markers: bool) -> None:
    """A cache write much larger than what is new since the cached prefix."""
    if not markers or not call.cache_write_tokens or not seen.marks:
        return
    written = seen.fixed + sum(seen.sizes[: max(seen.marks) + 1]) - readable
    expected = max(written, 0) // _CHARS_PER_TOKEN
    if call.cache_write_tokens > expected * 1.5 + _WRITE_SLACK:
        cause = call.divergence.cause if call.divergence else "unknown"
        call.flags.append(
            f"cache write of {call.cache_write_tokens} tokens, about {expected} expected ({cause})"
        )
