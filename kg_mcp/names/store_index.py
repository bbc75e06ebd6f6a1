"""The name indexes of one store: built with each load, opened (or built if missing) with the store.

The store's own index holds the names of its default graph. A graph set (the named graphs one
caller reads, kg_mcp.backends.graph_access) has an index of its own beside it, holding only the
names of those graphs: `kg-mcp load --graph IRI` builds the one of that graph and rebuilds every
other the store has; a server builds a missing one when a caller first needs it.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pyoxigraph as ox

from kg_mcp.names.build import FORMAT_VERSION, INDEX_FILE, build_index, fill_index, index_path, read_index_meta
from kg_mcp.names.index import NameIndex
from kg_mcp.names.pairs import ensure_word_pairs
from kg_mcp.observability import metrics
from kg_mcp.profiles import Profile, detect_profile, get_profile
from kg_mcp.store_meta import read_meta

log = logging.getLogger(__name__)


def store_stamp(store: ox.Store) -> str:
    """Identifies the store's last load: an index with another stamp is out of date."""
    loads = read_meta(store).get("loads", [])
    return f"{len(loads)}:{loads[-1].get('at', '')}" if loads else "0"


def store_profile(store: ox.Store, name: str | None = None) -> Profile:
    """The profile named, else the one recorded in the store, else the one its predicates show
    anywhere in it (default graph and named graphs alike: one profile for the whole store, so that
    the index a load builds for a graph set is the one a server reading those graphs expects)."""
    chosen = name or read_meta(store).get("profile")
    if chosen:
        return get_profile(chosen)
    return detect_profile(lambda query: bool(store.query(query, use_default_graph_as_union=True)))


def graphs_index_path(store_dir: str | Path, graphs: Sequence[str]) -> Path:
    """Where the index of the named `graphs` (read as one) lives in the store directory."""
    key = hashlib.sha256("\n".join(sorted(graphs)).encode()).hexdigest()[:16]
    return Path(store_dir) / f"{Path(INDEX_FILE).stem}-graphs-{key}.sqlite"


def graph_set_indexes(store_dir: str | Path) -> list[tuple[str, ...]]:
    """The graph sets whose indexes the store directory holds."""
    found = []
    for path in sorted(Path(store_dir).glob(f"{Path(INDEX_FILE).stem}-graphs-*.sqlite")):
        graphs = (read_index_meta(path) or {}).get("graphs")
        if graphs and graphs_index_path(store_dir, graphs) == path:
            found.append(tuple(graphs))
    return found


def build_store_index(
    store: ox.Store, store_dir: str | Path, *, profile: Profile, languages: Sequence[str], progress: bool = True,
    graphs: Sequence[str] = (),
) -> int:
    """(Re)build the index file inside `store_dir` from `store` (its default graph, or the named
    `graphs` read as one); returns the names indexed."""
    return build_index(
        store,
        graphs_index_path(store_dir, graphs) if graphs else index_path(store_dir),
        label_predicates=profile.label_predicates,
        alias_predicates=profile.alias_predicates,
        languages=languages,
        stamp=store_stamp(store),
        progress=progress,
        graphs=graphs,
    )


def is_current(
    store: ox.Store, store_dir: str | Path, profile: Profile, languages: Sequence[str], graphs: Sequence[str] = ()
) -> bool:
    meta = read_index_meta(graphs_index_path(store_dir, graphs) if graphs else index_path(store_dir))
    return bool(meta) and meta == {
        **meta,
        "version": FORMAT_VERSION,
        "languages": list(languages),
        "label_predicates": list(profile.label_predicates),
        "alias_predicates": list(profile.alias_predicates),
        "stamp": store_stamp(store),
        **({"graphs": sorted(graphs)} if graphs else {}),
    }


def open_graphs_index(
    store: ox.Store, store_dir: str | Path, graphs: Sequence[str], profile: Profile, languages: Sequence[str],
    *, read_ahead: bool = False,
) -> NameIndex | None:
    """The index of the named `graphs` if the directory holds a current one (None: build it first)."""
    if not is_current(store, store_dir, profile, languages, graphs):
        return None
    path = graphs_index_path(store_dir, graphs)
    ensure_word_pairs(path)
    return NameIndex.open(path, read_ahead=read_ahead)


def open_store_index(
    store: ox.Store, store_dir: str | Path, profile: Profile, languages: Sequence[str], *, progress: bool = True,
    read_ahead: bool = False,
) -> NameIndex | None:
    """The store's index, built first if it is missing or out of date; None if it cannot be written."""
    if not is_current(store, store_dir, profile, languages):
        log.warning("building the name index of %s (once; `kg-mcp load` keeps it up to date)", store_dir)
        try:
            with metrics.name_index_build("store"):
                build_store_index(store, store_dir, profile=profile, languages=languages, progress=progress)
        except (OSError, sqlite3.Error) as e:
            log.warning("cannot build the name index in %s (%s): find_entities falls back to label queries", store_dir, e)
            return None
    else:
        ensure_word_pairs(index_path(store_dir))
    return NameIndex.open(index_path(store_dir), read_ahead=read_ahead)


def memory_index(store: ox.Store, profile: Profile, languages: Sequence[str], graphs: Sequence[str] = ()) -> NameIndex:
    """An index held in memory, for in-memory stores (the demo KG, tests): of the default graph, or
    of the named `graphs` read as one."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    fill_index(connection, store, profile.label_predicates, profile.alias_predicates, languages, progress=False,
               graphs=graphs)
    return NameIndex(connection, "memory")
