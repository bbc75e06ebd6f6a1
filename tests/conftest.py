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


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"benchmark data missing: {path} (CI runs with ../shared beside the repository)")
    return path


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


@pytest.fixture(scope="session")
def sparql_endpoint(tmp_path_factory):
    """`oxigraph serve` on a loopback port, loaded with the real Wikidata sample; yields the query URL."""
    location = tmp_path_factory.mktemp("oxigraph-serve")
    cli = oxigraph_cli()
    subprocess.run([cli, "load", "--location", str(location), "--file", str(_require(WIKIDATA_SAMPLE))], check=True, capture_output=True)
    port = free_port()
    process = subprocess.Popen(
        [cli, "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/query"
    try:
        wait_for_http(f"http://127.0.0.1:{port}/")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def memory_backend():
    """Build an in-memory store from Turtle text, with the profile detected as for any store."""
    from kg_mcp.backends import _local_backend

    def build(turtle: str, profile: str | None = None, settings: Settings | None = None) -> OxigraphBackend:
        store = ox.Store()
        store.load(turtle.encode(), format=ox.RdfFormat.TURTLE)
        return _local_backend(store, "test", profile, settings or Settings())

    return build
