"""Stores behind the tools: `open_backend` picks one from the command line's choices."""

from __future__ import annotations

import logging
from pathlib import Path

import pyoxigraph as ox

from kg_mcp.backends import _queries as q
from kg_mcp.backends.endpoint_names import EndpointNames
from kg_mcp.backends.base import (
    Backend, Direction, EntityHit, Lookup, Neighbour, Qualifier, RelationCount, Rows, StoreStats, Values,
)
from kg_mcp.backends.named_graphs import first_plan, plan_graphs
from kg_mcp.backends.namespace_discovery import Discovered, discover
from kg_mcp.backends.oxigraph_store import OxigraphBackend, default_graph_empty, named_data_graphs
from kg_mcp.backends.remote import RemoteBackend
from kg_mcp.errors import ConfigError, EndpointError
from kg_mcp.ids import Vocabulary
from kg_mcp.names.store_index import open_store_index, store_profile
from kg_mcp.profiles import GENERIC, Profile, detect_profile, get_profile
from kg_mcp.settings import Settings
from kg_mcp.store_meta import read_meta

__all__ = [
    "Backend",
    "Direction",
    "EntityHit",
    "Lookup",
    "Neighbour",
    "Qualifier",
    "RelationCount",
    "Rows",
    "StoreStats",
    "Values",
    "open_backend",
    "open_store",
    "open_endpoint",
    "open_demo",
]

log = logging.getLogger(__name__)

WIKIDATA_ENDPOINT = "https://query.wikidata.org/sparql"


def open_backend(
    *,
    store: str | Path | None = None,
    sparql: str | None = None,
    wikidata: bool = False,
    profile: str | None = None,
    settings: Settings | None = None,
    named_graphs: bool = False,
) -> Backend:
    """The backend for one of: a store directory, an endpoint URL, Wikidata, or (none given) the demo KG.
    `named_graphs`: a store without --graph serves every named graph it holds (under --graph-access)."""
    settings = settings or Settings()
    chosen = [x for x in (store, sparql, wikidata or None) if x]
    if len(chosen) > 1:
        raise ConfigError("Give one of --store, --sparql or --wikidata, not several.")
    if settings.graphs and not (sparql or wikidata or store):
        raise ConfigError(
            "--graph (KG_MCP_GRAPHS) picks named graphs of a store (--store, loaded with `kg-mcp load --graph IRI`) "
            "or of a SPARQL endpoint (--sparql); the demo KG has none."
        )
    if store:
        return open_store(store, profile=profile, settings=settings, named_graphs=named_graphs)
    if sparql or wikidata:
        return open_endpoint(sparql or WIKIDATA_ENDPOINT, profile=profile or ("wikidata" if wikidata else None), settings=settings)
    return open_demo(settings=settings, profile=profile)


def open_store(
    path: str | Path, *, profile: str | None = None, settings: Settings | None = None, named_graphs: bool = False
) -> OxigraphBackend:
    """A store made by `kg-mcp load`, opened read-only (serving never writes). It is read through its
    default graph, or through the named graphs of settings.graphs (--graph), or with no --graph
    through every named graph it holds (as an endpoint serves its data graphs) where its default
    graph is empty or `named_graphs` (a server whose callers each read their graphs, --graph-access)."""
    from kg_mcp.loading.atomic import recover_interrupted_swap

    path = Path(path)
    recover_interrupted_swap(path)
    if not path.is_dir():
        raise ConfigError(f"No store at {path}. Create one with: kg-mcp load FILE... --store {path}")
    try:
        store = ox.Store.read_only(str(path))
    except OSError as e:
        raise ConfigError(f"Cannot open the store at {path}: {e}") from e
    settings = settings or Settings()
    _check_graphs(store, path, settings.graphs)
    if not settings.graphs and (named_graphs or default_graph_empty(store)):
        every = _every_named_graph(store, path, required=named_graphs)
        settings = settings.model_copy(update={"graphs": every}) if every else settings
    backend = _local_backend(store, str(path), profile, settings, path=str(path))
    # The default graph's index; named graphs have theirs (kg_mcp.backends.store_names).
    default_index = settings.name_index and not settings.graphs
    backend.use_names(open_store_index(
        store, path, backend.profile, settings.languages, read_ahead=settings.warm_name_index) if default_index else None)
    return backend


def _every_named_graph(store: ox.Store, path: Path, *, required: bool) -> list[str]:
    """The store's data graphs, read as one where no --graph chooses; none `required` is refused."""
    graphs = named_data_graphs(store)
    if not graphs and required:
        raise ConfigError(
            f"--graph-access gives each caller named graphs of the store, and {path} holds none: load each "
            f"graph's data with: kg-mcp load FILE --store {path} --graph IRI"
        )
    if graphs and not default_graph_empty(store):
        log.warning("%s: callers read its named graphs (--graph-access), and none reads its default graph: "
                    "load that data with --graph IRI to grant it", path)
    return graphs


def _check_graphs(store: ox.Store, path: Path, graphs: list[str]) -> None:
    """Refuse --graph values that are no named graph of the store, naming those it holds."""
    missing = [g for g in graphs if not store.contains_named_graph(ox.NamedNode(g))]
    if missing:
        held = named_data_graphs(store)
        listed = ", ".join(held[:10]) + (" ..." if len(held) > 10 else "") if held else "none"
        raise ConfigError(
            f"The store at {path} has no graph {missing[0]} (its named graphs: {listed}). "
            f"Load one with: kg-mcp load FILE --store {path} --graph {missing[0]}"
        )


def open_demo(*, settings: Settings | None = None, profile: str | None = None) -> OxigraphBackend:
    """The small Wikidata-shaped demo KG that ships with kg-mcp, in memory."""
    from kg_mcp.demo import demo_path

    store = ox.Store()
    store.load(path=str(demo_path()), format=ox.RdfFormat.TURTLE)
    return _local_backend(store, "demo KG (in memory)", profile or "wikidata", settings or Settings())


def open_endpoint(url: str, *, profile: str | None = None, settings: Settings | None = None) -> RemoteBackend:
    """A remote SPARQL endpoint; the profile is detected with a few ASK queries unless given."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{url!r} is not an http(s) URL of a SPARQL endpoint.")
    settings = settings or Settings()
    probe = RemoteBackend(url, GENERIC, Vocabulary(GENERIC), settings)
    try:
        # Which graphs every query reads (kg_mcp.backends.named_graphs): the chosen ones, or the data
        # graphs. With discovery off nothing is asked at start: chosen graphs are read unchecked,
        # else the default graph.
        look = settings.prefix_discovery
        chosen_graphs = tuple(settings.graphs)
        plan = first_plan(url, chosen_graphs)
        # Wikidata's query service is a triple store (Blazegraph in triples mode): no graphs to list.
        if look and (settings.graphs or profile != "wikidata"):
            try:
                plan = plan_graphs(url, chosen_graphs, probe._solutions, probe._boolean, lambda: probe.http.engine)
            except EndpointError as e:  # discovery only shortens output: it must never stop a start
                log.warning("could not list the endpoint's graphs (%s); reading it as it answers", e.message)
                look = False
        probe.http.graphs = plan.graphs
        chosen = get_profile(profile) if profile else _detect(probe._boolean)
        log.info("endpoint %s: profile %s", url, chosen.name)
        # Looked at once per server: the endpoint's namespaces become prefixes, as a store's are at load time.
        known = {**chosen.prefixes, **settings.prefixes}
        found = discover(probe._solutions, known, plan.sampled) if look else Discovered()
    finally:
        probe.close()
    vocab = Vocabulary(chosen, {**found.prefixes, **settings.prefixes}, found.bare)
    vocab.sources.update({**found.sources, **{ns: "setting" for ns in settings.prefixes.values()}})
    backend = RemoteBackend(url, chosen, vocab, settings, graphs=plan)
    if settings.name_index and backend.text_search is None:  # only the cache is read here, no request
        backend.names = EndpointNames(backend, settings)
    return backend


def _local_backend(
    store: ox.Store, location: str, profile: str | None, settings: Settings, *, path: str | None = None
) -> OxigraphBackend:
    meta = read_meta(store)
    chosen = store_profile(store, profile)  # as the loads chose it for the name indexes
    # The label predicates in use are those of the graphs read (settings.graphs, else the default graph).
    probe = OxigraphBackend(store, GENERIC, Vocabulary(GENERIC), settings, location=location, graphs=settings.graphs)
    bare = [meta["relation_namespace"]] if meta.get("relation_namespace") else []
    vocab = Vocabulary(chosen, {**meta.get("prefixes", {}), **settings.prefixes}, bare)
    vocab.sources.update({ns: "store" for ns in [*meta.get("prefixes", {}).values(), *bare]})
    vocab.sources.update({ns: "setting" for ns in settings.prefixes.values()})
    used = [p for p in chosen.label_predicates if probe._boolean(q.ask_predicate(p))]
    log.info("store %s: profile %s", location, chosen.name)
    return OxigraphBackend(
        store, chosen, vocab, settings, location=location, path=path, label_predicates=used, graphs=settings.graphs
    )


def _detect(ask) -> Profile:
    return detect_profile(ask)
