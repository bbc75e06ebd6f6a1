"""Building the name index of a store: one pass over its label and alias triples into SQLite.

The index is a file inside the store directory, so `kg-mcp load` builds it in the staging copy
and the directory swap replaces store and index together. Stores made before it existed get
one on first open (or with `kg-mcp index`), written beside the store and renamed into place.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

import pyoxigraph as ox
from tqdm import tqdm

from kg_mcp.names.fold import fold_joined_many, fold_many
from kg_mcp.names.pairs import add_word_pairs

log = logging.getLogger(__name__)

INDEX_FILE = "kg-mcp-names.sqlite"
FORMAT_VERSION = 5  # an index of this version without the degree column is read as one without degrees
_BATCH = 50_000

# `names` holds one row per (folded name, entity, label-or-alias), with the entity's degree where
# the builder counted it (NULL: the backend counts it at lookup time); `words` indexes its words
# (already folded; the ascii tokenizer cuts only at ASCII punctuation and spaces, so FTS5 and
# Python agree on the words whatever Unicode version each knows), `terms` lists the distinct words (also
# spelled backwards) and `term_grams` their character trigrams: together they find the words a
# typo or two away from a typed one.
_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE names(id INTEGER PRIMARY KEY, entity TEXT NOT NULL, label TEXT NOT NULL, folded TEXT NOT NULL,
                   alias INTEGER NOT NULL, degree INTEGER, label_id INTEGER);
"""
# Each FTS5 table is merged into one segment once filled ('optimize'): a word is then looked up
# in one b-tree, not in each of the segments left by the inserts (a third of an exact name's lookup).
# A name's rowid in `words` is its length in the high bits and its id in the low ID_BITS:
# FTS5 returns matches in rowid order, so a query for a word that thousands of names
# share reads the shortest of them first and can stop after a few. `words` keeps no copy of the
# names (contentless). Rows go to FTS5 in rowid order, as it builds five times slower from rowids
# out of order.
ID_BITS = 32
_INDEXES = f"""
CREATE INDEX names_folded ON names(folded);
CREATE VIRTUAL TABLE words USING fts5(folded, content='', tokenize='ascii', detail='none');
INSERT INTO words(rowid, folded) SELECT (length(folded) << {ID_BITS}) | id, folded FROM names ORDER BY 1;
INSERT INTO words(words) VALUES('optimize');
CREATE VIRTUAL TABLE word_list USING fts5vocab(words, 'row');
CREATE TABLE terms(term TEXT PRIMARY KEY, backwards TEXT NOT NULL, docs INTEGER NOT NULL) WITHOUT ROWID;
"""
_TERM_INDEXES = """
DROP TABLE word_list;
CREATE INDEX terms_backwards ON terms(backwards);
CREATE VIRTUAL TABLE term_grams USING fts5(term, tokenize='trigram');
INSERT INTO term_grams(term) SELECT term FROM terms WHERE length(term) >= 3;
INSERT INTO term_grams(term_grams) VALUES('optimize');
"""


def index_path(store_dir: str | Path) -> Path:
    return Path(store_dir) / INDEX_FILE


def build_index(
    store: ox.Store,
    path: str | Path,
    *,
    label_predicates: Sequence[str],
    alias_predicates: Sequence[str],
    languages: Sequence[str],
    stamp: str = "",
    progress: bool = True,
) -> int:
    """Write the name index of `store` to `path` (replacing it atomically); returns the names indexed.

    Labels and aliases count in `languages` and untagged; `stamp` identifies the store's last
    load, so an index left from an older load is recognised and rebuilt.
    """
    started = time.perf_counter()
    with written_whole(Path(path)) as connection:
        count = fill_index(connection, store, label_predicates, alias_predicates, languages, stamp, progress)
    log.info("name index %s: %d names in %.1f s", path, count, time.perf_counter() - started)
    return count


@contextmanager
def written_whole(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to a new index file that replaces `path` only when the block ends without error:
    a failed or stopped build deletes its partial file and leaves the previous index as it was."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    connection = sqlite3.connect(partial)
    try:
        yield connection
    except BaseException:
        connection.close()
        partial.unlink(missing_ok=True)
        raise
    connection.close()
    os.replace(partial, path)


def fill_index(
    connection: sqlite3.Connection,
    store: ox.Store,
    label_predicates: Sequence[str],
    alias_predicates: Sequence[str],
    languages: Sequence[str],
    stamp: str = "",
    progress: bool = True,
) -> int:
    """Create the index's tables in an empty database and fill them from `store`; returns the names."""
    start_index(connection)
    count = insert_names(connection, _names(store, label_predicates, alias_predicates, set(languages) | {""}, progress))
    finish_index(connection, label_predicates, alias_predicates, languages, stamp, count)
    return count


def start_index(connection: sqlite3.Connection) -> None:
    """Create the index's tables in an empty database, for `insert_names` and then `finish_index`."""
    connection.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)


def insert_names(connection: sqlite3.Connection, names: Iterable[tuple[str, str, int]]) -> int:
    """Add (entity, name, alias) rows, folding the names in batches; returns the rows added (a name
    with punctuation inside words makes two, see `fold_joined`)."""
    count = 0
    names = iter(names)
    while batch := list(islice(names, _BATCH)):
        count += len(insert_batch(connection, batch))
    return count


def insert_batch(connection: sqlite3.Connection, batch: list[tuple[str, str, int]]) -> list[int]:
    """Add one batch of (entity, name, alias) rows; returns, for each row added (in id order), the
    position in `batch` of the name it came from."""
    rows, sources = _folded(batch)
    connection.executemany("INSERT INTO names(entity, label, folded, alias) VALUES (?, ?, ?, ?)", rows)
    return sources


def _folded(batch: list[tuple[str, str, int]]) -> tuple[list[tuple[str, str, str, int]], list[int]]:
    # A name repeated (in several languages) makes repeated rows: lookups keep one hit per entity.
    texts = [text for _, text, _ in batch]
    rows, sources = [], []
    for i, ((entity, text, alias), folded, joined) in enumerate(zip(batch, fold_many(texts), fold_joined_many(texts))):
        if folded:
            rows.append((entity, text, folded, alias))
            sources.append(i)
        if joined and joined != folded:
            rows.append((entity, text, joined, alias))
            sources.append(i)
    return rows, sources


def finish_index(
    connection: sqlite3.Connection,
    label_predicates: Sequence[str],
    alias_predicates: Sequence[str],
    languages: Sequence[str],
    stamp: str,
    count: int,
    extra: dict | None = None,
) -> None:
    """Build the word indexes over the names inserted, record the settings (and `extra`), and commit."""
    connection.executescript(_INDEXES)
    # Each word also spelled backwards, so that words ending alike are a range of an index too.
    terms = connection.execute("SELECT term, doc FROM word_list")
    while batch := terms.fetchmany(_BATCH):
        connection.executemany("INSERT INTO terms VALUES (?, ?, ?)", [(t, t[::-1], n) for t, n in batch])
    connection.executescript(_TERM_INDEXES)
    add_word_pairs(connection)
    meta = {
        "version": FORMAT_VERSION,
        "languages": list(languages),
        "label_predicates": list(label_predicates),
        "alias_predicates": list(alias_predicates),
        "stamp": stamp,
        "names": count,
        **(extra or {}),
    }
    connection.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
    connection.commit()


def set_degrees(connection: sqlite3.Connection, degrees: Iterable[tuple[str, int]]) -> None:
    """Record each entity's degree on its names, so that lookups rank without asking the KG."""
    connection.execute("CREATE TEMP TABLE degrees(entity TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
    degrees = iter(degrees)
    while batch := list(islice(degrees, _BATCH)):
        connection.executemany("INSERT OR REPLACE INTO degrees VALUES (?, ?)", batch)
    connection.execute("UPDATE names SET degree = (SELECT n FROM degrees WHERE degrees.entity = names.entity)")
    connection.execute("DROP TABLE temp.degrees")


def read_index_meta(path: str | Path) -> dict | None:
    """The recorded settings of an index, or None if there is no readable index at `path`."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return {k: json.loads(v) for k, v in connection.execute("SELECT key, value FROM meta")}
        finally:
            connection.close()
    except sqlite3.DatabaseError:
        return None


def _names(
    store: ox.Store, labels: Sequence[str], aliases: Sequence[str], languages: set[str], progress: bool
) -> Iterator[tuple[str, str, int]]:
    predicates = [(p, 0) for p in labels] + [(p, 1) for p in aliases if p not in labels]
    wanted = ", ".join(f'"{lang}"' for lang in sorted(languages))
    with tqdm(desc="name index", unit="names", unit_scale=True, file=sys.stderr, disable=None if progress else True) as bar:
        for predicate, alias in predicates:
            # The store filters languages: a Wikidata item has labels in hundreds of them.
            solutions = store.query(
                f"SELECT ?s ?o WHERE {{ ?s <{ox.NamedNode(predicate).value}> ?o . "
                f"FILTER(isIRI(?s) && isLiteral(?o) && LANG(?o) IN ({wanted})) }}"
            )
            read = 0
            for subject, literal in solutions:
                read += 1
                if read % 10_000 == 0:
                    bar.update(10_000)
                yield subject.value, literal.value, alias
            bar.update(read % 10_000)
