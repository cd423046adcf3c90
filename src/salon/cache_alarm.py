"""The cache and cost alarm: a channel's last answers against its own trailing baseline.

Per bot and channel, the last ``answers`` answers (the *window*) are judged against the
``baseline_answers`` answers just before them: the alarm is on when the window's cache read
share (cache reads over prompt tokens, summed) is lower than the baseline's by more than
``read_share_drop``, or its cost per answer (the median: one roll, which reads nothing, is
not a regression) more than ``cost_factor`` times the baseline's. It says the most common
cache break cause in the window and the first answer where it began (the first one of the
window past the threshold).

The judgement is a function of the channel's last answers only, so the bot (its trace
writer, for the log line and the OpenTelemetry event) and the web server (from the stored
traces' columns, for ``/metrics`` and the activity page) reach the same verdict on the same
answers. A lasting change becomes the channel's normal once it fills most of the baseline:
the alarm then ends, as it does when the figures come back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from salon.config.observability import CacheAlarmConfig

__all__ = ["Alarm", "Answer", "judge"]


@dataclass(frozen=True, slots=True)
class Answer:
    """One answered activation of a channel, as the alarm sees it."""

    read_tokens: int  # cache reads
    prompt_tokens: int  # input, cache reads and cache writes
    cost: float  # USD; 0 without a price
    cause: str | None  # the cache break cause, None when nothing broke
    at: float  # epoch seconds
    ref: str  # which activation: its id (the bot) or its trace's id (the store)

    @property
    def read_share(self) -> float:
        return self.read_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True, slots=True)
class Alarm:
    """A channel's window against its baseline; ``on`` when either figure turned bad."""

    read_share: float  # the window's
    baseline_read_share: float
    cost_per_answer: float  # the window's median
    baseline_cost_per_answer: float  # the baseline's median
    share_fell: bool
    cost_rose: bool
    cause: str | None  # the most common break cause in the window
    first: Answer  # where it began (the window's first answer when the alarm is off)

    @property
    def on(self) -> bool:
        return self.share_fell or self.cost_rose

    def describe(self) -> str:
        """One line: what turned bad, by how much, why, since when."""
        parts = []
        if self.share_fell:
            parts.append(
                f"cache read share {self.read_share:.0%} against {self.baseline_read_share:.0%}"
            )
        if self.cost_rose:
            ratio = self.cost_per_answer / self.baseline_cost_per_answer
            parts.append(f"cost per answer {ratio:.1f} times the usual")
        cause = self.cause or "no break recorded"
        return f"{' and '.join(parts)}; most common cause: {cause}"


def _share(answers: Sequence[Answer]) -> float | None:
    prompt = sum(a.prompt_tokens for a in answers)
    return sum(a.read_tokens for a in answers) / prompt if prompt else None


def judge(answers: Sequence[Answer], config: CacheAlarmConfig) -> Alarm | None:
    """The verdict on a channel's answers (oldest first); None while there are too few
    for a window and its whole baseline."""
    size, base_size = config.answers, config.baseline_answers
    if not config.enabled or len(answers) < size + base_size:
        return None
    recent = list(answers)[-size - base_size :]  # a deque, from the trace writer
    window, baseline = recent[base_size:], recent[:base_size]
    base_share, share = _share(baseline), _share(window)
    base_cost = median(a.cost for a in baseline)
    cost = median(a.cost for a in window)
    drop = config.read_share_drop
    fell = base_share is not None and share is not None and base_share - share > drop
    rose = base_cost > 0 and cost > base_cost * config.cost_factor
    low = (base_share or 0.0) - drop
    high = base_cost * config.cost_factor
    first = next(
        (a for a in window if (fell and a.read_share < low) or (rose and a.cost > high)),
        window[0],
    )
    causes = Counter(a.cause for a in window if a.cause)
    return Alarm(
        read_share=share or 0.0,
        baseline_read_share=base_share or 0.0,
        cost_per_answer=cost,
        baseline_cost_per_answer=base_cost,
        share_fell=fell,
        cost_rose=rose,
        cause=causes.most_common(1)[0][0] if causes else None,
        first=first,
    )
