"""Hostile `kg-mcp load` inputs: each load succeeds with exactly its content, or fails with a
LoadError naming the file and the right line, and leaves the previous store as it was.

Three layers, cheapest first:

- the line readers (text triples, N-Triples) over generated files, 5,000 cases each: quads or a
  LoadError at the first line that is bad on its own (an independent oracle: the line parsed
  alone), and names round-trip exactly into labels and literals;
- whole loads with load_sources into a store that already holds data, 100 cases per format
  (a load costs about 70 ms: copy, load, swap): on success the new triples are there and the old
  ones too; on failure, the error is the oracle's, the store's quads and metadata are unchanged
  and nothing is left beside it;
- a bad line at the end of a big file (300,000 good lines), N-Triples (pyoxigraph's native bulk
  loader) and plain-text triples: the error names the file and line 300,001, and the previous
  store is intact and usable.

Hypothesis draws one seed per case; the content is built from it (see test_fuzz_tools.py: the
same reason, generation cost).
"""

from __future__ import annotations

import gc
import io
import os
import random
from collections import Counter
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kg_mcp.backends import open_store
from kg_mcp.loading import LoadError, load_sources
from kg_mcp.loading.errors import BadLines
from kg_mcp.loading.rdf_files import read_rdf_lines
from kg_mcp.loading.text_triples import TextMinter, read_text_triples
from kg_mcp.namespaces import DEFAULT_BASE_IRI, ENTITY_PATH, META_GRAPH, RDFS_LABEL, RELATION_PATH
from kg_mcp.settings import Settings
from kg_mcp.tools import search

READER_CASES = int(os.environ.get("KG_FUZZ_LOAD_READER_CASES", "5000"))
LOAD_CASES = int(os.environ.get("KG_FUZZ_LOAD_CASES", "100"))
SEEDS = st.integers(0, 2**64 - 1)
pytestmark = pytest.mark.timeout(600)  # a bound on hanging


def _fuzz(cases: int):
    return settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))


LABEL = ox.NamedNode(RDFS_LABEL)
META = ox.NamedNode(META_GRAPH)
HOSTILE = [
    '"', "'", "<", ">", "{", "}", "\\", "#", ";", ".", "?s", "^^", "@en", "_:b", "%22", "%", "\\u0022", "\\n",
    "\u202e", "\u200b", "\ufeff", "\u00a0", "\u2028", "\x85", "\x00", "\x7f", "ﬁ", "Ｓ", "і", "\U0001f600", "é",
    '" } ; DROP ALL ; #', "> <http://ex.org/x> .", "|", "\t", " ", "~", ":", "http://", "Q42", "wd:Q42",
]  # fmt: skip


class Gen:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def char(self) -> str:
        r = self.r.random()
        if r < 0.5:
            return chr(self.r.randint(0x20, 0x7E))
        if r < 0.6:
            return chr(self.r.choice([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]))
        code = self.r.randint(0xA0, 0x10FFFF)
        return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)

    def name(self, one_line: bool = False) -> str:
        """A name: plain words, or hostile text around them (`one_line`: no separator, no line break)."""
        parts = [self.r.choice(["Alice", "Bob", "Catch Me If You Can", "Zundert", "x"])]
        for _ in range(self.r.randint(0, 3)):
            part = self.r.choice(HOSTILE) if self.r.random() < 0.6 else self.char()
            if not (one_line and any(c in part for c in "|\t\r\n")):
                parts.append(part)
        self.r.shuffle(parts)
        return "".join(parts)

    def text_file(self) -> tuple[bytes, list[tuple[str, str, str] | None]]:
        """Lines of a text-triples file, and for each line the fields it was made from (None: made bad)."""
        sep = self.r.choice(["|", "\t"])
        one_line = self.r.random() < 0.5  # half the files keep every name on its line, in its field
        relations = ["knows", "directed_by", "rel with space"] + ([] if one_line else ["r|x", "r\tx"])
        lines, meant = [], []
        for _ in range(self.r.randint(1, 8)):
            fields = (self.name(one_line), self.r.choice(relations), self.name(one_line))
            line = sep.join(fields)
            if self.r.random() < 0.08:  # made bad on purpose
                line = self.r.choice([fields[0], sep.join(fields[:2]), line + sep + "extra", sep.join(("", *fields[1:]))])
                meant.append(None)
            else:
                meant.append(fields)
            lines.append(line)
        data = ("\n" if self.r.random() < 0.8 else "\r\n").join(lines).encode("utf-8", "surrogatepass")
        if self.r.random() < 0.05:  # invalid UTF-8 somewhere
            at = self.r.randint(0, len(data))
            data = data[:at] + b"\xff\xfe" + data[at:]
        return data, meant

    def literal(self) -> str:
        return "".join(self.r.choice(HOSTILE) if self.r.random() < 0.5 else self.char() for _ in range(self.r.randint(0, 6)))

    def nt_file(self) -> tuple[bytes, list[ox.Triple | None]]:
        """N-Triples lines: most well escaped (the triple they must give), some raw hostile text."""
        lines, meant = [], []
        for i in range(self.r.randint(1, 8)):
            subject = ox.NamedNode(f"http://ex.org/s{self.r.randint(0, 3)}")
            predicate = ox.NamedNode("http://ex.org/p")
            value = self.literal()
            if self.r.random() < 0.5:
                obj = ox.Literal(value, language=self.r.choice([None, "en", "nl-BE"]))
            else:
                obj = ox.Literal(value, datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#string"))
            triple = ox.Triple(subject, predicate, obj)
            if self.r.random() < 0.75:
                lines.append(f"{subject} {predicate} {obj} .")  # pyoxigraph's own escaping
                meant.append(triple)
            else:  # raw: may or may not be valid N-Triples
                raw = self.r.choice(
                    [f'{subject} {predicate} "{value}" .', f"<http://ex.org/{value}> {predicate} {subject} .",
                     f"{subject} {predicate} {obj}", f"{subject} {value} {obj} .", value]
                )  # fmt: skip
                lines.append(raw)
                meant.append(None)
        return "\n".join(lines).encode("utf-8") + b"\n", meant


# --- oracles ----------------------------------------------------------------------------------


def _first_bad_nt_line(data: bytes) -> int | None:
    for number, line in enumerate(data.split(b"\n"), 1):
        try:
            list(ox.parse(input=line, format=ox.RdfFormat.N_TRIPLES))
        except SyntaxError:
            return number
    return None


def _bad_alone(data: bytes, number: int) -> bool:
    try:
        list(ox.parse(input=data.split(b"\n")[number - 1], format=ox.RdfFormat.N_TRIPLES))
    except SyntaxError:
        return True
    return False


def _check_nt_blame(error: LoadError, path: Path, data: bytes, first_bad: int | None) -> None:
    """The line named is bad on its own, and it is the first bad line or the next one: a missing
    dot is noticed on the next line, and when that line is bad too it is the one named."""
    assert error.path == path and first_bad is not None, (error, first_bad)
    assert first_bad <= error.line <= first_bad + 1 and _bad_alone(data, error.line), (error, first_bad)
    assert str(error).startswith(f"{path}:{error.line}: ")


def _read_text(data: bytes, path: Path) -> list[ox.Quad]:
    entities = TextMinter(DEFAULT_BASE_IRI + ENTITY_PATH)
    relations = TextMinter(DEFAULT_BASE_IRI + RELATION_PATH)
    return list(read_text_triples(io.BytesIO(data), path, entities, relations, BadLines(False)))


def _first_bad_text_line(data: bytes, path: Path) -> int | None:
    """The first line whose prefix of the file no longer reads (the reader decides the separator
    on the first line, so a line is judged with the lines before it)."""
    lines = data.split(b"\n")
    for number in range(1, len(lines) + 1):
        try:
            _read_text(b"\n".join(lines[:number]), path)
        except LoadError:
            return number
    return None


def _ambiguous(meant) -> bool:
    """Names holding a separator or a line break: the file reads as other fields than were meant
    (the separator is decided on the first line, as documented), so names are not compared."""
    return any(c in f for fields in meant if fields for f in fields for c in "|\t\r\n")


def _labels(quads) -> set[str]:
    return {q.object.value for q in quads if q.predicate == LABEL}


# --- the line readers -------------------------------------------------------------------------


def test_fuzz_text_triples_reader(tmp_path):
    stats = Counter()
    path = tmp_path / "kb.txt"

    @_fuzz(READER_CASES)
    @given(seed=SEEDS)
    def case(seed):
        data, meant = Gen(seed).text_file()
        note(repr(data))
        stats["cases"] += 1
        bad = _first_bad_text_line(data, path)
        try:
            quads = _read_text(data, path)
        except LoadError as error:
            assert error.path == path and error.line == bad, (error, bad)
            assert str(error).startswith(f"{path}:{bad}: ")
            stats["LoadError"] += 1
            return
        assert bad is None
        stats["loaded"] += 1
        labels = _labels(quads)
        if _ambiguous(meant):
            return
        for i, fields in enumerate(meant):
            if fields is not None:
                first = fields[0].removeprefix("\ufeff") if i == 0 else fields[0]  # a file's BOM is not a name
                assert {first, fields[2]} <= labels, (fields, labels)

    case()
    print(f"\nfuzz text reader: {dict(stats)}")
    assert stats["cases"] >= READER_CASES and stats["loaded"] > READER_CASES // 10 and stats["LoadError"] > READER_CASES // 10


def test_fuzz_ntriples_reader(tmp_path):
    stats = Counter()
    path = tmp_path / "kb.nt"

    @_fuzz(READER_CASES)
    @given(seed=SEEDS)
    def case(seed):
        data, meant = Gen(seed).nt_file()
        note(repr(data))
        stats["cases"] += 1
        bad = _first_bad_nt_line(data)
        try:
            quads = list(read_rdf_lines(io.BytesIO(data), path, ox.RdfFormat.N_TRIPLES, None, BadLines(False)))
        except LoadError as error:
            _check_nt_blame(error, path, data, bad)
            stats["LoadError"] += 1
            stats["named the line after the first bad one"] += error.line != bad
            return
        assert bad is None
        stats["loaded"] += 1
        triples = {ox.Triple(q.subject, q.predicate, q.object) for q in quads}
        assert {t for t in meant if t is not None} <= triples  # escaped values round-trip exactly

    case()
    print(f"\nfuzz N-Triples reader: {dict(stats)}")
    assert stats["cases"] >= READER_CASES and stats["loaded"] > READER_CASES // 10 and stats["LoadError"] > READER_CASES // 10


# --- whole loads ------------------------------------------------------------------------------


def _snapshot(store_dir: Path) -> tuple[set, set]:
    store = ox.Store.read_only(str(store_dir))
    try:
        data = {q for q in store if q.graph_name != META}
        meta = {q for q in store.quads_for_pattern(None, None, None, META)}
        return data, meta
    finally:
        del store


def _leftovers(store_dir: Path) -> list[str]:
    return sorted(p.name for p in store_dir.parent.iterdir() if p.name.startswith(f".{store_dir.name}.") and p.is_dir())


@pytest.fixture
def base_store(tmp_path) -> Path:
    src = tmp_path / "base.txt"
    src.write_text("Base|knows|Other\n", encoding="utf-8")
    store = tmp_path / "kb.store"
    load_sources([src], store, progress=False)
    return store


@pytest.mark.parametrize("fmt", ["txt", "nt"])
def test_fuzz_whole_loads_all_or_nothing(base_store, tmp_path, fmt):
    stats = Counter()
    src = tmp_path / f"input.{fmt}"

    @_fuzz(LOAD_CASES)
    @given(seed=SEEDS)
    def case(seed):
        g = Gen(seed)
        data, meant = g.text_file() if fmt == "txt" else g.nt_file()
        note(repr(data))
        src.write_bytes(data)
        bad = _first_bad_text_line(data, src) if fmt == "txt" else _first_bad_nt_line(data)
        before, meta_before = _snapshot(base_store)
        stats["cases"] += 1
        failed = None
        try:
            load_sources([src], base_store, progress=False)
        except LoadError as error:
            if fmt == "nt":
                _check_nt_blame(error, src, data, bad)
            else:
                assert error.path == src and error.line == bad, (error, bad)
            failed = str(error)
        if failed:
            assert _snapshot(base_store) == (before, meta_before)  # untouched, metadata included
            assert _leftovers(base_store) == []  # and nothing left beside it
            stats["LoadError"] += 1
            return
        assert bad is None, f"line {bad} is bad on its own, yet the load succeeded"
        after, meta_after = _snapshot(base_store)
        assert before <= after and meta_after != meta_before  # old triples kept, the load recorded
        if fmt == "nt":
            assert {ox.Quad(t.subject, t.predicate, t.object) for t in meant if t is not None} <= after
        elif not _ambiguous(meant):
            names = {f for fields in meant if fields for f in (fields[0], fields[2])}
            names = {n for n in names if not n.startswith("\ufeff")}  # a BOM that opens the file is not a name
            assert names <= _labels(after)
        stats["loaded"] += 1

    case()
    print(f"\nfuzz whole {fmt} loads: {dict(stats)}")
    assert stats["cases"] >= LOAD_CASES and stats["loaded"] and stats["LoadError"]


# --- a bad line at the end of a big file ---------------------------------------------------------

BIG = 300_000


@pytest.mark.parametrize("fmt", ["nt", "txt"])
def test_bad_line_at_the_end_of_a_big_file(base_store, tmp_path, fmt):
    src = tmp_path / f"big.{fmt}"
    with open(src, "w", encoding="utf-8") as f:
        if fmt == "nt":
            f.writelines(f'<http://ex.org/s{i % 5000}> <http://ex.org/p{i % 37}> "value {i}" .\n' for i in range(BIG))
            f.write('<http://ex.org/s1> <http://ex.org/p1> "an unterminated literal .\n')
        else:
            f.writelines(f"s{i % 5000}|p{i % 37}|o{i}\n" for i in range(BIG))
            f.write("s1|p1\n")
    before = _snapshot(base_store)
    with pytest.raises(LoadError) as caught:
        load_sources([src], base_store, progress=False)
    error = caught.value
    assert (error.path, error.line) == (src, BIG + 1)
    assert str(error).startswith(f"{src}:{BIG + 1}: ")
    assert _snapshot(base_store) == before and _leftovers(base_store) == []
    # Usable: served read-only, it answers as before.
    backend = open_store(base_store)
    try:
        out = search(backend, Settings(), "kg:Base")
        assert out.data.total == 1 and "Other" in out.text
    finally:
        backend.close()
    # And the next load works.
    good = tmp_path / "good.txt"
    good.write_text("Base|knows|Third\n", encoding="utf-8")
    load_sources([good], base_store, progress=False)
    assert len(_snapshot(base_store)[0]) == len(before[0]) + 2  # the triple and Third's label


def test_a_failed_load_releases_its_staging_store(base_store, tmp_path):
    # Regression: the traceback of the LoadError kept the loader's frames, and so its pyoxigraph
    # Store on the staging copy, alive until the garbage collector ran: a second load into the same
    # store in the same process then failed with OSError ("lock hold by current process").
    bad = tmp_path / "bad.nt"
    bad.write_text("<http://ex.org/a> <http://ex.org/p> oops .\n", encoding="utf-8")
    good = tmp_path / "good.txt"
    good.write_text("Base|knows|Third\n", encoding="utf-8")
    gc.collect()
    gc.disable()  # as it may be between two loads in a real process
    try:
        with pytest.raises(LoadError):
            load_sources([bad], base_store, progress=False)
        load_sources([good], base_store, progress=False)
    finally:
        gc.enable()
