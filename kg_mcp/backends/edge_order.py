"""The order listings keep, and a date shown as precisely as the KG states it.

Edges sorted here sort as `_queries.EDGE_ORDER` sorts them in SPARQL, so a page read from an
engine and a page cut from rows already read follow each other.
"""

from __future__ import annotations

import re

import pyoxigraph as ox

from kg_mcp.backends.base import Neighbour, Term

_XSD = "http://www.w3.org/2001/XMLSchema#"
_MONTH = 10  # Wikibase time precisions: 9 year, 10 month, 11 day (lower: decade, century, ...)


def with_precision(value: Term | None, precision: Term | None) -> Term | None:
    """A date literal cut to the precision the KG states: a year-precision date becomes xsd:gYear.

    >>> with_precision(ox.Literal("1974-01-01T00:00:00Z", datatype=ox.NamedNode(_XSD + "dateTime")), ox.Literal("9"))
    <Literal value=1974 datatype=<NamedNode value=http://www.w3.org/2001/XMLSchema#gYear>>
    """
    if not isinstance(value, ox.Literal) or value.datatype.value != _XSD + "dateTime" or precision is None:
        return value
    try:
        level = int(precision.value)
    except ValueError:
        return value
    match = re.match(r"^([+-]?\d{1,})-(\d\d)", value.value)
    if match is None or level > _MONTH:
        return value
    year = match.group(1).lstrip("+")
    if level == _MONTH:
        return ox.Literal(f"{year}-{match.group(2)}", datatype=ox.NamedNode(_XSD + "gYearMonth"))
    return ox.Literal(year, datatype=ox.NamedNode(_XSD + "gYear"))


def natural_key(text: str) -> tuple:
    """Sort key with digit runs compared as numbers (P580 before P1545)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def edge_order(row: Neighbour) -> tuple:
    """An edge's place in `_queries.EDGE_ORDER`: by the predicate's and the value's text (a blank node,
    whose STR is an error, first), IRIs before literals of the same text, then language and datatype."""
    value = row.value
    if isinstance(value, ox.BlankNode):
        return row.predicate.value, 0, "", False, "", "", value.value
    literal = isinstance(value, ox.Literal)
    language = (value.language or "") if literal else ""
    datatype = value.datatype.value if literal and not value.language else ""
    return row.predicate.value, 1, value.value, literal, language, datatype, ""
