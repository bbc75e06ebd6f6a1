"""KG-Reasoner's graph-attention entity ranker (paper, section 4.2.2), in numpy.

Every text (the question, relation and entity labels) is embedded with the static embedding model
of the `kgr-embed` extra (64 dimensions, loads offline). A candidate reached from the explored
entity over edge `l` has neighbours `n_1..n_m` (relation, entity) of its own. With `q` the
question's vector and `f(x) = [relation; entity; backwards]` an edge's features:

    alpha_j = softmax_j( (q A) . f(n_j) )                 attention, the question as the query
    z       = tanh( W_l f(l) + W_n sum_j alpha_j f(n_j) + b )
    score   = z . (P q)

`A`, `W_l`, `W_n`, `b` and `P` are learned (`kg_mcp.kg_reasoner.gnn_training`); a model file (.npz) holds
them with what it was trained on, so that a measurement can refuse questions it saw.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kg_mcp.errors import ConfigError
from kg_mcp.kg_reasoner.ranking import Link, RankItem, static_encoder

DIM = 64  # the static model's vector size
FEATURES = 2 * DIM + 1  # relation, entity, backwards
HIDDEN = 64
CONTEXT = 8  # neighbours read per candidate and direction
DEFAULT_MODEL = Path(__file__).parents[1] / "data" / "gnn-ranker.npz"
_PARAMS = ("A", "Wl", "Wn", "b", "P")


def question_key(question: str) -> str:
    """A short fingerprint of a question's text: how a model file lists what it was trained on.

    >>> question_key("what films did [Tom Hanks] star in")
    '8516b3f2b7856091'
    """
    return hashlib.sha256(" ".join(question.lower().split()).encode()).hexdigest()[:16]


@dataclass
class Params:
    A: np.ndarray  # (DIM, FEATURES): question -> attention query over neighbour features
    Wl: np.ndarray  # (HIDDEN, FEATURES): the linking edge
    Wn: np.ndarray  # (HIDDEN, FEATURES): the attended neighbours
    b: np.ndarray  # (HIDDEN,)
    P: np.ndarray  # (HIDDEN, DIM): question -> scoring direction

    @classmethod
    def initial(cls, seed: int = 0) -> Params:
        """Small random weights: an untrained ranker."""
        rng = np.random.default_rng(seed)
        return cls(
            A=rng.normal(0, 0.1, (DIM, FEATURES)),
            Wl=rng.normal(0, 1 / np.sqrt(FEATURES), (HIDDEN, FEATURES)),
            Wn=rng.normal(0, 1 / np.sqrt(FEATURES), (HIDDEN, FEATURES)),
            b=np.zeros(HIDDEN),
            P=rng.normal(0, 1 / np.sqrt(DIM), (HIDDEN, DIM)),
        )

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in _PARAMS}


@dataclass
class Batch:
    """Hops padded to the same number of candidates and neighbours (masks say what is real)."""

    q: np.ndarray  # (B, DIM)
    link: np.ndarray  # (B, N, FEATURES)
    context: np.ndarray  # (B, N, M, FEATURES)
    context_mask: np.ndarray  # (B, N, M) bool
    mask: np.ndarray  # (B, N) bool: a real candidate
    positive: np.ndarray | None = None  # (B, N) bool: a gold next-hop candidate


@dataclass
class _Forward:
    alpha: np.ndarray
    agg: np.ndarray
    z: np.ndarray
    p: np.ndarray
    scores: np.ndarray


def forward(params: Params, batch: Batch) -> _Forward:
    query = batch.q @ params.A  # (B, F)
    energy = np.einsum("bnmf,bf->bnm", batch.context, query)
    energy = np.where(batch.context_mask, energy, -np.inf)
    top = energy.max(axis=2, keepdims=True)
    weights = np.where(batch.context_mask, np.exp(energy - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = weights.sum(axis=2, keepdims=True)
    alpha = weights / np.where(total > 0, total, 1.0)  # no neighbours: all zero, nothing aggregated
    agg = np.einsum("bnm,bnmf->bnf", alpha, batch.context)
    z = np.tanh(batch.link @ params.Wl.T + agg @ params.Wn.T + params.b)
    p = batch.q @ params.P.T  # (B, H)
    scores = np.einsum("bnh,bh->bn", z, p)
    return _Forward(alpha, agg, z, p, scores)


def loss_and_grads(params: Params, batch: Batch) -> tuple[float, Params]:
    """Listwise loss of a batch of hops: -log of the probability mass the softmax over a hop's
    candidates puts on its gold ones; and its gradient (back-propagated by hand)."""
    assert batch.positive is not None
    out = forward(params, batch)
    s = np.where(batch.mask, out.scores, -np.inf)
    all_lse = _logsumexp(s)
    pos_lse = _logsumexp(np.where(batch.positive & batch.mask, s, -np.inf))
    n = len(s)
    loss = float(np.mean(all_lse - pos_lse))
    d_s = (_softmax(s, all_lse) - _softmax(np.where(batch.positive, s, -np.inf), pos_lse)) / n
    d_z = d_s[..., None] * out.p[:, None, :]
    d_p = np.einsum("bn,bnh->bh", d_s, out.z)
    d_u = d_z * (1 - out.z**2)
    d_agg = d_u @ params.Wn
    d_alpha = np.einsum("bnf,bnmf->bnm", d_agg, batch.context)
    d_energy = out.alpha * (d_alpha - (out.alpha * d_alpha).sum(axis=2, keepdims=True))
    d_query = np.einsum("bnm,bnmf->bf", d_energy, batch.context)
    grads = Params(
        A=batch.q.T @ d_query,
        Wl=np.einsum("bnh,bnf->hf", d_u, batch.link),
        Wn=np.einsum("bnh,bnf->hf", d_u, out.agg),
        b=d_u.sum(axis=(0, 1)),
        P=d_p.T @ batch.q,
    )
    return loss, grads


def _logsumexp(s: np.ndarray) -> np.ndarray:
    top = s.max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return (top + np.log(np.exp(s - top).sum(axis=1, keepdims=True)))[:, 0]


def _softmax(s: np.ndarray, lse: np.ndarray) -> np.ndarray:
    return np.exp(s - lse[:, None])


# --- texts to features --------------------------------------------------------------------------


class Embeddings:
    """Unit vectors of texts from an encoder, cached (labels recur from one search to the next)."""

    def __init__(self, encode: Callable[[Sequence[str]], Sequence[Sequence[float]]], max_cached: int = 200_000):
        self.encode = encode
        self.max_cached = max_cached
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if todo:
                if len(self._cache) + len(todo) > self.max_cached:
                    self._cache.clear()
                vectors = np.asarray(self.encode(todo), dtype=np.float64).reshape(len(todo), DIM)
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                vectors = vectors / np.where(norms > 0, norms, 1.0)
                self._cache.update(zip(todo, vectors))
            return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, DIM))


def _readable(label: str) -> str:
    return label.replace("_", " ")


class Vocabulary:
    """Texts numbered in order of first use, so that each is embedded once per batch of hops."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        text = _readable(text)
        if text not in self._index:
            self._index[text] = len(self.texts)
            self.texts.append(text)
        return self._index[text]


@dataclass
class Hop:
    """One hop as text numbers: the question, each candidate's edge (relation, entity, backwards)
    and its neighbours' (-1 rows: none), and which candidates are gold (when training)."""

    question: int
    link: np.ndarray  # (N, 3) int
    context: np.ndarray  # (N, M, 3) int
    positive: np.ndarray | None = None  # (N,) bool


def index_hop(vocab: Vocabulary, question: str, items: Sequence[RankItem], context_size: int,
              positive: Sequence[bool] | None = None) -> Hop:
    m = max(1, 2 * context_size)
    link = np.array([[vocab(it.link.relation), vocab(it.link.entity), it.link.backwards] for it in items], dtype=np.int32)
    context = np.full((len(items), m, 3), -1, dtype=np.int32)
    for i, it in enumerate(items):
        for j, c in enumerate(it.context[:m]):
            context[i, j] = (vocab(c.relation), vocab(c.entity), c.backwards)
    return Hop(vocab(question), link.reshape(len(items), 3), context,
               None if positive is None else np.asarray(positive, dtype=bool))


def gather(vectors: np.ndarray, hops: Sequence[Hop]) -> Batch:
    """Hops padded into one batch, features looked up in `vectors` (one unit vector per text)."""
    table = np.concatenate([vectors, np.zeros((1, DIM))])  # row -1: padding
    n = max(len(h.link) for h in hops)
    m = hops[0].context.shape[1]
    link = np.full((len(hops), n, 3), -1, dtype=np.int32)
    context = np.full((len(hops), n, m, 3), -1, dtype=np.int32)
    mask = np.zeros((len(hops), n), dtype=bool)
    positive = np.zeros((len(hops), n), dtype=bool)
    for i, h in enumerate(hops):
        link[i, : len(h.link)] = h.link
        context[i, : len(h.link)] = h.context
        mask[i, : len(h.link)] = True
        if h.positive is not None:
            positive[i, : len(h.link)] = h.positive
    context_mask = context[..., 0] >= 0

    def features(ix: np.ndarray) -> np.ndarray:
        return np.concatenate([table[ix[..., 0]], table[ix[..., 1]], np.maximum(ix[..., 2:3], 0)], axis=-1)

    return Batch(
        q=table[[h.question for h in hops]],
        link=features(link) * mask[..., None],
        context=features(context) * context_mask[..., None],
        context_mask=context_mask,
        mask=mask,
        positive=positive,
    )


# --- the ranker -----------------------------------------------------------------------------------


@dataclass
class ModelInfo:
    """What a model was trained on: benchmarks, sizes, and the fingerprints of its questions."""

    benchmarks: list[str] = field(default_factory=list)
    seed: int = 0
    trained_questions: set[str] = field(default_factory=set)  # question_key of every question read
    stats: dict = field(default_factory=dict)


class GNNRanker:
    """The graph-attention ranker: a `GraphRanker` (see kg_mcp.kg_reasoner.ranking)."""

    name = "gnn"
    context_size = CONTEXT

    def __init__(self, params: Params, info: ModelInfo | None = None, embed: Embeddings | None = None):
        self.params = params
        self.info = info or ModelInfo()
        self._embed = embed
        self._lock = threading.Lock()

    @classmethod
    def untrained(cls, seed: int = 0) -> GNNRanker:
        return cls(Params.initial(seed))

    @property
    def embed(self) -> Embeddings:
        with self._lock:
            if self._embed is None:
                self._embed = Embeddings(static_encoder())
            return self._embed

    def score_items(self, question: str, items: Sequence[RankItem]) -> list[float]:
        if not items:
            return []
        vocab = Vocabulary()
        hop = index_hop(vocab, question, items, self.context_size)
        return forward(self.params, gather(self.embed(vocab.texts), [hop])).scores[0].tolist()

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """Texts alone (relation labels, when a large neighbourhood is read relation by relation)."""
        return self.score_items(question, [RankItem(Link(t, False, "")) for t in texts])

    def saw(self, question: str) -> bool:
        """Whether this model was trained (or validated) on the question."""
        return question_key(question) in self.info.trained_questions

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"benchmarks": self.info.benchmarks, "seed": self.info.seed, "stats": self.info.stats}
        keys = np.array(sorted(self.info.trained_questions), dtype="S16")
        with path.open("wb") as f:  # an explicit handle: np.savez would append .npz to other names
            np.savez_compressed(f, **{k: v.astype(np.float32) for k, v in self.params.arrays().items()},
                                trained_questions=keys, meta=np.array(json.dumps(meta)))


def load_ranker(path: str | Path | None = None) -> GNNRanker:
    """A trained ranker from a model file (default: the one shipped in the package)."""
    path = Path(path) if path else DEFAULT_MODEL
    try:
        with np.load(path, allow_pickle=False) as data:
            params = Params(**{k: data[k].astype(np.float64) for k in _PARAMS})
            meta = json.loads(str(data["meta"]))
            keys = {k.decode() for k in data["trained_questions"]}
    except FileNotFoundError:
        raise ConfigError(f"no ranker model at {path}: train one with `kg-mcp train-ranker --out {path}`") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path} is not a ranker model made by `kg-mcp train-ranker` ({type(e).__name__})") from None
    if params.A.shape != (DIM, FEATURES) or params.P.shape != (HIDDEN, DIM):
        raise ConfigError(f"{path} was made for another model shape: train it again with `kg-mcp train-ranker`")
    info = ModelInfo(benchmarks=meta.get("benchmarks", []), seed=meta.get("seed", 0), trained_questions=keys,
                     stats=meta.get("stats", {}))
    return GNNRanker(params, info)
