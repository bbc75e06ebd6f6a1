"""The semantic fallback: names nearest in meaning by the static embedding model (off by default).

Used only when nothing matches by words or typos. The vectors of the index's names are computed
on first use and kept in memory, so it suits stores of up to a few million names.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from kg_mcp.names.index import NameIndex, NameMatch
from kg_mcp.kg_reasoner.ranking import static_encoder

log = logging.getLogger(__name__)

MAX_NAMES = 2_000_000
_BATCH = 20_000


class SemanticNames:
    def __init__(self, index: NameIndex):
        self._index = index
        self._lock = threading.Lock()
        self._entities: list[tuple[str, str]] | None = None
        self._vectors: np.ndarray | None = None
        self._encode = None

    def nearest(self, name: str, pool: int, *, min_similarity: float = 0.4) -> list[NameMatch]:
        with self._lock:
            if self._vectors is None:
                self._prepare()
        assert self._vectors is not None and self._entities is not None and self._encode is not None
        if not len(self._vectors):
            return []
        query = _unit(np.asarray(self._encode([name]), dtype=np.float32))[0]
        scores = self._vectors @ query
        best = np.argsort(-scores)[: pool * 4]
        out: dict[str, NameMatch] = {}
        for i in best:
            entity, label = self._entities[i]
            if scores[i] >= min_similarity and entity not in out:
                out[entity] = NameMatch(entity, label, "semantic")
        return list(out.values())[:pool]

    def _prepare(self) -> None:
        self._encode = static_encoder()
        self._entities = self._index.labels(MAX_NAMES)
        if len(self._entities) == MAX_NAMES:
            log.warning("semantic lookup: only the first %d names of %s are compared", MAX_NAMES, self._index.where)
        texts = [label for _, label in self._entities]
        parts = [np.asarray(self._encode(texts[i : i + _BATCH]), dtype=np.float32) for i in range(0, len(texts), _BATCH)]
        self._vectors = _unit(np.concatenate(parts)) if parts else np.zeros((0, 1), dtype=np.float32)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
