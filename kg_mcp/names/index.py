"""Looking names up in a store's name index (see `build`): exact, all words, one or two typos.

A lookup returns candidates by tier, best tier first: the whole name (a label, or an alias),
then every typed word (in any order, the last one possibly unfinished), then words within one
or two edits of the typed ones. The backend orders each tier by degree.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from rapidfuzz.distance import OSA

from kg_mcp.names.build import ID_BITS
from kg_mcp.names.fold import fold, fold_joined, fts_tokens
from kg_mcp.names.fold import words as fold_words
from kg_mcp.names.pairs import TABLE as PAIRS_TABLE
from kg_mcp.names.pairs import has_word_pairs, pair_token
from kg_mcp.names.warm import warm

log = logging.getLogger(__name__)

# The order of the tiers; a lower number ranks first.
TIERS = {"exact": 0, "folded": 1, "alias": 2, "words": 3, "fuzzy": 4, "semantic": 5}
_CANDIDATE_TERMS = 5_000  # words looked at per piece of a mistyped word
_NAME_ID = (1 << ID_BITS) - 1  # the name's id, in a rowid of `words`
_WIDER = 3  # words-tier names read per name kept
_COMPLETIONS = 32  # words an unfinished last word may begin, OR-ed (past it: FTS5's prefix query)
_CACHE_KIB = 32 * 1024  # SQLite's own cache of the index's pages, per connection: the b-trees' upper levels
_FEW_NAMES = 200  # a word list this short is read whole: single words are asked, not pairs
_FUZZY_PAIRS = 32  # spellings of two neighbouring mistyped words asked as pairs (each is a probe)


@dataclass(frozen=True)
class NameMatch:
    entity: str  # IRI
    name: str  # the label or alias that matched
    kind: str  # a key of TIERS
    edits: int = 0  # typos corrected (fuzzy matches)
    # A looser match within its tier: the last typed word only begins a word of the name (words),
    # or the name has words besides the typed ones (fuzzy).
    looser: bool = False
    # The name ends with a typed word (words tier): "Holmes" is more often Katie Holmes than Holmes
    # Herbert, as a word typed alone is mostly a surname or a title's last, key word.
    completes: bool = True
    degree: int | None = None  # recorded in the index by its builder; None: the backend counts it
    # The entity's best label, where the index knows it: the text (this name is it), or the id of the
    # row that holds it (`label_of` reads it); None: the backend reads it.
    shown: str | int | None = None

    @property
    def order(self) -> int:
        """Rank within the tier (lower first, then by degree): fewer typos, then the closer matches,
        then the names the typed words complete."""
        return self.edits * 4 + self.looser * 2 + (not self.completes)


def max_edits(word: str) -> int:
    """Typos forgiven in one typed word: none in short words, where any change makes another word.

    >>> [max_edits(w) for w in ("ab", "spiel", "spielburg")]
    [0, 1, 2]
    """
    return 0 if len(word) < 4 else 1 if len(word) < 9 else 2


class NameIndex:
    """A read-only connection to one index file (or an in-memory one, for in-memory stores)."""

    def __init__(self, connection: sqlite3.Connection, where: str):
        self._db = connection
        self._lock = threading.Lock()  # one connection, shared by the server's worker threads
        self.where = where
        self.warming: threading.Thread | None = None  # the read ahead of the file, while it runs
        # An index written before degrees (or label rows) were recorded has no such column: read as unknown.
        columns = {row[1] for row in connection.execute("PRAGMA table_info(names)")}
        self._degree = "n.degree" if "degree" in columns else "NULL"  # names are read as `names n`
        self._label_id = "n.label_id" if "label_id" in columns else "NULL"
        self._pairs = has_word_pairs(connection)
        meta = dict(connection.execute("SELECT key, value FROM meta WHERE key = 'details'").fetchall())
        # What the index keeps for hits besides names (kg_mcp.names.details): {} when nothing.
        self.details: dict = json.loads(meta["details"]) if meta.get("details") else {}

    @classmethod
    def open(cls, path: str | Path, *, read_ahead: bool = False) -> NameIndex:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        # Pages are read with a system call each, not through a mapping: a lookup reads a few dozen
        # pages scattered over the file, and a fault on a mapped page that is not cached reads the
        # disk's whole read-ahead around it (8 MB on the scale bench's machine): a lookup on an index
        # out of the page cache took 100 ms mapped against 4 ms read (10M triples), and within 10%
        # either way once cached.
        connection.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        index = cls(connection, str(path))
        if read_ahead:  # into the page cache, in the background (kg_mcp.names.warm)
            index.warming = warm(path)
        return index

    def close(self) -> None:
        self._db.close()

    def _rows(self, sql: str, args: tuple) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def lookup(self, name: str, pool: int, fill: int | None = None) -> list[NameMatch]:
        """Up to `pool` candidates per tier, tiers in order; an entity appears once, in its best tier.

        Typo matches are looked for only while fewer than `fill` (default `pool`) entities matched.
        """
        folded = fold(name)
        if not folded:
            return []
        found: dict[str, NameMatch] = {}
        for match in self._whole(name, folded, pool):
            best = found.get(match.entity)
            if best is None or TIERS[match.kind] < TIERS[best.kind]:
                found[match.entity] = match
        words = [token for word in fold_words(name) for token in fts_tokens(word)]
        if not words:
            return list(found.values())
        whole = bool(found)
        found.update((m.entity, m) for m in self._words(words, pool, set(found), fill or pool))
        # Typos are looked for only when the name is not there as typed, and too little matched its words.
        if not whole and len(found) < (fill or pool):
            found.update((m.entity, m) for m in self._fuzzy(words, pool, set(found)))
        return sorted(found.values(), key=lambda m: (TIERS[m.kind], m.order))

    def _whole(self, name: str, folded: str, pool: int) -> list[NameMatch]:
        # Best connected first where the index records degrees (else NULLs: the order of the rows).
        rows = self._rows(
            f"SELECT n.id, n.entity, n.label, n.alias, {self._degree}, {self._label_id} FROM names n WHERE n.folded = ? "
            f"ORDER BY {self._degree} DESC, n.id LIMIT ?",
            (folded, pool * 4),
        )
        return [
            NameMatch(
                entity, label, "alias" if alias else "exact" if label == name else "folded", degree=degree,
                shown=_shown(row_id, label, label_id),
            )
            for row_id, entity, label, alias, degree, label_id in rows
        ]

    def _words(self, words: list[str], pool: int, known: set[str], fill: int) -> list[NameMatch]:
        # The last word may be unfinished ("Steven Spielb"): then it is a prefix. A prefix query costs
        # several times a word query, so a last word indexed as typed is first taken whole, and
        # completed only if that leaves the list short.
        last, head = words[-1], words[:-1]
        indexed = self._indexed(set(words))
        if not set(head) <= indexed.keys():
            return []  # a word besides the last one is in no name: nothing has every word
        # More names than kept are read, so that the names ending with a typed word are found among them.
        wide = pool * _WIDER
        found: list[NameMatch] = []
        if last in indexed:
            whole = self._matching(*self._all_of(head, {last: indexed[last]}, indexed), wide, known, "words", 0, words)
            found = _completed(whole, words)
            if len(known) + len(found) >= fill:
                return found[:pool]
        if len(last) < 2:
            return found
        completions = self._completions(last)
        if completions is None:  # too many words begin so: FTS5's prefix query, on single words
            query = " AND ".join([*map(_quoted, head), _quoted(last) + "*"])
            seen = known | {m.entity for m in found}
            found += _completed(self._matching("words", query, wide, seen, "words", 0, words), words, prefix=True)
        elif completions := {c: n for c, n in completions.items() if c != last or last not in indexed}:
            seen = known | {m.entity for m in found}  # (`last` itself was asked above)
            more = self._matching(*self._all_of(head, completions, indexed), wide, seen, "words", 0, words)
            found += _completed(more, words, prefix=True)
        return sorted(found, key=lambda m: m.order)[:pool]

    def _all_of(self, head: list[str], ends: dict[str, int], names_of: dict[str, int]) -> tuple[str, str]:
        """(table, FTS5 query) for the names with every word of `head` and one of `ends`; `ends` and
        `names_of` give each word's count of names.

        FTS5 reads the lists of all the words asked, so single words are asked only while one list
        of them is short (_FEW_NAMES names): then that list bounds the work. Otherwise the pairs of
        neighbouring typed words are asked of the pair index (see `pairs`), whose lists are as
        short as the answer; an index built before it has no pairs, and asks single words anyway.
        """
        head = list(dict.fromkeys(head))
        shortest = min([*(names_of[w] for w in head), sum(ends.values())])
        if head and self._pairs and shortest > _FEW_NAMES:
            chain = [_quoted(pair_token(a, b)) for a, b in zip(head, head[1:])]
            last = " OR ".join(_quoted(pair_token(head[-1], end)) for end in ends)
            return PAIRS_TABLE, " AND ".join([*chain, f"({last})"])
        last = " OR ".join(map(_quoted, ends))
        return "words", " AND ".join([*map(_quoted, head), f"({last})"])

    def _indexed(self, words: set[str]) -> dict[str, int]:
        """Those of `words` that some name has, with the count of names that have each."""
        marks = ",".join("?" * len(words))
        return dict(self._rows(f"SELECT term, docs FROM terms WHERE term IN ({marks})", tuple(words)))

    def _completions(self, prefix: str) -> dict[str, int] | None:
        """The indexed words that `prefix` begins, with their counts of names; None past _COMPLETIONS of them.

        FTS5 answers a prefix query by merging the whole lists of every word it begins before the first
        row (most of a 2 ms lookup of an exact name on the scale bench's 10M-triple store). The same
        words OR-ed are merged row by row, so the LIMIT stops it early. Past _COMPLETIONS words (a last
        word of two or three letters) the prefix query is kept.
        """
        rows = self._rows(
            "SELECT term, docs FROM terms WHERE term >= ? AND term < ? LIMIT ?",
            (prefix, prefix + "\U0010ffff", _COMPLETIONS + 1),
        )
        return None if len(rows) > _COMPLETIONS else dict(rows)

    def _fuzzy(self, words: list[str], pool: int, known: set[str]) -> list[NameMatch]:
        groups: list[dict[str, int]] = []  # per typed word, its nearest spellings and their edits
        edits, widened = 0, False
        for word in words:
            near = self.near_words(word, short=True)
            widened |= bool(set(near) - {word})
            # The closest first, ties alphabetically (a set's order changes between processes).
            nearest = sorted(near, key=lambda w: (near[w], w))[:20]
            groups.append({w: near[w] for w in nearest} or {word: 0})
            edits += min(near.values(), default=0)
        if not widened:
            return []  # no other spelling of any word is indexed: the same query as the words tier
        edits = max(edits, 1)
        names_of = self._indexed({w for group in groups for w in group})
        shortest = min(sum(names_of.get(w, 0) for w in group) for group in groups)
        if self._pairs and len(groups) > 1 and shortest > _FEW_NAMES:  # as in `_all_of`
            # Each neighbouring two typed words as pairs of their spellings, the fewest edits first:
            # every token asked costs a probe of the index even where no name has it.
            clauses = []
            for first, second in zip(groups, groups[1:]):
                spellings = sorted((e + f, a, b) for a, e in first.items() for b, f in second.items())
                tokens = dict.fromkeys(pair_token(a, b) for _, a, b in spellings[:_FUZZY_PAIRS])
                clauses.append("(" + " OR ".join(map(_quoted, tokens)) + ")")
            return self._matching(PAIRS_TABLE, " AND ".join(clauses), pool, known, "fuzzy", edits, words)
        query = " AND ".join("(" + " OR ".join(map(_quoted, group)) + ")" for group in groups)
        return self._matching("words", query, pool, known, "fuzzy", edits, words)

    def _matching(
        self, table: str, query: str, pool: int, known: set[str], kind: str, edits: int, typed: list[str]
    ) -> list[NameMatch]:
        # The shortest names first (the fewest words besides the typed ones): the order of the
        # words' rowids, so only the names kept are read, however many share a common word. Two
        # rows per name kept, as an entity may match by its label and an alias.
        rows = self._rows(
            f"SELECT n.id, n.entity, n.label, n.folded, {self._degree}, {self._label_id} FROM "
            f"(SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid LIMIT ?) AS m "
            f"JOIN names n ON n.id = m.rowid & {_NAME_ID} ORDER BY m.rowid",
            (query, pool * 2),
        )
        out: dict[str, NameMatch] = {}
        for row_id, entity, label, folded, degree, label_id in rows:
            if entity not in known and entity not in out:
                # "War" finds War Horse before Warlock; "Parcs" finds Paris before Paris, Texas.
                if kind == "words":
                    looser = typed[-1] not in folded.split()
                else:
                    looser = folded.count(" ") + 1 > len(typed)
                out[entity] = NameMatch(entity, label, kind, edits, looser, degree=degree, shown=_shown(row_id, label, label_id))
        return list(out.values())[:pool]

    def near_words(self, word: str, *, short: bool = False) -> dict[str, int]:
        """Indexed words within `max_edits(word)` of `word` (a swap of neighbours is one edit), with their distance.

        A word with one typo keeps intact the first half of the typed word (the typo is later) or
        the rest (it is earlier), or, for a swap across the middle, both ends; with two typos one
        of three pieces is intact, the middle one found as a substring by the trigram index.
        """
        # Three-letter words ("Tie Limit") only with `short`: alone, their neighbours are too many.
        k = max_edits(word) or (1 if short and len(word) == 3 else 0)
        if k == 0:
            return {}
        lengths = (len(word) - k, len(word) + k)
        if k == 1:
            half = -(-len(word) // 2)
            candidates = self._starting(word[:half], lengths) | self._ending(word[half:], lengths)
            candidates |= self._starting(word[: half - 1], (len(word), len(word)), ending=word[half + 1 :])
        else:
            third = -(-len(word) // 3)
            candidates = self._starting(word[:third], lengths) | self._ending(word[-third:], lengths)
            candidates |= self._containing(word[third:-third], lengths)
        near = {}
        for term in candidates:
            distance = OSA.distance(word, term, score_cutoff=k)
            if distance <= k:
                near[term] = distance
        return near

    def _starting(self, prefix: str, lengths: tuple[int, int], ending: str = "") -> set[str]:
        if not prefix:
            return set()
        rows = self._rows(
            "SELECT term FROM terms WHERE term >= ? AND term < ? AND length(term) BETWEEN ? AND ? "
            "AND substr(term, length(term) - ? + 1) = ? LIMIT ?",
            (prefix, prefix + "\U0010ffff", *lengths, len(ending), ending, _CANDIDATE_TERMS),
        )
        return {t for (t,) in rows}

    def _ending(self, suffix: str, lengths: tuple[int, int]) -> set[str]:
        if not suffix:
            return set()
        backwards = suffix[::-1]
        rows = self._rows(
            "SELECT term FROM terms WHERE backwards >= ? AND backwards < ? AND length(term) BETWEEN ? AND ? LIMIT ?",
            (backwards, backwards + "\U0010ffff", *lengths, _CANDIDATE_TERMS),
        )
        return {t for (t,) in rows}

    def _containing(self, piece: str, lengths: tuple[int, int]) -> set[str]:
        if len(piece) < 3:  # the trigram index finds pieces of three letters or more
            return set()
        rows = self._rows(
            "SELECT term FROM term_grams WHERE term_grams MATCH ? AND length(term) BETWEEN ? AND ? LIMIT ?",
            (_quoted(piece), *lengths, _CANDIDATE_TERMS),
        )
        return {t for (t,) in rows}

    def label_of(self, row_ids: list[int]) -> dict[int, str]:
        """The names of rows by id: the best labels that `NameMatch.shown` points to."""
        if not row_ids:
            return {}
        marks = ",".join("?" * len(row_ids))
        return dict(self._rows(f"SELECT id, label FROM names WHERE id IN ({marks})", tuple(row_ids)))

    def labels(self, cap: int) -> list[tuple[str, str]]:
        """(entity, name) pairs, at most `cap` of them: what the semantic fallback compares with."""
        return self._rows("SELECT entity, label FROM names LIMIT ?", (cap,))


def _shown(row_id: int, label: str, label_id: int | None) -> str | int | None:
    """`NameMatch.shown` of a row: its own name when it is its entity's best label, else that row's id."""
    return None if label_id is None else label if label_id == row_id else label_id


def _completed(matches: list[NameMatch], typed: list[str], prefix: bool = False) -> list[NameMatch]:
    """`matches` marked by whether the name ends with a typed word (or, with `prefix`, with a word
    that the unfinished last one begins), those first; otherwise in the order given."""
    marked = [replace(m, completes=_ends_with(m.name, typed, prefix)) for m in matches]
    return sorted(marked, key=lambda m: m.order)


def _ends_with(name: str, typed: list[str], prefix: bool) -> bool:
    """Whether `name`'s last word is one of the `typed` words (with `prefix`, or begins with the last one).

    >>> _ends_with("Katie Holmes", ["holmes"], False), _ends_with("Holmes Herbert", ["holmes"], False)
    (True, False)
    >>> _ends_with("Steven Spielberg", ["steven", "spielb"], True), _ends_with("The Go-Getter", ["go"], False)
    (True, False)
    >>> _ends_with("Modena F.C.", ["modena", "fc"], False)
    True
    """
    for form in (fold(name), fold_joined(name)):
        tokens = fts_tokens(form.rsplit(" ", 1)[-1]) if form else []
        if tokens and (tokens[-1] in typed or prefix and tokens[-1].startswith(typed[-1])):
            return True
    return False


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'
