"""The KG a benchmark runs on: its KB's store (found in a cache folder, or built there with kg-mcp's
loader), a store, endpoint or MCP server the user names, or Wikidata.

A benchmark with a KB (MetaQA, PathQuestion) gets one store per distinct set of KB files, named
after the benchmark's KB and a short fingerprint of the files (path, size, modification time),
so that a user's own copy never reuses a store built from another. Loading is atomic, so a store
that exists is complete.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg_mcp.agents.evaluation.benchmarks import Benchmark
from kg_mcp.agents.kg_client import KGClient

from kg_mcp.errors import ConfigError
from kg_mcp.settings import cache_dir as settings_cache_dir


def store_path(benchmark: Benchmark, cache_dir: Path | None = None) -> Path:
    if not benchmark.kb_files:
        raise ConfigError(f"{benchmark.name} has no KB to load: it runs over a live endpoint (--wikidata or --sparql URL).")
    fingerprint = hashlib.sha256()
    for kb in benchmark.kb_files:
        stat = kb.stat() if kb.exists() else None
        fingerprint.update(f"{kb.resolve()}|{stat.st_size if stat else 0}|{stat.st_mtime_ns if stat else 0}\n".encode())
    stem = benchmark.kb_files[0].parent.name if benchmark.name.startswith("metaqa") else benchmark.name
    return (cache_dir or settings_cache_dir()) / "stores" / f"{stem}-{fingerprint.hexdigest()[:10]}"


def load_command(benchmark: Benchmark, store: Path) -> str:
    """The one command that builds the store by hand."""
    files = " ".join(shlex.quote(str(k)) for k in benchmark.kb_files)
    return f"kg-mcp load {files} --store {shlex.quote(str(store))}"


def ensure_store(benchmark: Benchmark, cache_dir: Path | None = None, *, build: bool = True, progress: bool = True) -> Path:
    """The benchmark's store, built from its KB files first if it is not there (unless `build` is off:
    then the error names the command that builds it)."""
    from kg_mcp.loading import LoadError, load_sources

    store = store_path(benchmark, cache_dir)
    if store.is_dir():
        return store
    missing = [k for k in benchmark.kb_files if not k.is_file()]
    if missing:
        raise ConfigError(f"{benchmark.name}: KB file missing: {missing[0]} (give the KB with --data or --kb).")
    if not build:
        raise ConfigError(f"No store for {benchmark.name} yet. Build it with:\n  {load_command(benchmark, store)}")
    try:
        load_sources(benchmark.kb_files, store, progress=progress)
    except LoadError as e:
        raise ConfigError(f"Could not build the {benchmark.name} store at {store}: {e}") from None
    return store


@dataclass
class KGTarget:
    """Where the drivers' MCP client connects: an in-process server over a backend, a stdio command,
    or an HTTP URL. Each worker opens its own client."""

    backend: Any = None
    command: str | None = None
    url: str | None = None
    token: str | None = None

    def client(self) -> KGClient:
        if self.url:
            return KGClient.connect(url=self.url, token=self.token)
        if self.command:
            return KGClient.connect(command=self.command)
        return KGClient.connect(server=self.backend)

    def describe(self) -> str:
        if self.url:
            return self.url
        if self.command:
            return f"stdio: {self.command}"
        return str(getattr(self.backend, "location", None) or getattr(self.backend, "url", "") or "in-process")


def choose_kg(
    benchmark: Benchmark,
    *,
    store: Path | None = None,
    sparql: str | None = None,
    wikidata: bool = False,
    command: str | None = None,
    url: str | None = None,
    token: str | None = None,
    profile: str | None = None,
    settings: Any = None,
    cache_dir: Path | None = None,
    build: bool = True,
    progress: bool = True,
) -> KGTarget:
    """The KG named by the user (an MCP server URL or command, a store, an endpoint, Wikidata), else the
    benchmark's own: its KB's store (built if needed), or Wikidata for QALD-10, CoLoTa and the Wikidata
    sets of Think-on-Graph's release. Freebase sets need the user's endpoint (read with the freebase
    profile unless --profile says otherwise)."""
    from kg_mcp.backends import open_backend

    if sum(bool(x) for x in (store, sparql, wikidata, command, url)) > 1:
        raise ConfigError("Give one KG: --store, --sparql, --wikidata, --server-cmd or --url.")
    if url:
        return KGTarget(url=url, token=token)
    if command:
        return KGTarget(command=command)
    if benchmark.endpoint == "freebase":
        if wikidata:
            raise ConfigError(
                f"{benchmark.name} is a Freebase benchmark: give a Freebase endpoint with --sparql URL, not --wikidata."
            )
        if not (store or sparql):
            raise ConfigError(
                f"{benchmark.name} runs over Freebase, which kg-mcp does not download: give a Freebase SPARQL endpoint "
                "with --sparql URL (e.g. Virtuoso at http://localhost:8890/sparql), a store with --store, or a server "
                "with --url or --server-cmd."
            )
        profile = profile or "freebase"
    if not (store or sparql or wikidata):
        if benchmark.kb_files:
            store = ensure_store(benchmark, cache_dir, build=build, progress=progress)
        else:
            wikidata = True
    return KGTarget(backend=open_backend(store=store, sparql=sparql, wikidata=wikidata, profile=profile, settings=settings))
