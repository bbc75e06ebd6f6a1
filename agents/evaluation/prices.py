"""Dollars from tokens for a few well-known models, at their providers' list prices.

Prices are US dollars per million tokens (input, output), standard tier, without caching or
batch discounts, as published by OpenAI and Anthropic (checked 2025-10). A model not listed here
(a local model behind --base-url, a new release) gets no cost: reports then show tokens only
and say so. Dated snapshots (`gpt-4o-mini-2024-07-18`) are priced as their model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

AS_OF = "2025-10"


@dataclass(frozen=True)
class Price:
    input_per_million: float
    output_per_million: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5-nano": Price(0.05, 0.40),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
}

_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def price_of(model: str | None) -> Price | None:
    """The price of `provider:NAME` or `NAME`, or None when it is not in the table.

    >>> price_of("openai:gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"], price_of("openai:Qwen/Qwen2.5-7B")
    (True, None)
    """
    if not model:
        return None
    name = model.split(":", 1)[1] if ":" in model else model
    return PRICES.get(name) or PRICES.get(_SNAPSHOT.sub("", name))


def run_cost(usage: Mapping[str, Mapping[str, int]], models: Mapping[str, str | None]) -> float | None:
    """The cost of one run: `usage` {role: {input_tokens, output_tokens}}, `models` {role: model}.

    None when a role that used tokens has a model without a price.
    """
    total = 0.0
    for role, counts in usage.items():
        tokens_in, tokens_out = int(counts.get("input_tokens", 0)), int(counts.get("output_tokens", 0))
        if not tokens_in and not tokens_out:
            continue
        price = price_of(models.get(role))
        if price is None:
            return None
        total += price.cost(tokens_in, tokens_out)
    return total
