"""Ontology questions at the cost of one good query: what kg-mcp's gold calls cost a model against
one well-written SPARQL query each.

The ontology oracle's questions (kg_mcp.agents.evaluation.ontology_oracle: superclasses,
subclasses, instances, shapes' classes and paths, list members, definitions, labels, the
ontology's own relation) are drawn from published ontologies as PyPI packages ship them
(tests/ontologies.py). Each is answered on the same store twice:

- by its gold tool call through an MCP client, every page read (next_cursor) as a model reading the
  last line would: the characters of each call's arguments (as JSON) and of every page, and the
  number of calls;
- by one query, the question's gold SPARQL with its subject written in, run by kg-mcp's own
  `sparql` tool: the characters of its compact table (one call), and of the query as a model
  writes it where the server declares its prefixes (issue 39): ids as the tools print them, no
  PREFIX lines (the full form is what runs here).

The ratio is kg-mcp's characters (written and read) over the query's (written and read), per
ontology and per kind of question (goal: at most 1.5); each row's note gives the same ratio for
the characters read alone. Then the characters per call of the same gold calls before and after this
branch's listings (`--before REV`, by default the commit the listings branched from), on Brick
and the LinkML metamodel: the earlier code runs in a child process from `git archive REV`, on the
same stores.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import subprocess
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

import pyoxigraph as ox
import rdflib

from bench.common import REPO, Row
from kg_mcp.agents.evaluation.ontology_oracle import OntologyQuestion, questions, read_pages
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.backends import open_store
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings
from kg_mcp.tools import sparql
from tests.ontologies import ontology_files

ONTOLOGIES = ("brick", "linkml", "schema.org", "shacl-shacl", "dash")
BEFORE_AFTER = ("brick", "linkml")
GOAL = 1.5
BASE_REV = "e471207"  # main as the listings branch found it


def ontology_cost(work: Path, per_kind: int, before: str = BASE_REV) -> list[Row]:
    """Rows of the result table (per ontology, per kind, all); prints the per-question detail and the
    before/after table of characters per call."""
    settings = Settings()
    # per key: [kg-mcp read, kg-mcp written, calls, query answer read, query written, questions]
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    kinds: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    first_pages: dict[str, list[tuple[OntologyQuestion, int]]] = {}
    for name in ONTOLOGIES:
        backend = open_store(_store(work, name))
        try:
            asked = questions(_graph(name), lambda iri: backend.vocab.compact(ox.NamedNode(iri)), per_kind=per_kind)
            answered = asyncio.run(_through_the_tools(backend, asked))
            first_pages[name] = [(q, first) for q, (_, _, first) in zip(asked, answered)]
            for question, (chars, calls, _) in zip(asked, answered):
                answer = sparql(backend, settings, question.query).text
                written = calls * len(json.dumps(question.arguments, ensure_ascii=False))  # a cursor's pages: about as long
                query = len(_as_written(question.query, backend))
                for key, table in ((name, totals), ("all", totals), (question.kind, kinds)):
                    for i, n in enumerate((chars, written, calls, len(answer), query, 1)):
                        table[key][i] += n
        finally:
            backend.close()
    rows = [_row(f"ontology cost {key}", *values) for key, values in totals.items()]
    rows += [_row(f"ontology cost, {kind}", *values) for kind, values in sorted(kinds.items())]
    print(_before_after(work, first_pages, before))
    return rows


_PREFIX_LINE = re.compile(r"PREFIX\s+\w*:\s*<[^>]*>\s*")
_IRI = re.compile(r"<([^>]+)>")


def _as_written(query: str, backend) -> str:
    """The query as a model writes it when the server declares its prefixes: no PREFIX lines, ids
    as the tools print them.

    >>> class B: vocab = type("V", (), {"compact": staticmethod(lambda n: "ex:" + n.value.rsplit("/", 1)[-1])})
    >>> _as_written("PREFIX a: <http://a/> SELECT ?x WHERE { <http://x/y> a:p ?x }", B)
    'SELECT ?x WHERE { ex:y a:p ?x }'
    """
    return _IRI.sub(lambda m: backend.vocab.compact(ox.NamedNode(m.group(1))), _PREFIX_LINE.sub("", query))


def _row(measure: str, read: int, written: int, calls: int, answer: int, query: int, n: int) -> Row:
    note = (f"baseline: one SPARQL query a question ({query / n:,.0f} characters written, its sparql table "
            f"{answer / n:,.0f} read); kg-mcp {written / n:,.0f} written, {read / n:,.0f} read; read alone: "
            f"{read / max(answer, 1):.2f}x")
    return Row(f"{measure} ({n} questions, {calls} calls)", (read + written) / n, (answer + query) / n, "chars",
               f"<= {GOAL}", note)


async def _through_the_tools(backend, asked: list[OntologyQuestion]) -> list[tuple[int, int, int]]:
    """(characters of every page, pages, characters of the first page) of each question's gold call."""
    out = []
    async with KGClient.connect(server=backend) as kg:
        for question in asked:
            pages, chars = await read_pages(kg, question.tool, question.arguments)
            out.append((chars, len(pages), len(pages[0].text)))
    return out


def _store(work: Path, name: str) -> Path:
    folder = work / "ontologies" / name
    if not folder.exists():
        load_sources(ontology_files(name), folder, progress=False)
    return folder


def _graph(name: str) -> rdflib.Graph:
    graph = rdflib.Graph()
    for path in ontology_files(name):
        graph.parse(path, format="nt" if path.suffix == ".nt" else "turtle")
    return graph


# --- before and after: characters per call of the same gold calls ---------------------------------------

_BEFORE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import kg_mcp
assert kg_mcp.__file__.startswith(sys.argv[1]), kg_mcp.__file__
from kg_mcp.backends import open_store
from kg_mcp.settings import Settings
from kg_mcp import tools
calls = json.loads(sys.stdin.read())
sizes, opened = [], {}
for store, tool, arguments in calls:
    backend = opened.get(store) or opened.setdefault(store, open_store(store))
    sizes.append(len(getattr(tools, tool)(backend, Settings(), **arguments).text))
print(json.dumps(sizes))
"""


def _before_after(work: Path, first_pages: dict, rev: str) -> str:
    """A table of characters per call, by kind of question, before (`rev`) and after."""
    tree = work / f"before-{rev}"
    if not (tree / "kg_mcp").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "kg_mcp"], cwd=REPO, capture_output=True, check=True).stdout
        archive_path = tree / "code.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tree, filter="data")
    calls = [(str(_store(work, name)), q.tool, q.arguments) for name in BEFORE_AFTER for q, _ in first_pages[name]]
    done = subprocess.run([sys.executable, "-c", _BEFORE, str(tree.resolve())], input=json.dumps(calls), capture_output=True,
                          text=True, check=True)
    before = iter(json.loads(done.stdout))
    lines = [f"characters per call, before ({rev}) and after (this tree), the gold calls' first pages:",
             f"{'ontology':<10} {'kind':<20} {'calls':>5} {'before':>9} {'after':>9} {'after/before':>12}"]
    for name in BEFORE_AFTER:
        by_kind: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for question, after in first_pages[name]:
            by_kind[question.kind].append((next(before), after))
        for kind, pairs in [*sorted(by_kind.items()), ("all", [p for ps in by_kind.values() for p in ps])]:
            old, new = statistics.fmean(p[0] for p in pairs), statistics.fmean(p[1] for p in pairs)
            lines.append(f"{name:<10} {kind:<20} {len(pairs):>5} {old:>9,.0f} {new:>9,.0f} {new / old:>12.2f}")
    return "\n".join(lines)
