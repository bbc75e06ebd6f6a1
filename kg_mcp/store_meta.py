"""kg-mcp's bookkeeping inside an Oxigraph store: one JSON document in a named graph of its own.

The document records the store's prefixes, the namespaces minted for plain-text KBs, the schema
profile, and one entry per load. It travels with the store (backups, copies) and is invisible
to queries over the default graph.
"""

from __future__ import annotations

import json
from typing import Any

import pyoxigraph as ox

from kg_mcp.namespaces import META_GRAPH, META_JSON, META_SUBJECT, OWN_GRAPHS

_GRAPH = ox.NamedNode(META_GRAPH)
_SUBJECT = ox.NamedNode(META_SUBJECT)
_PREDICATE = ox.NamedNode(META_JSON)


def read_meta(store: ox.Store) -> dict[str, Any]:
    """The store's metadata document, or an empty dict for a store kg-mcp did not write."""
    for quad in store.quads_for_pattern(_SUBJECT, _PREDICATE, None, _GRAPH):
        return json.loads(quad.object.value)
    return {}


def write_meta(store: ox.Store, meta: dict[str, Any]) -> None:
    """Replace the store's metadata document (a transactional update of one quad)."""
    old = list(store.quads_for_pattern(_SUBJECT, _PREDICATE, None, _GRAPH))
    for quad in old:
        store.remove(quad)
    store.add(ox.Quad(_SUBJECT, _PREDICATE, ox.Literal(json.dumps(meta, sort_keys=True)), _GRAPH))


def named_data_graphs(store: ox.Store) -> list[str]:
    """The store's named graphs, kg-mcp's own bookkeeping graphs aside."""
    return sorted(g.value for g in store.named_graphs() if isinstance(g, ox.NamedNode) and g.value not in OWN_GRAPHS)
