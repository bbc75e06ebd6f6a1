"""`kg-mcp train-ranker`: the graph-attention ranker trained on benchmarks' gold relation paths.

Each hop of a gold chain (`gold_hops`) becomes a training example: the explored entity's edges as
`kgr_search` reads them, the gold next entities as positives and a seeded sample of the other
neighbours as negatives, each candidate with its own neighbours. Questions in the `train` split
train, `validation` ones pick the epoch; `held-out` questions are never read, and the model file
lists the fingerprints of every question it read, so that a measurement can refuse them.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import asdict, dataclass

from tqdm import tqdm

from kg_mcp.agents.evaluation.benchmarks import Benchmark, select
from kg_mcp.agents.evaluation.gold_hops import GoldHop, gold_hops, split_of
from kg_mcp.backends import Backend, Direction
from kg_mcp.kg_reasoner.gnn_ranker import CONTEXT, GNNRanker, Hop, ModelInfo, Vocabulary, index_hop, question_key
from kg_mcp.kg_reasoner.gnn_training import fit
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer
from kg_mcp.tools.traverse import edges_around, graph_items

MAX_POSITIVES = 8
MAX_NEGATIVES = 24


@dataclass
class TrainingReport:
    train_questions: int
    validation_questions: int
    train_hops: int
    validation_hops: int
    epochs: int
    best_epoch: int
    validation_loss: float
    seconds: float


def hop_example(backend: Backend, settings: Settings, vocab: Vocabulary, hop: GoldHop, rng: random.Random) -> Hop | None:
    """One training example, or None when the gold relation is not among the edges read."""
    edges = edges_around(backend, hop.entity)
    positive = [
        e.predicate == hop.predicate and (e.direction is Direction.INCOMING) == hop.backwards and e.value in hop.gold
        for e in edges
    ]
    pos = [i for i, p in enumerate(positive) if p]
    neg = [i for i, p in enumerate(positive) if not p]
    if not pos or not neg:
        return None  # nothing to learn from a hop without a choice
    chosen = rng.sample(pos, min(len(pos), MAX_POSITIVES)) + rng.sample(neg, min(len(neg), MAX_NEGATIVES))
    rng.shuffle(chosen)
    picked = [edges[i] for i in chosen]
    namer = Namer(backend, settings, [hop.entity, *(e.predicate for e in picked), *(e.value for e in picked)])
    items = graph_items(backend, namer, hop.entity, picked, CONTEXT)
    return index_hop(vocab, hop.question.text, items, CONTEXT, [positive[i] for i in chosen])


def train_ranker(
    sources: list[tuple[Benchmark, Backend]],
    *,
    settings: Settings | None = None,
    per_benchmark: int | None = None,
    seed: int = 0,
    epochs: int = 8,
    max_seconds: float = 420.0,
    progress: bool = True,
) -> tuple[GNNRanker, TrainingReport]:
    """A ranker trained on the train split of each benchmark (at most `per_benchmark` questions of
    each split drawn with `seed`), the epoch chosen on the validation split."""
    started = time.monotonic()
    settings = settings or Settings()
    vocab = Vocabulary()
    rng = random.Random(seed)
    splits: dict[str, list[Hop]] = {"train": [], "validation": []}
    counts = {"train": 0, "validation": 0}
    read: set[str] = set()
    for bench, backend in sources:
        for split in ("train", "validation"):
            chosen = [q for q in bench.questions if q.gold_path and split_of(q.text, seed) == split]
            cap = None if per_benchmark is None else max(1, per_benchmark if split == "train" else per_benchmark // 5)
            chosen = select(chosen, sample=cap, seed=seed)
            for question in tqdm(chosen, desc=f"{bench.name} {split}", unit="q", file=sys.stderr, disable=not progress):
                read.add(question_key(question.text))
                counts[split] += 1
                for hop in gold_hops(backend, question, seed):
                    example = hop_example(backend, settings, vocab, hop, rng)
                    if example is not None:
                        splits[split].append(example)
    ranker = GNNRanker.untrained(seed)
    vectors = ranker.embed(vocab.texts)
    left = max(30.0, max_seconds - (time.monotonic() - started))
    params, report = fit(vectors, splits["train"], splits["validation"], seed=seed, epochs=epochs, max_seconds=left)
    total = time.monotonic() - started
    summary = TrainingReport(counts["train"], counts["validation"], len(splits["train"]), len(splits["validation"]),
                             report.epochs, report.best_epoch, round(report.validation_loss, 4), round(total, 1))
    info = ModelInfo(benchmarks=[b.name for b, _ in sources], seed=seed, trained_questions=read, stats=asdict(summary))
    return GNNRanker(params, info), summary
