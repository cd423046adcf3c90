"""What a replay on real providers will cost, said before it starts: a dry run of the same
room and arms (the prompts billed by each vendor's rules on the virtual clock), with every
answer taken as ``max_tokens`` long, a ceiling on the output side. ``--max-cost`` refuses
to start above it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from salon.agent.conversation.sidecall import side_config
from salon.config import BotConfig
from salon.config.prices import price_for
from salon.model import Participant
from salon.replay.arms import Arm
from salon.replay.engine import Replay
from salon.replay.judge import judge_ceiling, pairs_of
from salon.replay.sources import Recorded
from salon.trace import money

__all__ = ["Estimate", "estimate", "models_used", "providers_used"]


def providers_used(config: BotConfig) -> set[str]:
    """The providers an arm asks: its own, and the speak gate's and evaluator's."""
    return {c.provider for c in _configs_used(config)}


def models_used(config: BotConfig) -> set[str]:
    return {c.model_name() for c in _configs_used(config)}


def _configs_used(config: BotConfig) -> list[BotConfig]:
    found = [config]
    for step in (config.speak_gate, config.context_evaluator):
        if step.enabled:
            found.append(side_config(config, step.provider, step.model))
    return found


@dataclass
class Estimate:
    arms: dict[str, float | None]  # US dollars at most, per arm; None: a model has no price
    unpriced: list[str] = field(default_factory=list)  # models without a price
    extra: dict[str, float | None] = field(default_factory=dict)  # the judge's, when asked

    @property
    def total(self) -> float | None:
        values = [*self.arms.values(), *self.extra.values()]
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    def line(self) -> str:
        total = self.total
        if total is None:
            models = ", ".join(sorted(set(self.unpriced))) or "a model"
            return f"estimated cost: unknown: no price for {models} (set one under prices:)"
        parts = ", ".join(f"{k} {money(v or 0.0)}" for k, v in {**self.arms, **self.extra}.items())
        return (
            f"estimated cost: at most {money(total)} ({parts}): the prompts as a dry run bills "
            "them, every answer max_tokens long"
        )

    def refusal(self, max_cost: float | None) -> str | None:
        """Why the replay must not start under ``--max-cost``, or None."""
        if max_cost is None:
            return None
        total = self.total
        if total is None:
            return "--max-cost cannot be checked: " + self.line().removeprefix("estimated cost: ")
        if total > max_cost:
            return (
                f"the estimated cost, at most {money(total)}, is above --max-cost "
                f"{money(max_cost)}: nothing was sent"
            )
        return None


async def estimate(
    recorded: Recorded,
    arms: Sequence[Arm],
    me: Participant,
    *,
    frozen: bool,
    judge: BotConfig | None = None,
) -> Estimate:
    """A dry run of the room, totalled per arm at its ceiling; with ``judge``, its two
    asks for each message the first arm and another both answered."""
    totals: dict[str, float | None] = {arm.name: 0.0 for arm in arms}
    judged: float | None = 0.0
    longest = {arm.name: arm.config.max_tokens for arm in arms}
    replay = Replay(recorded, arms, me, frozen=frozen)
    try:
        async for rows in replay.rows():
            for row in rows:
                totals[row.arm] = _plus(totals[row.arm], row.ceiling_usd)
            if judge is None:
                continue
            for pair in pairs_of(rows, recorded):
                sizes = (longest[pair.arms[0]], longest[pair.arms[1]])
                judged = _plus(judged, judge_ceiling(pair, sizes, judge))
    finally:
        await replay.aclose()
    unpriced = [
        model
        for arm in arms
        for model in sorted(models_used(arm.config))
        if price_for(model, arm.config.prices) is None
    ]
    if judge is not None and price_for(judge.model_name(), judge.prices) is None:
        unpriced.append(judge.model_name())
    return Estimate(totals, unpriced, {"judge": judged} if judge is not None else {})


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
