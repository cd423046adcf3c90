"""Which lifetime each Anthropic cache breakpoint gets, from the channel's tempo.

Anthropic's prompt cache (platform.claude.com/docs/en/build-with-claude/prompt-caching)
keeps an entry 5 minutes from its last read, or 1 hour with ``ttl: "1h"``; a write costs
1.25x input (5 minutes) or 2x (1 hour), a read 0.1x. A prompt of Salon's has up to two
kinds of breakpoint: the **stable** one (the system prompt and the breakpoint that stays
put between rolls) and the **tail** ones (the newest message of the previous activation
and of this one), which move every activation.

For ``cache_ttl: auto`` each candidate (stable, tail) is priced over the channel's recent
gaps between activations, as if each gap were the one before the next activation, with
that activation's likely sizes: S tokens up to the stable breakpoint, R from there to the
breakpoint this activation writes (its previous tail and its new messages), D a tail as
long as this one's. For a gap g:

- tail alive (g <= tail TTL): 0.1 (S + R) + w_tail D  (read up to the old tail, write the new);
- else stable alive (g <= stable TTL): 0.1 S + w_tail (R + D);
- else: w_stable S + w_tail (R + D);

with w = 1.25 (5 minutes), 2 (1 hour) or 1 (off: no marker, plain input), plus the roll's
rewrite of the stable prefix, w_stable S / (2 k), k = (R + D) / D the activations the
prefix has lived (expected to live as many more). The candidate of
lowest mean cost wins: ``off/off``, ``5m/5m``, ``1h/5m`` or ``1h/1h`` (never a 1-hour
marker after a 5-minute one: the API refuses that order; never a marked stable prefix
with an unmarked tail, which would stop the cached prefix from growing). With fewer than
``MIN_GAPS`` gaps seen the plan is the API's default, 5 minutes everywhere.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MIN_GAPS",
    "OPENAI_MIN_PREFIX",
    "CachePlan",
    "WriteWatch",
    "anthropic_min_prefix",
    "gemini_min_prefix",
    "min_cacheable",
    "plan_ttls",
]

MIN_GAPS = 3
READ = 0.1
WRITE = {"off": 1.0, "5m": 1.25, "1h": 2.0}
LIFETIME = {"off": -1.0, "5m": 300.0, "1h": 3600.0}
# Never a marked stable prefix with an unmarked tail: the tail is where the next
# activation's read ends, and without it the cached prefix stops growing.
CANDIDATES: tuple[tuple[str, str], ...] = (("off", "off"), ("5m", "5m"), ("1h", "5m"), ("1h", "1h"))

# Anthropic's minimum cacheable prompt per model family; anything else takes 1 024 tokens.
_MINIMUMS = (
    (re.compile(r"opus-4-[56]|haiku-4-5"), 4096),
    (re.compile(r"haiku-3|3-5-haiku|3-haiku|opus-4-7"), 2048),
)


def anthropic_min_prefix(model: str) -> int:
    """The fewest tokens a cached prefix needs on ``model``: below it nothing is cached
    (and the API says nothing), so a marker there is wasted."""
    for pattern, tokens in _MINIMUMS:
        if pattern.search(model):
            return tokens
    return 1024


# OpenAI caches prompts of 1 024 tokens or more
# (developers.openai.com/api/docs/guides/prompt-caching).
OPENAI_MIN_PREFIX = 1024


def gemini_min_prefix(model: str) -> int:
    """The fewest tokens Gemini's implicit cache takes (ai.google.dev/gemini-api/docs/caching):
    2 048 on Gemini 2.5 models, 4 096 on Gemini 3 and later."""
    return 2048 if "2.5" in model or "2-5" in model else 4096


def min_cacheable(kind: str, model: str, override: int | None = None) -> int:
    """The fewest prompt tokens a provider of type ``kind`` (``ProviderConfig.type``)
    caches for ``model``; ``override``: the provider's ``cache_min_tokens``. 0 where no
    minimum is documented (a local model)."""
    if kind in ("anthropic", "bedrock"):
        return anthropic_min_prefix(model) if override is None else override
    if kind == "openai":
        return OPENAI_MIN_PREFIX
    if kind == "google":
        return gemini_min_prefix(model)
    return 0


@dataclass(frozen=True, slots=True)
class CachePlan:
    stable: str  # "off", "5m" or "1h"
    tail: str
    reason: str


def plan_ttls(gaps: Sequence[float], stable: int, middle: int, tail: int) -> CachePlan:
    """The cheapest (stable, tail) lifetimes for a channel whose recent activations came
    ``gaps`` seconds apart, for a prompt of ``stable`` + ``middle`` + ``tail`` tokens."""
    if len(gaps) < MIN_GAPS:
        return CachePlan("5m", "5m", f"{len(gaps)} gaps seen: the API's default")
    # Priced for the next activation, which this one's writes serve: its middle is this
    # one's middle and tail, its tail about this one's.
    costs = {c: _mean_cost(c, gaps, stable, middle + tail, tail) for c in CANDIDATES}
    # A roll rewrites the stable prefix at its write price. The prefix has lived about
    # (middle / tail) activations since the last one: expect as many more.
    lived = max(1.0, (middle + tail) / max(tail, 1))
    costs = {c: cost + WRITE[c[0]] * stable / (2 * lived) for c, cost in costs.items()}
    best = min(CANDIDATES, key=costs.__getitem__)
    within = sum(1 for g in gaps if g <= LIFETIME["5m"]), sum(1 for g in gaps if g <= 3600)
    reason = (
        f"{len(gaps)} gaps, {within[0]} within 5m, {within[1]} within 1h: "
        f"{best[0]}/{best[1]} costs {costs[best]:.0f} a call against "
        f"{costs['5m', '5m']:.0f} for 5m/5m, {costs['off', 'off']:.0f} uncached"
    )
    return CachePlan(best[0], best[1], reason)


def _mean_cost(
    plan: tuple[str, str], gaps: Sequence[float], stable: int, middle: int, tail: int
) -> float:
    first, last = plan
    w_first, w_last = WRITE[first], WRITE[last]
    total = 0.0
    for gap in gaps:
        if gap <= LIFETIME[last]:
            total += READ * (stable + middle) + w_last * tail
        elif gap <= LIFETIME[first]:
            total += READ * stable + w_last * (middle + tail)
        else:
            total += w_first * stable + w_last * (middle + tail)
    return total / len(gaps)


class WriteWatch:
    """Cache writes that went unread, estimated per channel from billed usage alone.

    A call's write covers the prompt from what it read to what it wrote up to: tokens
    ``read`` to ``read + written``. The channel's next call reads some prefix; whatever
    of the previous write lies beyond that read was never read, and is counted wasted
    (a write outlives the next call only when it is a 1-hour one read later, which Salon
    does not wait to see). A call after the entry's lifetime reads nothing of it, so the
    TTL needs no rule of its own: the billed read shows it. The newest write of a channel
    is counted once the call after it shows it unread (``pending`` says how much waits).
    """

    def __init__(self, channels: int = 10_000) -> None:
        self._writes: OrderedDict[str, tuple[int, int]] = OrderedDict()  # (start, end)
        self._channels = channels

    def observe(self, channel: str, read: int, written: int, prompt: int) -> int:
        """Record a call's billed read and write (of ``prompt`` tokens in all); the tokens
        of the channel's previous write it shows unread. A call that reported no prompt
        (it failed before the prompt was read) shows nothing."""
        if prompt <= 0:
            return 0
        start, end = self._writes.pop(channel, (0, 0))
        wasted = max(0, end - max(read, start))
        if written > 0:
            self._writes[channel] = (read, read + written)
            if len(self._writes) > self._channels:
                self._writes.popitem(last=False)
        return wasted

    def pending(self, channel: str) -> int:
        """Tokens the channel's newest write holds that no later call has read yet."""
        start, end = self._writes.get(channel, (0, 0))
        return end - start
