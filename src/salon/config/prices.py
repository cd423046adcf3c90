"""What a call costs: a dated table of list prices, overridden by the config's ``prices``.

Prices are US dollars per million tokens, as the vendors publish them (checked in November
2026 against public price tables; they change, so ``prices:`` in the config wins). A model
name is matched after dropping a vendor prefix (``anthropic.``, ``openai/``, ``models/``) by
the longest table key it starts with, so ``claude-sonnet-4-5-20250929`` and Bedrock's
``anthropic.claude-sonnet-4-5-20250929-v1:0`` both find ``claude-sonnet-4-5``. A model with
no price has no cost (``None``), never a guessed one.
"""

from __future__ import annotations

from collections.abc import Mapping

from salon.config.models import Price
from salon.model import Usage

__all__ = ["DEFAULT_PRICES", "HOUR_WRITE", "call_cost", "price_for"]

HOUR_WRITE = 2.0  # Anthropic: a 1-hour cache write costs twice the input rate


def _anthropic(inp: float, out: float, read: float | None = None) -> Price:
    """Anthropic: 5-minute cache writes at 1.25x input, reads at 0.1x unless given."""
    return Price(input=inp, output=out, cache_write=inp * 1.25, cache_read=read or inp * 0.1)


def _cached(inp: float, out: float, read: float) -> Price:
    """Automatic prefix caching (OpenAI, Google): reads at their own rate, no write charge."""
    return Price(input=inp, output=out, cache_read=read, cache_write=inp)


DEFAULT_PRICES: dict[str, Price] = {
    # Anthropic (also on Bedrock)
    "claude-fable-5-1": _anthropic(10.0, 50.0, read=0.25),
    "claude-mythos-5-1": _anthropic(10.0, 50.0, read=0.25),
    "claude-fable-5": _anthropic(10.0, 50.0),
    "claude-mythos-5": _anthropic(10.0, 50.0),
    "claude-opus-5-5": _anthropic(4.0, 20.0, read=0.20),
    "claude-opus-5": _anthropic(5.0, 25.0),
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-6": _anthropic(5.0, 25.0),
    "claude-opus-4-7": _anthropic(5.0, 25.0),
    "claude-opus-4-8": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-3-opus": _anthropic(15.0, 75.0),
    "claude-sonnet-5-5": _anthropic(2.0, 10.0, read=0.10),
    "claude-sonnet-5": _anthropic(2.0, 10.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-3-5-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-5-5": _anthropic(0.10, 0.50),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.80, 4.0),
    "claude-3-haiku": _anthropic(0.25, 1.25, read=0.03),
    # OpenAI
    "gpt-5.4-mini": _cached(0.75, 4.50, 0.075),
    "gpt-5.4": _cached(2.50, 15.0, 0.25),
    "gpt-5.2": _cached(1.75, 14.0, 0.175),
    "gpt-5-mini": _cached(0.25, 2.0, 0.025),
    "gpt-5-nano": _cached(0.05, 0.40, 0.005),
    "gpt-5": _cached(1.25, 10.0, 0.125),
    "gpt-4.1-mini": _cached(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _cached(0.10, 0.40, 0.025),
    "gpt-4.1": _cached(2.0, 8.0, 0.50),
    "gpt-4o-mini": _cached(0.15, 0.60, 0.075),
    "gpt-4o": _cached(2.50, 10.0, 1.25),
    "o4-mini": _cached(1.10, 4.40, 0.275),
    "o3": _cached(2.0, 8.0, 0.50),
    # Google
    "gemini-2.5-pro": _cached(1.25, 10.0, 0.3125),
    "gemini-2.5-flash-lite": _cached(0.10, 0.40, 0.025),
    "gemini-2.5-flash": _cached(0.30, 2.50, 0.075),
    "gemini-2.0-flash": _cached(0.10, 0.40, 0.025),
}

_PREFIXES = ("anthropic.", "anthropic/", "openai/", "google/", "models/", "us.", "eu.", "apac.")


def _base(model: str) -> str:
    name = model.strip().lower()
    changed = True
    while changed:  # e.g. "us.anthropic.claude-…" on Bedrock
        changed = False
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix) :], True
    return name.replace(".", "-") if name.startswith("claude") else name


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: the config's first (exact name, then the same matching),
    then the built-in table."""
    if overrides and model in overrides:
        return overrides[model]
    base = _base(model)
    for table in (overrides or {}, DEFAULT_PRICES):
        keys = sorted((k for k in table if base.startswith(_base(k))), key=len, reverse=True)
        if keys:
            return table[keys[0]]
    return None


def call_cost(price: Price | None, usage: Usage, *, write_factor: float = 1.0) -> float | None:
    """US dollars for one call's usage; None without a price. Writes the vendor reports as
    1-hour ones (``cache_write_1h_tokens``) cost Anthropic's 2x input; ``write_factor``
    scales the others, for a vendor that does not break them out (``cache_ttl: 1h``: 1.6,
    2x input against the table's 5-minute 1.25x)."""
    if price is None:
        return None
    read = price.cache_read if price.cache_read is not None else price.input
    write = price.cache_write if price.cache_write is not None else price.input
    hour = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * read
        + (usage.cache_write_tokens - hour) * write * write_factor
        + hour * price.input * HOUR_WRITE
    ) / 1_000_000
