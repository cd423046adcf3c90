"""The cache and cost alarm's rule: a channel's window of answers against its baseline."""

from __future__ import annotations

import random

from salon.cache_alarm import Answer, judge
from salon.config.observability import CacheAlarmConfig

CONFIG = CacheAlarmConfig()  # a drop of 0.2, a factor of 2, 10 answers against 50


def steady(n: int, rng: random.Random) -> Answer:
    """A healthy answer: most of a growing prompt read from the cache; every 40 answers
    the window is cut back (a roll), and nothing is read."""
    prompt = 8000 + rng.randint(0, 2000)
    rolled = n % 40 == 39
    read = 0 if rolled else prompt - rng.randint(50, 600)
    cost = 0.004 + (0.02 if rolled else 0.0) + rng.random() * 0.002
    return Answer(read, prompt, cost, "roll" if rolled else None, float(n), f"a{n}")


def broken(n: int, rng: random.Random) -> Answer:
    """A prompt variable that changes every call: nothing read, all written again."""
    prompt = 8000 + rng.randint(0, 2000)
    return Answer(0, prompt, 0.03, "config change", float(n), f"a{n}")


def test_a_steady_channel_never_alarms_over_2000_answers() -> None:
    rng = random.Random(7)
    answers = [steady(n, rng) for n in range(2000)]
    alarms = [n for n in range(2000) if (v := judge(answers[: n + 1], CONFIG)) and v.on]
    assert alarms == []


def test_a_regression_alarms_within_20_answers_naming_its_cause_and_first_answer() -> None:
    rng = random.Random(7)
    answers = [steady(n, rng) for n in range(100)]
    for n in range(100, 130):
        answers.append(broken(n, rng))
        verdict = judge(answers, CONFIG)
        if verdict is not None and verdict.on:
            break
    assert n - 100 < 20
    assert verdict is not None
    assert verdict.share_fell
    assert verdict.cause == "config change"
    assert verdict.first.ref == "a100"
    assert "config change" in verdict.describe()


def test_the_alarm_ends_once_the_channel_recovers() -> None:
    rng = random.Random(3)
    answers = [steady(n, rng) for n in range(60)] + [broken(n, rng) for n in range(60, 75)]
    assert (verdict := judge(answers, CONFIG)) is not None
    assert verdict.on
    answers += [steady(n, rng) for n in range(75, 85)]
    assert (verdict := judge(answers, CONFIG)) is not None
    assert not verdict.on


def test_too_few_answers_are_not_judged() -> None:
    rng = random.Random(1)
    answers = [broken(n, rng) for n in range(59)]
    assert judge(answers, CONFIG) is None
    assert judge(answers, CacheAlarmConfig(answers=5, baseline_answers=5)) is not None


def test_cost_alone_alarms_when_the_share_holds() -> None:
    base = [Answer(900, 1000, 0.01, None, float(n), str(n)) for n in range(50)]
    dear = [Answer(900, 1000, 0.05, "model change", float(n), str(n)) for n in range(50, 60)]
    verdict = judge(base + dear, CONFIG)
    assert verdict is not None
    assert verdict.on
    assert verdict.cost_rose
    assert not verdict.share_fell
    assert "5.0 times" in verdict.describe()
