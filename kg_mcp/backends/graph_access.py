"""Which named graphs a caller may read: `--graph-access FILE` maps scopes to graphs, and each call
reads through the graphs its token's scopes grant.

    [scopes]
    "graph:movies" = ["http://example.org/graph/metaqa"]
    "graph:people" = ["http://example.org/graph/people", "http://example.org/graph/places"]
    "graph:all" = ["*"]          # every graph the server serves

A caller reads the union of what its scopes grant; a caller with none of them reads nothing and is
told so. The shared token of --auth-token-env, and any token with the scope `kg:all-graphs`, reads
every graph the server serves, as does every caller of a server without --graph-access.

The graph set travels with the call as a context variable (`reading(graphs)`, set by the server
for each request): the backends read it where they choose a query's dataset, so no tool changes.
On an endpoint the set becomes the SPARQL protocol's default-graph-uri / named-graph-uri, as
--graph does (kg_mcp.backends.named_graphs): the default graph is their merge, and GRAPH patterns
see those graphs only. On a local store (kg_mcp.backends.oxigraph_store) the same set is the
dataset of every query and the graphs of every index read. Caches that remember what was read
(labels, the KG summary, name indexes) are kept per graph set.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kg_mcp.errors import ConfigError

ALL = "*"
ALL_GRAPHS_SCOPE = "kg:all-graphs"

# The graphs of the call being served: None reads what the server serves (no restriction).
_current: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar("kg_mcp_graphs", default=None)


@contextmanager
def reading(graphs: Iterable[str] | None) -> Iterator[None]:
    """Within the block, every query reads `graphs` only (None: everything the server serves)."""
    token = _current.set(frozenset(graphs) if graphs is not None else None)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> frozenset[str] | None:
    """The graphs the call being served may read (None: no restriction)."""
    return _current.get()


def dataset(served: tuple[str, ...]) -> tuple[str, ...]:
    """The dataset of a query: the caller's graphs when restricted, else the server's own choice.

    >>> dataset(("http://a",)) == ("http://a",)
    True
    >>> with reading(["http://b", "http://a"]):
    ...     dataset(())
    ('http://a', 'http://b')
    """
    graphs = _current.get()
    return served if graphs is None else tuple(sorted(graphs))


def cache_key() -> str:
    """A short key of the current graph set, for caches that must not mix graph sets ('' unrestricted)."""
    graphs = _current.get()
    if graphs is None:
        return ""
    return hashlib.sha256("\n".join(sorted(graphs)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class GraphAccess:
    """The scopes of a --graph-access file and the graphs each grants (ALL: every graph served)."""

    grants: dict[str, tuple[str, ...]]
    source: str = ""  # the file it was read from

    @property
    def scopes(self) -> list[str]:
        return list(self.grants)

    def graphs_for(self, scopes: Iterable[str], served: Iterable[str] = ()) -> frozenset[str] | None:
        """The graphs `scopes` may read: None for all the server serves, else a set (maybe empty).

        >>> access = GraphAccess({"graph:movies": ("http://m",), "graph:all": (ALL,)})
        >>> sorted(access.graphs_for(["kg:read", "graph:movies"])), access.graphs_for(["graph:all"])
        (['http://m'], None)
        >>> access.graphs_for(["kg:read"])
        frozenset()
        """
        held = set(scopes)
        if ALL_GRAPHS_SCOPE in held:
            return None
        granted: set[str] = set()
        for scope in held & set(self.grants):
            if ALL in self.grants[scope]:
                return None
            granted.update(self.grants[scope])
        served = set(served)
        return frozenset(granted & served if served else granted)


MAX_GRANT_SETS = 64  # graph sets a grant file may give callers, each with a name index of its own


def grant_sets(access: GraphAccess, served: Iterable[str]) -> list[tuple[str, ...]]:
    """Every graph set a caller can be given: the union of the graphs of any scopes it holds
    together, and every graph served (kg:all-graphs, ["*"]); each sorted, each once, none empty.
    Each needs a name index of its own (kg_mcp.backends.store_names), built before serving.

    >>> access = GraphAccess({"graph:a": ("http://a",), "graph:b": ("http://b",), "graph:ab": ("http://a", "http://b")})
    >>> grant_sets(access, ["http://a", "http://b", "http://c"])
    [('http://a',), ('http://a', 'http://b'), ('http://a', 'http://b', 'http://c'), ('http://b',)]
    """
    served = sorted(set(served))
    unions: set[tuple[str, ...]] = {tuple(served)} if served else set()
    for grant in access.grants.values():
        graphs = frozenset(served) if ALL in grant else frozenset(grant) & frozenset(served)
        if not graphs:
            continue
        unions |= {tuple(sorted(graphs | set(other))) for other in unions} | {tuple(sorted(graphs))}
        if len(unions) > MAX_GRANT_SETS:
            raise ConfigError(
                f"The graph-access file gives callers more than {MAX_GRANT_SETS} different sets of graphs, each "
                "needing a name index of its own: give scopes that grant graphs together instead of one scope a graph."
            )
    return sorted(unions)


def read_graph_access(path: str | Path) -> GraphAccess:
    """The --graph-access file at `path`, or a ConfigError saying what to fix."""
    from kg_mcp.settings import graph_iri_problem, read_toml_file

    path = Path(path)
    document = read_toml_file(path, "graph-access file")
    if set(document) != {"scopes"} or not isinstance(document["scopes"], dict) or not document["scopes"]:
        raise ConfigError(
            f'The graph-access file {path} holds one table, [scopes], mapping each scope to its graphs: '
            f'"graph:movies" = ["http://example.org/graph/movies"].'
        )
    grants = {}
    for scope, graphs in document["scopes"].items():
        where = f'The graph-access file {path}, "{scope}"'
        if not scope or any(c.isspace() for c in scope) or scope in ("kg:read", "kg:sparql", ALL_GRAPHS_SCOPE):
            raise ConfigError(f"{where}: a graph scope is one word, other than kg:read, kg:sparql and {ALL_GRAPHS_SCOPE}.")
        if not isinstance(graphs, list) or not graphs or not all(isinstance(g, str) for g in graphs):
            raise ConfigError(f'{where}: give a list of graph IRIs, or ["*"] for every graph.')
        for graph in graphs:
            if graph != ALL and (problem := graph_iri_problem(graph)) is not None:
                raise ConfigError(f"{where}: {problem}")
        grants[scope] = tuple(graphs)
    return GraphAccess(grants, str(path))
