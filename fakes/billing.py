"""Prompt-cache billing as the Anthropic API does it, for the loopback LLM server.

A request's prompt is the system prompt, then each message's content blocks in order. At
every block carrying ``cache_control`` the prompt so far is a cacheable prefix. The longest
such prefix seen in an earlier request is read from the cache (billed at 0.1x); from there
to the last breakpoint is written to the cache (1.25x); the rest is plain input (1x).
Prefixes compare by content (role and text), not by how the text is cut into blocks.
Tokens are counted as characters / 4, rounded up, per block; an image counts 1 000.

``AutoPrefixBilling`` bills as OpenAI's automatic prompt caching is documented to work: no
markers and no write surcharge; a prompt of at least 1 024 tokens is cached, and a later
prompt reads the longest prefix it shares with an earlier one, in steps of 128 tokens
(``cached_tokens``, billed at 0.1x here; the rest is plain input).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AutoPrefixBilling", "Bill", "CacheBilling"]

READ_PRICE = 0.1
WRITE_PRICE = 1.25
IMAGE_TOKENS = 1000


@dataclass
class Bill:
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def cost(self) -> float:
        """In units of one plain input token."""
        return (
            self.input_tokens
            + READ_PRICE * self.cache_read_tokens
            + WRITE_PRICE * self.cache_write_tokens
        )

    def __iadd__(self, other: Bill) -> Bill:
        self.input_tokens += other.input_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        return self


@dataclass
class CacheBilling:
    cached: set[str] = field(default_factory=set)
    total: Bill = field(default_factory=Bill)

    def bill(self, body: dict[str, Any]) -> Bill:
        digest = hashlib.sha256()
        tokens = 0
        marks: list[tuple[int, str]] = []  # (tokens so far, prefix hash) at each breakpoint
        current = -1
        for turn, role, block in _blocks(body):
            if turn != current:  # where a turn starts counts; where a block starts does not
                digest.update(f"\x00{turn}:{role}\x00".encode())
                current = turn
            if block.get("type") == "text":
                digest.update(block["text"].encode())
                tokens += math.ceil(len(block["text"]) / 4)
            else:
                plain = {k: v for k, v in block.items() if k != "cache_control"}
                digest.update(json.dumps(plain, sort_keys=True).encode())
                tokens += IMAGE_TOKENS
            if "cache_control" in block:
                marks.append((tokens, digest.copy().hexdigest()))
        read = max((at for at, key in marks if key in self.cached), default=0)
        last = marks[-1][0] if marks else 0
        written = max(last - read, 0)
        self.cached.update(key for _, key in marks)
        bill = Bill(tokens - read - written, read, written)
        self.total += bill
        return bill


def _blocks(body: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(turn number, role, block) in prompt order; the system prompt is turn 0."""
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    out = [(0, "system", block) for block in system]
    for turn, message in enumerate(body.get("messages", []), start=1):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out.extend((turn, message["role"], block) for block in content)
    return out


OPENAI_MIN_PREFIX = 1024
OPENAI_STEP = 128
_CHARS_PER_TOKEN = 4


@dataclass
class AutoPrefixBilling:
    cached: set[str] = field(default_factory=set)
    total: Bill = field(default_factory=Bill)

    def bill(self, body: dict[str, Any]) -> Bill:
        """Bill a chat completion or completion request."""
        text = _prompt_text(body)
        tokens = math.ceil(len(text) / _CHARS_PER_TOKEN)
        step = OPENAI_STEP * _CHARS_PER_TOKEN
        prefixes = [
            hashlib.sha256(text[:end].encode()).hexdigest()
            for end in range(step, len(text) + 1, step)
        ]
        read = 0
        for count, key in enumerate(prefixes, start=1):
            if key not in self.cached:
                break
            read = count * OPENAI_STEP
        read = read if read >= OPENAI_MIN_PREFIX else 0
        if tokens >= OPENAI_MIN_PREFIX:
            self.cached.update(prefixes)
        bill = Bill(tokens - read, read, 0)
        self.total += bill
        return bill


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
