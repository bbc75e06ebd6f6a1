"""The word-pair index: each name's words paired, so that several typed words cost what one rare word does.

All typed words asked of the word index (`words`) make FTS5 merge the whole list of names of
every word before it knows which names have them all: on a large KG a common first name and a
common surname are lists of thousands, while the names with both are a few. Each pair of words
near each other in a name is a token of its own here ("biglia~lucas", the two words in sorted
order, so either order typed finds it), whose list holds just the names with both words: a
lookup reads those, however large the KG grows.

Pairs are made of each word and the WINDOW words after it, so every pair of words in a name of up
to WINDOW + 1 words is indexed; in a longer name two typed words further apart than that are not
found together (the words tier's single-word queries still find names by each one alone).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from kg_mcp.names.fold import fts_tokens

log = logging.getLogger(__name__)

WINDOW = 5
TABLE = "word_pairs"
_JOIN = "~"  # never inside a word: the ascii tokenizer cuts words at ASCII punctuation

# Rowids as in `words` (length, then id), so pairs are read shortest names first too.
_PAIRS = f"""
CREATE VIRTUAL TABLE {TABLE} USING fts5(pairs, content='', tokenize="ascii tokenchars '{_JOIN}'", detail='none');
INSERT INTO {TABLE}(rowid, pairs) SELECT (length(folded) << 32) | id, kg_word_pairs(folded) FROM names ORDER BY 1;
INSERT INTO {TABLE}({TABLE}) VALUES('optimize');
"""


def pair_token(a: str, b: str) -> str:
    """The token of two words, the same in either order.

    >>> pair_token("lucas", "biglia"), pair_token("biglia", "lucas")
    ('biglia~lucas', 'biglia~lucas')
    """
    return f"{a}{_JOIN}{b}" if a <= b else f"{b}{_JOIN}{a}"


def pair_text(folded: str) -> str:
    """The pair tokens of a folded name, space-separated (what the pair index holds for it).

    >>> pair_text("lucas biglia"), pair_text("paris")
    ('biglia~lucas', '')
    >>> sorted(pair_text("the lord of the rings").split())
    ['lord~of', 'lord~rings', 'lord~the', 'of~rings', 'of~the', 'rings~the', 'the~the']
    """
    # A folded ASCII name is words of letters and digits between single spaces: FTS5's own words.
    words = folded.split(" ") if folded.isascii() and folded.replace(" ", "").isalnum() else fts_tokens(folded)
    if len(words) == 2:  # most names: no generator to set up
        return pair_token(*words)
    pairs = (pair_token(a, b) for i, a in enumerate(words) for b in words[i + 1 : i + 1 + WINDOW])
    return " ".join(dict.fromkeys(pairs))


def add_word_pairs(connection: sqlite3.Connection) -> None:
    """Build the pair index over the `names` of an index database, in one transaction."""
    connection.create_function("kg_word_pairs", 1, pair_text, deterministic=True)
    connection.executescript(f"BEGIN; DROP TABLE IF EXISTS {TABLE}; {_PAIRS} COMMIT;")


def ensure_word_pairs(path: str | Path) -> None:
    """Add the pair index to an index file built before it existed (once; lookups work without it,
    only slower on a large KG). An index that cannot be written is left as it is."""
    try:
        connection = sqlite3.connect(path)
        try:
            if has_word_pairs(connection):
                return
            started = time.perf_counter()
            add_word_pairs(connection)
            log.info("name index %s: word pairs added in %.1f s", path, time.perf_counter() - started)
        finally:
            connection.close()
    except sqlite3.Error as e:
        log.warning("cannot add word pairs to the name index %s (%s): lookups of several words stay slower", path, e)


def has_word_pairs(connection: sqlite3.Connection) -> bool:
    """Whether an index has the pair index (those built before it existed do not)."""
    row = connection.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone()
    return row is not None
