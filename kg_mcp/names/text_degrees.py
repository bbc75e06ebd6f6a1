"""Each node's edges counted from N-Triples text while `kg-mcp load` reads the file anyway, so the
name index records every name's degree without reading the loaded store (reading it back costs
an hour at 100M triples: every entity's edges, in random order).

A line `<s> <p> o .` counts an edge out of `s` and, when `o` is an IRI, one into `o`. Nodes are
counted by the hash of their text as the file writes it (`<...>`, the same bytes the name scan
sees), in numpy arrays: a few bytes per edge while a chunk is read, then merged into sorted
(key, count) arrays. Keys are Python's hash of the bytes, so they mean something only in this
process; two nodes whose hashes collide (about one pair in 10^11 at 100 million nodes) share a count.
A file that repeats a line counts it twice (the store keeps it once).
"""

from __future__ import annotations

import numpy as np

_COLLAPSE_EVERY = 32_000_000  # keys gathered (256 MB) before they are collapsed to (key, count) pairs


def node_key(text: bytes) -> int:
    """The key a node is counted under: its N-Triples text, `<iri>`."""
    return hash(text)


def values_at(
    table: np.ndarray, values: np.ndarray, keys: np.ndarray, order: np.ndarray | None = None, missing: int = 0
) -> np.ndarray:
    """For each of `keys`, its value in `values` where the sorted `table` holds it, else `missing`.

    The keys are looked up in sorted order (`order`: their argsort, when the caller has it): a binary
    search per key in the keys' own random order misses the processor's caches at every step, five
    times slower over the 21 million names of a 100M-triple file than sorting them first.

    >>> values_at(np.array([2, 5, 9]), np.array([20, 50, 90]), np.array([9, 1, 2]))
    array([90,  0, 20])
    """
    if not len(table):
        return np.full(len(keys), missing, values.dtype)
    order = np.argsort(keys) if order is None else order
    ordered = keys[order]
    at = np.searchsorted(table, ordered)
    at[at == len(table)] = 0
    found = np.empty(len(keys), values.dtype)
    found[order] = np.where(table[at] == ordered, values[at], missing)
    return found


class KeyCounts:
    """Counts of int64 keys: gathered in chunks, collapsed now and then into sorted (key, count) parts
    (a key repeats a few times in each: a node's lines), and the parts merged once, when counts are
    first read. Each part is sorted once: merging into one running table at every step would sort
    it again and again (at 100M triples, 200 million keys)."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.counts = np.empty(0, np.int64)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending: list[np.ndarray] = []
        self._pending_size = 0

    def add(self, keys: np.ndarray) -> None:
        self._pending.append(keys)
        self._pending_size += len(keys)
        if self._pending_size >= _COLLAPSE_EVERY:
            self._collapse()

    def _collapse(self) -> None:
        if self._pending:
            self._parts.append(np.unique(np.concatenate(self._pending), return_counts=True))
            self._pending, self._pending_size = [], 0

    def _merge(self) -> None:
        self._collapse()
        if not self._parts:
            return
        parts = [(self.keys, self.counts), *self._parts] if len(self.keys) else self._parts
        self._parts = []
        if len(parts) == 1:
            self.keys, self.counts = parts[0][0], parts[0][1].astype(np.int64)
            return
        self.keys, inverse = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
        weights = np.concatenate([c for _, c in parts])
        self.counts = np.bincount(inverse, weights=weights, minlength=len(self.keys)).astype(np.int64)

    def of(self, keys: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
        """The count of each of `keys` (0 for a key never added); `order`: their argsort, if known."""
        self._merge()
        return values_at(self.keys, self.counts, keys, order)


class EdgeCounter:
    """Out- and in-edges of every node of the N-Triples chunks fed (whole lines)."""

    def __init__(self) -> None:
        self.outgoing = KeyCounts()
        self.incoming = KeyCounts()

    def feed(self, lines: list[bytes]) -> None:
        # A subject is the line up to its first '>' (an IRI; a blank node gives a key no name has);
        # an IRI object ends the line as "<...> ." (a typed literal's datatype looks the same: counted
        # into a datatype, which no name is).
        subjects = [line[: line.find(b">") + 1] for line in lines]
        self.outgoing.add(np.fromiter(map(hash, subjects), np.int64, len(subjects)))
        objects = [line[line.rfind(b"<") : -2] for line in lines if line.endswith(b"> .")]
        self.incoming.add(np.fromiter(map(hash, objects), np.int64, len(objects)))

    def degrees(self, keys: np.ndarray, hidden_out: np.ndarray, cap: int, order: np.ndarray | None = None) -> np.ndarray:
        """Each key's visible edges, each direction up to `cap` (as `_queries.degree` counts them),
        `hidden_out` being its outgoing edges along hidden predicates; `order`: the keys' argsort, if known."""
        out = np.maximum(self.outgoing.of(keys, order) - hidden_out, 0)
        return np.minimum(out, cap) + np.minimum(self.incoming.of(keys, order), cap)
