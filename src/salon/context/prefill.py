"""Prefill mode: the room as a transcript the model continues as the bot.

    system     The system is in CLI simulation mode.
    user       <cmd>cat untitled.txt</cmd>
    assistant  Alice: Hello

               Salon: Hi, how are you?

               Alice: Very good.

               Salon:

The transcript ends with the bot's name, so the model writes the bot's next message; when
the newest message is the bot's own, nothing is added and the model continues it. An
assistant turn is split where an image must go (images travel in user turns) and where the
cache breakpoint sits (a block of its own, marked for the provider's prompt cache).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from salon.config.views import RenderSettings
from salon.context.builder import (
    RenderMemo,
    continues_run,
    images_of,
    labels_until,
    record_text,
    reply_mark,
    requested_thinking,
    run_joiner,
    spoken,
    weave,
)
from salon.context.names import Labels
from salon.llm.base import ChatMessage, ContentPart, ImagePart, LLMRequest, TextPart
from salon.model import Message, Participant, ToolRecord

__all__ = ["PrefillMemo", "render_prefill", "stop_sequences"]

_SEPARATOR = "\n\n"

_State = tuple[tuple[ChatMessage, ...], tuple[ContentPart, ...], str]


class PrefillMemo(RenderMemo):
    """``render_prefill``'s memo: the transcript as it stood before each message that
    carried a breakpoint last time (few, and near where the next change comes), so a
    render goes on from the last of them before its first change."""

    __slots__ = ("snapshots",)

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list[tuple[int, _State]] = []  # (item index, transcript before it)

    @property
    def nbytes(self) -> int:
        """The messages, and the transcript of the snapshots (its parts shared among them)."""
        return super().nbytes + self.chars if self.snapshots else super().nbytes

    def resume_point(
        self, key: tuple[object, ...], items: tuple[Message, ...], marked: set[str]
    ) -> tuple[int, _State | None]:
        same = self.unchanged(key, items, marked)
        usable = [snap for snap in self.snapshots if 0 < snap[0] <= same]
        return usable[-1] if usable else (0, None)


_PREFIX_LABEL = re.compile(r"^([^\n:]{1,40}):", re.MULTILINE)


def _reserved(me: Participant, settings: RenderSettings) -> tuple[str, ...]:
    """The names only the bot goes by in a transcript: its configured name, its account's,
    and the speakers of ``context_prefix``."""
    return (
        settings.name,
        me.name,
        *(s.strip() for s in _PREFIX_LABEL.findall(settings.context_prefix)),
    )


def stop_sequences(
    messages: Sequence[Message],
    me: Participant,
    settings: RenderSettings,
    labels: Labels | None = None,
) -> tuple[str, ...]:
    """``\\nLabel:`` for the most recent participants (authors and people mentioned, under
    the labels the transcript gives them: ``labels``, decided over ``messages``) and the
    speakers of ``context_prefix``, then their case variants (a model writes ``You:`` for
    ``you``): whoever the model might start to speak for, it stops there."""
    if labels is None:
        labels = labels_until(len(messages), messages, me, Labels(_reserved(me, settings)))
    names: list[str] = []
    for message in reversed(messages):
        for person in (message.author, *message.mentions):
            if person.id != me.id and (label := labels.known(person)) not in names:
                names.append(label)
        if len(names) >= settings.recent_participant_count:
            break
    names = names[: settings.recent_participant_count]
    own = {settings.name.lower(), me.name.lower()}
    for label in _PREFIX_LABEL.findall(settings.context_prefix):
        if label.strip() and label.strip().lower() not in own and label.strip() not in names:
            names.append(label.strip())
    variants = [v for name in names for v in (name.capitalize(), name.lower(), name.title())]
    chosen = [f"\n{name}:" for name in [*names, *variants]]
    return tuple(dict.fromkeys([*chosen, *settings.stop_sequences]))


def _block(
    item: Message | ToolRecord, position: int, me: Participant, name: str, labels: Labels
) -> str:
    """One message of the transcript. Trailing white space is dropped, so a block reads the
    same whether or not it ends the request (where the API forbids trailing white space)."""
    if isinstance(item, ToolRecord):
        # What its turn said went on right after the name, as the loop wrote it there.
        return f"{name}:{'' if item.said else ' '}{record_text(item)}".rstrip()
    who = item.author
    author = (
        name
        if who.id == me.id
        else labels.decided.get((who.id, who.name, who.borrowed)) or labels.author(who, position)
    )
    said = item.text
    if item.attachments or item.mentions or ":" in said:  # else spoken() gives it back
        said = spoken(item, position, me, name, labels)
    return f"{reply_mark(item)}{author}: {said}".rstrip()


class _Transcript:
    """Accumulates assistant text, closing turns where images or the breakpoint go."""

    def __init__(self) -> None:
        self.turns: list[ChatMessage] = []
        self.parts: list[ContentPart] = []
        self.text = ""

    def state(self) -> _State:
        return (tuple(self.turns), tuple(self.parts), self.text)

    def restore(self, state: _State) -> None:
        turns, parts, self.text = state
        self.turns, self.parts = list(turns), list(parts)

    def write(self, text: str) -> None:
        self.text += text

    def breakpoint(self) -> None:
        if self.text:
            self.parts.append(TextPart(self.text, cache_breakpoint=True))
            self.text = ""

    def image(self, image: ImagePart) -> None:
        self._close_assistant()
        self.turns.append(ChatMessage("user", (image,)))

    def _close_assistant(self) -> None:
        if self.text:
            self.parts.append(TextPart(self.text))
            self.text = ""
        if self.parts:
            self.turns.append(ChatMessage("assistant", tuple(self.parts)))
            self.parts = []

    def finish(self) -> list[ChatMessage]:
        self._close_assistant()
        return self.turns


def render_prefill(
    messages: Sequence[Message],
    me: Participant,
    settings: RenderSettings,
    model: str,
    records: Sequence[ToolRecord] = (),
    *,
    breakpoint_id: str | None = None,
    breakpoints: Collection[str] = (),
    message_limit: int | None = None,
    memo: PrefillMemo | None = None,
    preamble: str = "",
) -> LLMRequest:
    """The request for ``messages``; the messages ``breakpoint_id`` and ``breakpoints``
    end blocks marked for the prompt cache. A bot's run of messages is one block.
    ``memo`` (one per channel) lets a render go on from the previous one. ``preamble``
    (the linked channels, ``salon.agent.links``) follows ``context_prefix``, before the
    room's history."""
    marked = {*breakpoints, *([breakpoint_id] if breakpoint_id else [])}
    name = settings.name
    transcript = _Transcript()
    given = tuple(messages)
    key = (me, name, settings.context_prefix, message_limit, preamble, settings.bot_run_join)
    start, state = memo.resume_point(key, given, marked) if memo and not records else (0, None)
    if state is not None:
        transcript.restore(state)
    else:
        _open(transcript, settings.context_prefix, preamble)
    reserved = _reserved(me, settings)
    labels = memo.labels_from(start, given, me, reserved) if memo else Labels(reserved)
    items: Sequence[Message | ToolRecord] = weave(given, records) if not start else given
    previous: Message | ToolRecord | None = items[start - 1] if start else None
    snapshots = [snap for snap in memo.snapshots if snap[0] < start] if memo else []
    for position in range(start, len(items)):
        item = items[position]
        if isinstance(item, Message) and item.id in marked:
            snapshots.append((position, transcript.state()))
        if isinstance(item, Message) and continues_run(previous, item):
            assert isinstance(previous, Message)
            if item.author.id != me.id:
                labels.author(item.author, position)  # for every message, as in a catch-up
            joiner = run_joiner(previous, message_limit, settings.bot_run_join)
            at_line_start = joiner.endswith("\n")
            said = spoken(item, position, me, name, labels, at_line_start=at_line_start)
            transcript.write((joiner + said).rstrip())
        else:
            block = _block(item, position, me, name, labels)
            transcript.write((_SEPARATOR if position else "") + block)
        if isinstance(item, Message):
            for image in images_of(item):
                transcript.image(image)
            if item.id in marked:
                transcript.breakpoint()
        previous = item
    if memo is not None:
        memo.remember(key, given if not records else (), marked, start)
        memo.snapshots, memo.labels = snapshots, labels
    last = items[-1] if items else None
    continuing = isinstance(last, Message) and last.author.id == me.id
    if not continuing:
        transcript.write(f"{_SEPARATOR if items else ''}{name}:")
    turns = transcript.finish()
    opening = ChatMessage.text("user", settings.prefill_user)
    return LLMRequest(
        model=model,
        messages=(opening, *_strip_end(turns)),
        system=settings.prefill_system,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        stop=stop_sequences(given, me, settings, labels),
        cache_system=settings.prompt_caching,
        prefill=True,
        thinking=requested_thinking(settings),
    )


def _open(transcript: _Transcript, *openings: str) -> None:
    """What comes before the room's history: ``context_prefix``, then the linked block."""
    for opening in openings:
        if opening:
            transcript.write(opening + _SEPARATOR)


def _strip_end(turns: list[ChatMessage]) -> list[ChatMessage]:
    """A final assistant turn may not end in white space (the model continues from it)."""
    if not turns or turns[-1].role != "assistant":
        return turns
    *rest, last = turns
    *parts, tail = last.parts
    if isinstance(tail, TextPart):
        tail = TextPart(tail.text.rstrip(), tail.cache_breakpoint)
    return [*rest, ChatMessage("assistant", (*parts, tail))]
