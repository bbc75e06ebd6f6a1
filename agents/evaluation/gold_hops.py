"""Gold-path hops of benchmark questions, for training and measuring `kgr_search`'s rankers.

A question with a gold relation path (MetaQA, PathQuestion) is walked on its KB along one chain
of entities that reaches a gold answer: at each hop the explored entity, the gold relation, and
the gold next entities (every entity the gold relation reaches from there). The chain is drawn
with a seed, so every ranker is measured on the same hops.

Questions are split by a fingerprint of their text (`split_of`): `train` and `validation` are
what `kg-mcp train-ranker` reads; `held-out` is what it never reads.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Literal

import pyoxigraph as ox

from kg_mcp.agents.evaluation.benchmarks import Question
from kg_mcp.agents.evaluation.matching import normalise
from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import KGError

Split = Literal["train", "validation", "held-out"]
TRAIN_SHARE, VALIDATION_SHARE = 0.5, 0.1  # the other 40% of each benchmark is never trained on
_TRIES = 10  # next entities tried per hop when looking for a chain that reaches an answer
_READ = 1000  # edges of one relation read per entity


def split_of(question: str, seed: int = 0) -> Split:
    """Where a question falls (by its text and the seed): train, validation or held-out.

    >>> [split_of(q) for q in ("who directed [Alien]", "who wrote [Alien]", "when was [Alien] released")]
    ['train', 'train', 'held-out']
    """
    digest = hashlib.sha256(f"{seed}:{' '.join(question.lower().split())}".encode()).digest()
    x = int.from_bytes(digest[:8], "big") / 2**64
    return "train" if x < TRAIN_SHARE else "validation" if x < TRAIN_SHARE + VALIDATION_SHARE else "held-out"


@dataclass(frozen=True)
class GoldHop:
    question: Question
    position: int  # 0 for the hop from the topic entity
    entity: ox.NamedNode  # the explored entity
    relation: str  # the gold relation (`~rel`: walked backwards)
    predicate: ox.NamedNode
    backwards: bool
    gold: frozenset[ox.NamedNode]  # the entities the gold relation reaches from `entity`


def gold_hops(backend: Backend, question: Question, seed: int = 0) -> list[GoldHop]:
    """The hops of one chain from the question's topic entity to a gold answer ([] if none)."""
    if not question.gold_path or not question.topics:
        return []
    name, ident = next(iter(question.topics.items()))
    try:
        topic = backend.resolve_entity(ident or name)
        steps = [backend.resolve_relation(r) for r in question.gold_path]
    except KGError:
        return []
    answers = {normalise(a) for a in question.answers}
    rng = random.Random(f"{seed}:{question.id}")

    def reached(node: ox.NamedNode, i: int) -> list[ox.NamedNode]:
        predicate, direction = steps[i]
        found = backend.neighbours(node, direction, [predicate], _READ)
        return list(dict.fromkeys(n.value for n in found if isinstance(n.value, ox.NamedNode)))

    def chain(node: ox.NamedNode, i: int) -> list[GoldHop] | None:
        nexts = reached(node, i)
        predicate, direction = steps[i]
        hop = GoldHop(question, i, node, question.gold_path[i], predicate, direction is Direction.INCOMING, frozenset(nexts))
        if i == len(steps) - 1:
            labels = backend.labels(nexts)
            hit = any(normalise(labels.get(n) or backend.vocab.compact(n)) in answers for n in nexts)
            return [hop] if hit else None
        rng.shuffle(nexts)
        for nxt in nexts[:_TRIES]:
            rest = chain(nxt, i + 1)
            if rest is not None:
                return [hop, *rest]
        return None

    return chain(topic, 0) or []

