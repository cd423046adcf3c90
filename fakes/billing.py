"""Prompt-cache billing as the vendors document it, for the loopback LLM server.

Time comes from ``clock`` (a callable returning an aware ``datetime``): the benchmark hands
in a virtual clock it moves itself, so a simulated day takes no real time.

``CacheBilling``: Anthropic's Messages API and Bedrock's Claude models
(platform.claude.com/docs/en/build-with-claude/prompt-caching; for Claude on Bedrock,
docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html: the same lifetimes, each
hit resetting it, and the same checkpoint limit). A request's prompt is its tools, then the system
prompt, then each message's content blocks, in that order. A block carrying
``cache_control`` is a breakpoint:

- at most 4 breakpoints a request; a 5th is a 400 ``invalid_request_error``, "A maximum of
  4 blocks with cache_control may be provided. Found 5.";
- ``ttl`` is ``"5m"`` (the default) or ``"1h"``; a 1-hour breakpoint after a 5-minute one
  is a 400 ("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control
  block. Note that blocks are processed in the following order: `tools`, `system`,
  `messages`.");
- an entry lives its TTL from its last use: every read refreshes it at no cost;
- writes cost 1.25x input for 5 minutes, 2x for 1 hour; reads 0.1x;
- a prefix shorter than the model's minimum (``anthropic_minimum``: 1 024 tokens for most
  models, 2 048 for Haiku 3/3.5 and Opus 4.7, 4 096 for Opus 4.5/4.6 and Haiku 4.5) is
  neither written nor read, and no error is raised;
- a read is found by the automatic look-back: from each breakpoint the system checks the
  block boundaries before it, about 20 blocks back, for a live entry; the longest found is
  read, and from there to the last cacheable breakpoint is written (each stretch at the TTL
  of the breakpoint that ends it).

Prefixes compare by content (role and text), not by how the text is cut into blocks.
Tokens are counted as characters / 4, rounded up, per block; an image counts 1 000.
``wasted_tokens`` counts tokens written whose entry expired before anything read it.

``AutoPrefixBilling``: OpenAI's automatic prompt caching
(developers.openai.com/api/docs/guides/prompt-caching): no markers and no write surcharge;
a prompt of at least 1 024 tokens is cached, and a later prompt reads the longest prefix it
shares with a cached one, in steps of 128 tokens (``cached_tokens``, billed at 0.1x here).
Retention: in memory, a prefix is typically cleared after 5 to 10 minutes of inactivity and
always within an hour (this fake: 10 minutes idle, 1 hour at most); with
``prompt_cache_retention: "24h"`` it is kept up to 24 hours.

``ImplicitPrefixBilling``: the Gemini API's implicit caching
(ai.google.dev/gemini-api/docs/caching): on by default for Gemini 2.5 and newer, no fee to
write, a hit billed at a 90 % discount (``cachedContentTokenCount``), for a prompt of at
least 2 048 tokens (2.5 models) or 4 096 (Gemini 3 and later). Google documents no
lifetime ("send requests with similar prefix in a short amount of time"): this fake keeps
a prefix 5 minutes from its last use.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "AutoPrefixBilling",
    "Bill",
    "BillingRefused",
    "CacheBilling",
    "ImplicitPrefixBilling",
    "anthropic_minimum",
]

READ_PRICE = 0.1
WRITE_PRICE = 1.25
WRITE_PRICE_1H = 2.0
IMAGE_TOKENS = 1000
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
TTLS = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1)}

Clock = Callable[[], datetime]


def _wall() -> datetime:
    return datetime.now(UTC)


class BillingRefused(Exception):
    """The vendor refuses the request (HTTP 400); the message is the vendor's."""


@dataclass
class Bill:
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0  # all writes, 1-hour ones included
    cache_write_1h_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def cost(self) -> float:
        """In units of one plain input token."""
        short = self.cache_write_tokens - self.cache_write_1h_tokens
        return (
            self.input_tokens
            + READ_PRICE * self.cache_read_tokens
            + WRITE_PRICE * short
            + WRITE_PRICE_1H * self.cache_write_1h_tokens
        )

    def __iadd__(self, other: Bill) -> Bill:
        self.input_tokens += other.input_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cache_write_1h_tokens += other.cache_write_1h_tokens
        return self


# Anthropic's table of minimum cacheable prompt lengths, by model family (newest first
# within a pattern's reach); anything not listed takes 1 024.
_MINIMUMS = (
    (re.compile(r"opus-4-[56]|haiku-4-5"), 4096),
    (re.compile(r"haiku-3|3-5-haiku|3-haiku|opus-4-7"), 2048),
)


def anthropic_minimum(model: str) -> int:
    """The fewest tokens a prefix needs to be cached for ``model`` (Anthropic's table)."""
    for pattern, tokens in _MINIMUMS:
        if pattern.search(model):
            return tokens
    return 1024


@dataclass
class _Entry:
    expires: datetime
    ttl: timedelta
    tokens: int  # what writing it cost, in tokens
    read: bool = False


@dataclass(frozen=True)
class _Mark:
    block: int  # index of the block carrying the marker
    tokens: int  # tokens up to and including it
    ttl: str
    where: str  # the request path of the block, for the vendor's error message


@dataclass
class CacheBilling:
    clock: Clock = _wall
    entries: dict[str, _Entry] = field(default_factory=dict)
    total: Bill = field(default_factory=Bill)
    wasted_tokens: int = 0

    def bill(self, body: dict[str, Any], model: str | None = None) -> Bill:
        """Bill one request; ``BillingRefused`` when the API would refuse it."""
        now = self.clock()
        self._expire(now)
        blocks = _blocks(body)
        marks = _marks(blocks)
        keys, ends = _prefixes(blocks)
        minimum = anthropic_minimum(model or str(body.get("model", "")))
        cacheable = [m for m in marks if m.tokens >= minimum]
        read_at = self._look_back(cacheable, keys, ends)
        read = ends[read_at] if read_at is not None else 0
        if read_at is not None:
            self._use(keys[: read_at + 1], now)
        bill = Bill(cache_read_tokens=read)
        done = read
        for mark in cacheable:
            if mark.tokens <= done:
                continue
            written = mark.tokens - done
            ttl = TTLS[mark.ttl]
            self.entries[keys[mark.block]] = _Entry(now + ttl, ttl, written)
            bill.cache_write_tokens += written
            if mark.ttl == "1h":
                bill.cache_write_1h_tokens += written
            done = mark.tokens
        bill.input_tokens = (ends[-1] if ends else 0) - done
        self.total += bill
        return bill

    def settle(self) -> int:
        """Count every unread entry as wasted (the day is over); the wasted total."""
        for entry in self.entries.values():
            if not entry.read:
                self.wasted_tokens += entry.tokens
        self.entries.clear()
        return self.wasted_tokens

    def _expire(self, now: datetime) -> None:
        for key in [k for k, e in self.entries.items() if e.expires <= now]:
            entry = self.entries.pop(key)
            if not entry.read:
                self.wasted_tokens += entry.tokens

    def _look_back(self, marks: list[_Mark], keys: list[str], ends: list[int]) -> int | None:
        """The block the longest live cached prefix ends at, found looking back from each
        breakpoint over at most ``LOOKBACK_BLOCKS`` block boundaries."""
        best: int | None = None
        for mark in marks:
            for block in range(mark.block, max(mark.block - LOOKBACK_BLOCKS, -1), -1):
                if keys[block] in self.entries:
                    if best is None or ends[block] > ends[best]:
                        best = block
                    break
        return best

    def _use(self, keys: list[str], now: datetime) -> None:
        """A read uses every cached prefix it covers: each is refreshed, and was read."""
        for key in keys:
            entry = self.entries.get(key)
            if entry is not None:
                entry.read = True
                entry.expires = now + entry.ttl


def _blocks(body: dict[str, Any]) -> list[tuple[int, str, dict[str, Any], str]]:
    """(turn number, role, block, path) in prompt order: tools, system (turn 0), messages."""
    out: list[tuple[int, str, dict[str, Any], str]] = []
    for index, tool in enumerate(body.get("tools") or []):
        out.append((-1, "tools", tool, f"tools.{index}"))
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    out.extend((0, "system", block, f"system.{i}") for i, block in enumerate(system))
    for turn, message in enumerate(body.get("messages", []), start=1):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out.extend(
            (turn, message["role"], block, f"messages.{turn - 1}.content.{i}")
            for i, block in enumerate(content)
        )
    return out


def _marks(blocks: list[tuple[int, str, dict[str, Any], str]]) -> list[_Mark]:
    """The breakpoints, checked as the API checks them (count, then TTL order)."""
    tokens = 0
    marks: list[_Mark] = []
    for index, (_, _, block, where) in enumerate(blocks):
        tokens += _tokens(block)
        control = block.get("cache_control")
        if control is not None:
            ttl = control.get("ttl", "5m")
            if ttl not in TTLS:
                raise BillingRefused(f"{where}.cache_control.ttl: Input should be '5m' or '1h'")
            marks.append(_Mark(index, tokens, ttl, where))
    if len(marks) > MAX_BREAKPOINTS:
        raise BillingRefused(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marks)}."
        )
    for earlier, later in itertools.pairwise(marks):
        if earlier.ttl == "5m" and later.ttl == "1h":
            raise BillingRefused(
                f"{later.where}.cache_control.ttl: a ttl='1h' cache_control block must not "
                "come after a ttl='5m' cache_control block. Note that blocks are processed "
                "in the following order: `tools`, `system`, `messages`."
            )
    return marks


def _tokens(block: dict[str, Any]) -> int:
    if block.get("type") == "text":
        return math.ceil(len(block["text"]) / 4)
    if block.get("type") == "image":
        return IMAGE_TOKENS
    plain = {k: v for k, v in block.items() if k != "cache_control"}
    return math.ceil(len(json.dumps(plain, sort_keys=True)) / 4)


def _prefixes(blocks: list[tuple[int, str, dict[str, Any], str]]) -> tuple[list[str], list[int]]:
    """The prefix hash and token count at the end of each block. Where a turn starts
    counts; where a block starts within a turn does not."""
    digest = hashlib.sha256()
    keys: list[str] = []
    ends: list[int] = []
    tokens = 0
    current: int | None = None
    for turn, role, block, _ in blocks:
        if turn != current:
            digest.update(f"\x00{turn}:{role}\x00".encode())
            current = turn
        if block.get("type") == "text":
            digest.update(block["text"].encode())
        else:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps(plain, sort_keys=True).encode())
        tokens += _tokens(block)
        keys.append(digest.copy().hexdigest())
        ends.append(tokens)
    return keys, ends


OPENAI_MIN_PREFIX = 1024
OPENAI_STEP = 128
OPENAI_IDLE = timedelta(minutes=10)
OPENAI_MAX_AGE = timedelta(hours=1)
OPENAI_EXTENDED = timedelta(hours=24)
_CHARS_PER_TOKEN = 4


@dataclass
class _Prefix:
    created: datetime
    used: datetime
    extended: bool


@dataclass
class AutoPrefixBilling:
    clock: Clock = _wall
    cached: dict[str, _Prefix] = field(default_factory=dict)
    total: Bill = field(default_factory=Bill)
    minimum: int = OPENAI_MIN_PREFIX
    step: int = OPENAI_STEP

    def bill(self, body: dict[str, Any], model: str | None = None) -> Bill:
        """Bill a chat completion, completion or generateContent request."""
        now = self.clock()
        self._expire(now)
        text = self._text(body)
        tokens = math.ceil(len(text) / _CHARS_PER_TOKEN)
        step = self.step * _CHARS_PER_TOKEN
        prefixes = [
            hashlib.sha256(text[:end].encode()).hexdigest()
            for end in range(step, len(text) + 1, step)
        ]
        read = 0
        for count, key in enumerate(prefixes, start=1):
            if key not in self.cached:
                break
            self.cached[key].used = now
            read = count * self.step
        read = read if read >= self.minimum else 0
        if tokens >= self.minimum:
            extended = body.get("prompt_cache_retention") == "24h"
            for key in prefixes:
                self.cached.setdefault(key, _Prefix(now, now, extended)).used = now
        bill = Bill(tokens - read, read, 0)
        self.total += bill
        return bill

    def _text(self, body: dict[str, Any]) -> str:
        return _prompt_text(body)

    def _alive(self, prefix: _Prefix, now: datetime) -> bool:
        if prefix.extended:
            return now - prefix.created < OPENAI_EXTENDED
        return now - prefix.used < OPENAI_IDLE and now - prefix.created < OPENAI_MAX_AGE

    def _expire(self, now: datetime) -> None:
        for key in [k for k, p in self.cached.items() if not self._alive(p, now)]:
            del self.cached[key]


GEMINI_IDLE = timedelta(minutes=5)


def gemini_minimum(model: str) -> int:
    """Gemini's minimum input for implicit caching: 2 048 tokens on 2.5 models, 4 096 on
    Gemini 3 and later."""
    return 2048 if "2.5" in model or "2-5" in model else 4096


@dataclass
class ImplicitPrefixBilling(AutoPrefixBilling):
    model: str = "gemini-2.5-flash"

    def bill(self, body: dict[str, Any], model: str | None = None) -> Bill:
        self.minimum = gemini_minimum(model or self.model)
        return super().bill(body, model)

    def _text(self, body: dict[str, Any]) -> str:
        pieces = [json.dumps(body.get("systemInstruction") or {}, sort_keys=True)]
        for content in body.get("contents", []):
            pieces.append(f"\x00{content.get('role', 'user')}\x00")
            pieces.append(json.dumps(content.get("parts", []), sort_keys=True))
        return "".join(pieces)

    def _alive(self, prefix: _Prefix, now: datetime) -> bool:
        return now - prefix.used < GEMINI_IDLE


def _prompt_text(body: dict[str, Any]) -> str:
    """The prompt as one text: each message's role and content, in order."""
    if "prompt" in body:
        return str(body["prompt"])
    pieces = []
    for message in body.get("messages", []):
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, sort_keys=True)
        pieces.append(f"\x00{message['role']}\x00{content}")
    return "".join(pieces)
