"""Tool recall and exact answer sets on published ontologies, without a model.

The questions people ask of an ontology, a shapes graph or a vocabulary (what is this class a kind
of, what lies below it, what does this shape require, what does this list hold, how is this term
defined and named) are drawn from the released file itself: rdflib reads the file and its SPARQL
gives each question's gold answers, independently of kg-mcp. The same file is loaded with
`kg-mcp load`'s loader, and each question is answered by its gold tool call, made through an MCP
client as a perfect model would make it (never through `sparql`):

| kind | question | gold SPARQL (rdflib) | gold call |
|---|---|---|---|
| superclasses | every named class X is a kind of | X rdfs:subClassOf+ ?a | follow(X, [rdfs:subClassOf+]) |
| subclasses | every named class below X, at any depth | ?d rdfs:subClassOf+ X | follow(X, [~rdfs:subClassOf+]) |
| direct subclasses | the named classes directly below X | ?d rdfs:subClassOf X | search(X, incoming, [rdfs:subClassOf]) |
| instances | the named members of class X | ?x rdf:type X | search(X, incoming, [rdf:type]) |
| shape classes | the classes shape X requires of its properties' values | X sh:property/sh:class ?c | follow(X, [sh:property, sh:class], exclude_through=none) |
| shape paths | the properties shape X constrains | X sh:property/sh:path ?p | follow(X, [sh:property, sh:path], exclude_through=none) |
| list members | the members of X's list under P | X P/rdf:rest*/rdf:first ?m | follow(X, [P, rdf:rest*, rdf:first], exclude_through=none) |
| definitions | X's definitions, whole | X skos:definition (or rdfs:comment) ?d | search(X, outgoing, [that property]) |
| labels | X's labels in every language | X rdfs:label ?l | search(X, outgoing, [rdfs:label]) |
| relation | X's values of the ontology's most used own relation R | X R ?o | search(X, outgoing, [R]) |

Where a listing ends with a next page (its `next_cursor`), the call is made again with that
cursor until the last page, as a model reading the note would. The answer a model would read is
every named row of the pages' tables (a `follow` entity, a `search` value; blank nodes are not
named answers), literals whole (a cut cell is read from the whole values that follow the table). A question is recalled when every gold answer is there,
exact when the answers are the gold set (`oracle.score`, after `matching.normalise`). Questions are
drawn per kind with a fixed seed from the subjects that have an answer; a question whose gold set
holds a blank node is not drawn (its answer is a description, not a set of names).
"""

from __future__ import annotations

import random
import re
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyoxigraph as ox
import rdflib
from rdflib.term import BNode, Literal, URIRef

from kg_mcp.agents.evaluation.matching import normalise
from kg_mcp.agents.evaluation.oracle import named_cells, score
from kg_mcp.agents.kg_client import KGClient

PER_KIND = 12  # questions drawn of each kind
SEED = 7
NS = "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> " \
     "PREFIX sh: <http://www.w3.org/ns/shacl#> PREFIX skos: <http://www.w3.org/2004/02/skos/core#> "
_WHOLE = re.compile(r"^--- row (\d+), [\d,]+ characters ---\n", re.MULTILINE)
_MACHINERY = ("http://www.w3.org/1999/02/22-rdf-syntax-ns#", "http://www.w3.org/2000/01/rdf-schema#",
              "http://www.w3.org/2002/07/owl#", "http://www.w3.org/ns/shacl#", "http://datashapes.org/dash#")


@dataclass(frozen=True)
class OntologyQuestion:
    id: str
    kind: str
    text: str
    tool: str  # "follow" or "search"
    arguments: dict
    answers: tuple[str, ...]  # compact ids, or literal texts
    query: str = ""  # the gold SPARQL with the question's subject written in: one well-written query answers it


@dataclass
class Row:
    question: OntologyQuestion
    recalled: bool
    exact: bool
    precision: float
    missing: list[str]
    extra: list[str]
    chars: int  # characters of every page read
    error: str | None = None
    calls: int = 1  # pages read


@dataclass
class Result:
    name: str
    rows: list[Row] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        n = len(self.rows)
        kinds = Counter(r.question.kind for r in self.rows)
        return {
            "ontology": self.name, "questions": n, "kinds": dict(kinds),
            "recall": sum(r.recalled for r in self.rows) / n if n else None,
            "exact": sum(r.exact for r in self.rows) / n if n else None,
            "precision": statistics.fmean(r.precision for r in self.rows) if n else None,
            "chars_mean": statistics.fmean(r.chars for r in self.rows) if n else None,
        }


# --- the questions, from rdflib's SPARQL on the released file ------------------------------------------


def questions(graph: rdflib.Graph, compact: Callable[[str], str], *, per_kind: int = PER_KIND, seed: int = SEED) -> list[OntologyQuestion]:
    """The question set of one ontology: up to `per_kind` questions of each kind it has answers for."""
    rng = random.Random(seed)
    drawn: list[OntologyQuestion] = []

    def draw(kind: str, candidates: list, gold: Callable, text: str, tool: str, arguments: Callable) -> None:
        pool = sorted(set(candidates), key=str)
        rng.shuffle(pool)
        taken = 0
        for subject in pool:
            if taken == per_kind:
                break
            answers = gold(subject)
            if not answers or any(isinstance(a, BNode) for a in answers):
                continue
            shown = tuple(sorted({_text(a, compact) for a in answers}))
            who = compact(str(subject[0] if isinstance(subject, tuple) else subject))
            drawn.append(OntologyQuestion(f"{kind}:{taken + 1}", kind, text.format(x=who), tool, arguments(subject), shown,
                                          last_query[0]))
            taken += 1

    last_query = [""]

    def ask(query: str, **bound) -> list:
        last_query[0] = _written(NS + query, bound)
        return [row[0] for row in graph.query(NS + query, initBindings=bound)]

    def subjects(query: str) -> list:
        return [s for s in ask(query) if isinstance(s, URIRef)]

    classes_with_parents = subjects("SELECT DISTINCT ?x WHERE { ?x rdfs:subClassOf ?p FILTER(isIRI(?p)) }")
    classes_with_children = subjects("SELECT DISTINCT ?x WHERE { ?c rdfs:subClassOf ?x FILTER(isIRI(?c)) }")
    named = "FILTER(isIRI(?a) && ?a != ?x)"
    draw("superclasses", classes_with_parents,
         lambda x: ask(f"SELECT DISTINCT ?a WHERE {{ ?x rdfs:subClassOf+ ?a {named} }}", x=x),
         "Every named class {x} is a kind of, at any depth", "follow", lambda x: _follow(x, compact, ["rdfs:subClassOf+"]))
    draw("subclasses", classes_with_children,
         lambda x: ask(f"SELECT DISTINCT ?a WHERE {{ ?a rdfs:subClassOf+ ?x {named} }}", x=x),
         "Every named class below {x}, at any depth", "follow", lambda x: _follow(x, compact, ["~rdfs:subClassOf+"]))
    draw("direct subclasses", classes_with_children,
         lambda x: ask(f"SELECT DISTINCT ?a WHERE {{ ?a rdfs:subClassOf ?x {named} }}", x=x),
         "The named classes directly below {x}", "search", lambda x: _search(x, compact, "rdfs:subClassOf", "incoming"))
    members = Counter(c for a, c in graph.subject_objects(rdflib.RDF.type) if isinstance(a, URIRef) and isinstance(c, URIRef))
    typed = [c for c, n in members.items() if n <= 200]
    draw("instances", [t for t in typed if not str(t).startswith(_MACHINERY)],
         lambda x: ask("SELECT DISTINCT ?a WHERE { ?a a ?x FILTER(isIRI(?a)) }", x=x),
         "The named members of class {x}", "search", lambda x: _search(x, compact, "rdf:type", "incoming"))
    for step, kind in (("sh:class", "shape classes"), ("sh:path", "shape paths")):
        shapes = subjects(f"SELECT DISTINCT ?x WHERE {{ ?x sh:property ?b . ?b {step} ?v FILTER(isIRI(?v)) }}")
        draw(kind, shapes, lambda x, step=step: ask(f"SELECT DISTINCT ?a WHERE {{ ?x sh:property ?b . ?b {step} ?a }}", x=x),
             f"What {step} shape {{x}} gives its properties' constraints", "follow",
             lambda x, step=step: _follow(x, compact, ["sh:property", step], keep_start=True))
    lists = [(r[0], r[1]) for r in graph.query(NS + "SELECT DISTINCT ?x ?p WHERE { ?x ?p ?l . ?l rdf:first ?f "
                                                    "FILTER(isIRI(?x) && ?p != rdf:rest) }") if isinstance(r[0], URIRef)]
    draw("list members", lists,
         lambda xp: ask("SELECT DISTINCT ?a WHERE { ?x ?p ?l . ?l rdf:rest*/rdf:first ?a }", x=xp[0], p=xp[1]),
         "The members of the list of {x}", "follow",
         lambda xp: _follow(xp[0], compact, [compact(str(xp[1])), "rdf:rest*", "rdf:first"], keep_start=True))
    for predicate, kind, text in (("skos:definition", "definitions", "How {x} is defined (skos:definition)"),
                                  ("rdfs:comment", "definitions", "How {x} is described (rdfs:comment)"),
                                  ("rdfs:label", "labels", "Every label of {x}")):
        if kind == "definitions" and any(q.kind == "definitions" for q in drawn):
            continue  # one description property per ontology: the one it uses
        described = subjects(f"SELECT DISTINCT ?x WHERE {{ ?x {predicate} ?d }}")
        draw(kind, described, lambda x, p=predicate: ask(f"SELECT DISTINCT ?a WHERE {{ ?x {p} ?a }}", x=x),
             text, "search", lambda x, p=predicate: _search(x, compact, p, "outgoing"))
    own = own_relation(graph)
    if own is not None:
        draw("relation", subjects(f"SELECT DISTINCT ?x WHERE {{ ?x <{own}> ?o FILTER(isIRI(?o)) }}"),
             lambda x: ask(f"SELECT DISTINCT ?a WHERE {{ ?x <{own}> ?a }}", x=x),
             f"{{x}}'s values of {compact(str(own))}", "search", lambda x: _search(x, compact, compact(str(own)), "outgoing"))
    return drawn


def own_relation(graph: rdflib.Graph) -> URIRef | None:
    """The ontology's most used relation of its own (not RDF, RDFS, OWL, SHACL, SKOS) between named
    nodes (counted over the triples: rdflib's GROUP BY takes a minute on 60k triples)."""
    skos = "http://www.w3.org/2004/02/skos/core#"
    used = Counter(p for s, p, o in graph if isinstance(s, URIRef) and isinstance(o, URIRef)
                   and not str(p).startswith((*_MACHINERY, skos)))
    return used.most_common(1)[0][0] if used else None


def _written(query: str, bound: dict) -> str:
    """`query` with its bound variables written in as IRIs: the text a model would send.

    >>> _written("SELECT ?a WHERE { ?x ?p ?a }", {"x": URIRef("http://x/a"), "p": URIRef("http://x/p")})
    'SELECT ?a WHERE { <http://x/a> <http://x/p> ?a }'
    """
    for name, value in bound.items():
        query = re.sub(rf"\?{name}\b", f"<{value}>", query)
    return query


def _text(term, compact: Callable[[str], str]) -> str:
    return str(term) if isinstance(term, Literal) else compact(str(term))


def _follow(x, compact, path: list[str], *, keep_start: bool = False) -> dict:
    """follow's arguments; `keep_start` where the start may be an answer (a shape of a class whose
    property takes that class), which follow leaves out unless told."""
    return {"entity": compact(str(x)), "path": path, **({"exclude_through": "none"} if keep_start else {})}


def _search(x, compact, relation: str, direction: str) -> dict:
    return {"entity": compact(str(x)), "direction": direction, "properties_to_filter_for": [relation]}


# --- the answers, through the tools ------------------------------------------------------------------


def read_answers(tool: str, text: str) -> dict[str, set[str]]:
    """The named answers of a tool's text: each IRI or literal of its table (blank nodes left out),
    {as shown: its normalised forms}; a cut literal is read whole from after the table."""
    column, label = ("entity", "label") if tool == "follow" else ("value", "valueLabel")
    whole = _whole_values(text)
    answers: dict[str, set[str]] = {}
    for number, row in enumerate(named_cells(text), 1):
        shown = whole.get(number, row.get(column, ""))
        if not shown or shown.startswith(("_:", "[ ", "( ")):  # a blank node: its handle or its description
            continue
        answers.setdefault(shown, set()).update(normalise(c) for c in (shown, row.get(label, "")) if c)
    return answers


def _whole_values(text: str) -> dict[int, str]:
    """{row number: its whole value}, from the part after a search table that holds the cut values."""
    marks = list(_WHOLE.finditer(text))
    found = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        found[int(mark.group(1))] = text[mark.end() : end].rstrip("\n")
    return found


async def read_pages(kg: KGClient, tool: str, arguments: dict) -> tuple[list, int]:
    """The call's pages (KGClient.call_pages, at most kg_client.MAX_PAGES) and the characters of
    their texts."""
    pages = await kg.call_pages(tool, arguments)
    return pages, sum(len(page.text) for page in pages)


async def ask_all(kg: KGClient, name: str, asked: list[OntologyQuestion]) -> Result:
    """Each question's gold call through `kg`, every page of it, scored against its gold answers."""
    result = Result(name)
    for question in asked:
        pages, chars = await read_pages(kg, question.tool, question.arguments)
        error = next((page for page in pages if page.is_error), None)
        answers: dict[str, set[str]] = {}
        # A later page that fails ends the read: the pages before it count, as a model has them.
        for page in pages[: pages.index(error)] if error is not None else pages:
            for shown, forms in read_answers(question.tool, page.text).items():
                answers.setdefault(shown, set()).update(forms)
        missing, exact, precision, extra = score(answers, question.answers)
        result.rows.append(Row(question, not missing, exact, precision, missing, extra, chars,
                               error.text[:300] if error is not None else None, len(pages)))
    return result


def parse_file(path: Path) -> rdflib.Graph:
    graph = rdflib.Graph()
    suffix = path.suffix.lower()
    graph.parse(path, format={".nt": "nt", ".ttl": "turtle", ".owl": "xml", ".rdf": "xml"}.get(suffix, "turtle"))
    return graph


async def run_backend(backend, graph: rdflib.Graph, name: str, *, per_kind: int = PER_KIND) -> Result:
    """Ask `graph`'s questions of `backend` (the same file, loaded) through an MCP client; score them."""
    asked = questions(graph, lambda iri: backend.vocab.compact(ox.NamedNode(iri)), per_kind=per_kind)
    async with KGClient.connect(server=backend) as kg:
        return await ask_all(kg, name, asked)


async def run_file(path: Path, store_dir: Path, *, per_kind: int = PER_KIND) -> Result:
    """Load `path` into a new store at `store_dir` (`kg-mcp load`'s loader), then `run_backend`."""
    from kg_mcp.backends import open_store
    from kg_mcp.loading import load_sources

    load_sources([path], store_dir, progress=False)
    backend = open_store(store_dir)
    try:
        return await run_backend(backend, parse_file(path), path.name, per_kind=per_kind)
    finally:
        backend.close()


def format_table(results: list[Result]) -> str:
    head = ("ontology", "questions", "recall", "exact", "precision", "kinds")
    lines = [head]
    for result in results:
        s = result.summary()
        lines.append((s["ontology"], str(s["questions"]), f"{s['recall']:.1%}", f"{s['exact']:.1%}", f"{s['precision']:.1%}",
                      ", ".join(f"{k} {n}" for k, n in s["kinds"].items())))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in lines]
    for result in results:
        for row in result.rows:
            if not row.exact:
                out.append(f"  miss {result.name} {row.question.id} {row.question.arguments}: missing {row.missing[:5]} "
                           f"extra {row.extra[:5]}" + (f" error {row.error}" if row.error else ""))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    """python -m kg_mcp.agents.evaluation.ontology_oracle [--per-kind N] FILE... : the table for each released file."""
    import argparse
    import asyncio
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="released ontology files (Turtle, N-Triples, RDF/XML)")
    parser.add_argument("--per-kind", type=int, default=PER_KIND, help="questions drawn of each kind")
    options = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for i, path in enumerate(options.files):
            results.append(asyncio.run(run_file(path, Path(scratch) / str(i), per_kind=options.per_kind)))
    print(format_table(results))


if __name__ == "__main__":
    main()
