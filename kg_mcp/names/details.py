"""What a lookup's hits show besides the name that matched, kept in the name index of a store loaded
from N-Triples: each name's entity degree and best label, so that a lookup reads nothing from the
store (on a large store each such read mostly waits for the disk).

While `kg-mcp load` reads the file (kg_mcp.names.scan), every line's nodes are counted
(kg_mcp.names.text_degrees), and every label, alias and description line is noted by node,
predicate and language. Once the store's profile is known, each row of `names` gets:

- `degree`: its entity's visible edges, each direction up to the cap, as the store would count
  them: the lines along the profile's hidden predicates are taken off. Only where every hidden
  predicate is a label, alias or description predicate, so that the scan saw all of them
  (Freebase, generic RDF); Wikidata and DBpedia hide other predicates too, and their names keep
  no degree (the backend counts the candidates' edges, as before).
- `label_id`: the id of the row holding its entity's best label (preferred language first, then
  the profile's order of label predicates; the label the store shows), or NULL when the entity
  has no label in the preferred languages or untagged (the backend reads it).

The index also records whether the file had any description line for the profile: without one,
a hit's description is known to be none without asking.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Sequence

import numpy as np

from kg_mcp.names.text_degrees import EdgeCounter, values_at
from kg_mcp.profiles import Profile

_OTHER_LANGUAGE = 127  # the language rank of a line in none of the preferred languages


class TextDetails:
    """Gathers, line by line, what `apply` turns into each name row's degree and label row."""

    def __init__(self, predicates: Sequence[str], languages: Sequence[str]):
        self.predicates = list(predicates)  # a line's predicate is noted as its position here
        self.edges = EdgeCounter()
        self._language_rank = {lang: i for i, lang in enumerate(languages)}
        self._language_rank.setdefault("", len(languages))
        # 8 bytes a line or row (arrays, not lists of Python ints: 21 million names at 100M triples)
        self._line_keys = [array("q") for _ in self.predicates]  # per predicate, any language
        self._row_keys = array("q")  # per row of `names`, in id order
        self._row_language = bytearray()
        self._row_predicate = bytearray()

    def language_rank(self, language: str) -> int:
        return self._language_rank.get(language, _OTHER_LANGUAGE)

    def line(self, key: int, predicate: int) -> None:
        self._line_keys[predicate].append(key)

    def rows(self, keys: Sequence[int], languages: Sequence[int], predicates: Sequence[int]) -> None:
        """The rows just inserted into `names`, in id order."""
        self._row_keys.extend(keys)
        self._row_language.extend(languages)
        self._row_predicate.extend(predicates)

    def described(self, profile: Profile) -> bool:
        """Whether the file has a description line of `profile` (in any language)."""
        return any(self._line_keys[self.predicates.index(p)] for p in profile.description_predicates if p in self.predicates)

    def degrees_counted(self, profile: Profile) -> bool:
        """Whether every predicate `profile` hides had its lines noted: its names, descriptions and
        other string-valued ones (then the degrees are the store's; DBpedia and Wikidata hide more)."""
        return not profile.unhide_for_subjects_in and not profile.hidden_namespaces and set(
            profile.hidden_predicates
        ) <= set(self.predicates)

    def apply(self, connection: sqlite3.Connection, profile: Profile, cap: int) -> dict:
        """Set every name row's degree and label row for `profile`; returns what the index meta records."""
        keys = np.frombuffer(self._row_keys, np.int64)
        ids = np.arange(1, len(keys) + 1, dtype=np.int64)  # rows were inserted in this order, from id 1
        order = np.argsort(keys)  # every lookup of the rows' keys below goes in this order (values_at)
        degrees = None
        if self.degrees_counted(profile):
            hidden = [i for i, p in enumerate(self.predicates) if profile.is_hidden(p)]
            lines = np.concatenate([np.frombuffer(self._line_keys[i], np.int64) for i in hidden] or [np.empty(0, np.int64)])
            hidden_keys, hidden_counts = np.unique(lines, return_counts=True)
            hidden_out = values_at(hidden_keys, hidden_counts, keys, order)
            degrees = array("q", self.edges.degrees(keys, hidden_out, cap, order).astype(np.int64).tobytes())
        label_ids = array("q", self._label_rows(keys, ids, profile, order).tobytes())
        connection.create_function("kg_degree", 1, (lambda i: degrees[i - 1]) if degrees else (lambda i: None))
        connection.create_function("kg_label_row", 1, lambda i: label_ids[i - 1] or None)
        connection.execute("UPDATE names SET degree = kg_degree(id), label_id = kg_label_row(id)")
        return {
            "degrees": "text" if degrees else None,
            "degree_cap": cap if degrees else None,
            "labels": "text",
            "descriptions": "store" if self.described(profile) else "none",
        }

    def _label_rows(self, keys: np.ndarray, ids: np.ndarray, profile: Profile, by_key: np.ndarray) -> np.ndarray:
        """For each row, the id of its entity's best label row (0: none indexed); `by_key`: the keys' argsort."""
        order = np.full(256, 255, np.int64)  # a predicate's place among the profile's label predicates
        for place, predicate in enumerate(profile.label_predicates):
            if predicate in self.predicates:
                order[self.predicates.index(predicate)] = place
        predicate = np.frombuffer(bytes(self._row_predicate), np.uint8).astype(np.int64)
        language = np.frombuffer(bytes(self._row_language), np.uint8).astype(np.int64)
        rank = language * 256 + order[predicate]
        labels = np.flatnonzero(order[predicate] < 255)  # rows of a label (not alias) predicate
        best = labels[np.lexsort((ids[labels], rank[labels], keys[labels]))]  # per key, best first
        first = np.ones(len(best), bool)
        first[1:] = keys[best][1:] != keys[best][:-1]
        best_keys, best_ids = keys[best][first], ids[best][first]
        return values_at(best_keys, best_ids, keys, by_key).astype(np.int64)
