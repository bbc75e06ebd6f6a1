"""What the graph view makes of each tool's structured content (view/src/graph.js, run by node on
results the tools return from real stores): blank nodes as small anonymous nodes, searchable by
their handle; a follow's transitive step and a batched search drawn like the others. The browser
test (test_view_browser.py) draws the common results; these are the rarer shapes, without a browser."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kg_mcp.settings import Settings
from kg_mcp.tools import follow, search

ROOT = Path(__file__).resolve().parents[1]
EX = "<http://example.org/"
TURTLE = """
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:shape rdfs:label "Shape" ; ex:property [ ex:path ex:name ; ex:minCount 1 ] , [ ex:path ex:age ] .
ex:a rdfs:label "A" ; ex:next ex:b . ex:b rdfs:label "B" ; ex:next ex:c . ex:c rdfs:label "C" .
"""


def graph_of(results: list[dict]) -> list[dict]:
    script = (
        f"import {{ toGraph }} from {json.dumps(str(ROOT / 'view' / 'src' / 'graph.js'))};\n"
        "const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        "console.log(JSON.stringify(input.map(toGraph)));\n"
    ).replace("require('fs')", "(await import('node:fs'))")
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(results),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_blank_nodes_transitive_steps_and_batches(memory_backend):
    backend = memory_backend(TURTLE)
    settings = Settings()
    shape = search(backend, settings, "<http://example.org/shape>").data.model_dump(mode="json")
    walked = follow(backend, settings, "<http://example.org/a>", ["<http://example.org/next>+"]).data.model_dump(mode="json")
    batch = search(backend, settings, entities=["<http://example.org/a>", "<http://example.org/b>"]).data.model_dump(mode="json")
    drawn_shape, drawn_walk, drawn_batch = graph_of([shape, walked, batch])

    blanks = [n for n in drawn_shape["nodes"] if n["kind"] == "blank"]
    assert len(blanks) == 2 and all(n["label"] == "" for n in blanks)  # small and anonymous on the canvas
    assert all(n["title"].startswith("[ ") and "<http://example.org/path>" in n["title"] for n in blanks)  # inline
    assert all(n["id"].startswith("_:") and n["handle"] for n in blanks)  # a local store names them: clickable
    assert {(e["source"], e["label"]) for e in drawn_shape["edges"]} == {(EX + "shape>", "property")}

    assert {n["label"] for n in drawn_walk["nodes"] if n["role"] == "answer"} == {"B", "C"}
    assert {n["label"] for n in drawn_walk["nodes"] if n["role"] == "start"} == {"A"}
    assert {e["label"] for e in drawn_walk["edges"]} == {EX + "next>+"}

    assert {n["label"] for n in drawn_batch["nodes"] if n["role"] == "focus"} == {"A", "B"}
    assert {(e["source"], e["target"]) for e in drawn_batch["edges"]} == {(EX + "a>", EX + "b>"), (EX + "b>", EX + "c>")}


def test_shapes_that_are_not_graphs_say_so():
    empty, unknown = graph_of([{}, {"claims": []}])
    assert empty["nodes"] == [] and unknown["summary"] == "This result has no graph to draw."
