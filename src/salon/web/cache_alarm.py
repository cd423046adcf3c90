"""The cache and cost alarm as the web server shows it: ``/metrics`` series and a banner.

The web server is a process of its own: it judges each channel from the stored traces'
columns (``TracePart.recent_answers``) with the same rule as the bots' trace writers
(``salon.cache_alarm``), so it needs no state of its own and sees the whole fleet. Judged
are the channels of each configured bot answered in the last day (the most recently
active ``_CHANNELS`` of each), with a whole window and baseline of answers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from salon.cache_alarm import Alarm, Answer, judge
from salon.web.context import Web

__all__ = ["AlarmMetrics", "Judged", "alarm_banner", "judged_channels"]

_SINCE = 86400.0  # seconds: channels answered within them are judged
_CHANNELS = 200  # per bot


@dataclass(frozen=True, slots=True)
class Judged:
    bot: str
    channel: str
    verdict: Alarm


def _answer(row: Sequence[Any]) -> Answer:
    trace_id, read, prompt, cost, cause, at = row
    return Answer(int(read), int(prompt), float(cost or 0.0), cause, float(at), str(trace_id))


async def judged_channels(web: Web) -> list[Judged]:
    """Every judged channel of every configured bot, alarmed or not."""
    configs = await web.fleet.current()
    found: list[Judged] = []
    for bot, config in sorted(configs.bots.items()):
        settings = config.traces.cache_alarm
        if not settings.enabled:
            continue
        recent = await web.store.traces.recent_answers(
            bot,
            since=web.now() - _SINCE,
            channels=_CHANNELS,
            answers=settings.answers + settings.baseline_answers,
        )
        for channel, rows in sorted(recent.items()):
            verdict = judge([_answer(r) for r in rows], settings)
            if verdict is not None:
                found.append(Judged(bot, channel, verdict))
    return found


def alarm_banner(judged: Sequence[Judged]) -> str:
    """One warning per alarmed channel, for the top of the activity page; "" when none."""
    items = []
    for each in judged:
        alarm = each.verdict
        if not alarm.on:
            continue
        began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(alarm.first.at))
        link = f'<a href="/activity/traces/{escape(alarm.first.ref)}">{began}</a>'
        items.append(
            f"<li><b>{escape(each.bot)}</b> in <code>{escape(each.channel)}</code>: "
            f"{escape(alarm.describe())}; it began with the answer of {link}</li>"
        )
    if not items:
        return ""
    shown = "".join(items)
    return f'<div class="panel alarm" role="alert"><h2>Cache alarm</h2><ul>{shown}</ul></div>'


class AlarmMetrics(Collector):
    """Per judged channel: ``salon_cache_alarm`` (1 while on), and the window's and the
    baseline's cache read share and cost per answer that it compares."""

    def __init__(self, judged: Sequence[Judged]) -> None:
        self.judged = judged

    def collect(self) -> Iterator[Metric]:
        labels = ["bot", "channel"]
        alarm = GaugeMetricFamily(
            "salon_cache_alarm",
            "1 while the channel's cache read share or cost per answer is off its baseline",
            labels=labels,
        )
        share = GaugeMetricFamily(
            "salon_channel_cache_read_share",
            "Cache read share of the channel's last answers (over=window) and before (baseline)",
            labels=[*labels, "over"],
        )
        cost = GaugeMetricFamily(
            "salon_channel_cost_per_answer_usd",
            "Cost per answer of the channel's last answers (over=window) and before (baseline)",
            labels=[*labels, "over"],
        )
        for each in self.judged:
            key, verdict = [each.bot, each.channel], each.verdict
            alarm.add_metric(key, 1.0 if verdict.on else 0.0)
            share.add_metric([*key, "window"], verdict.read_share)
            share.add_metric([*key, "baseline"], verdict.baseline_read_share)
            cost.add_metric([*key, "window"], verdict.cost_per_answer)
            cost.add_metric([*key, "baseline"], verdict.baseline_cost_per_answer)
        yield from (alarm, share, cost)
