"""cache_alarm_detect_answers: how soon the cache alarm tells a regression, and that a
steady channel never sets it off.

A chat channel billed as OpenAI's automatic prefix caching (``fakes/billing.py``,
``AutoPrefixBilling``, on a virtual clock: an answer a minute): a system prompt, then the
conversation, four messages an answer, the window cut back to half of its 240 messages when
full (a roll: nothing is read that time), as rolling context does. Each answer's billed
usage becomes its trace and goes to the trace writer's alarm (``CacheWatch``, the default
``traces.cache_alarm``). Steady: 2 000 answers, and how many alarms began. Regression:
after 100 steady answers the system prompt carries a variable that changes at every call
(the time, to the second), and the figure is the answers from the first such call to the
alarm.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bench.figures import Figure
from fakes.billing import AutoPrefixBilling
from salon.agent.recording.alarm import CacheWatch
from salon.config.observability import CacheAlarmConfig
from salon.trace import CallTrace, Divergence, Trace

STEADY = 2000
BEFORE = 100
AFTER = 100
_WINDOW = 240
_PRICE = 2.0 / 1_000_000  # USD per input token; reads at a tenth
_SYSTEM = "You are Muse, a calm assistant in a busy chat room. " * 40


class _Channel:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)
        self.billing = AutoPrefixBilling(clock=lambda: self.now)
        self.messages: list[dict[str, Any]] = []
        self.watch = CacheWatch()
        self.config = CacheAlarmConfig()
        self.count = 0

    def answer(self, *, variable: bool) -> bool:
        """One answer; whether the alarm began with it."""
        self.count += 1
        self.now += timedelta(minutes=1)
        rolled = len(self.messages) + 4 > _WINDOW
        if rolled:
            self.messages = self.messages[_WINDOW // 2 :]
        for i in range(4):
            text = f"message {self.count}.{i}: a line of chat of some ordinary length, words"
            self.messages.append({"role": "user", "content": text})
        system = _SYSTEM + (f"The time is {self.now:%H:%M:%S}." if variable else "")
        body = {"messages": [{"role": "system", "content": system}, *self.messages]}
        bill = self.billing.bill(body)
        cause = "config change" if variable else "roll" if rolled else "new messages"
        return self._observe(bill.input_tokens, bill.cache_read_tokens, cause)

    def _observe(self, fresh: int, read: int, cause: str) -> bool:
        at = self.now.timestamp()
        call = CallTrace("answer", "openai", "gpt", {}, at, input_tokens=fresh)
        call.cache_read_tokens = read
        call.cost = (fresh + read / 10) * _PRICE
        call.divergence = Divergence(0, None, cause)
        trace = Trace("muse", "discord", "discord:1", "general", at, at + 1, calls=[call])
        trace.activation = f"{self.count:012x}"
        event = self.watch.observe(trace, self.config)
        return event is not None and event[2]["salon.cache_alarm.state"] == "began"


async def run() -> list[Figure]:
    steady = _Channel()
    false_alarms = sum(steady.answer(variable=False) for _ in range(STEADY))
    channel = _Channel()
    for _ in range(BEFORE):
        channel.answer(variable=False)
    detected = next(
        (n for n in range(1, AFTER + 1) if channel.answer(variable=True)), float(AFTER + 1)
    )
    return [
        Figure("cache_alarm_detect_answers", float(detected), "answers", target=20),
        Figure("cache_alarm_false_alarms", float(false_alarms), "alarms", target=0),
    ]
