"""`kg://entity/{id}`: an entity's card, a resource a user can attach to a conversation.

The card says what the entity is (label, description, types), every relation around it with its
number of triples, and its first triples each way; it is held to the tools' output cap. It is a
resource template, so `resources/list` stays the same few entries however big the KG is; the id
is completed from what the user types (kg_mcp.protocol.completion).
"""

from __future__ import annotations

import pyoxigraph as ox

from kg_mcp.backends import Backend, Direction
from kg_mcp.namespaces import RDF_TYPE
from kg_mcp.profiles import FREEBASE, WD_PROP
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, capped, relation_name, table

ENTITY_TEMPLATE = "kg://entity/{id}"
RELATIONS_SHOWN = 40
TRIPLES_OUT = 20
TRIPLES_IN = 10
TYPES_SHOWN = 10
# What an entity is, in the vocabularies the profiles know: rdf:type, Wikidata's instance of
# (P31), Freebase's type.object.type.
TYPE_PREDICATES = (RDF_TYPE, WD_PROP + "direct/P31", FREEBASE + "type.object.type")


def entity_uri(compact_id: str) -> str:
    """The card's URI for an id as the tools show it (percent-encoded, as RFC 6570 expands {id}).

    >>> entity_uri("wd:Q42")
    'kg://entity/wd%3AQ42'
    """
    from urllib.parse import quote

    return "kg://entity/" + quote(compact_id, safe="")


def entity_card(backend: Backend, settings: Settings, ref: str) -> str:
    """The card of the entity `ref` (an id as the tools show it, or its exact label), in markdown."""
    node = backend.resolve_entity(ref)
    counts = backend.relations_around(node)
    outgoing = backend.neighbours(node, Direction.OUTGOING, None, TRIPLES_OUT + 1)
    incoming = backend.neighbours(node, Direction.INCOMING, None, TRIPLES_IN + 1)
    types = [n.value for n in backend.neighbours(node, Direction.OUTGOING, [ox.NamedNode(p) for p in TYPE_PREDICATES], TYPES_SHOWN)]
    namer = Namer(backend, settings, [node, *types, *(c.predicate for c in counts)])
    namer.add(t for n in [*outgoing, *incoming] for t in (n.predicate, n.value))
    description = backend.descriptions([node]).get(node)

    lines = [f"# {namer.heading(node)}"]
    if description:
        lines.append(description)
    if types:
        lines.append("Types: " + ", ".join(namer.heading(t) if isinstance(t, ox.NamedNode) else namer.value_text(t) for t in types))
    n_out = sum(1 for c in counts if c.direction is Direction.OUTGOING)
    lines.append(f"\n## Relations: {n_out} outgoing, {len(counts) - n_out} incoming (~ = incoming)")
    shown = counts[:RELATIONS_SHOWN]
    lines.append(table(
        ("relation", "label", "triples"),
        [(relation_name(namer, c.predicate, c.direction), namer.predicate_label(c.predicate), f"{c.count}{'' if c.exact else '+'}") for c in shown],
        settings,
    ))
    if len(counts) > len(shown):
        lines.append(f"... and {len(counts) - len(shown)} more relations (get_relations lists them all).")
    for title, rows, cap in (("First triples out", outgoing, TRIPLES_OUT), ("First triples in", incoming, TRIPLES_IN)):
        if not rows:
            continue
        more = " (more: search)" if len(rows) > cap else ""
        lines.append(f"\n## {title}{more}")
        lines.append(table(
            ("property", "value", "label"),
            [(namer.id(n.predicate), namer.value_text(n.value), namer.label(n.value)) for n in rows[:cap]],
            settings,
        ))
    return capped("\n".join(lines) + "\n", settings, "Use search or get_relations for the rest.")

