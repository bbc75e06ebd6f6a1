"""Each caller reads only the named graphs its scopes grant (`--graph-access`), on both backends:
two graphs (Wikidata-shaped art from the demo KG, MetaQA's films) and data that no caller is granted
(a "secret" edge into the art), held by `oxigraph serve` (served by `kg-mcp serve --sparql`; the
secret in a third named graph) and by a local store loaded with `kg-mcp load --graph` (served by
`kg-mcp serve --store`; the secret in the store's default graph). Each server has named tokens and a real OpenID provider (tests/oidc.py), and each caller
the SDK's client. Nothing of another graph, nor of the default graph, reaches a caller through any
tool, lookup, completion, resource, the instructions or `sparql`; the audit log names each subject.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import httpx2
import pyoxigraph as ox
import pytest
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PromptReference, ResourceTemplateReference

from conftest import _oxigraph_serve, free_port, text_kb_as_ntriples, wait_for_http
from oidc import Memory, Provider, signing_key
from kg_mcp.backends.graph_access import read_graph_access
from kg_mcp.demo import demo_path
from kg_mcp.errors import ConfigError
from kg_mcp.protocol.entities import entity_uri
from kg_mcp.serving.tokens import new_token

CLIENT_SECRET = "client-secret-" + "x" * 24
ALL_SCOPES = "kg:read kg:sparql graph:art graph:films"

ART = "http://example.org/graph/art"
FILMS = "http://example.org/graph/films"
FILM_LINES = 60  # MetaQA's lines about "Catch Me If You Can" and around it
FILM = "<http://kg-mcp.local/entity/Catch_Me_If_You_Can>"
VAN_GOGH = "<http://www.wikidata.org/entity/Q5582>"
# Granted to nobody: an edge into van Gogh and a name of its own.
SECRET = "Secret Default Thing"
SECRET_GRAPH = "http://example.org/graph/secret"
SECRET_LINES = (
    '<http://example.org/secret/x> <http://www.w3.org/2000/01/rdf-schema#label> "Secret Default Thing" .\n'
    "<http://example.org/secret/x> <http://example.org/secret/knows> <http://www.wikidata.org/entity/Q5582> .\n"
)
BACKENDS = ["endpoint", "store"]
ENTITY = ResourceTemplateReference(type="ref/resource", uri="kg://entity/{id}")


@pytest.fixture(scope="module")
def graph_files(tmp_path_factory, data_dir):
    """The two graphs' N-Triples and the default graph's."""
    work = tmp_path_factory.mktemp("graph-access")
    art = work / "art.nt"
    store = ox.Store()
    store.load(path=str(demo_path()), format=ox.RdfFormat.TURTLE)
    store.dump(str(art), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    lines = (data_dir / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Catch Me If You Can|"))
    films = text_kb_as_ntriples(lines[start - 20 : start - 20 + FILM_LINES], work / "films.nt")
    secret = work / "secret.nt"
    secret.write_text(SECRET_LINES)
    return work, {ART: art, FILMS: films}, secret


def kg_sources(backend: str, graph_files):
    """What `kg-mcp serve` is given (a generator: the engine stops when it is closed): `oxigraph
    serve` over the graphs, or a store loaded graph by graph with `kg-mcp load --graph`."""
    work, named, secret = graph_files
    if backend == "endpoint":
        serving = _oxigraph_serve(work / "oxigraph", None, named={**named, SECRET_GRAPH: secret})
        yield ["--sparql", next(serving)]
        serving.close()
        return
    store = work / "store"
    for graph, path in named.items():
        load = [sys.executable, "-m", "kg_mcp", "load", str(path), "--store", str(store), "--graph", graph]
        subprocess.run(load, check=True, capture_output=True, timeout=300)
    subprocess.run([sys.executable, "-m", "kg_mcp", "load", str(secret), "--store", str(store)],
                   check=True, capture_output=True, timeout=300)
    yield ["--store", str(store)]


def machine(client_id: str, scope: str) -> dict:
    return {"client_id": client_id, "client_secret": CLIENT_SECRET, "grant_types": ["client_credentials"],
            "redirect_uris": [], "response_types": [], "scope": ALL_SCOPES}


@pytest.fixture(scope="module")
def provider(graph_files):
    """One provider for the module: a resource (server port) per backend."""
    work = graph_files[0]
    ports = {backend: free_port() for backend in BACKENDS}
    grants = {"art-ci": "kg:read graph:art", "films-ci": "kg:read graph:films"}
    running = Provider(work, {
        "keys": [signing_key()],
        "clients": [machine(name, scope) for name, scope in grants.items()],
        "scope_by_client": grants,
        "users": {},
        "resources": {f"http://127.0.0.1:{port}/mcp": {"scope": ALL_SCOPES} for port in ports.values()},
    })
    running.start()
    yield running, ports
    running.stop()


@pytest.fixture(scope="module", params=BACKENDS)
def team(request, graph_files, provider):
    backend = request.param
    work = graph_files[0] / backend
    work.mkdir(exist_ok=True)
    provider, ports = provider
    engine = kg_sources(backend, graph_files)
    kg = next(engine)
    port = ports[backend]
    resource = f"http://127.0.0.1:{port}/mcp"
    tokens = {
        "alice": new_token("alice", ["kg:read", "kg:sparql", "graph:art"]),
        "bob": new_token("bob", ["kg:read", "kg:sparql", "graph:films"]),
        "carol": new_token("carol", ["kg:read"]),
        "dave": new_token("dave", ["kg:read", "kg:sparql", "kg:all-graphs"]),
    }
    (work / "tokens.toml").write_text("\n".join(table for _, table in tokens.values()))
    (work / "access.toml").write_text(f'[scopes]\n"graph:art" = ["{ART}"]\n"graph:films" = ["{FILMS}"]\n')
    command = [sys.executable, "-m", "kg_mcp", "serve", *kg, "--transport", "http", "--port", str(port),
               "--enable-sparql", "--tokens", str(work / "tokens.toml"), "--graph-access", str(work / "access.toml"),
               "--audit-log", str(work / "audit.jsonl"), "--oauth-issuer", provider.issuer, "--public-url", resource]
    log = open(work / "server.log", "w")
    env = {**os.environ, "KG_MCP_CACHE": str(work / "cache")}
    if backend == "store":  # the long calls in a worker process, the caller's graphs sent with each
        env["KG_MCP_WORKER_PROCESSES"] = "1"
    process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=90)
        yield {"url": resource, "tokens": {n: t for n, (t, _) in tokens.items()}, "audit": work / "audit.jsonl",
               "issuer": provider.issuer, "backend": backend}
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
        engine.close()


async def session_of(team, name: str) -> dict:
    """What one caller gets: instructions, lookups, completions, every tool on the other graph's
    entities, resources, sparql."""
    seen: dict = {}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {team['tokens'][name]}"}, timeout=60) as http:
        async with Client(streamable_http_client(team["url"], http_client=http)) as client:
            seen["instructions"] = client.instructions or ""
            seen["methods"] = {}
            for label in ("Vincent van Gogh", "Catch Me If You Can", SECRET):
                found = await client.call_tool("find_entities", {"name": label})
                seen[label] = [] if found.is_error else [e["id"] for e in found.structured_content["entities"]]
                seen["methods"][label] = found.content[0].text
            seen["completions"] = {}
            for typed in ("Vincent van", "Catch Me If", "Secret Def"):
                done = (await client.complete(ENTITY, {"name": "id", "value": typed})).completion
                seen["completions"][typed] = done.values
            question = PromptReference(type="ref/prompt", name="search_on_graph")
            for typed in ("who painted The Starry", "who directed Catch Me If You"):
                done = (await client.complete(question, {"name": "question", "value": typed})).completion
                seen["completions"][typed] = done.values
            seen["schema"] = (await client.read_resource("kg://schema")).contents[0].text
            seen["stats"] = json.loads((await client.read_resource("kg://stats")).contents[0].text)
            seen["cards"] = {}
            for entity in (VAN_GOGH, FILM):
                try:
                    seen["cards"][entity] = (await client.read_resource(entity_uri(entity))).contents[0].text
                except Exception as error:  # noqa: BLE001 - the SDK's error for a resource not found
                    seen["cards"][entity] = f"error: {error}"
            queries = {
                "graphs": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }",
                "labels": 'SELECT ?s WHERE { ?s ?p ?o FILTER(STR(?o) = "Vincent van Gogh") }',
                "films": 'SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } FILTER(CONTAINS(STR(?o), "Spielberg")) }',
                "secret": 'SELECT ?s ?p ?o WHERE { ?s ?p ?o FILTER(CONTAINS(STR(?s), "secret")) }',
                "everything": "SELECT ?s ?p ?o WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }",
            }
            for key, query in queries.items():
                result = await client.call_tool("sparql", {"query": query})
                seen[key] = json.dumps(result.structured_content) if not result.is_error else "refused"
            ways_round = {
                "from named": f"SELECT * FROM NAMED <{FILMS}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
                "the other's graph": f"SELECT * WHERE {{ GRAPH <{FILMS if name == 'alice' else ART}> {{ ?s ?p ?o }} }}",
                "service": f"SELECT * WHERE {{ SERVICE <{team['url']}> {{ ?s ?p ?o }} }}",
            }
            seen["refused"] = {}
            for key, query in ways_round.items():
                result = await client.call_tool("sparql", {"query": query})
                seen["refused"][key] = result.is_error
            seen["tool calls"] = {}
            for tool, arguments in {
                "search": {"entity": "wd:Q5582"},
                "get_relations": {"entity": "wd:Q5582"},
                "explore_kg": {"entity": "wd:Q5582", "relations": ["wdt:P19"]},
                "follow": {"entity": "wd:Q5582", "path": ["wdt:P19"]},
            }.items():
                result = await client.call_tool(tool, arguments)
                seen["tool calls"][tool] = result.content[0].text
            # A traversal named the same by both: each continues its own, never the other's tree.
            question = {"question": "Where was Vincent van Gogh born?", "session": "team-q1"}
            if name == "alice":  # two steps down from van Gogh: a tree to climb back up
                await client.call_tool("kgr_search", {**question, "entity": "wd:Q5582"})
                await client.call_tool("kgr_search", {**question, "entity": "wd:Q9883"})
            back = await client.call_tool("kgr_search", {"backtrack": True, "session": "team-q1"})
            seen["tool calls"]["kgr_search"] = back.content[0].text
    return seen


async def test_each_caller_reads_only_its_graphs(team):
    alice = await session_of(team, "alice")
    bob = await session_of(team, "bob")

    assert alice["Vincent van Gogh"] and not alice["Catch Me If You Can"]
    assert bob["Catch Me If You Can"] and not bob["Vincent van Gogh"]
    assert not alice[SECRET] and not bob[SECRET]
    if team["backend"] == "store":  # each graph's own name index, built by kg-mcp load --graph
        assert "by name index)" in alice["methods"]["Vincent van Gogh"] and "by name index)" in bob["methods"]["Catch Me If You Can"]
    assert any("Q5582" in id for id in alice["completions"]["Vincent van"]) and not bob["completions"]["Vincent van"]
    assert "Catch_Me_If_You_Can" in bob["completions"]["Catch Me If"][0] and not alice["completions"]["Catch Me If"]
    assert not alice["completions"]["Secret Def"] and not bob["completions"]["Secret Def"]
    assert "who painted The Starry Night" in alice["completions"]["who painted The Starry"]
    assert not bob["completions"]["who painted The Starry"] and not alice["completions"]["who directed Catch Me If You"]
    assert "who directed Catch Me If You Can" in bob["completions"]["who directed Catch Me If You"]
    assert "directed_by" in bob["instructions"] and "directed_by" not in alice["instructions"]
    assert "Zundert" not in bob["instructions"] and "Spielberg" not in alice["instructions"]
    assert "directed_by" in bob["schema"] and "directed_by" not in alice["schema"]
    assert alice["stats"]["triples"] != bob["stats"]["triples"]
    assert "Vincent van Gogh" in alice["cards"][VAN_GOGH] and bob["cards"][VAN_GOGH].startswith("error")
    assert "Spielberg" in bob["cards"][FILM] and alice["cards"][FILM].startswith("error")
    assert ART in alice["graphs"] and FILMS not in alice["graphs"]
    assert FILMS in bob["graphs"] and ART not in bob["graphs"]
    assert "Q5582" in alice["labels"] and "Q5582" not in bob["labels"]
    assert "Spielberg" not in alice["films"] and "rows" in alice["films"]
    for seen in (alice, bob):  # the secret is granted to nobody
        assert "rows" in seen["secret"] and "example.org/secret" not in seen["secret"]
        assert "rows" in seen["everything"] and "example.org/secret" not in seen["everything"]
        assert SECRET_GRAPH not in seen["graphs"]
    assert "Spielberg" not in alice["everything"] and "Zundert" not in bob["everything"]
    assert all(alice["refused"].values()) and all(bob["refused"].values())
    for tool, text in alice["tool calls"].items():  # the secret edge into van Gogh stays unseen
        assert "secret" not in text.lower(), tool
    for tool, text in bob["tool calls"].items():  # van Gogh (wd:Q5582) is in the art graph only
        assert "Zundert" not in text, tool
    # Bob never named an art entity: a traversal of the same name is his own, not alice's tree.
    assert "wd:Q" not in bob["tool calls"]["kgr_search"]
    assert "Zundert" in alice["tool calls"]["follow"] and "Q5582" in alice["tool calls"]["kgr_search"]

    lines = [json.loads(line) for line in team["audit"].read_text().splitlines()]
    by_subject = {(line["subject"], tuple(line["graphs"] or ())) for line in lines if line["kind"] == "tool"}
    assert ("alice", (ART,)) in by_subject and ("bob", (FILMS,)) in by_subject


async def test_two_machines_signed_in_by_oauth_each_read_their_graph(team):
    """The 'done when': two callers of one server, signed in by the SDK's OAuth client with client
    credentials, each see only their graph, and the audit log names each call's subject."""
    metadata = httpx2.get(team["url"].replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=60).json()
    assert {"kg:read", "kg:sparql", "graph:art", "graph:films"} <= set(metadata["scopes_supported"])
    seen = {}
    for name in ("art-ci", "films-ci"):
        auth = ClientCredentialsOAuthProvider(team["url"], Memory(), name, CLIENT_SECRET, issuer=team["issuer"])
        async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
            async with Client(streamable_http_client(team["url"], http_client=http)) as client:
                found = {}
                for label in ("Vincent van Gogh", "Catch Me If You Can"):
                    result = await client.call_tool("find_entities", {"name": label})
                    found[label] = bool(result.structured_content["entities"])
                seen[name] = (found, client.instructions or "")
    assert seen["art-ci"][0] == {"Vincent van Gogh": True, "Catch Me If You Can": False}
    assert seen["films-ci"][0] == {"Vincent van Gogh": False, "Catch Me If You Can": True}
    assert "directed_by" in seen["films-ci"][1] and "directed_by" not in seen["art-ci"][1]
    lines = [json.loads(line) for line in team["audit"].read_text().splitlines()]
    calls = {(line["subject"], tuple(line["graphs"] or ())) for line in lines if line["name"] == "find_entities"}
    assert ("art-ci", (ART,)) in calls and ("films-ci", (FILMS,)) in calls


async def test_a_caller_granted_no_graph_is_told_so(team):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {team['tokens']['carol']}"}, timeout=60) as http:
        async with Client(streamable_http_client(team["url"], http_client=http)) as client:
            assert "grants no graph" in (client.instructions or "")
            result = await client.call_tool("find_entities", {"name": "Vincent van Gogh"})
            assert result.is_error and "graph:art" in result.content[0].text


async def test_every_graph_granted_is_every_graph_served_and_no_more(team):
    """kg:all-graphs reads every graph the server serves: on the endpoint the secret's graph too, on the
    store only its named graphs, never its default graph (no scope grants that)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {team['tokens']['dave']}"}, timeout=60) as http:
        async with Client(streamable_http_client(team["url"], http_client=http)) as client:
            found = {}
            for label in ("Vincent van Gogh", "Catch Me If You Can", SECRET):
                result = await client.call_tool("find_entities", {"name": label})
                found[label] = bool(result.structured_content["entities"])
            marks = 'FILTER(CONTAINS(STR(?o), "Spielberg") || CONTAINS(STR(?o), "Zundert") || CONTAINS(STR(?s), "secret"))'
            everything = await client.call_tool("sparql", {"query": f"SELECT ?s ?o WHERE {{ ?s ?p ?o {marks} }}"})
            walked = await client.call_tool("search", {"entity": VAN_GOGH, "direction": "incoming"})
    served = team["backend"] == "endpoint"
    assert found == {"Vincent van Gogh": True, "Catch Me If You Can": True, SECRET: served}
    rows = json.dumps(everything.structured_content)
    assert "Spielberg" in rows and "Zundert" in rows and ("example.org/secret" in rows) == served
    assert not walked.is_error and ("secret" in walked.content[0].text.lower()) == served


def test_a_bad_graph_access_file_is_refused_in_our_words(tmp_path):
    path = tmp_path / "access.toml"
    path.write_text('[scopes]\n"graph:art" = ["not an iri"]\n')
    with pytest.raises(ConfigError, match="not a graph IRI"):
        read_graph_access(path)
    path.write_text('[scopes]\n"kg:read" = ["http://example.org/g"]\n')
    with pytest.raises(ConfigError, match="other than kg:read"):
        read_graph_access(path)


def test_a_read_only_replica_without_a_grants_index_says_so_and_base_metadata_names_no_graph(tmp_path, graph_files):
    """A store loaded graph by graph has each graph's name index, not the index of both together; a
    replica that opens it read-only (as the systemd unit's ReadOnlyPaths= makes it) cannot build that
    one: it says so at start, in /readyz (still ready), and in the lookup that falls back. With
    KG_MCP_METADATA_SCOPES=base (settings as an environment file gives them), the public metadata
    lists kg:read and kg:sparql only, and a caller granted no graph is not told the graph scopes."""
    from bench.team_rig import read_only

    _, named, _ = graph_files
    store = tmp_path / "kg" / "store"
    for graph, path in named.items():
        load = [sys.executable, "-m", "kg_mcp", "load", str(path), "--store", str(store), "--graph", graph]
        subprocess.run(load, check=True, capture_output=True, timeout=300)
    (tmp_path / "access.toml").write_text(f'[scopes]\n"graph:art" = ["{ART}"]\n"graph:films" = ["{FILMS}"]\n')
    both, both_table = new_token("both", ["kg:read", "graph:art", "graph:films"])
    carol, carol_table = new_token("carol", ["kg:read"])
    (tmp_path / "tokens.toml").write_text(both_table + carol_table)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {**os.environ, "KG_MCP_CACHE": str(tmp_path / "cache"), "KG_MCP_TOKENS": str(tmp_path / "tokens.toml"),
           "KG_MCP_GRAPH_ACCESS": str(tmp_path / "access.toml"), "KG_MCP_OAUTH_ISSUER": "http://127.0.0.1:9/realms/x",
           "KG_MCP_PUBLIC_URL": url, "KG_MCP_METADATA_SCOPES": "base"}
    command = [sys.executable, "-m", "kg_mcp", "serve", "--store", str(store), "--transport", "http", "--port", str(port)]
    log = open(tmp_path / "server.log", "w")
    process = subprocess.Popen(read_only(command, [str(store.parent)]), env=env, stdout=log, stderr=log)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=90)
        ready = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json()["ready"] is True
        warning = ready.json()["warnings"]["name_indexes"]
        assert f"{ART} + {FILMS}" in warning and f"kg-mcp index --store {store} --graph-access" in warning
        metadata = httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp", timeout=30).json()
        assert metadata["scopes_supported"] == ["kg:read", "kg:sparql"] and metadata["resource"] == url

        async def lookup(token: str):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    return await client.call_tool("find_entities", {"name": "Vincent van Gogh"})

        found = asyncio.run(lookup(both)).structured_content
        assert found["entities"] and "no name index of the graphs you read" in found["method"]
        refused = asyncio.run(lookup(carol))
        text = refused.content[0].text
        assert refused.is_error and "grants no graph" in text and "Ask the server's operator" in text and "graph:" not in text
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
    started = (tmp_path / "server.log").read_text()
    assert "Read-only file system" in started and "have no name index" in started
