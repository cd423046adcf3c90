"""Where the bot should have spoken, and how well each arm's decisions match.

``--links FILE``: reply links in the irc-disentanglement form, one ``A B -`` a line (B
answers A; ``A A -`` starts a conversation). The messages NICK answered are positives; every
other annotated message is a negative, except NICK's own lines and system lines; lines
before the first one the file annotates are context (no label). ``--labels FILE``: the ids
(or line numbers) of the messages where the bot should speak, one a line; every other
message is a negative, except the bot's own lines and system lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from salon.errors import ConfigError, ConfigProblem
from salon.replay.sources import Line

__all__ = ["Score", "labels_from_ids", "labels_from_links", "read_links", "score"]

Labels = Mapping[int, bool | None]  # by line index


def read_links(path: Path) -> list[tuple[int, int]]:
    """The (A, B) pairs of a links file: B answers A."""
    pairs: list[tuple[int, int]] = []
    for number, row in enumerate(_rows(path), start=1):
        words = row.split()
        try:
            pairs.append((int(words[0]), int(words[1])))
        except (IndexError, ValueError) as exc:
            reason = f"line {number}: expected 'A B -' (two line numbers), got {row!r}"
            raise ConfigError([ConfigProblem(str(path), "--links", reason)]) from exc
    return pairs


def _rows(path: Path) -> Iterable[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([ConfigProblem(str(path), "", f"cannot read: {exc}")]) from exc
    return [row for row in text.splitlines() if row.strip() and not row.startswith("#")]


def labels_from_links(
    lines: Iterable[Line], links: Iterable[tuple[int, int]], me_id: str
) -> dict[int, bool | None]:
    """Each line's label: True where the line is one ``me_id`` answered."""
    pairs = list(links)
    by_index = {line.index: line for line in lines}
    first = min((b for _, b in pairs), default=len(by_index))  # annotated lines are Bs
    answered = {a for a, b in pairs if a != b and _author(by_index, b) == me_id}
    return {
        index: None if index < first or _unlabelled(line, me_id) else index in answered
        for index, line in by_index.items()
    }


def labels_from_ids(
    lines: Iterable[Line], ids: Iterable[str], me_id: str
) -> dict[int, bool | None]:
    """Each line's label from a list of ids or line numbers to speak at."""
    wanted = {i.strip() for i in ids}
    return {
        line.index: None
        if _unlabelled(line, me_id)
        else (line.id in wanted or str(line.index) in wanted)
        for line in lines
    }


def read_ids(path: Path) -> list[str]:
    return [row.split()[0] for row in _rows(path)]


def _author(by_index: Mapping[int, Line], index: int) -> str | None:
    line = by_index.get(index)
    return line.author_id if line is not None else None


def _unlabelled(line: Line, me_id: str) -> bool:
    return line.kind == "system" or line.author_id == me_id


@dataclass
class Score:
    """The decisions over the labelled messages, and the misses both ways."""

    true_pos: int = 0
    false_pos: int = 0
    true_neg: int = 0
    false_neg: int = 0
    spoke_unwanted: list[int] = field(default_factory=list)  # indexes
    missed: list[int] = field(default_factory=list)

    def add(self, index: int, spoke: bool, label: bool | None) -> None:
        if label is None:
            return
        if spoke and label:
            self.true_pos += 1
        elif spoke:
            self.false_pos += 1
            self.spoke_unwanted.append(index)
        elif label:
            self.false_neg += 1
            self.missed.append(index)
        else:
            self.true_neg += 1

    @property
    def labelled(self) -> int:
        return self.true_pos + self.false_pos + self.true_neg + self.false_neg

    @property
    def precision(self) -> float | None:
        spoke = self.true_pos + self.false_pos
        return self.true_pos / spoke if spoke else None

    @property
    def recall(self) -> float | None:
        wanted = self.true_pos + self.false_neg
        return self.true_pos / wanted if wanted else None

    @property
    def balanced_accuracy(self) -> float | None:
        """The mean of the recall on positives and on negatives: 0.5 is a coin's worth."""
        negatives = self.true_neg + self.false_pos
        if self.recall is None or not negatives:
            return None
        return (self.recall + self.true_neg / negatives) / 2


def score(decisions: Iterable[tuple[int, bool]], labels: Labels) -> Score:
    result = Score()
    for index, spoke in decisions:
        result.add(index, spoke, labels.get(index))
    return result
