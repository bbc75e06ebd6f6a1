"""Which ranker a server uses: `get_ranker(spec)` and `ranker_from_env()` (KG_MCP_RANKER).

`lexical` (the default), `embedding`, `gnn` (the graph-attention model shipped in the package),
`gnn:FILE` (one trained with `kg-mcp train-ranker`), or `module:factory` for your own. This sits
above both kinds of ranker (kg_mcp.kg_reasoner.ranking, .gnn_ranker), so neither imports the other's
chooser; the graph-attention one, and numpy with it, is imported only when asked for.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Sequence

from kg_mcp.errors import ConfigError
from kg_mcp.kg_reasoner.ranking import EmbeddingRanker, LexicalRanker, Ranker, static_encoder


class _Lazy:
    """A ranker built on first use (an embedding model loads only if a ranking is ever needed)."""

    def __init__(self, name: str, build: Callable[[], Ranker]):
        self.name = name
        self._build = build
        self._ranker: Ranker | None = None
        self._lock = threading.Lock()

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        with self._lock:
            if self._ranker is None:
                self._ranker = self._build()
        return self._ranker.score(question, texts)


def get_ranker(spec: str | None = None) -> Ranker:
    """`lexical` (default), `embedding`, `gnn` (the shipped model), `gnn:FILE`, or `module:factory`
    (a callable returning a Ranker)."""
    spec = (spec or "lexical").strip()
    if spec == "lexical":
        return LexicalRanker()
    if spec == "embedding":
        return _Lazy("embedding", lambda: EmbeddingRanker(static_encoder()))
    if spec == "gnn" or spec.startswith("gnn:"):
        from kg_mcp.kg_reasoner.gnn_ranker import load_ranker

        return load_ranker(spec.partition(":")[2] or None)
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"unknown ranker {spec!r}: use lexical, embedding, gnn, gnn:FILE, or module:factory")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"cannot load the ranker {spec!r}: {e}") from None
    try:
        ranker = factory()
    except TypeError as e:
        raise ConfigError(f"cannot make the ranker {spec!r}: {e}") from None
    if not isinstance(ranker, Ranker):
        raise ConfigError(f"{spec!r} did not return a ranker (an object with .name and .score(question, texts))")
    return ranker


def ranker_from_env() -> Ranker:
    return get_ranker(os.environ.get("KG_MCP_RANKER"))
