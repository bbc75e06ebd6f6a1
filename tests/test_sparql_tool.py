"""The sparql tool: read-only by parsing, the ids the tools print declared, rows paged with the total told, examples written for the KG."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from mcp import Client

from kg_mcp.backends import open_store
from kg_mcp.errors import InvalidInput, QueryRefused
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools.sparql import check_read_only, sparql

REFUSED = [
    "INSERT DATA { <http://a> <http://b> <http://c> }",
    "DELETE WHERE { ?s ?p ?o }",
    "LOAD <http://example.org/data.ttl>",
    "CLEAR ALL",
    "DROP GRAPH <urn:kg-mcp:meta>",
    "CREATE GRAPH <http://g>",
    "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }",
    "PREFIX e: <http://evil.example/> SELECT * WHERE { SERVICE e:sparql { ?s ?p ?o } }",
    "SELECT * WHERE { SERVICE ?endpoint { ?s ?p ?o } }",
    "PREFIX : <http://evil.example/> SELECT * WHERE { SERVICE :sparql { ?s ?p ?o } }",
    "SELECT * WHERE { ?s ?p ?o OPTIONAL { SERVICE SILENT <http://x/> { ?s ?q ?v } } }",
    "SELECT * FROM <http://example.org/remote.ttl> WHERE { ?s ?p ?o }",
    "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "DESCRIBE <http://a>",
]


def _tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(file.relative_to(path).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize("query", REFUSED)
def test_updates_services_and_non_select_forms_are_refused(query):
    with pytest.raises(QueryRefused):
        check_read_only(query, "generic")


def test_wikidata_label_service_is_allowed_only_on_wikidata():
    query = (
        "PREFIX wikibase: <http://wikiba.se/ontology#> PREFIX bd: <http://www.bigdata.com/rdf#> "
        'SELECT ?x ?xLabel WHERE { ?x ?p ?o . SERVICE wikibase:label { bd:serviceParam wikibase:language "en". } }'
    )
    assert check_read_only(query, "wikidata").form == "SelectQuery"
    with pytest.raises(QueryRefused):
        check_read_only(query, "generic")


def test_empty_prefix_queries_run():
    checked = check_read_only("PREFIX : <http://example.org/> SELECT ?s WHERE { ?s :p ?o }", "generic")
    assert checked.form == "SelectQuery" and checked.text == "SELECT ?s WHERE { ?s <http://example.org/p> ?o . }"


def test_syntax_errors_are_input_errors():
    with pytest.raises(InvalidInput, match="does not parse"):
        check_read_only("SELEKT ?x WHERE { ?x ?y }", "generic")


def test_rows_capped_with_total_and_a_cursor(metaqa):
    query = "SELECT ?m WHERE { ?m <http://kg-mcp.local/relation/directed_by> <http://kg-mcp.local/entity/Steven_Spielberg> }"
    out = sparql(metaqa, Settings(sparql_row_cap=5), query)
    assert out.data.total == 25 and len(out.data.rows) == 5 and out.data.truncated and out.data.offset == 0
    assert out.text.startswith("sparql: 25 rows\n")
    assert out.text.endswith(f'Rows 1-5 of 25 shown. Next page: call again with the same arguments and cursor="{out.data.next_cursor}".')
    ask = sparql(metaqa, Settings(), "ASK { ?m <http://kg-mcp.local/relation/directed_by> ?d }")
    assert ask.data.boolean is True


def test_every_kind_of_call_runs_as_written_on_a_local_store(metaqa):
    # The written text glues a call's bracket to its name: Oxigraph reads `CONCAT (`, `COALESCE (`
    # and `BNODE ( )` as syntax errors.
    query = (
        'SELECT (CONCAT("a", STRAFTER(STR(?y), "entity/")) AS ?c) (COALESCE(?none, 7) AS ?k) (isBLANK(BNODE()) AS ?b) '
        "(COUNT(*) AS ?n) (<http://www.w3.org/2001/XMLSchema#integer>(\"3\") AS ?i) "
        "WHERE { <http://kg-mcp.local/entity/Jaws> <http://kg-mcp.local/relation/release_year> ?y } "
        "GROUP BY ?y ?none"
    )
    out = sparql(metaqa, Settings(), query)
    assert [[cell.id if cell else None for cell in row] for row in out.data.rows] == [["a1975", "7", "true", "1", "3"]]


async def test_sparql_tool_offered_by_default_off_when_asked_and_store_unchanged(metaqa_store_dir):
    before = _tree_digest(metaqa_store_dir)
    backend = open_store(metaqa_store_dir)
    async with Client(build_server(backend, Settings(sparql_tool=False))) as client:
        assert "sparql" not in {t.name for t in (await client.list_tools()).tools}
        assert "kg://examples" not in {str(r.uri) for r in (await client.list_resources()).resources}
    async with Client(build_server(backend, Settings())) as client:  # in-process, as over stdio: offered
        for query in REFUSED:
            result = await client.call_tool("sparql", {"query": query})
            assert result.is_error, query
        ok = await client.call_tool("sparql", {"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"})
        assert not ok.is_error and ok.structured_content["rows"][0][0]["id"] == "172219"
    backend.close()
    del backend
    assert _tree_digest(metaqa_store_dir) == before


def test_ids_as_the_tools_print_them_run_without_prefix_lines_on_a_local_store(metaqa):
    """kg:Steven_Spielberg as every tool prints it, and `:directed_by` for the relation printed bare."""
    out = sparql(metaqa, Settings(), "SELECT ?m WHERE { ?m :directed_by kg:Steven_Spielberg }")
    assert out.data.total == 25 and not out.data.warnings
    assert {row[0].id for row in out.data.rows} >= {"kg:Jaws", "kg:Schindler%27s_List"}  # printed as search prints them
    # The query's own PREFIX wins over the server's.
    own = sparql(metaqa, Settings(), "PREFIX kg: <http://example.org/> SELECT ?m WHERE { ?m :directed_by kg:Steven_Spielberg }")
    assert own.data.total == 0


def test_declared_prefixes_are_resolved_by_the_writer_never_sent():
    prefixes = (("ex", "http://example.org/"), ("", "http://kg-mcp.local/relation/"))
    checked = check_read_only("SELECT ?s WHERE { ?s :p ex:o }", "generic", prefixes=prefixes)
    assert checked.text == "SELECT ?s WHERE { ?s <http://kg-mcp.local/relation/p> <http://example.org/o> . }"
    with pytest.raises(InvalidInput, match="The prefix nope: is not declared"):
        check_read_only("SELECT ?s WHERE { ?s nope:p ?o }", "generic", prefixes=prefixes)


async def test_examples_are_written_from_the_kgs_schema_and_each_runs(ontology_store):
    brick = ontology_store("brick")
    async with Client(build_server(brick, Settings())) as client:
        examples = json.loads((await client.read_resource("kg://examples")).contents[0].text)["examples"]
    questions = " ".join(example["question"] for example in examples)
    for kind in ("at any depth", "constraints of the shape", "members of the RDF lists", "count per class"):
        assert kind in questions
    for example in examples:  # the tool's own ids, no PREFIX line, rows and no warning
        out = sparql(brick, Settings(), example["query"])
        assert "PREFIX" not in example["query"] and out.data.rows and not out.data.warnings, example
        assert example["rows"] == out.data.total
