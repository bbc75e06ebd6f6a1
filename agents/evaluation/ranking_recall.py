"""`kg-mcp eval --ranking`: how often `kgr_search`'s top k holds a gold next entity, per ranker.

Every question's gold chain (`gold_hops`) is searched hop by hop with `kgr_search` itself, in one
traversal per question and ranker; a hop counts as recalled when one of the top k triples leads
by the gold relation to a gold next entity. Questions that a learned ranker was trained on are
left out for every ranker (so all are measured on the same hops), and the code checks it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from kg_mcp.agents.evaluation.benchmarks import Question
from kg_mcp.agents.evaluation.gold_hops import GoldHop, gold_hops
from kg_mcp.backends import Backend
from kg_mcp.kg_reasoner.ranking import Ranker
from kg_mcp.settings import Settings
from kg_mcp.tools.traverse import kgr_search
from kg_mcp.kg_reasoner.traversal import Tree


@dataclass
class Recall:
    ranker: str
    k: int
    hits: int
    hops: int

    @property
    def share(self) -> float:
        return self.hits / self.hops if self.hops else 0.0

    def line(self) -> str:
        return f"{self.ranker}: recall@{self.k} {100 * self.share:.1f}% ({self.hops} hops)"


def unseen(questions: list[Question], rankers: list[Ranker]) -> list[Question]:
    """The questions no learned ranker among `rankers` was trained (or validated) on."""
    learned = [r for r in rankers if hasattr(r, "saw")]
    return [q for q in questions if not any(r.saw(q.text) for r in learned)]


def first_gold(backend: Backend, settings: Settings, tree: Tree, ranker: Ranker, hop: GoldHop, k: int) -> int | None:
    """The rank (1-based) of the first triple of `kgr_search`'s top k that leads to a gold next entity."""
    out = kgr_search(backend, settings, tree, ranker, backend.vocab.compact(hop.entity), k=k)
    relation = backend.vocab.compact(hop.predicate)
    gold = {backend.vocab.compact(g) for g in hop.gold}
    explored = backend.vocab.compact(hop.entity)
    for rank, t in enumerate(out.data.triples, 1):
        if t.relation != relation:
            continue
        if hop.backwards and t.object.id == explored and t.subject.id in gold:
            return rank
        if not hop.backwards and t.subject.id == explored and t.object.id in gold:
            return rank
    return None


def measure(
    backend: Backend,
    questions: list[Question],
    rankers: list[Ranker],
    *,
    ks: Sequence[int] = (20,),
    seed: int = 0,
    settings: Settings | None = None,
    progress: bool = True,
) -> list[Recall]:
    """recall@k of each ranker for each k over the gold hops of `questions` (none of them seen in
    training): one search per hop and ranker, at the largest k."""
    settings = settings or Settings()
    if unseen(questions, rankers) != questions:
        raise ValueError("a learned ranker was trained on some of these questions: measure on unseen() ones only")
    chains = [gold_hops(backend, q, seed) for q in tqdm(questions, desc="gold paths", unit="q", file=sys.stderr,
                                                         disable=not progress)]
    results = []
    for ranker in rankers:
        ranks: list[int | None] = []
        for chain in tqdm(chains, desc=ranker.name, unit="q", file=sys.stderr, disable=not progress):
            if not chain:
                continue
            tree = Tree(question=chain[0].question.text)
            ranks += [first_gold(backend, settings, tree, ranker, hop, max(ks)) for hop in chain]
        results += [Recall(ranker.name, k, sum(r is not None and r <= k for r in ranks), len(ranks)) for k in ks]
    return results
