"""``salon replay`` on real rooms: the irc-disentanglement corpus's #ubuntu dev split
(Kummerfeld et al., "A Large-Scale Corpus for Conversation Disentanglement", ACL 2019;
CC BY 4.0), from ../shared/data beside the repository.

- ``replay_messages_per_s``: a 1 200-line dev log, one arm, dry run, the bot playing the
  log's busiest person; and ``replay_memory_growth_mib``, the settled RSS after the same
  log five times over against once (memory flat: the arm keeps a bounded room).
- ``replay_speak_balanced_accuracy_rules``: the bot playing the person who answered most
  in each dev log, default activation rules (no model decision), against the messages that
  person answered (reply links): the mean over the ten logs. No target: it says what rules
  alone catch, and so what a speak gate must add.
- ``replay_cache_cost_vs_best_fixed_real``: the same ten logs, the same helper, frozen,
  dry run: the total cost with ``cache_ttl: auto`` over that of the cheapest fixed setting
  in hindsight (``5m``, ``1h`` or ``off``, one for all ten logs). Target <= 1.05.
- ``replay_cost_per_answer_ratio_naive``: Salon (``cache_ttl: auto``, rolling context) per
  answer over a bot that sends the same recency window every time without cache markers
  (``cache_ttl: off``, a roll at every message), on the same answers. Target <= 0.35.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from bench.figures import Figure, settled_rss_mib
from salon.config import BotConfig
from salon.replay.arms import Arm
from salon.replay.engine import Replay, me_for
from salon.replay.labels import labels_from_links, read_links, score
from salon.replay.sources import Recorded, read_irc

__all__ = [
    "cache_cost_vs_best_fixed",
    "cost_per_answer_naive",
    "messages_per_s",
    "speak_balanced_accuracy",
]

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "irc-disentanglement" / "dev"
LINES = 1200


def _config(cache_ttl: str = "auto", **more: object) -> BotConfig:
    return BotConfig.model_validate(
        {
            "name": "Helper",
            "providers": {
                "claude": {
                    "type": "anthropic",
                    "model": "claude-sonnet-4-6",
                    "api_key_env": "ANTHROPIC_API_KEY",
                    "cache_ttl": cache_ttl,
                }
            },
            "provider": "claude",
            "system_prompt": "You help people in #ubuntu. " * 200,
            **more,
        }
    )


def _helper(recorded: Recorded, links: list[tuple[int, int]]) -> str:
    """The person who answered most in a log (reply links)."""
    by_index = {line.index: line for line in recorded.lines}
    answers = Counter(by_index[b].author for a, b in links if a != b and b in by_index)
    return answers.most_common(1)[0][0]


def _busiest(recorded: Recorded) -> str:
    said = Counter(line.author for line in recorded.lines if line.kind == "message")
    return said.most_common(1)[0][0]


async def _replay(recorded: Recorded, nick: str, *, frozen: bool) -> list[tuple[int, bool]]:
    config = _config()
    replay = Replay(recorded, [Arm("rules", config)], me_for(recorded, config, nick), frozen=frozen)
    try:
        return [(rows[0].line.index, rows[0].decision == "speak") async for rows in replay.rows()]
    finally:
        await replay.aclose()


def _repeated(recorded: Recorded, times: int) -> Recorded:
    span = recorded.lines[-1].time - recorded.lines[0].time + timedelta(minutes=1)
    lines = tuple(
        replace(
            line,
            index=n * len(recorded.lines) + line.index,
            id=f"{n}-{line.id}",
            time=line.time + n * span,
        )
        for n in range(times)
        for line in recorded.lines
    )
    return replace(recorded, lines=lines)


async def messages_per_s() -> list[Figure]:
    logs = sorted(DEV.glob("*.raw.txt"))
    if not logs:
        return []
    full = read_irc(logs[0])
    recorded = replace(full, lines=full.lines[:LINES])
    nick = _busiest(recorded)
    await _replay(recorded, nick, frozen=False)  # imports and first builds out of the timing
    start = time.perf_counter()
    await _replay(recorded, nick, frozen=False)
    rate = LINES / (time.perf_counter() - start)
    once = settled_rss_mib()
    await _replay(_repeated(recorded, 5), nick, frozen=False)
    growth = settled_rss_mib() - once
    return [
        Figure("replay_messages_per_s", rate, "messages/s", 200, direction="min"),
        Figure("replay_memory_growth_mib", growth, "MiB", 20),
    ]


async def speak_balanced_accuracy() -> list[Figure]:
    figures: list[Figure] = []
    values = []
    for log in sorted(DEV.glob("*.raw.txt")):
        recorded = read_irc(log)
        links = read_links(log.with_name(log.name.replace(".raw.", ".annotation.")))
        helper = _helper(recorded, links)
        me_id = me_for(recorded, _config(), helper).id
        labels = labels_from_links(recorded.lines, links, me_id)
        result = score(await _replay(recorded, helper, frozen=True), labels)
        if result.balanced_accuracy is not None:
            values.append(result.balanced_accuracy)
            name = f"replay_speak_balanced_accuracy_rules_{log.name[:13]}"
            figures.append(Figure(name, result.balanced_accuracy, "ratio"))
    if values:
        mean = sum(values) / len(values)
        figures.insert(0, Figure("replay_speak_balanced_accuracy_rules", mean, "ratio"))
    return figures


_FIXED = ("5m", "1h", "off")


async def _costs(log: Path, arms: list[Arm]) -> tuple[dict[str, float], int]:
    """Each arm's total cost over one log (frozen, dry run), and the answers given."""
    recorded = read_irc(log)
    links = read_links(log.with_name(log.name.replace(".raw.", ".annotation.")))
    me = me_for(recorded, _config(), _helper(recorded, links))
    replay = Replay(recorded, arms, me, frozen=True)
    totals = {arm.name: 0.0 for arm in arms}
    answers = 0
    try:
        async for rows in replay.rows():
            answers += rows[0].decision == "speak"
            for row in rows:
                totals[row.arm] += row.cost_usd or 0.0
    finally:
        await replay.aclose()
    return totals, answers


async def _over_dev(arms: list[Arm]) -> tuple[Counter[str], int]:
    totals: Counter[str] = Counter()
    answers = 0
    for log in sorted(DEV.glob("*.raw.txt")):
        found, spoke = await _costs(log, arms)
        totals.update(found)
        answers += spoke
    return totals, answers


async def cache_cost_vs_best_fixed() -> list[Figure]:
    if not any(DEV.glob("*.raw.txt")):
        return []
    totals, answers = await _over_dev([Arm(ttl, _config(ttl)) for ttl in ("auto", *_FIXED)])
    best = min(_FIXED, key=lambda ttl: totals[ttl])
    ratio = totals["auto"] / totals[best]
    return [
        Figure("replay_cache_cost_vs_best_fixed_real", ratio, "ratio", 1.05),
        *(Figure(f"replay_cost_usd_{name}", totals[name], "USD") for name in totals),
        Figure("replay_cache_answers", answers, "answers"),
    ]


async def cost_per_answer_naive() -> list[Figure]:
    if not any(DEV.glob("*.raw.txt")):
        return []
    naive = _config("off", rolling_threshold=1)  # the recency window, whole, every time
    totals, answers = await _over_dev([Arm("auto", _config()), Arm("naive", naive)])
    per = {name: totals[name] / max(answers, 1) for name in totals}
    return [
        Figure("replay_cost_per_answer_ratio_naive", per["auto"] / per["naive"], "ratio", 0.35),
        Figure("replay_cost_per_answer_usd_auto", per["auto"], "USD"),
        Figure("replay_cost_per_answer_usd_naive", per["naive"], "USD"),
    ]


if __name__ == "__main__":
    for figure in asyncio.run(messages_per_s()) + asyncio.run(speak_balanced_accuracy()):
        print(figure.json())
    for figure in asyncio.run(cache_cost_vs_best_fixed()) + asyncio.run(cost_per_answer_naive()):
        print(figure.json())
