"""WebQuestions names its topic by a Freebase page (`/en/jamaica`), not a mid: resolve it in the KG.

Freebase's dump keeps such keys as `type.object.key` literals with their namespace
(`ns:m.03_r3 ns:type.object.key "/en/jamaica"`). The key is looked up that way first, through the
backend when the run holds one (`--sparql URL`, `--store DIR`) or through the server's `sparql`
tool when it offers one; when the KG has no such key, the name the key spells (`jamaica`) goes
to `find_entities`. Each question records which way its topic was found: "key", "name", or
"unresolved" (the driver then starts without a topic entity).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kg_mcp.agents.evaluation.tog_benchmarks import key_name
from kg_mcp.agents.kg_client import KGClient

KEY_PREDICATE = "http://rdf.freebase.com/ns/type.object.key"
METHODS = ("key", "name", "unresolved")


def key_query(key: str) -> str:
    r"""The SELECT that finds the entity holding a key (the key quoted as a SPARQL string).

    >>> key_query('/en/a"b')
    'SELECT ?e WHERE { ?e <http://rdf.freebase.com/ns/type.object.key> "/en/a\\"b" } LIMIT 2'
    """
    import pyoxigraph as ox

    return f"SELECT ?e WHERE {{ ?e <{KEY_PREDICATE}> {ox.Literal(key)} }} LIMIT 2"


async def _by_key(kg: KGClient, key: str, backend: Any) -> str | None:
    """The compact id of the entity holding `key`, or None (no such key, or no way to ask)."""
    if backend is not None:
        import pyoxigraph as ox

        rows = await asyncio.to_thread(backend.run_query, key_query(key), 2)
        found = [row[0] for row in rows.rows if isinstance(row[0], ox.NamedNode)]
        return backend.vocab.compact(found[0]) if found else None
    if any(tool.name == "sparql" for tool in kg.tools):
        result = await kg.call_tool("sparql", {"query": key_query(key)})
        rows = (result.data or {}).get("rows") or []
        if not result.is_error and rows and rows[0] and rows[0][0]:
            return rows[0][0].get("id")
    return None


async def resolve_topic_key(kg: KGClient, key: str, backend: Any = None) -> tuple[dict[str, str | None], str]:
    """({name: id} for the driver, the method that found it: "key", "name" or "unresolved")."""
    name = key_name(key)
    entity = await _by_key(kg, key, backend)
    if entity:
        return {name: entity}, "key"
    result = await kg.call_tool("find_entities", {"name": name, "limit": 1})
    hits = (result.data or {}).get("entities") or []
    if not result.is_error and hits and hits[0].get("id"):
        return {name: hits[0]["id"]}, "name"
    return {}, "unresolved"
