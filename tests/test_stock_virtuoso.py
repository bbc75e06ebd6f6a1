"""Virtuoso as a user runs it: Debian's packaged ini (ports and paths changed only), the MetaQA KB
bulk-loaded into a named graph (ld_dir into a graph IRI, rdf_loader_run, checkpoint). Its own
system graphs come first in an unrestricted query; kg-mcp reads the data graph and shows compact ids."""

from __future__ import annotations

import json

import anyio
import pytest
from click.testing import CliRunner
from conftest import text_kb_as_ntriples
from mcp import Client

from kg_mcp.backends import open_endpoint
from kg_mcp.backends.named_graphs import engine_of_graph
from kg_mcp.backends.namespace_discovery import discover
from kg_mcp.cli import main
from kg_mcp.server import build_server
from kg_mcp.settings import Settings

GRAPH = "http://kg-mcp.local/graph/metaqa"
VIRTRDF = "http://www.openlinksw.com/schemas/virtrdf#"
FIRST_LINE, LAST_LINE = 45_500, 47_500  # a slice of MetaQA around "In Bloom" (line 46,446)


@pytest.fixture(scope="module")
def source(data_dir, tmp_path_factory):
    lines = (data_dir / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()[FIRST_LINE:LAST_LINE]
    return text_kb_as_ntriples(lines, tmp_path_factory.mktemp("stock-metaqa") / "metaqa.nt")


@pytest.fixture(scope="module")
def stock_url(stock_virtuoso, source) -> str:
    stock_virtuoso.load(source, GRAPH)
    return stock_virtuoso.endpoint


@pytest.fixture(scope="module")
def stock_backend(stock_url):
    backend = open_endpoint(stock_url, settings=Settings())
    yield backend
    backend.close()


def test_an_unrestricted_sample_meets_virtuosos_own_graphs_first(stock_backend):
    # The failure: the first triples of `?s ?p ?o` on the union of every graph are
    # Virtuoso's RDF-view schema, so a sample without a dataset finds its namespaces, not the data's.
    unrestricted = discover(lambda query: stock_backend._answer(query, ()).result, {})
    assert VIRTRDF in unrestricted.prefixes.values()
    assert not any(ns.startswith("http://kg-mcp.local/") for ns in unrestricted.prefixes.values())


def test_the_data_graph_is_read_and_the_engines_own_are_not(stock_backend):
    plan = stock_backend.graph_plan
    assert plan.graphs == (GRAPH,)
    system = plan.system
    assert VIRTRDF in system and "http://www.w3.org/2002/07/owl#" in system
    assert all(engine_of_graph(g) == "Virtuoso" for g in system)
    assert stock_backend.vocab.prefixes.get("kg") == "http://kg-mcp.local/entity/"


def test_outputs_are_compact_and_accepted_back(stock_backend):
    async def calls():
        async with Client(build_server(stock_backend, stock_backend.settings)) as client:
            found = await client.call_tool("find_entities", {"name": "In Bloom", "limit": 3})
            relations = await client.call_tool("get_relations", {"entity": "kg:In_Bloom"})
            walked = await client.call_tool("follow", {"entity": "kg:In_Bloom", "path": ["directed_by"]})
            schema = json.loads((await client.read_resource("kg://schema")).contents[0].text)
            return found, relations, walked, schema

    found, relations, walked, schema = anyio.run(calls)
    # The KG summary (relations, hubs) counts the data graph: nothing of Virtuoso's DAV folder or views.
    metaqa = {"directed_by", "written_by", "starred_actors", "release_year", "in_language", "has_tags", "has_genre",
              "has_imdb_votes", "has_imdb_rating", "rdfs:label"}
    assert schema["top_relations"] and {r["relation"] for r in schema["top_relations"]} <= metaqa
    assert schema["hubs"] and all(h["entity"].startswith("kg:") for h in schema["hubs"])
    assert not found.is_error and "| kg:In_Bloom | In Bloom |" in found.content[0].text
    assert not relations.is_error and "| directed_by |" in relations.content[0].text
    assert "http://" not in relations.content[0].text
    assert not walked.is_error and "kg:Nana_Ekvtimishvili" in walked.content[0].text


def test_info_lists_the_graphs_with_their_sizes(stock_url, source):
    shown = CliRunner().invoke(main, ["info", "--sparql", stock_url])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert f"graphs: every graph but the engine's own: {GRAPH}" in lines
    data = next(line for line in lines if line.strip().endswith(f"{GRAPH}  (read)"))
    triples = sum(1 for line in source.read_text(encoding="utf-8").splitlines() if line.strip())
    assert data.split() == [f"{triples:,}", GRAPH, "(read)"]
    assert any(VIRTRDF in line and line.endswith("(Virtuoso's own, not read)") for line in lines)
    assert "openlinksw" not in shown.output.split("named graphs")[0]  # no Virtuoso relation among the top ones
