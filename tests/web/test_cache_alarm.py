"""The cache alarm end to end on the web server: /metrics and the activity page's banner,
judged from stored traces after a regression (a prompt that changes at every call)."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from salon.trace import CallTrace, Divergence, Trace
from tests.web.conftest import Site
from tests.web.test_activity import sign_in


def answered(n: int, *, broken: bool) -> Trace:
    at = time.time() - 600 + n
    call = CallTrace(
        kind="answer",
        provider="test",
        model="test-model",
        request={"messages": []},
        started_at=at,
        input_tokens=100,
        cache_read_tokens=0 if broken else 8000,
        cache_write_tokens=8000 if broken else 100,
        cost=0.03 if broken else 0.004,
        divergence=Divergence(-1, None, "config change") if broken else None,
    )
    return Trace("salon", "irc", "irc:#salon", "#salon", at, at + 1, calls=[call])


def alarm_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(("salon_cache_alarm", "salon_channel_"))
    }


CHANNEL = (("bot", "salon"), ("channel", "irc:#salon"))


async def test_metrics_and_the_page_show_the_alarm_after_a_regression(site: Site) -> None:
    await site.store.write_traces([answered(n, broken=False) for n in range(60)])
    quiet = alarm_samples((await site.client.get("/metrics")).text)
    assert quiet[("salon_cache_alarm", CHANNEL)] == 0
    await site.store.write_traces([answered(n, broken=True) for n in range(60, 65)])
    loud = alarm_samples((await site.client.get("/metrics")).text)
    assert loud[("salon_cache_alarm", CHANNEL)] == 1
    window = loud[("salon_channel_cache_read_share", (*CHANNEL, ("over", "window")))]
    baseline = loud[("salon_channel_cache_read_share", (*CHANNEL, ("over", "baseline")))]
    assert window < baseline - 0.2
    await sign_in(site)
    page = (await site.client.get("/activity")).text
    assert "Cache alarm" in page
    assert "most common cause: config change" in page
    first = await site.store.traces.list_traces(limit=5)
    assert f'href="/activity/traces/{first[-1].id}"' in page  # the first broken answer


async def test_the_page_has_no_banner_while_the_cache_holds(site: Site) -> None:
    await site.store.write_traces([answered(n, broken=False) for n in range(70)])
    await sign_in(site)
    assert "Cache alarm" not in (await site.client.get("/activity")).text
