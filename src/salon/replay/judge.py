"""``--judge PROVIDER``: a blind pairwise preference between two arms' answers.

For each message where the first arm and another both answered, the judge (a provider of
the bot's config) reads the recorded room up to that message and the two answers, named
only "Reply 1" and "Reply 2", and says which is better. Each pair is asked twice, the
order swapped: a judge that prefers a position rather than an answer shows as a split.
Agreement is the share of pairs, of those read both times, where both orders named the
same arm.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from salon.agent.conversation.sidecall import side_request
from salon.config import BotConfig
from salon.config.prices import price_for
from salon.replay.calls import ArmCalls
from salon.replay.engine import Row
from salon.replay.sources import Recorded

__all__ = ["JUDGE_SYSTEM", "Pair", "Verdicts", "judge_ceiling", "judge_pairs", "pairs_of"]

JUDGE_SYSTEM = (
    "You compare two replies a chat bot could post next in a group chat. Read the "
    "conversation, then the two replies, and say which one is better for the people in the "
    "room: more helpful, correct and fitting. Answer with the number 1 or 2 only."
)
CONTEXT_LINES = 10  # of the recorded room, up to the message answered
MAX_TOKENS = 10
_CHOICE = re.compile(r"(?<!\d)([12])(?!\d)")


@dataclass(frozen=True, slots=True)
class Pair:
    """One message both arms answered."""

    index: int
    arms: tuple[str, str]
    answers: tuple[str, str]
    context: str


@dataclass
class Verdicts:
    """The judge's preferences between two arms."""

    arms: tuple[str, str]
    compared: int = 0
    wins: dict[str, int] = field(default_factory=dict)  # both orders named this arm
    split: int = 0  # the two orders named different arms
    unreadable: int = 0  # an ask failed or its answer named neither
    cost_usd: float | None = 0.0

    @property
    def agreement(self) -> float | None:
        read = self.compared - self.unreadable
        return (read - self.split) / read if read else None

    def as_json(self) -> dict[str, Any]:
        agreement = self.agreement
        return {
            "judge_summary": True,
            "arms": list(self.arms),
            "compared": self.compared,
            "wins": {arm: self.wins.get(arm, 0) for arm in self.arms},
            "split": self.split,
            "unreadable": self.unreadable,
            "agreement": None if agreement is None else round(agreement, 4),
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
        }

    def line(self, judge: str) -> str:
        a, b = self.arms
        agreement = self.agreement
        shown = "-" if agreement is None else f"{agreement:.0%}"
        return (
            f"judge {judge}: {a} vs {b} on {self.compared} messages: {a} preferred "
            f"{self.wins.get(a, 0)}, {b} {self.wins.get(b, 0)}, split {self.split}, "
            f"unreadable {self.unreadable}; agreement {shown}"
        )


def pairs_of(rows: Sequence[Row], recorded: Recorded) -> list[Pair]:
    """The pairs a line gives: the first arm against each other one, where both spoke."""
    if not rows or not _answered(rows[0]):
        return []
    first = rows[0]
    index = first.line.index
    start = max(0, index - CONTEXT_LINES + 1)
    context = "\n".join(
        f"{line.author}: {line.text}" if line.kind != "action" else f"* {line.author} {line.text}"
        for line in recorded.lines[start : index + 1]
        if line.kind != "system"
    )
    return [
        Pair(index, (first.arm, row.arm), (first.answer, row.answer), context)
        for row in rows[1:]
        if _answered(row)
    ]


def _answered(row: Row) -> bool:
    return row.decision == "speak" and bool(row.answer) and not row.error


async def judge_pairs(
    pairs: Sequence[Pair], config: BotConfig, calls: ArmCalls, recorded: Recorded
) -> tuple[dict[tuple[str, str], Verdicts], list[dict[str, Any]]]:
    """Ask about every pair twice; the verdicts per pair of arms, and one JSON line each."""
    verdicts: dict[tuple[str, str], Verdicts] = {}
    lines: list[dict[str, Any]] = []
    for pair in pairs:
        found = verdicts.setdefault(pair.arms, Verdicts(pair.arms))
        when = recorded.lines[pair.index].time
        first = await _ask(pair, config, calls, when, found, swapped=False)
        second = await _ask(pair, config, calls, when, found, swapped=True)
        found.compared += 1
        if first is None or second is None:
            found.unreadable += 1
        elif first != second:
            found.split += 1
        else:
            found.wins[first] = found.wins.get(first, 0) + 1
        preferred = first if first == second else None
        lines.append(
            {"judge": True, "index": pair.index, "arms": list(pair.arms),
             "first": first, "swapped": second, "preferred": preferred}
        )  # fmt: skip
    return verdicts, lines


async def _ask(
    pair: Pair, config: BotConfig, calls: ArmCalls, when: Any, found: Verdicts, *, swapped: bool
) -> str | None:
    """The arm the judge prefers with the answers in this order, or None."""
    order = (1, 0) if swapped else (0, 1)
    text = (
        f"Conversation:\n{pair.context}\n\nReply 1:\n{pair.answers[order[0]]}\n\n"
        f"Reply 2:\n{pair.answers[order[1]]}\n\nWhich reply is better? Answer 1 or 2."
    )
    request = side_request(config, JUDGE_SYSTEM, text, MAX_TOKENS)
    spoken = await calls.call("judge", config, request, when, "1")
    cost = spoken.cost_usd
    found.cost_usd = None if found.cost_usd is None or cost is None else found.cost_usd + cost
    choice = None if spoken.error else _CHOICE.search(spoken.text)
    if choice is None:
        return None
    return pair.arms[order[int(choice.group(1)) - 1]]


def judge_ceiling(pair: Pair, max_tokens: tuple[int, int], config: BotConfig) -> float | None:
    """What judging ``pair`` (twice) costs at most: its prompt with both answers
    ``max_tokens`` long, every input token uncached; None without a price."""
    price = price_for(config.model_name(), config.prices)
    if price is None:
        return None
    prompt = math.ceil((len(JUDGE_SYSTEM) + len(pair.context) + 120) / 4) + sum(max_tokens)
    return 2 * (prompt * price.input + MAX_TOKENS * price.output) / 1_000_000
