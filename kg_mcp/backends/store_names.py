"""The name index of each graph set a local store is read through (kg_mcp.backends.graph_access).

A caller who reads some named graphs of a store looks names up in an index of those graphs only,
never in the store's own index (its default graph) nor in another graph set's: a name a caller
cannot read never shows in its lookups. `kg-mcp load --graph IRI` builds the index of that graph
(and rebuilds every other the store holds), `kg-mcp index --graph-access FILE` those of every set
of graphs the file can grant; a graph set without a current index gets one built in the
background when a caller first needs it (the server starts those of every grant), and lookups
answer with label queries meanwhile, over the same graphs. On a store the server cannot write
(replicas open it read-only) that build fails, and the server says so (`gaps`). An in-memory store indexes
a graph set in memory, at once (it is small).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence

import pyoxigraph as ox

from kg_mcp.names import NameIndex
from kg_mcp.names.store_index import build_store_index, memory_index, open_graphs_index
from kg_mcp.observability import metrics
from kg_mcp.profiles import Profile

log = logging.getLogger(__name__)

GraphSet = tuple[str, ...]  # sorted graph IRIs


class GraphSetNames:
    """The graph sets' name indexes of one store: opened, or built once, and kept."""

    def __init__(self, store: ox.Store, store_dir: str | None, profile: Profile, languages: Sequence[str], *,
                 read_ahead: bool = False):
        self._store = store
        self._dir = store_dir
        self._profile = profile
        self._languages = list(languages)
        self._read_ahead = read_ahead  # settings.warm_name_index (kg_mcp.names.warm)
        self._indexes: dict[GraphSet, NameIndex] = {}
        self._builds: dict[GraphSet, threading.Thread] = {}
        self._failed: set[GraphSet] = set()
        self._lock = threading.Lock()

    def index(self, graphs: GraphSet, *, begin: bool = True) -> NameIndex | None:
        """The index of `graphs` if there is one now; else None, its build begun if `begin`."""
        with self._lock:
            found = self._indexes.get(graphs)
            if found is not None or graphs in self._builds or graphs in self._failed:
                return found
            if self._dir is None:  # an in-memory store: small, indexed at once
                found = self._indexes[graphs] = memory_index(self._store, self._profile, self._languages, graphs)
                return found
            found = open_graphs_index(self._store, self._dir, graphs, self._profile, self._languages,
                                      read_ahead=self._read_ahead)
            if found is not None:
                self._indexes[graphs] = found
            elif begin:
                thread = threading.Thread(target=self._build, args=(graphs,), name="kg-mcp-graph-names", daemon=True)
                self._builds[graphs] = thread
                thread.start()
            return found

    def note(self, graphs: GraphSet) -> str:
        """What a lookup answered without the index says about it."""
        if graphs in self._failed:
            return "this server has no name index of the graphs you read: words inside a label and misspellings are not matched"
        return "the name index of the graphs you read is being built" if graphs in self._builds else ""

    def gaps(self) -> list[GraphSet]:
        """The graph sets asked for that have no index: being built, or that could not be built."""
        with self._lock:
            return sorted({*self._builds, *self._failed})

    def _build(self, graphs: GraphSet) -> None:
        log.warning("building the name index of %s in %s (once; `kg-mcp index --graph-access FILE` builds them all before serving)",
                    ", ".join(graphs), self._dir)
        try:
            with metrics.name_index_build("store"):
                build_store_index(self._store, self._dir, profile=self._profile, languages=self._languages,
                                  progress=False, graphs=graphs)
            opened = open_graphs_index(self._store, self._dir, graphs, self._profile, self._languages,
                                      read_ahead=self._read_ahead)
        except (OSError, sqlite3.Error) as e:
            log.warning("cannot build the name index of %s in %s (%s): find_entities uses label queries there",
                        ", ".join(graphs), self._dir, e)
            opened = None
        with self._lock:
            if opened is not None:
                self._indexes[graphs] = opened
            else:
                self._failed.add(graphs)
            del self._builds[graphs]

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the builds under way (tests, and close)."""
        for thread in list(self._builds.values()):
            thread.join(timeout)

    def close(self) -> None:
        self.wait(30)
        with self._lock:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
