"""Why a call was billed a smaller cache read than its prompt allowed, when its prompt
repeats the previous one as far as Salon can tell.

``expired``: the time since the channel's previous call is past the cache's documented
lifetime: Anthropic's markers live 5 minutes or 1 hour from their last use (the shortest
the previous request sent counts); OpenAI clears a prefix after 5 to 10 minutes idle in
memory (the shorter counts), 24 hours with ``prompt_cache_retention: "24h"``; Google
documents no lifetime for Gemini's implicit cache, nor does a local server have one.

``unexplained``: anything else, with what Salon knows: the time since the previous call
against that lifetime, whether the previous call failed or cached nothing, and where the
request as sent first differs from the previous one (the byte, and in what: the tool list,
the system prompt, a message; cache markers aside) or that it repeats it whole, and the
request's settings that changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from salon.trace import CallTrace

__all__ = ["Previous", "explain", "lifetime", "sent_difference"]

_TTLS = {"5m": 300.0, "1h": 3600.0}
_OPENAI_IDLE = 300.0  # "typically 5 to 10 minutes of inactivity": the shorter
_OPENAI_EXTENDED = 86400.0
# Fields of a request that do not enter the prompt: a change in them costs no cache read.
_PER_CALL = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "metadata",
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "stop",
        "stop_sequences",
    }
)
# The prompt's parts in the order a vendor reads them; each list item is a part of its own.
_PROMPT = ("tools", "system", "systemInstruction", "messages", "contents", "prompt")


@dataclass(frozen=True, slots=True)
class Previous:
    """What the channel's previous call sent and was billed."""

    ended_at: float  # epoch seconds
    sent: Mapping[str, Any]  # the request as sent
    ttls: tuple[str, ...]  # its cache markers as sent, "<where> <ttl>"
    read: int  # billed cache read tokens
    written: int  # billed cache write tokens
    prompt: int  # billed prompt tokens (0: it failed before the prompt was read)

    @classmethod
    def of(cls, call: CallTrace) -> Previous:
        ended = call.started_at + (call.total_ms or 0.0) / 1000
        read, written = call.cache_read_tokens, call.cache_write_tokens
        prompt = call.input_tokens + read + written
        return cls(ended, call.request, tuple(call.cache_ttls), read, written, prompt)


def lifetime(kind: str, previous: Previous) -> float | None:
    """Seconds a prefix the previous call cached lives unused (None: not documented)."""
    if kind in ("anthropic", "bedrock"):
        ttls = [_TTLS.get(marker.rsplit(" ", 1)[-1], 300.0) for marker in previous.ttls]
        return min(ttls, default=None)
    if kind == "openai":
        extended = previous.sent.get("prompt_cache_retention") == "24h"
        return _OPENAI_EXTENDED if extended else _OPENAI_IDLE
    return None


def explain(previous: Previous, call: CallTrace, life: float | None, kind: str) -> tuple[str, str]:
    """(cause, what Salon knows) for a call billed below what its prompt allowed."""
    gap = max(call.started_at - previous.ended_at, 0.0)
    if life is not None and gap > life:
        return "expired", (
            f"{span(gap)} since the previous call, past the cache's lifetime of {span(life)}"
        )
    facts = [
        f"{span(gap)} since the previous call, "
        + (f"within the cache's lifetime of {span(life)}" if life else "lifetime not documented")
    ]
    if not previous.prompt:
        facts.append("the previous call failed before its prompt was read")
    elif kind in ("anthropic", "bedrock") and not previous.read and not previous.written:
        facts.append("the previous call neither read nor wrote the cache")
    facts.append(sent_difference(previous.sent, call.request))
    return "unexplained", "; ".join(facts)


def span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def sent_difference(before: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """Where ``now`` first differs from ``before``, both requests as sent, in words."""
    offset = 0
    said = ""
    for (label, old), (_, new) in zip(_pieces(before), _pieces(now), strict=False):
        if old != new:
            same = _common(old, new)
            at = offset + len(old[:same].encode())
            said = f"the request as sent differs from the previous one at byte {at}, in {label}"
            break
        offset += len(old.encode())
    else:
        said = f"the request as sent repeats the previous one's {offset} bytes"
    settings = sorted(
        key
        for key in before.keys() | now.keys()
        if key not in _PER_CALL and key not in _PROMPT and before.get(key) != now.get(key)
    )
    if settings:
        said += f"; its settings differ: {', '.join(settings)}"
    return said


def _pieces(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(what it is, its JSON without cache markers) of each part of a prompt, in order."""
    for key in _PROMPT:
        value = body.get(key)
        if value is None:
            continue
        if key in ("tools", "messages", "contents") and isinstance(value, list):
            for index, item in enumerate(value):
                yield _label(key, index, item), _json(item)
        else:
            yield ("the prompt" if key == "prompt" else "the system prompt"), _json(value)


def _label(key: str, index: int, item: Any) -> str:
    if key == "tools":
        return "the tool list"
    role = item.get("role", "") if isinstance(item, dict) else ""
    if role in ("system", "developer"):
        return "the system prompt"
    return f"message {index} ({role})" if role else f"message {index}"


def _json(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=False, sort_keys=True, default=str)


def _plain(value: Any) -> Any:
    """``value`` without cache markers, which move between requests and are no part of
    the prefix a vendor compares."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _common(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # halving: the pieces of a long request are long
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
