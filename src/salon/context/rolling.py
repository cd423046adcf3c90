"""Rolling context: the window moves in steps so the prompt's prefix stays cacheable.

Between rolls every message is kept and the cache breakpoint stays on one message id, so
the request up to the breakpoint is byte-identical from one activation to the next (and a
provider's prompt cache can answer it). When ``rolling_threshold`` messages have arrived
since the last roll, or the kept messages exceed ``hard_max_characters``, or the message the
window starts at is gone, the window is cut back to the recency budgets and the breakpoint
moves to ``cache_breakpoint_offset`` messages below the newest. With ``rolling_budget:
average`` the cut goes below the budgets by half the threshold, so that the window holds
them on average rather than at least. With ``recency_window_age`` a roll also happens as
soon as the window holds a message the budgets leave out (one too old, or one too many).

Two more breakpoints ride along: one on the newest message, so the next activation can
read everything up to it from the cache, and one on the newest message of the previous
activation, which is where this activation's cache read ends. Anthropic allows four; the
system prompt takes the fourth.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from salon.config.views import WindowSettings
from salon.context.view import PlainIndex, VisibleIndex
from salon.model import Message, RollState

__all__ = ["RollState", "Rolled", "activation_gaps", "roll"]

# The channel's tempo: how many recent gaps between the bot's activations are weighed, and
# how close two of its messages must be to count as one activation (a split answer, or a
# tool's note before the answer).
TEMPO_GAPS = 20
SAME_ACTIVATION = 10.0


@dataclass(frozen=True)
class Rolled:
    messages: list[Message]
    breakpoint_id: str | None
    state: RollState
    rolled: bool
    breakpoints: tuple[str, ...] = ()  # every message to mark, oldest first


def roll(
    visible: Sequence[Message],
    state: RollState | None,
    budgets: WindowSettings,
    window: list[Message],
    me_id: str,
    *,
    index: VisibleIndex | None = None,
) -> Rolled:
    """Choose the context from ``visible`` (all visible messages fetched, oldest first).

    ``window`` is what the recency budgets alone would keep; it is what a roll cuts to.
    ``index`` knows where each of ``visible`` is (a channel view keeps one up to date).
    """
    if not visible:
        return Rolled([], None, state or RollState("", None, ""), rolled=False)
    index = index or PlainIndex(visible)
    anchor = index.position(state.anchor_id) if state is not None else None
    head = index.position(state.head_id) if state is not None else None
    if state is not None and anchor is not None and head is not None:
        kept = list(visible[anchor:])
        # Arrivals are other people's messages: the bot's own answers do not count.
        arrived = sum(1 for m in visible[head + 1 :] if m.author.id != me_id)
        size = index.chars_from(anchor)
        within = arrived < budgets.rolling_threshold and size <= budgets.hard_max_characters
        if within and _inside_age(anchor, window, budgets, index):
            previous_tail = state.tail_id
            state = _stable_breakpoint(kept, state, me_id, index, anchor)
            state = replace(state, tail_id=kept[-1].id)
            marks = (state.breakpoint_id, previous_tail, kept[-1].id)
            present = {m: at - anchor for m in marks if m and (at := index.position(m)) is not None}
            found = [m for m, at in present.items() if at >= 0]
            return Rolled(
                kept,
                state.breakpoint_id,
                state,
                False,
                tuple(sorted(found, key=present.__getitem__)),
            )
    return _cut(_below_budget(window, budgets) or list(visible[-1:]), budgets)


def _inside_age(
    anchor: int, window: list[Message], budgets: WindowSettings, index: VisibleIndex
) -> bool:
    """With an age limit (``recency_window_age``), the kept messages stay only while the
    budgets' pick still holds them all: the limit is the seed's "whichever is smaller"."""
    if budgets.recency_window_age is None:
        return True
    start = index.position(window[0].id) if window else None
    return start is not None and anchor >= start


def _below_budget(window: list[Message], budgets: WindowSettings) -> list[Message]:
    """What a roll keeps of ``window`` (the recency budgets' pick). With ``rolling_budget:
    average`` the budgets shrink by half the threshold, in messages and in proportion in
    characters, so that the window, growing between rolls, holds them on average."""
    if budgets.rolling_budget != "average" or not window:
        return window
    budget = budgets.recency_window_messages
    messages = max(1, budget - budgets.rolling_threshold // 2)
    characters = budgets.recency_window_characters * messages // budget
    kept = window[-messages:]
    used = sum(len(m.text) for m in kept)
    start = 0
    while used > characters and start < len(kept) - 1:
        used -= len(kept[start].text)
        start += 1
    return kept[start:]


def _cut(window: list[Message], budgets: WindowSettings) -> Rolled:
    offset = min(budgets.cache_breakpoint_offset, len(window) - 1)
    mark = window[-1 - offset]
    newest = window[-1].id
    state = RollState(window[0].id, mark.id, newest, mark.created_at, tail_id=newest)
    return Rolled(window, mark.id, state, True, _marks((mark.id, newest), window))


def _marks(ids: tuple[str | None, ...], kept: list[Message]) -> tuple[str, ...]:
    """The distinct breakpoint ids present in ``kept``, oldest first."""
    present = {m.id: i for i, m in enumerate(kept)}
    found = {i for i in ids if i is not None and i in present}
    return tuple(sorted(found, key=present.__getitem__))


def _stable_breakpoint(
    kept: list[Message], state: RollState, me_id: str, index: VisibleIndex, anchor: int
) -> RollState:
    """The remembered breakpoint; if its message vanished, the newest message by a person
    (not a bot: bots' runs get merged and edited) from no later than it."""
    if state.breakpoint_id is None:
        return state
    at = index.position(state.breakpoint_id)
    if at is not None and at >= anchor:
        return state
    when = state.breakpoint_time
    stable = [
        m
        for m in kept
        if not m.author.is_bot and m.author.id != me_id and (when is None or m.created_at <= when)
    ]
    if not stable:
        return replace(state, breakpoint_id=None, breakpoint_time=None)
    return replace(state, breakpoint_id=stable[-1].id, breakpoint_time=stable[-1].created_at)


def activation_gaps(messages: Sequence[Message], me_id: str) -> tuple[float, ...]:
    """Seconds between the bot's recent activations in ``messages`` (oldest first), the
    last one up to the newest message (the one being answered): the channel's tempo, by
    which a provider chooses how long cache entries live. Read from the messages' own
    times, so it needs no state of its own and survives a restart. The bot's messages
    less than ``SAME_ACTIVATION`` apart, one after another, are one activation (an answer
    in paragraphs), timed by its first. Walked from the newest back, only as far as the
    last ``TEMPO_GAPS`` gaps need: this runs for every answer."""
    if not messages:
        return ()
    starts: list[float] = []  # activations' first messages, newest first
    later: float | None = None  # the bot message seen just before (a later one)
    for message in reversed(messages):
        if message.author.id != me_id:
            continue
        at = message.created_at.timestamp()
        if later is not None and later - at < SAME_ACTIVATION:
            starts[-1] = at  # the same activation began earlier
        elif len(starts) > TEMPO_GAPS:
            break  # enough: the oldest start is complete
        else:
            starts.append(at)
        later = at
    starts = starts[: TEMPO_GAPS + 1]
    times = [*reversed(starts), messages[-1].created_at.timestamp()]
    gaps = [after - before for before, after in itertools.pairwise(times)]
    return tuple(max(gap, 0.0) for gap in gaps[-TEMPO_GAPS:])
