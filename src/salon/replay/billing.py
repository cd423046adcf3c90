"""What a request is billed, by each vendor's documented prompt-cache rules, on a clock the
caller moves (a replay's virtual clock: the log's own timestamps).

``MarkerCache``: Anthropic's Messages API and Claude on Bedrock. The prompt is the tools,
the system prompt, then each message's blocks; a block with ``cache_control`` is a
breakpoint (``ttl`` 5m or 1h). An entry lives its lifetime from its last read; a prefix
below the model's minimum (``salon.llm.cache_plan.anthropic_min_prefix``) is neither
written nor read. From each breakpoint the vendor looks back about 20 block boundaries
for a live entry and reads the longest; from there to each later breakpoint is written, at
the lifetime of the breakpoint that ends it. Prefixes compare by content (role and text).

``PrefixCache``: automatic prefix caching without markers or write charge: OpenAI (a
prompt of 1 024 tokens or more is cached, later prompts read the longest shared prefix in
steps of 128 tokens; kept about 10 minutes idle, an hour at most) and Gemini's implicit
cache (2 048 tokens on 2.5 models, 4 096 later; Google gives no lifetime: 5 minutes idle).

Tokens are characters / 4, rounded up, per block (an image: 1 000), as Salon estimates
them when it places markers (``salon.llm.anthropic``). The tests check these rules
against the loopback server's billing fakes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from salon.llm.cache_plan import anthropic_min_prefix
from salon.model import Usage

__all__ = ["Billing", "MarkerCache", "NoCache", "PrefixCache", "billing_for"]

LOOKBACK_BLOCKS = 20
MAX_ENTRIES = 4096  # cached prefixes kept per arm; the oldest go first
_TTL = {"5m": timedelta(minutes=5), "1h": timedelta(hours=1)}


class Billing(Protocol):
    def bill(self, body: dict[str, Any], model: str, now: datetime) -> Usage: ...


class NoCache:
    """A provider without a prompt cache (a local model): every token is input."""

    def bill(self, body: dict[str, Any], model: str, now: datetime) -> Usage:
        return Usage(input_tokens=sum(tokens for *_, tokens in _blocks(body)))


@dataclass
class _Entry:
    expires: datetime
    ttl: timedelta


class MarkerCache:
    """Anthropic's explicit cache breakpoints."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def bill(self, body: dict[str, Any], model: str, now: datetime) -> Usage:
        self._expire(now)
        keys, ends, marks = _prefixes(body)
        minimum = anthropic_min_prefix(model)
        cacheable = [(block, ttl) for block, ttl in marks if ends[block] >= minimum]
        found = self._look_back([block for block, _ in cacheable], keys, ends)
        read = ends[found] if found is not None else 0
        if found is not None:
            self._refresh(keys[: found + 1], now)
        written = hour = 0
        done = read
        for block, ttl in cacheable:
            if ends[block] <= done:
                continue
            self._entries[keys[block]] = _Entry(now + _TTL[ttl], _TTL[ttl])
            written += ends[block] - done
            hour += ends[block] - done if ttl == "1h" else 0
            done = ends[block]
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)
        total = ends[-1] if ends else 0
        return Usage(
            input_tokens=total - done,
            cache_read_tokens=read,
            cache_write_tokens=written,
            cache_write_1h_tokens=hour,
        )

    def _expire(self, now: datetime) -> None:
        for key in [k for k, e in self._entries.items() if e.expires <= now]:
            del self._entries[key]

    def _look_back(self, marks: list[int], keys: list[str], ends: list[int]) -> int | None:
        best: int | None = None
        for mark in marks:
            for block in range(mark, max(mark - LOOKBACK_BLOCKS, -1), -1):
                if keys[block] in self._entries:
                    if best is None or ends[block] > ends[best]:
                        best = block
                    break
        return best

    def _refresh(self, keys: list[str], now: datetime) -> None:
        """A read refreshes every cached prefix it covers."""
        for key in keys:
            entry = self._entries.get(key)
            if entry is not None:
                entry.expires = now + entry.ttl


def _blocks(body: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], int]]:
    """(turn key, role, block, tokens) in prompt order: tools, system, messages."""
    for tool in body.get("tools") or []:
        yield "tools", "tools", tool, _tokens(tool)
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system:
        yield "system", "system", block, _tokens(block)
    for turn, message in enumerate(body.get("messages") or [], start=1):
        content = message.get("content") or ""
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            yield str(turn), str(message.get("role")), block, _tokens(block)


def _tokens(block: dict[str, Any]) -> int:
    if block.get("type") == "text":
        return math.ceil(len(str(block.get("text", ""))) / 4)
    if block.get("type") == "image":
        return 1000
    plain = {k: v for k, v in block.items() if k != "cache_control"}
    return math.ceil(len(json.dumps(plain, sort_keys=True, default=str)) / 4)


def _prefixes(body: dict[str, Any]) -> tuple[list[str], list[int], list[tuple[int, str]]]:
    """The content hash and tokens of the prompt up to each block's end, and the
    breakpoints (block, ttl). Where a turn starts counts, where a block starts does not."""
    digest = hashlib.sha256()
    keys: list[str] = []
    ends: list[int] = []
    marks: list[tuple[int, str]] = []
    tokens, current = 0, ""
    for index, (turn, role, block, size) in enumerate(_blocks(body)):
        if turn != current:
            digest.update(f"\x00{turn}:{role}\x00".encode())
            current = turn
        if block.get("type") == "text":
            digest.update(str(block.get("text", "")).encode())
        else:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps(plain, sort_keys=True, default=str).encode())
        tokens += size
        keys.append(digest.copy().hexdigest())
        ends.append(tokens)
        control = block.get("cache_control")
        if isinstance(control, dict):
            marks.append((index, str(control.get("ttl", "5m"))))
    return keys, ends, marks


@dataclass
class _Prefix:
    created: datetime
    used: datetime


class PrefixCache:
    """Automatic prefix caching: the longest cached prefix is read, no write is charged."""

    def __init__(
        self,
        *,
        minimum: int = 1024,
        step: int = 128,
        idle: timedelta = timedelta(minutes=10),
        max_age: timedelta = timedelta(hours=1),
    ) -> None:
        self.minimum, self.step, self.idle, self.max_age = minimum, step, idle, max_age
        self._cached: OrderedDict[str, _Prefix] = OrderedDict()

    def bill(self, body: dict[str, Any], model: str, now: datetime) -> Usage:
        for key in [k for k, p in self._cached.items() if not self._alive(p, now)]:
            del self._cached[key]
        text = _prompt_text(body)
        tokens = math.ceil(len(text) / 4)
        width = self.step * 4
        digest = hashlib.sha256()
        keys = []
        for end in range(width, len(text) + 1, width):
            digest.update(text[end - width : end].encode())
            keys.append(digest.copy().hexdigest())
        read = 0
        for count, key in enumerate(keys, start=1):
            if key not in self._cached:
                break
            self._cached[key].used = now
            read = count * self.step
        read = read if read >= self.minimum else 0
        if tokens >= self.minimum:
            for key in keys:
                self._cached.setdefault(key, _Prefix(now, now)).used = now
        while len(self._cached) > MAX_ENTRIES * 8:
            self._cached.popitem(last=False)
        return Usage(input_tokens=tokens - read, cache_read_tokens=read)

    def _alive(self, prefix: _Prefix, now: datetime) -> bool:
        return now - prefix.used < self.idle and now - prefix.created < self.max_age


def _prompt_text(body: dict[str, Any]) -> str:
    """The prompt as one text, in the order the vendor reads it."""
    if "contents" in body:  # Gemini's generateContent
        pieces = [json.dumps(body.get("systemInstruction") or {}, sort_keys=True)]
        for content in body["contents"]:
            pieces.append(f"\x00{content.get('role', 'user')}\x00")
            pieces.append(json.dumps(content.get("parts", []), sort_keys=True))
        return "".join(pieces)
    if "prompt" in body:
        return str(body["prompt"])
    pieces = []
    for message in body.get("messages") or []:
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, sort_keys=True)
        pieces.append(f"\x00{message.get('role')}\x00{content}")
    return "".join(pieces)


def billing_for(provider_type: str, model: str) -> Billing:
    """The cache rules of a provider type."""
    if provider_type in ("anthropic", "bedrock"):
        return MarkerCache()
    if provider_type == "openai":
        return PrefixCache()
    if provider_type == "google":
        minimum = 2048 if "2.5" in model or "2-5" in model else 4096
        return PrefixCache(minimum=minimum, idle=timedelta(minutes=5), max_age=timedelta.max)
    return NoCache()
