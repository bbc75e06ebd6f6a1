"""A Freebase-shaped synthetic KG, streamed as N-Triples: seeded, fast enough for 100M triples.

What it imitates: machine ids (`m.0` and six base-32 characters) in the Freebase namespace, names
through `type.object.name` (@en), dotted relation ids that carry their own names, unnamed
mediator (CVT) nodes between entities (film.film.starring -> performance -> actor), literals
(dates, years, aliases), and power-law degrees: a few hubs with millions of in-edges at 100M
(type nodes, countries, professions), a long tail of entities with a handful of edges.

Edge lines are built as numpy byte matrices (a template row with the ids written into fixed
columns), so the cost per line is a memcpy; only variable-length names are formatted in Python.

    python -m bench.freebase_shape 1000000 .bench/freebase-1M.nt
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NS = "http://rdf.freebase.com/ns/"
NAME = "type.object.name"
TYPE = "type.object.type"
ALIAS = "common.topic.alias"
XSD = "http://www.w3.org/2001/XMLSchema#"
_ALPHABET = np.frombuffer(b"0123456789bcdfghjklmnpqrstvwxyz_", dtype=np.uint8)
_CHUNK = 1 << 20

# Hubs with real names; their mids are fixed so the bench can look them up.
COUNTRIES = (
    "United States of America", "United Kingdom", "India", "Canada", "Germany", "France", "Japan", "Australia",
    "Italy", "Spain", "Brazil", "Mexico", "China", "Russia", "Sweden", "Netherlands", "Ireland", "Poland",
    "Argentina", "South Korea",
)  # fmt: skip
PROFESSIONS = (
    "Actor", "Writer", "Musician", "Politician", "Film director", "Singer", "Football player", "Journalist",
    "Painter", "Film producer", "Screenwriter", "Lawyer", "Physician", "Engineer", "Teacher", "Composer",
)  # fmt: skip
# Entity kinds: (type id, type name, share of named entities).
KINDS = (
    ("people.person", "Person", 0.40),
    ("film.film", "Film", 0.15),
    ("location.location", "Location", 0.15),
    ("organization.organization", "Organization", 0.15),
    ("book.written_work", "Written work", 0.15),
)
RELATION_NAMES = {
    NAME: "Name",
    TYPE: "Type",
    ALIAS: "Also known as",
    "people.person.place_of_birth": "Place of birth",
    "people.person.nationality": "Country of nationality",
    "people.person.profession": "Profession",
    "people.person.date_of_birth": "Date of birth",
    "people.person.spouse_s": "Spouse (or domestic partner)",
    "people.marriage.spouse": "Spouse",
    "people.marriage.from": "From",
    "film.film.directed_by": "Directed by",
    "film.film.country": "Country of origin",
    "film.film.starring": "Performances",
    "film.performance.actor": "Actor",
    "film.performance.character_note": "Character note",
    "location.location.containedby": "Contained by",
    "organization.organization.headquarters": "Headquarters",
    "organization.organization.founders": "Founders",
    "book.written_work.author": "Author",
    "book.written_work.subjects": "Subjects",
}
_FIRST = "Al Be Ca Da El Fa Ga Ha Io Ja Ka La Ma Na Ol Pa Ra Sa Ta Ul Va Wi Xa Yo Za".split()  # noqa: SIM905
_MID = "ber da fin go hel ka lor mi nus ra sen to vik wen zo".split()  # noqa: SIM905
_END = "a an as el en er ia in is o on or us y".split()  # noqa: SIM905


def mid_bytes(ids: np.ndarray) -> np.ndarray:
    """The six base-32 characters after `m.0` of each id, as an (n, 6) byte matrix.

    Ids are scrambled by an odd multiplier (a bijection modulo 2^30), so neighbours in the
    generator's numbering do not look like neighbours in the file.
    """
    scrambled = (ids.astype(np.uint64) * np.uint64(0x2545F491) + np.uint64(0x1234567)) & np.uint64(
        (1 << 30) - 1
    )
    shifts = np.arange(25, -1, -5, dtype=np.uint64)
    return _ALPHABET[((scrambled[:, None] >> shifts) & np.uint64(31)).astype(np.intp)]


def mid(i: int) -> str:
    """The Freebase-style id of entity number `i`, e.g. `m.0k3x9bq`."""
    return "m.0" + mid_bytes(np.array([i])).tobytes().decode()


def entity_name(i: int) -> str:
    """A person-like name, unique for most ids (the number tail keeps duplicates rare but present)."""
    a, b, c = i % 25, (i // 25) % 15, (i // 375) % 14
    d, e, f = (i // 5250) % 25, (i // 131250) % 15, (i // 1968750) % 14
    return f"{_FIRST[a]}{_MID[b]}{_END[c]} {_FIRST[d]}{_MID[e]}{_END[f]}"


@dataclass(frozen=True)
class Layout:
    """How many of each thing a file of `triples` lines holds; entity numbers by kind."""

    triples: int

    @property
    def entities(self) -> int:
        # Lines per named entity: name 1, type 1, alias .2, date .16, edges ~1.8, mediator edges ~1.4.
        return max(200, int(self.triples / 5.6))

    def kind_range(self, kind: int) -> tuple[int, int]:
        """[start, end) of entity numbers of KINDS[kind]; numbers below len(COUNTRIES) + len(PROFESSIONS) are hubs."""
        start = len(COUNTRIES) + len(PROFESSIONS)
        for k, (_, _, share) in enumerate(KINDS):
            size = int(self.entities * share)
            if k == kind:
                return start, start + size
            start += size
        raise IndexError(kind)


def country_id(rank: int) -> int:
    return rank


def profession_id(rank: int) -> int:
    return len(COUNTRIES) + rank


class _Writer:
    def __init__(self, out, budget: int):
        self.out, self.budget, self.written = out, budget, 0

    def left(self) -> int:
        return self.budget - self.written

    def raw(self, data: bytes, lines: int) -> None:
        self.out.write(data)
        self.written += lines

    def edges(
        self,
        subjects: np.ndarray,
        predicate: str,
        objects: np.ndarray | None = None,
        *,
        obj: str | None = None,
    ) -> None:
        """Lines `<m.S> <predicate> <m.O> .` (or a fixed object term `obj`), as one byte matrix."""
        n = min(len(subjects), self.left())
        if n <= 0:
            return
        head = f"<{NS}m.0".encode()
        middle = f"> <{NS}{predicate}> ".encode() + (f"<{NS}m.0".encode() if obj is None else obj.encode())
        tail = b"> .\n" if obj is None else b" .\n"
        width = len(head) + 6 + len(middle) + (6 if obj is None else 0) + len(tail)
        for lo in range(0, n, _CHUNK):
            hi = min(n, lo + _CHUNK)
            rows = np.empty((hi - lo, width), dtype=np.uint8)
            rows[:] = np.frombuffer(
                head + b"XXXXXX" + middle + (b"XXXXXX" if obj is None else b"") + tail, dtype=np.uint8
            )
            at = len(head)
            rows[:, at : at + 6] = mid_bytes(subjects[lo:hi])
            if obj is None:
                at += 6 + len(middle)
                rows[:, at : at + 6] = mid_bytes(objects[lo:hi])
            self.raw(rows.tobytes(), hi - lo)

    def literal_lines(self, lines: list[str]) -> None:
        lines = lines[: max(0, self.left())]
        self.raw("".join(lines).encode(), len(lines))


def _power_law(rng: np.random.Generator, n: int, start: int, size: int, exponent: float = 3.0) -> np.ndarray:
    """`n` entity numbers in [start, start+size), skewed: number start gets the most, a long tail."""
    return start + np.minimum(size - 1, (size * rng.random(n) ** exponent).astype(np.int64))


def write_freebase(path: Path, triples: int, seed: int = 11) -> Path:
    """Write (once) an N-Triples file of exactly `triples` lines shaped like Freebase; returns `path`."""
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    layout = Layout(triples)
    rng = np.random.default_rng(seed)
    with partial.open("wb", buffering=1 << 24) as out:
        w = _Writer(out, triples)
        _schema(w)
        _named(w, layout, rng)
        _facts(w, layout, rng)
    partial.rename(path)
    return path


def _schema(w: _Writer) -> None:
    lines = [f'<{NS}{p}> <{NS}{NAME}> "{label}"@en .\n' for p, label in RELATION_NAMES.items()]
    lines += [f'<{NS}{t}> <{NS}{NAME}> "{label}"@en .\n' for t, label, _ in KINDS]
    lines += [f'<{NS}{mid(country_id(r))}> <{NS}{NAME}> "{name}"@en .\n' for r, name in enumerate(COUNTRIES)]
    lines += [
        f'<{NS}{mid(profession_id(r))}> <{NS}{NAME}> "{name}"@en .\n' for r, name in enumerate(PROFESSIONS)
    ]
    lines += [
        f"<{NS}{mid(country_id(r))}> <{NS}{TYPE}> <{NS}location.country> .\n" for r in range(len(COUNTRIES))
    ]
    w.literal_lines(lines)


def _named(w: _Writer, layout: Layout, rng: np.random.Generator) -> None:
    """Names, types and aliases of every entity; dates of birth of a share of people."""
    for kind, (type_id, _, _) in enumerate(KINDS):
        start, end = layout.kind_range(kind)
        for lo in range(start, end, _CHUNK):
            ids = np.arange(lo, min(end, lo + _CHUNK))
            mids = [m.decode() for m in mid_bytes(ids).view("S6").ravel().tolist()]
            w.literal_lines(
                [f'<{NS}m.0{m}> <{NS}{NAME}> "{entity_name(int(i))}"@en .\n' for i, m in zip(ids, mids)]
            )
            w.edges(ids, TYPE, obj=f"<{NS}{type_id}>")
            _aliases(w, ids[rng.random(len(ids)) < 0.2])
            if type_id == "people.person":
                born = ids[rng.random(len(ids)) < 0.4]
                _dated(w, born, "people.person.date_of_birth", 1900 + born % 110, f'-01-01"^^<{XSD}date>')


def _aliases(w: _Writer, ids: np.ndarray) -> None:
    mids = [m.decode() for m in mid_bytes(ids).view("S6").ravel().tolist()]
    w.literal_lines(
        [f'<{NS}m.0{m}> <{NS}{ALIAS}> "{entity_name(int(i) * 7 + 3)}"@en .\n' for i, m in zip(ids, mids)]
    )


def _facts(w: _Writer, layout: Layout, rng: np.random.Generator) -> None:
    """Entity-to-entity edges and mediators, in rounds until the line budget is spent."""
    people, films, places, orgs, books = (layout.kind_range(k) for k in range(len(KINDS)))
    mediator = layout.kind_range(len(KINDS) - 1)[1]  # mediator numbers follow the named entities
    while w.left() > 0:
        for lo in range(people[0], people[1], _CHUNK):
            ids = np.arange(lo, min(people[1], lo + _CHUNK))
            n = len(ids)
            w.edges(ids, "people.person.nationality", np.minimum(len(COUNTRIES) - 1, rng.zipf(1.6, n) - 1))
            w.edges(ids, "people.person.place_of_birth", _power_law(rng, n, *_span(places)))
            some = ids[rng.random(n) < 0.5]
            w.edges(
                some,
                "people.person.profession",
                profession_id(np.minimum(len(PROFESSIONS) - 1, rng.zipf(1.8, len(some)) - 1)),
            )
            married = ids[rng.random(n) < 0.2]
            cvt = np.arange(mediator, mediator + len(married))
            mediator += len(married)
            w.edges(married, "people.person.spouse_s", cvt)
            w.edges(cvt, "people.marriage.spouse", _power_law(rng, len(cvt), *_span(people), exponent=1.0))
            _dated(w, cvt, "people.marriage.from", 1900 + cvt % 120, f'"^^<{XSD}gYear>')
        for lo in range(films[0], films[1], _CHUNK):
            ids = np.arange(lo, min(films[1], lo + _CHUNK))
            n = len(ids)
            w.edges(ids, "film.film.directed_by", _power_law(rng, n, *_span(people)))
            w.edges(ids, "film.film.country", np.minimum(len(COUNTRIES) - 1, rng.zipf(1.4, n) - 1))
            for _ in range(3):  # three performances per film, each a mediator node
                cvt = np.arange(mediator, mediator + n)
                mediator += n
                w.edges(ids, "film.film.starring", cvt)
                w.edges(cvt, "film.performance.actor", _power_law(rng, n, *_span(people)))
        for lo in range(places[0], places[1], _CHUNK):
            ids = np.arange(lo, min(places[1], lo + _CHUNK))
            inside = ids[rng.random(len(ids)) < 0.5]
            w.edges(
                inside,
                "location.location.containedby",
                _power_law(rng, len(inside), *_span(places), exponent=4.0),
            )
            rest = np.setdiff1d(ids, inside)
            w.edges(
                rest,
                "location.location.containedby",
                np.minimum(len(COUNTRIES) - 1, rng.zipf(1.5, len(rest)) - 1),
            )
        for lo in range(orgs[0], orgs[1], _CHUNK):
            ids = np.arange(lo, min(orgs[1], lo + _CHUNK))
            w.edges(ids, "organization.organization.headquarters", _power_law(rng, len(ids), *_span(places)))
            w.edges(ids, "organization.organization.founders", _power_law(rng, len(ids), *_span(people)))
        for lo in range(books[0], books[1], _CHUNK):
            ids = np.arange(lo, min(books[1], lo + _CHUNK))
            w.edges(ids, "book.written_work.author", _power_law(rng, len(ids), *_span(people)))
            w.edges(
                ids, "book.written_work.subjects", _power_law(rng, len(ids), *_span(places), exponent=2.0)
            )


def _span(bounds: tuple[int, int]) -> tuple[int, int]:
    return bounds[0], bounds[1] - bounds[0]


def _dated(w: _Writer, ids: np.ndarray, predicate: str, years: np.ndarray, suffix: str) -> None:
    """Lines `<m.S> <predicate> "YYYY<suffix> .` (a date or a year): fixed width, so a byte matrix."""
    n = min(len(ids), w.left())
    if n <= 0:
        return
    head = f"<{NS}m.0".encode()
    middle = f'> <{NS}{predicate}> "'.encode()
    template = np.frombuffer(head + b"XXXXXX" + middle + b"0000" + suffix.encode() + b" .\n", dtype=np.uint8)
    rows = np.empty((n, len(template)), dtype=np.uint8)
    rows[:] = template
    rows[:, len(head) : len(head) + 6] = mid_bytes(ids[:n])
    at = len(head) + 6 + len(middle)
    for k, scale in enumerate((1000, 100, 10, 1)):
        rows[:, at + k] = ord("0") + (years[:n] // scale) % 10
    w.raw(rows.tobytes(), n)


if __name__ == "__main__":
    write_freebase(Path(sys.argv[2]), int(float(sys.argv[1])))
