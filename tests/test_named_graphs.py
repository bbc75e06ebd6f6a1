"""--graph: two data sets in two named graphs of one endpoint (`oxigraph serve` and Virtuoso); with
one graph chosen, every tool, resource, lookup and count sees that graph only."""

from __future__ import annotations

import json

import anyio
import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from conftest import _oxigraph_serve, text_kb_as_ntriples
from mcp import Client

from kg_mcp.backends import open_endpoint, open_store
from kg_mcp.cli import main
from kg_mcp.errors import ConfigError
from kg_mcp.loading import LoadError, load_sources
from kg_mcp.server import build_server
from kg_mcp.settings import Settings

MOVIES = "http://example.org/graph/movies"
PEOPLE = "http://example.org/graph/people"
FILM, FILM_NAME, DIRECTOR = "kg:In_Bloom", "In Bloom", "kg:Nana_Ekvtimishvili"  # MetaQA
PERSON, PERSON_NAME = "kg:ludwig_ii_of_bavaria", "ludwig_ii_of_bavaria"  # PathQuestion
ENTITIES = "http://kg-mcp.local/entity/"  # kg:


@pytest.fixture(scope="module")
def sources(data_dir, tmp_path_factory) -> dict[str, object]:
    folder = tmp_path_factory.mktemp("two-graphs")
    movies = (data_dir / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()[46_000:47_000]
    people = (data_dir / "pathquestion" / "2H-kb.txt").read_text(encoding="utf-8").splitlines()[:600]
    files = {
        MOVIES: text_kb_as_ntriples(movies, folder / "movies.nt"),
        PEOPLE: text_kb_as_ntriples(people, folder / "people.nt"),
    }
    triples = {graph: sum(1 for line in f.read_text().splitlines() if line.strip()) for graph, f in files.items()}
    return {"files": files, "triples": triples}


@pytest.fixture(scope="module")
def oxigraph_url(sources, tmp_path_factory):
    yield from _oxigraph_serve(tmp_path_factory.mktemp("oxigraph-two-graphs"), None, sources["files"])


@pytest.fixture(scope="module")
def virtuoso_url(virtuoso, sources) -> str:
    for graph, path in sources["files"].items():
        virtuoso.load(path, graph)
    return virtuoso.endpoint  # no default-graph-uri: the whole instance, as a user points at it


@pytest.fixture(scope="module", params=["oxigraph", "virtuoso"])
def engine_url(request) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


def call_all(backend, calls: list[tuple[str, dict]]) -> list:
    async def run():
        async with Client(build_server(backend, backend.settings)) as client:
            results = [await client.call_tool(name, args) for name, args in calls]
            stats = json.loads((await client.read_resource("kg://stats")).contents[0].text)
            return results, stats

    return anyio.run(run)


def test_one_graph_chosen_only_it_is_seen(engine_url, sources):
    engine, url = engine_url
    backend = open_endpoint(url, settings=Settings(graphs=[MOVIES], sparql_tool=True))
    assert backend.graph_plan.graphs == (MOVIES,)
    (film, word, person, relations, walked, absent, total, graphs, other), stats = call_all(backend, [
        ("find_entities", {"name": FILM_NAME, "limit": 3}),
        ("find_entities", {"name": "Bloom", "limit": 3}),  # Virtuoso answers with bif:contains
        ("find_entities", {"name": PERSON_NAME, "limit": 3}),
        ("get_relations", {"entity": FILM}),
        ("follow", {"entity": FILM, "path": ["directed_by"]}),
        ("search", {"entity": PERSON}),
        ("sparql", {"query": "SELECT (COUNT(*) AS ?n) WHERE { SELECT ?s WHERE { ?s ?p ?o } LIMIT 100000 }"}),
        ("sparql", {"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"}),
        ("sparql", {"query": f"SELECT ?s WHERE {{ GRAPH <{PEOPLE}> {{ ?s ?p ?o }} }} LIMIT 5"}),
    ])
    assert f"| {FILM} | {FILM_NAME} |" in film.content[0].text
    if engine == "virtuoso":  # its text search finds a word of the name in the chosen graph
        assert "bif:contains" in word.content[0].text and f"| {FILM} |" in word.content[0].text
    assert PERSON not in person.content[0].text and "no entity has this name" in person.content[0].text
    assert "| directed_by |" in relations.content[0].text and "| parents |" not in relations.content[0].text
    assert DIRECTOR in walked.content[0].text
    assert absent.is_error and "not in the KG" in absent.content[0].text
    movies = sources["triples"][MOVIES]
    assert f"| {movies} |" in total.content[0].text  # a count with a subquery
    # GRAPH ?g sees the chosen graph only; GRAPH <other> is refused, in our words.
    assert MOVIES in graphs.content[0].text and PEOPLE not in graphs.content[0].text
    assert other.is_error and "is not one of the graphs this server reads" in other.content[0].text
    assert "kg:" not in other.content[0].text
    assert stats["triples"] == movies  # the kg://stats resource counts the chosen graph
    assert stats["graphs"] == f"the graphs chosen with --graph: {MOVIES}"
    backend.close()


def test_the_other_graph_chosen_the_first_is_not_seen(engine_url, sources):
    _, url = engine_url
    backend = open_endpoint(url, settings=Settings(graphs=[PEOPLE]))
    (person, film, walked), stats = call_all(backend, [
        ("find_entities", {"name": PERSON_NAME, "limit": 3}),
        ("find_entities", {"name": "Bloom", "limit": 3}),  # Virtuoso answers with bif:contains
        ("follow", {"entity": FILM, "path": ["directed_by"]}),
    ])
    assert f"| {PERSON} |" in person.content[0].text
    assert FILM not in film.content[0].text  # nor by bif:contains on Virtuoso
    assert walked.is_error and DIRECTOR not in walked.content[0].text
    assert stats["triples"] == sources["triples"][PEOPLE]
    backend.close()


def test_both_graphs_chosen_read_together(engine_url, sources):
    _, url = engine_url
    backend = open_endpoint(url, settings=Settings(graphs=[MOVIES, PEOPLE]))
    (film, person), stats = call_all(backend, [
        ("find_entities", {"name": FILM_NAME, "limit": 3}),
        ("find_entities", {"name": PERSON_NAME, "limit": 3}),
    ])
    assert f"| {FILM} |" in film.content[0].text and f"| {PERSON} |" in person.content[0].text
    assert stats["triples"] == sum(sources["triples"].values())
    backend.close()


def test_an_unknown_graph_is_refused_at_start_naming_those_there(engine_url):
    _, url = engine_url
    with pytest.raises(ConfigError) as refused:
        open_endpoint(url, settings=Settings(graphs=["http://example.org/graph/typo"]))
    message = refused.value.args[0]
    assert "http://example.org/graph/typo" in message and MOVIES in message and PEOPLE in message


@pytest.mark.parametrize("discovery", [True, False])
def test_graphs_named_in_the_url_and_by_graph_are_refused_before_any_request(discovery):
    # Nothing listens on this port: the refusal must come before the first request, discovery or not.
    url = "http://127.0.0.1:9/sparql?default-graph-uri=urn%3Aa"
    settings = Settings(graphs=["urn:b"], prefix_discovery=discovery)
    with pytest.raises(ConfigError, match="either in the URL or with --graph"):
        open_endpoint(url, settings=settings)


def test_oxigraph_named_graphs_alone_are_read_without_graph(oxigraph_url, sources):
    # `oxigraph serve` keeps its default graph apart from the named graphs: with the default graph
    # empty, the named graphs are what the endpoint holds, so they are read.
    backend = open_endpoint(oxigraph_url, settings=Settings())
    assert set(backend.graph_plan.graphs) == {MOVIES, PEOPLE}
    assert backend.stats().triples == sum(sources["triples"].values())
    assert backend.vocab.prefixes.get("kg") == "http://kg-mcp.local/entity/"
    backend.close()


def test_a_kg_mcp_store_served_by_oxigraph_reads_its_default_graph(data_dir, tmp_path):
    # A store made by `kg-mcp load` keeps its bookkeeping in named graphs of its own (META_GRAPH,
    # and the hub statistics of a store with hubs): served by `oxigraph serve`, those are not data,
    # so the data in the default graph is what is read.
    movies = (data_dir / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()[:20_000]
    store = tmp_path / "store"
    load_sources([text_kb_as_ntriples(movies, tmp_path / "movies.nt")], store, hub_threshold=50)
    local = ox.Store.read_only(str(store))
    data_triples = sum(1 for _ in local.quads_for_pattern(None, None, None, ox.DefaultGraph()))
    del local
    served = _oxigraph_serve(store, None)
    url = next(served)
    try:
        backend = open_endpoint(url, settings=Settings())
        assert set(backend.graph_plan.listed) == {"urn:kg-mcp:meta", "urn:kg-mcp:stats"}
        assert backend.graph_plan.graphs == ()
        assert backend.stats().triples == data_triples
        assert backend.resolve_entity("kg:Richard_Brooks")  # in the first line
        backend.close()
    finally:
        served.close()


def test_graph_option_and_info_listing(oxigraph_url, sources):
    shown = CliRunner().invoke(main, ["info", "--sparql", oxigraph_url, "--graph", PEOPLE])
    assert shown.exit_code == 0, shown.output
    assert f"triples: {sources['triples'][PEOPLE]:,}" in shown.output
    assert f"{sources['triples'][PEOPLE]:,}  {PEOPLE}  (read)" in shown.output and MOVIES not in shown.output
    everything = CliRunner().invoke(main, ["info", "--sparql", oxigraph_url])
    assert f"{sources['triples'][MOVIES]:,}  {MOVIES}  (read)" in everything.output
    refused = CliRunner().invoke(main, ["info", "--sparql", oxigraph_url, "--graph", "movies"])
    assert refused.exit_code != 0 and "is not a graph IRI" in refused.output


def test_graphs_from_the_environment_the_command_line_and_config(monkeypatch, tmp_path):
    monkeypatch.setenv("KG_MCP_GRAPHS", f"{MOVIES}, {PEOPLE}")  # as a bundle passes its option
    assert Settings().graphs == [MOVIES, PEOPLE]
    monkeypatch.setenv("KG_MCP_GRAPHS", "")
    assert Settings().graphs == []
    monkeypatch.setenv("KG_MCP_GRAPHS", "movies")
    bad = CliRunner().invoke(main, ["info", "--sparql", "http://127.0.0.1:9/sparql"])
    assert bad.exit_code != 0 and "KG_MCP_GRAPHS: 'movies' is not a graph IRI" in bad.output
    monkeypatch.delenv("KG_MCP_GRAPHS")
    on_the_demo = CliRunner().invoke(main, ["info", "--graph", MOVIES])
    assert on_the_demo.exit_code != 0 and "the demo KG has none" in on_the_demo.output
    snippet = CliRunner().invoke(main, ["config", "cursor", "--sparql", "http://127.0.0.1:9/sparql", "--graph", MOVIES])
    assert json.loads(snippet.stdout)["mcpServers"]["kg-mcp"]["args"][-2:] == ["--graph", MOVIES]


def test_the_bundle_option_reaches_the_server(oxigraph_url, sources):
    from test_bundle import host_env, served

    _, stats = anyio.run(served, host_env({"sparql_url": oxigraph_url, "graphs": f"{PEOPLE} "}))
    assert stats["graphs"] == f"the graphs chosen with --graph: {PEOPLE}"
    assert stats["triples"] == sources["triples"][PEOPLE]


def test_a_store_loaded_into_named_graphs_reads_the_graphs_chosen(sources, tmp_path):
    """`kg-mcp load --graph` puts each data set in its graph, with its own name index; --graph on the
    store reads the graphs chosen only, through every tool, lookup and sparql; without --graph, a
    store holding named graphs only reads them all, as an endpoint does."""
    store = tmp_path / "store"
    held = 0
    for graph, path in sources["files"].items():
        report = load_sources([path], store, progress=False, graph=graph)
        assert report.graph == graph and f"into <{graph}>" in report.summary()
        held += sources["triples"][graph]
        assert report.store_triples == held  # every graph's quads, kg-mcp's own metadata aside
    backend = open_store(store, settings=Settings(graphs=[MOVIES], sparql_tool=True))
    film_iri, person_iri = (f"<{ENTITIES}{name[3:]}>" for name in (FILM, PERSON))  # no kg: prefix in a store of N-Triples
    (film, person, walked, absent, total, graphs, other), stats = call_all(backend, [
        ("find_entities", {"name": FILM_NAME, "limit": 3}),
        ("find_entities", {"name": PERSON_NAME, "limit": 3}),
        ("follow", {"entity": film_iri, "path": ["directed_by"]}),
        ("search", {"entity": person_iri}),
        ("sparql", {"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"}),
        ("sparql", {"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"}),
        ("sparql", {"query": f"SELECT ?s WHERE {{ GRAPH <{PEOPLE}> {{ ?s ?p ?o }} }} LIMIT 5"}),
    ])
    assert f"| {film_iri} | {FILM_NAME} |" in film.content[0].text and "looked up by name index)" in film.content[0].text
    assert "no entity has this name" in person.content[0].text and DIRECTOR[3:] in walked.content[0].text
    assert absent.is_error and "not in the KG" in absent.content[0].text
    assert f"| {sources['triples'][MOVIES]} |" in total.content[0].text
    assert MOVIES in graphs.content[0].text and PEOPLE not in graphs.content[0].text
    assert other.is_error and "is not one of the graphs this server reads" in other.content[0].text
    assert stats["triples"] == sources["triples"][MOVIES] and MOVIES in stats["graphs"]
    backend.close()

    both = open_store(store)  # no --graph, no default graph: every named graph, as one
    assert both.read_graphs == tuple(sorted([MOVIES, PEOPLE])) and both.stats().triples == sum(sources["triples"].values())
    assert both.resolve_entity(f"<{ENTITIES}In_Bloom>") and both.resolve_entity(f"<{ENTITIES}{PERSON[3:]}>")
    both.close()
    with pytest.raises(ConfigError, match=f"no graph http://nope/g .*its named graphs: {MOVIES}, {PEOPLE}"):
        open_store(store, settings=Settings(graphs=["http://nope/g"]))


def test_a_load_into_a_graph_refuses_what_cannot_be_one_and_leaves_the_store(sources, tmp_path):
    store = tmp_path / "store"
    load_sources([sources["files"][MOVIES]], store, progress=False, graph=MOVIES)
    quads = tmp_path / "people.nq"
    quads.write_text(f'<http://x/a> <http://x/p> "1" <{PEOPLE}> .\n')
    with pytest.raises(LoadError, match="names the graph of each statement itself"):
        load_sources([quads], store, progress=False, graph=PEOPLE)
    with pytest.raises(LoadError, match="bookkeeping graph"):
        load_sources([sources["files"][PEOPLE]], store, progress=False, graph="urn:kg-mcp:meta")
    kept = open_store(store)
    assert kept.read_graphs == (MOVIES,) and kept.stats().triples == sources["triples"][MOVIES]
    kept.close()
