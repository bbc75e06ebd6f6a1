"""Anonymous nodes summed up: a listing names its named rows and counts its blank nodes by kind.

An OWL class's superclasses are a few named classes and, often, a hundred restrictions; a SHACL
shape's values are property shapes; a list is cells. Read one by one they flood a listing, so by
default (`anonymous="summary"`) a listing shows the named rows and one line instead of the
anonymous ones:

    109 anonymous values: owl:Restriction 104 (on 98 properties), owl:unionOf 5. To list them:
    search(entity="linkml:SlotDefinition", properties_to_filter_for=["rdfs:subClassOf"], anonymous="list")

A call that asks for them (`anonymous="list"`) lists them, with their content inline, after the
named rows; so does a call about them: one that starts at a blank node, or whose rows are all
anonymous.

A blank node's kind is what it is built as: an OWL class expression (owl:unionOf,
owl:intersectionOf, owl:complementOf, owl:oneOf), else its type (owl:Restriction,
sh:PropertyShape, ...), else a list (rdf:first), else a property shape when it has sh:path, else
"other". A restriction kind also says on how many properties (owl:onProperty) its nodes are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction
from kg_mcp.backends.base import Term
from kg_mcp.errors import InvalidInput
from kg_mcp.quoting import quoted

Anonymous = Literal["summary", "list"]
CHOICES = ("summary", "list")
CLASSIFIED = 1000  # blank nodes whose kind a summary reads at most (the rest are counted, not sorted)
KINDS_SHOWN = 8  # kinds named in the line; the rest are summed up as "other"

_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_OWL = "http://www.w3.org/2002/07/owl#"
_SH = "http://www.w3.org/ns/shacl#"
_TYPE, _FIRST, _LIST = ox.NamedNode(_RDF + "type"), ox.NamedNode(_RDF + "first"), ox.NamedNode(_RDF + "List")
_ON_PROPERTY, _PATH = ox.NamedNode(_OWL + "onProperty"), ox.NamedNode(_SH + "path")
_OPERATORS = tuple(ox.NamedNode(_OWL + n) for n in ("unionOf", "intersectionOf", "complementOf", "oneOf"))
_READ = (_TYPE, _FIRST, _ON_PROPERTY, _PATH, *_OPERATORS)
_EDGES = 16  # edges of those predicates read per node


class KindCount(BaseModel):
    kind: str  # "owl:Restriction", "owl:unionOf", "RDF list", "property shape", ...
    count: int
    properties: int | None = None  # distinct owl:onProperty values of a restriction kind


class AnonymousSummary(BaseModel):
    """The anonymous rows a listing summed up instead of listing them."""

    total: int  # anonymous rows (or nodes) left out of the listing
    kinds: list[KindCount] = []
    sorted: int = 0  # of them, read and sorted into kinds (at most CLASSIFIED; 0 where the KG cannot read them)
    call: str = ""  # the call that lists them


def check_anonymous(anonymous: str) -> str:
    if anonymous not in CHOICES:
        raise InvalidInput(
            f'anonymous must be "summary" or "list"; got {quoted(str(anonymous))}.',
            '"summary" (the default) lists named rows and counts blank nodes by kind; "list" lists the blank nodes too.',
        )
    return anonymous


def lists_anonymous(anonymous: str, start: Term | Iterable[Term] | None = None) -> bool:
    """Whether blank nodes are listed: asked for, or the call starts at one."""
    starts = list(start) if isinstance(start, (list, tuple, set, frozenset)) else [start]
    return check_anonymous(anonymous) == "list" or any(isinstance(s, ox.BlankNode) for s in starts)


def anonymous_summary(backend: Backend, compact, nodes: Sequence[Term], total: int, call: str) -> AnonymousSummary:
    """`total` anonymous rows, of which `nodes` (blank nodes, any number) are sorted into kinds, the
    first CLASSIFIED of them; `call` lists them."""
    nodes = [n for n in dict.fromkeys(nodes) if isinstance(n, ox.BlankNode)][:CLASSIFIED]
    if not nodes or not backend.addresses_blank_nodes(nodes[0]):
        return AnonymousSummary(total=total, call=call)
    backend.read_blank_nodes(nodes)
    kinds: Counter[str] = Counter()
    properties: dict[str, set[Term]] = {}
    for node in nodes:
        edges = backend.neighbours(node, Direction.OUTGOING, list(_READ), _EDGES)
        kind = _kind(compact, edges)
        kinds[kind] += 1
        on = {e.value for e in edges if e.predicate == _ON_PROPERTY}
        if on:
            properties.setdefault(kind, set()).update(on)
    counted = [KindCount(kind=k, count=n, properties=len(properties[k]) if k in properties else None)
               for k, n in kinds.most_common()]
    return AnonymousSummary(total=total, kinds=counted, sorted=len(nodes), call=call)


def _kind(compact, edges) -> str:
    found = {}
    for e in edges:
        found.setdefault(e.predicate, []).append(e.value)
    for operator in _OPERATORS:
        if operator in found:
            return compact(operator)
    types = sorted(compact(t) for t in found.get(_TYPE, []) if isinstance(t, ox.NamedNode) and t != _LIST)
    if types:
        return types[0] if len(types) == 1 else " & ".join(types[:2])
    if _FIRST in found:
        return "RDF list"
    if _PATH in found:
        return "property shape"
    return "other"


def anonymous_line(what: str, anonymous: AnonymousSummary) -> str:
    """The listing's line for its anonymous rows, e.g. `109 anonymous values: owl:Restriction 104 (on
    98 properties), owl:unionOf 5. To list them: follow(..., anonymous="list")`."""
    parts = []
    for kind in anonymous.kinds[:KINDS_SHOWN]:
        on = f" (on {kind.properties:,} {'property' if kind.properties == 1 else 'properties'})" if kind.properties else ""
        parts.append(f"{kind.kind} {kind.count:,}{on}")
    rest = sum(k.count for k in anonymous.kinds[KINDS_SHOWN:])
    if rest:
        parts.append(f"other kinds {rest:,}")
    kinds = ""
    if parts:
        of = f" (kinds of the first {anonymous.sorted:,})" if anonymous.sorted < anonymous.total else ""
        kinds = f": {', '.join(parts)}{of}"
    how = f" To list them: {anonymous.call}" if anonymous.call else ""
    return f"{anonymous.total:,} {what} (blank nodes), not listed{kinds}.{how}"
