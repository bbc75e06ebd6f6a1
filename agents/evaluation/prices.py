"""Dollars from tokens for a few well-known models, at their providers' list prices.

Prices are US dollars per million tokens (input, output), standard tier, without batch
discounts, as published by OpenAI and Anthropic (checked 2025-10). Prompt tokens read from the
provider's cache cost less (OpenAI: a half, a quarter or a tenth of the input price by model;
Anthropic: a tenth), and Anthropic bills those written to it at 1.25 times the input price. A model not listed here
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
    cached_share: float = 1.0  # the price of a prompt token read from the cache, as a share of input's
    write_share: float = 1.0  # the price of one written to it

    def cost(self, input_tokens: int, output_tokens: int, cached: int = 0, written: int = 0) -> float:
        """Dollars for `input_tokens` (of which `cached` read from and `written` to the prompt cache)."""
        plain = input_tokens - cached - written
        prompt = plain + cached * self.cached_share + written * self.write_share
        return (prompt * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00, cached_share=0.5),
    "gpt-4o-mini": Price(0.15, 0.60, cached_share=0.5),
    "gpt-4.1": Price(2.00, 8.00, cached_share=0.25),
    "gpt-4.1-mini": Price(0.40, 1.60, cached_share=0.25),
    "gpt-4.1-nano": Price(0.10, 0.40, cached_share=0.25),
    "gpt-5": Price(1.25, 10.00, cached_share=0.1),
    "gpt-5-mini": Price(0.25, 2.00, cached_share=0.1),
    "gpt-5-nano": Price(0.05, 0.40, cached_share=0.1),
    "o3": Price(2.00, 8.00, cached_share=0.25),
    "o4-mini": Price(1.10, 4.40, cached_share=0.25),
    "claude-opus-4-1": Price(15.00, 75.00, cached_share=0.1, write_share=1.25),
    "claude-sonnet-4-5": Price(3.00, 15.00, cached_share=0.1, write_share=1.25),
    "claude-sonnet-4": Price(3.00, 15.00, cached_share=0.1, write_share=1.25),
    "claude-haiku-4-5": Price(1.00, 5.00, cached_share=0.1, write_share=1.25),
    "claude-3-5-haiku": Price(0.80, 4.00, cached_share=0.1, write_share=1.25),
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
        cached, written = int(counts.get("cached_input_tokens", 0)), int(counts.get("cache_write_tokens", 0))
        if not tokens_in and not tokens_out:
            continue
        price = price_of(models.get(role))
        if price is None:
            return None
        total += price.cost(tokens_in, tokens_out, cached, written)
    return total
