"""The prefixes declared for every user query: the ones the tools print ids with.

Every tool shows `brick:Chiller` or `wd:Q42`; a query that uses those ids as printed runs without
PREFIX lines, as the Wikidata Query Service declares `wd:` and `wdt:` for its users. The names are
the server's vocabulary (its profile's, the store's recorded ones, an endpoint's discovered ones,
`--prefix NAME=IRI`), and the empty prefix stands for the namespace whose ids the tools print bare
(MetaQA's `directed_by`, Freebase's `m.0v1xv`): `:directed_by` in a query. A PREFIX of the query's
own wins. The writer (kg_mcp.sparql.writer) resolves them as it resolves the query's own, so the
text that runs holds every IRI in full and none of these names.

>>> declared({"brick": "https://brickschema.org/schema/Brick#", "bad name": "http://x/"}, ["http://kg/relation/"])
(('brick', 'https://brickschema.org/schema/Brick#'), ('', 'http://kg/relation/'))
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kg_mcp.sparql.lexing import PN_PREFIX

_NAME = re.compile(PN_PREFIX)
_NAMESPACE = re.compile(r'[A-Za-z][A-Za-z0-9+.\-]*:[^<>"{}|^`\\\x00-\x20]*')


def declared(prefixes: Mapping[str, str], bare: Sequence[str] = ()) -> tuple[tuple[str, str], ...]:
    """(name, namespace) pairs a query may use undeclared: each of `prefixes` whose name SPARQL can
    write and whose namespace is an absolute IRI, and the empty prefix for the first of `bare`."""
    pairs = [(name, iri) for name, iri in prefixes.items() if _NAME.fullmatch(name) and _NAMESPACE.fullmatch(iri)]
    if bare and "" not in prefixes and _NAMESPACE.fullmatch(bare[0]):
        pairs.append(("", bare[0]))
    return tuple(pairs)


def listed(pairs: Sequence[tuple[str, str]], *, limit_chars: int = 1500) -> str:
    """The declared prefixes as a line for a model to read, within about `limit_chars` (the rest by
    name only, then counted).

    >>> listed([("rdf", "http://www.w3.org/1999/02/22-rdf-syntax-ns#"), ("", "http://kg/relation/")])
    'rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>, : <http://kg/relation/> (ids printed bare, e.g. :name)'
    """
    parts, names, used = [], [], 0
    for name, iri in pairs:
        part = f"{name}: <{iri}>" + (" (ids printed bare, e.g. :name)" if not name else "")
        if used + len(part) <= limit_chars:
            parts.append(part)
            used += len(part) + 2
        else:
            names.append(f"{name}:")
    shown = ", ".join(parts)
    if names:
        shown += f"; also {', '.join(names[:40])}" + (f" and {len(names) - 40} more" if len(names) > 40 else "")
    return shown
