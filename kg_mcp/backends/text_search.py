"""Engines' own text search, for find_entities on endpoints: queries, and which engine has which.

Virtuoso matches words in literals with `bif:contains` (ranked by its own score), QLever with
`ql:contains-word` over literals indexed as text, and the Wikidata query service asks Wikidata's
entity search through `mwapi` (labels, aliases, typos, ranked as on wikidata.org). Each is much
cheaper than scanning labels with a FILTER, which large endpoints refuse or time out on.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyoxigraph as ox

from kg_mcp.backends._queries import label_pattern, wikidata_entity_search
from kg_mcp.names.fold import words

METHODS = {
    "mwapi": "Wikidata entity search (mwapi)",
    "virtuoso": "Virtuoso text search (bif:contains)",
    "qlever": "QLever text search (ql:contains-word)",
}

# A query that Virtuoso answers and any other engine rejects as a syntax error (bif: is not declared).
VIRTUOSO_PROBE = 'SELECT ?l WHERE { ?x ?p ?l . ?l bif:contains "\'kgmcpprobe\'" } LIMIT 1'

_QL = "http://qlever.cs.uni-freiburg.de/builtin-functions/"


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def virtuoso_contains(name: str, predicates: Sequence[str], limit: int) -> str | None:
    """Entities with a label containing every word of `name` (the last one as a prefix when long enough).

    >>> print(virtuoso_contains("Steven Spielb", ["http://www.w3.org/2000/01/rdf-schema#label"], 5))
    SELECT ?x (MAX(?sc) AS ?score) WHERE { { ?x <http://www.w3.org/2000/01/rdf-schema#label> ?l . BIND(<http://www.w3.org/2000/01/rdf-schema#label> AS ?lp) } ?l bif:contains "'steven' AND 'spielb*'" OPTION (SCORE ?sc) } GROUP BY ?x ORDER BY DESC(?score) LIMIT 5
    """
    typed = words(name)
    if not typed:
        return None
    # Virtuoso expands a prefix only after at least four characters.
    terms = [f"'{w}'" for w in typed[:-1]] + [f"'{typed[-1]}*'" if len(typed[-1]) >= 4 else f"'{typed[-1]}'"]
    return (
        f"SELECT ?x (MAX(?sc) AS ?score) WHERE {{ {label_pattern('?x', '?l', predicates)} "
        f"?l bif:contains {_string(' AND '.join(terms))} OPTION (SCORE ?sc) }} "
        f"GROUP BY ?x ORDER BY DESC(?score) LIMIT {int(limit)}"
    )


def qlever_contains(name: str, predicates: Sequence[str], limit: int) -> str | None:
    """Entities with a label holding every word of `name`, for a QLever index built with its literals as text.

    >>> "ql:contains-word \\"steven spielb*\\"" in qlever_contains("Steven Spielb", ["http://x/label"], 5)
    True
    """
    typed = words(name)
    if not typed:
        return None
    text = " ".join(typed[:-1] + [typed[-1] + "*" if len(typed[-1]) >= 3 else typed[-1]])
    return (
        f"PREFIX ql: <{_QL}> SELECT DISTINCT ?x WHERE {{ {label_pattern('?x', '?l', predicates)} "
        f"?t ql:contains-entity ?l . ?t ql:contains-word {_string(text)} }} LIMIT {int(limit)}"
    )


def search_query(engine: str, name: str, predicates: Sequence[str], languages: Sequence[str], limit: int) -> str | None:
    if engine == "mwapi":
        return wikidata_entity_search(name, languages[0] if languages else "en", limit)
    if engine == "virtuoso":
        return virtuoso_contains(name, predicates, limit)
    if engine == "qlever":
        return qlever_contains(name, predicates, limit)
    raise ValueError(engine)


def found(solution: ox.QuerySolution) -> ox.NamedNode | None:
    x = solution["x"]
    return x if isinstance(x, ox.NamedNode) else None
