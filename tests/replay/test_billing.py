"""The replay's billing model against the loopback server's billing fakes: the same
request bodies at the same times must bill the same tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fakes.billing import AutoPrefixBilling, CacheBilling
from salon.replay.billing import MarkerCache, PrefixCache

MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
K = 4096


def _body(*blocks: tuple[str, dict[str, str] | None], system: str = "") -> dict[str, Any]:
    content = [
        {"type": "text", "text": t, **({"cache_control": m} if m else {})} for t, m in blocks
    ]
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "messages": [{"role": "user", "content": content}],
    }
    if system:
        body["system"] = [{"type": "text", "text": system, "cache_control": HOUR}]
    return body


def _sequence() -> list[tuple[float, dict[str, Any]]]:
    """(minutes after the start, body): growing rooms, gaps past 5 minutes and an hour."""
    room = [("a" * K, MARK)]
    steps: list[tuple[float, dict[str, Any]]] = []
    at = 0.0
    for gap, extra in ((0, "b"), (3, "c"), (7, "d"), (2, "e"), (50, "f"), (70, "g")):
        at += gap
        room = [(t, None) for t, _ in room] + [(extra * 900, MARK)]
        steps.append((at, _body(*room[-3:], ("q" * 40, None), system="s" * K)))
    steps.append((at + 1, _body(("z" * 10, MARK))))
    return steps


def test_marker_cache_bills_as_the_anthropic_fake_does() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    now = start
    fake = CacheBilling(clock=lambda: now)
    ours = MarkerCache()
    for minutes, body in _sequence():
        now = start + timedelta(minutes=minutes)
        expected = fake.bill(body)
        got = ours.bill(body, "claude-sonnet-4-6", now)
        assert (got.input_tokens, got.cache_read_tokens, got.cache_write_tokens) == (
            expected.input_tokens, expected.cache_read_tokens, expected.cache_write_tokens,
        )  # fmt: skip
        assert got.cache_write_1h_tokens == expected.cache_write_1h_tokens


def test_prefix_cache_bills_as_the_openai_fake_does() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    now = start
    fake = AutoPrefixBilling(clock=lambda: now)
    ours = PrefixCache()
    text = ""
    for minute, extra in ((0, "a" * 5000), (4, "b" * 700), (16, "c" * 900), (17, "d" * 30)):
        now = start + timedelta(minutes=minute)
        text += extra
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": text}]}
        expected = fake.bill(body)
        got = ours.bill(body, "gpt-4.1", now)
        assert (got.input_tokens, got.cache_read_tokens) == (
            expected.input_tokens, expected.cache_read_tokens,
        )  # fmt: skip
