"""Prices: the built-in table by model family, the config's overrides, the cost of a call."""

from __future__ import annotations

import pytest

from salon.config.models import Price
from salon.config.prices import call_cost, price_for
from salon.model import Usage


@pytest.mark.parametrize(
    ("model", "dollars_in", "dollars_out"),
    [
        ("claude-sonnet-4-5-20250929", 3.0, 15.0),
        ("claude-sonnet-5-5", 2.0, 10.0),
        ("claude-opus-5-5", 4.0, 20.0),
        ("anthropic.claude-opus-4-5-20251101-v1:0", 5.0, 25.0),  # Bedrock's id
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", 15.0, 75.0),
        ("anthropic/claude-haiku-4.5", 1.0, 5.0),  # OpenRouter's spelling
        ("gpt-4o-mini-2024-07-18", 0.15, 0.60),
        ("gpt-4o", 2.50, 10.0),
        ("models/gemini-2.5-flash", 0.30, 2.50),
    ],
)
def test_a_model_finds_its_family_price(model: str, dollars_in: float, dollars_out: float) -> None:
    price = price_for(model)
    assert price is not None
    assert (price.input, price.output) == (dollars_in, dollars_out)


def test_an_unknown_model_has_no_price_and_no_cost() -> None:
    assert price_for("llama3.2") is None
    assert call_cost(None, Usage(1000, 1000)) is None


def test_the_config_overrides_the_table_and_prices_local_models() -> None:
    mine = {"llama3.2": Price(input=0, output=0), "gpt-4o": Price(input=1, output=2)}
    assert price_for("llama3.2", mine) == Price(input=0, output=0)
    assert price_for("gpt-4o-2024-08-06", mine) == Price(input=1, output=2)


def test_a_call_costs_each_kind_of_token_at_its_rate() -> None:
    price = price_for("claude-sonnet-4-5")
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000)
    usage = Usage(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, 400_000)
    # 3.00 + 1.50 + 2 x 0.30 + 0.4 x 3.75
    assert call_cost(price, usage) == pytest.approx(3.0 + 1.5 + 0.6 + 1.5)
