"""The name index of one store: built with each load, opened (or built if missing) with the store."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pyoxigraph as ox

from kg_mcp.names.build import FORMAT_VERSION, build_index, fill_index, index_path, read_index_meta
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
    """The profile named, else the one recorded in the store, else the one its predicates show."""
    chosen = name or read_meta(store).get("profile")
    return get_profile(chosen) if chosen else detect_profile(lambda query: bool(store.query(query)))


def build_store_index(
    store: ox.Store, store_dir: str | Path, *, profile: Profile, languages: Sequence[str], progress: bool = True
) -> int:
    """(Re)build the index file inside `store_dir` from `store`; returns the names indexed."""
    return build_index(
        store,
        index_path(store_dir),
        label_predicates=profile.label_predicates,
        alias_predicates=profile.alias_predicates,
        languages=languages,
        stamp=store_stamp(store),
        progress=progress,
    )


def is_current(store: ox.Store, store_dir: str | Path, profile: Profile, languages: Sequence[str]) -> bool:
    meta = read_index_meta(index_path(store_dir))
    return bool(meta) and meta == {
        **meta,
        "version": FORMAT_VERSION,
        "languages": list(languages),
        "label_predicates": list(profile.label_predicates),
        "alias_predicates": list(profile.alias_predicates),
        "stamp": store_stamp(store),
    }


def open_store_index(
    store: ox.Store, store_dir: str | Path, profile: Profile, languages: Sequence[str], *, progress: bool = True
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
    return NameIndex.open(index_path(store_dir))


def memory_index(store: ox.Store, profile: Profile, languages: Sequence[str]) -> NameIndex:
    """An index held in memory, for in-memory stores (the demo KG, tests)."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    fill_index(connection, store, profile.label_predicates, profile.alias_predicates, languages, progress=False)
    return NameIndex(connection, "memory")
