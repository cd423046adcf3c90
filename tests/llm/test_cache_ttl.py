"""Cache markers Anthropic takes and bills usefully: four at most, none under the model's
minimum, and with ``cache_ttl: auto`` lifetimes fitted to the channel's tempo."""

from __future__ import annotations

from typing import Any

import pytest

from fakes.billing import CacheBilling
from fakes.llm_server import LLMServer
from salon.config import Secrets
from salon.config.prices import call_cost, price_for
from salon.llm import ChatMessage, LLMRequest, TextPart
from salon.llm.cache_plan import plan_ttls
from salon.llm.factory import build_provider
from tests.conftest import bot_config

LONG = "a fairly long line of the channel's history, " * 100  # about 1 150 tokens


def provider(server: LLMServer | None = None, **extra: object) -> Any:
    base = server.base_url if server is not None else "http://127.0.0.1:9"
    settings = {"type": "anthropic", "model": "claude-sonnet-4-6", "base_url": base}
    settings |= {"api_key_env": "KEY", "backoff_initial": 0, **extra}
    return build_provider(bot_config(providers={"test": settings}), Secrets({"KEY": "k"}))


def marked(*texts: str, gaps: tuple[float, ...] = ()) -> LLMRequest:
    parts = tuple(TextPart(t, cache_breakpoint=True) for t in texts)
    return LLMRequest(
        model="claude-sonnet-4-6",
        system=LONG,
        cache_system=True,
        messages=(ChatMessage("user", parts),),
        activation_gaps=gaps,
    )


def controls(body: dict[str, Any]) -> list[dict[str, str]]:
    blocks = [*body.get("system", []), *body["messages"][0]["content"]]
    return [b["cache_control"] for b in blocks if "cache_control" in b]


async def test_a_fifth_breakpoint_is_never_sent_and_the_api_takes_the_request() -> None:
    async with LLMServer(billing=CacheBilling()) as server:
        sender = provider(server, cache_ttl="5m")
        request = marked(*(f"{i} {LONG}" for i in range(4)))
        assert len(controls(sender.wire(request))) == 4
        events = [e async for e in sender.stream(request)]
        assert events  # a 5th marker would have been the API's 400
        await sender.aclose()


def test_no_marker_goes_on_a_prefix_below_the_models_minimum() -> None:
    short = LLMRequest(
        model="claude-sonnet-4-6",
        system="Be kind.",
        cache_system=True,
        messages=(ChatMessage("user", (TextPart("hi", cache_breakpoint=True),)),),
    )
    assert controls(provider().wire(short)) == []
    body = provider().wire(marked("x" * 12000))  # ~4 150 tokens in all: Sonnet caches
    assert len(controls(body)) == 2
    small = LLMRequest(
        model="claude-haiku-4-5",  # wants 4 096 tokens: the system prompt alone is short
        system=LONG,
        cache_system=True,
        messages=(ChatMessage("user", (TextPart("x" * 12000, cache_breakpoint=True),)),),
    )
    assert len(controls(provider().wire(small))) == 1


def test_off_sends_no_markers() -> None:
    assert controls(provider(cache_ttl="off").wire(marked(LONG))) == []


def test_auto_keeps_the_apis_default_until_it_has_seen_the_channels_tempo() -> None:
    body = provider().wire(marked(LONG, LONG, gaps=(30.0,)))
    assert controls(body) == [{"type": "ephemeral"}] * 3


def test_auto_writes_one_hour_entries_for_a_channel_that_speaks_every_twenty_minutes() -> None:
    gaps = (1200.0, 900.0, 1500.0, 1800.0, 1100.0)
    body = provider().wire(marked(LONG, LONG, LONG, gaps=gaps))
    ttls = [c.get("ttl", "5m") for c in controls(body)]
    assert ttls[0] == "1h"  # the stable prefix outlives the gaps
    assert ttls == sorted(ttls, key=["1h", "5m"].index)  # never 1h after 5m


def test_auto_chooses_by_the_gaps() -> None:
    busy = plan_ttls([60.0] * 10, 20000, 5000, 500)
    assert (busy.stable, busy.tail) == ("5m", "5m")
    slow = plan_ttls([1200.0, 2400.0, 600.0, 1800.0] * 3, 20000, 5000, 500)
    assert slow.stable == "1h"
    asleep = plan_ttls([6 * 3600.0] * 6, 20000, 5000, 500)
    assert (asleep.stable, asleep.tail) == ("off", "off")  # no write would ever be read
    assert "gaps" in slow.reason


async def test_auto_mixed_lifetimes_are_taken_by_the_api() -> None:
    async with LLMServer(billing=CacheBilling()) as server:
        sender = provider(server)
        gaps = (1200.0, 240.0, 1500.0, 200.0, 1100.0, 100.0)
        request = marked(LONG, LONG, LONG, gaps=gaps)
        events = [e async for e in sender.stream(request)]
        assert events
        assert server.billing is not None
        assert server.billing.total.cache_write_tokens > 0
        await sender.aclose()


def test_the_tempo_is_read_from_the_bots_own_messages() -> None:
    from datetime import UTC, datetime, timedelta

    from salon.context.rolling import activation_gaps
    from salon.model import ChannelRef, Message, Participant

    room = ChannelRef("memory", "room")
    me, ada = Participant("bot", "Salon", is_bot=True), Participant("p0", "Ada")
    start = datetime(2026, 11, 26, 9, tzinfo=UTC)

    def at(minutes: float, who: Participant) -> Message:
        when = start + timedelta(minutes=minutes)
        return Message(str(minutes), room, who, "x", when)

    said = [at(0, ada), at(1, me), at(1.05, me), at(20, ada), at(21, me), at(50, ada)]
    # Two answers 3 seconds apart are one activation; the last gap runs to the newest.
    assert activation_gaps(said, "bot") == (20 * 60.0, 29 * 60.0)
    assert activation_gaps([at(0, ada)], "bot") == ()


def test_the_tempo_walk_from_the_newest_back_equals_a_walk_of_the_whole_room() -> None:
    """It stops once it has its gaps: the same gaps as reading every message from the
    oldest, in rooms of every shape."""
    import itertools
    import random
    from datetime import UTC, datetime, timedelta

    from salon.context.rolling import SAME_ACTIVATION, TEMPO_GAPS, activation_gaps
    from salon.model import ChannelRef, Message, Participant

    room = ChannelRef("memory", "room")
    me, ada = Participant("bot", "Salon", is_bot=True), Participant("p0", "Ada")
    start = datetime(2026, 11, 26, 9, tzinfo=UTC)

    def whole(messages: list[Message]) -> tuple[float, ...]:
        starts: list[float] = []
        last: float | None = None
        for message in messages:
            if message.author.id != "bot":
                continue
            at = message.created_at.timestamp()
            if last is None or at - last >= SAME_ACTIVATION:
                starts.append(at)
            last = at
        times = [*starts, messages[-1].created_at.timestamp()]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return tuple(gaps[-TEMPO_GAPS:])

    for seed in range(200):
        rng = random.Random(seed)
        clock, said = 0.0, []
        for n in range(rng.randint(1, 300)):
            clock += rng.choice((1.0, 4.0, 9.0, 11.0, 60.0, 1800.0))
            who = me if rng.random() < 0.3 else ada
            said.append(Message(str(n), room, who, "x", start + timedelta(seconds=clock)))
        assert activation_gaps(said, "bot") == whole(said), seed


async def test_auto_prices_each_write_at_its_own_lifetimes_rate() -> None:
    """A 1-hour write costs 2x input, a 5-minute one 1.25x: the usage Anthropic reports
    (``cache_creation``) says which is which, and the cost follows it."""
    async with LLMServer(billing=CacheBilling()) as server:
        sender = provider(server)
        gaps = (1200.0, 240.0, 1500.0, 200.0, 1100.0, 100.0)
        request = marked(LONG, LONG, LONG, gaps=gaps)
        usage = [e.usage for e in [e async for e in sender.stream(request)] if hasattr(e, "usage")]
        await sender.aclose()
        assert server.billing is not None
        bill = server.billing.total
    assert bill.cache_write_1h_tokens > 0  # auto chose 1 hour for this tempo
    assert usage[-1].cache_write_tokens == bill.cache_write_tokens
    assert usage[-1].cache_write_1h_tokens == bill.cache_write_1h_tokens
    price = price_for("claude-sonnet-4-6")
    assert price is not None
    short = bill.cache_write_tokens - bill.cache_write_1h_tokens
    expected = (
        bill.input_tokens * price.input
        + usage[-1].output_tokens * price.output
        + bill.cache_read_tokens * price.input * 0.1
        + short * price.input * 1.25
        + bill.cache_write_1h_tokens * price.input * 2
    ) / 1_000_000
    factor = sender.traits.cache_write_factor
    assert call_cost(price, usage[-1], write_factor=factor) == pytest.approx(expected)
