"""SPARQL text for the backend's questions.

Every term is written with pyoxigraph's N-Triples serialisation (`str(term)`), which escapes
quotes, angle brackets and newlines; nothing a model typed is ever formatted in directly.
Queries are bounded (LIMIT) wherever the answer could be large.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyoxigraph as ox

from kg_mcp.backends.base import Direction, Term, Values
from kg_mcp.namespaces import RDF_TYPE
from kg_mcp.profiles import Profile


def values(var: str, terms: Sequence[Term]) -> str:
    return f"VALUES ?{var} {{ {' '.join(str(t) for t in terms)} }}"


def _string(text: str) -> str:
    return str(ox.Literal(text))


def visible(profile: Profile, var: str, node: ox.NamedNode) -> str:
    """A FILTER leaving out the profile's bookkeeping predicates ('' when nothing is hidden)."""
    if node.value.startswith(profile.unhide_for_subjects_in or ("\0",)):
        return ""
    tests = []
    if profile.hidden_predicates:
        hidden = ", ".join(f"<{p}>" for p in sorted(profile.hidden_predicates))
        tests.append(f"?{var} NOT IN ({hidden})")
    tests += [f"!STRSTARTS(STR(?{var}), {_string(ns)})" for ns in profile.hidden_namespaces]
    return f"FILTER({' && '.join(tests)})" if tests else ""


def edge_pattern(node: ox.NamedNode, direction: Direction) -> str:
    return f"{node} ?p ?o ." if direction is Direction.OUTGOING else f"?o ?p {node} ."


def kind_filter(kind: Values, var: str = "o") -> str:
    """A FILTER keeping the neighbours of one kind ('' for any)."""
    if kind is Values.NAMED:
        return f" FILTER(!isBlank(?{var}))"
    if kind is Values.ANONYMOUS:
        return f" FILTER(isBlank(?{var}))"
    return ""


# The order a listing's edges are read in, page after page: by their text, which every engine compares
# code point by code point (kg_mcp.backends.edge_order.edge_order is the same order in Python).
EDGE_ORDER = "STR(?p) STR(?o) isLiteral(?o) LANG(?o) STR(DATATYPE(?o)) ?o"


def neighbours(
    profile: Profile,
    node: ox.NamedNode,
    direction: Direction,
    predicates: Sequence[ox.NamedNode] | None,
    limit: int,
    label_predicates: Sequence[str] = (),
    languages: Sequence[str] = (),
    *,
    kind: Values = Values.ANY,
    offset: int = 0,
    ordered: bool = False,
) -> str:
    """Up to `limit` edges (only to neighbours of that `kind`), each with the neighbour's candidate
    labels (?ol), in one round trip, from the `offset`-th on; `ordered`: in EDGE_ORDER, so that a
    listing's pages follow one another on any engine.

    A neighbour labelled in several languages yields one row per label, so the row limit leaves
    room for them (the caller keeps the first `limit` edges); a second branch, with ?p unbound,
    carries the labels of `node` itself. Unordered, flat, without a subquery: Oxigraph evaluates
    it lazily and stops at the limit, which keeps a hub cheap.
    """
    restrict = (values("p", predicates) if predicates else visible(profile, "p", node)) + kind_filter(kind)
    edges = f"{restrict} {edge_pattern(node, direction)}"
    paged = ordered or offset or kind is not Values.ANY  # a listing's page: every page reads the same query
    if paged:
        order = f" ORDER BY {EDGE_ORDER}" if ordered else ""
        edges = f"{{ SELECT ?p ?o WHERE {{ {edges} }}{order} OFFSET {int(offset)} LIMIT {int(limit)} }}"
    if not label_predicates:
        return f"SELECT ?p ?o WHERE {{ {edges} }}" + ("" if paged else f" LIMIT {int(limit)}")
    langs = ", ".join(_string(lang) for lang in [*languages, ""])
    lang_filter = f"FILTER(LANG(?ol) IN ({langs}))"
    label = f"OPTIONAL {{ {label_pattern('?o', '?ol', label_predicates)} {lang_filter} }}"
    own = f"BIND({node} AS ?o) {label_pattern('?o', '?ol', label_predicates)} {lang_filter}"
    rows = int(limit) * (len(languages) + 1) + len(languages) + 1
    return f"SELECT ?p ?o ?lp ?ol WHERE {{ {{ {edges} {label} }} UNION {{ {own} }} }} LIMIT {rows}"


def count_neighbours(
    profile: Profile, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None, cap: int,
    kind: Values = Values.ANY,
) -> str:
    """Edges counted up to `cap` (a result equal to `cap` means "at least"): a hub is never read whole."""
    restrict = (values("p", predicates) if predicates else visible(profile, "p", node)) + kind_filter(kind)
    edges = f"SELECT ?p WHERE {{ {restrict} {edge_pattern(node, direction)} }} LIMIT {int(cap)}"
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ {{ {edges} }} }}"


def count_kinds(
    profile: Profile, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None, cap: int
) -> str:
    """Edges (?n) and those to blank nodes (?b) among the first `cap`: one read of them for both."""
    restrict = values("p", predicates) if predicates else visible(profile, "p", node)
    edges = f"SELECT ?o WHERE {{ {restrict} {edge_pattern(node, direction)} }} LIMIT {int(cap)}"
    return f"SELECT (COUNT(*) AS ?n) (SUM(IF(isBlank(?o), 1, 0)) AS ?b) WHERE {{ {{ {edges} }} }}"


def relation_counts(profile: Profile, node: ox.NamedNode, direction: Direction, cap: int) -> str:
    """Predicates among the first `cap` edges, with their counts there (all of them below the cap)."""
    edges = f"SELECT ?p WHERE {{ {edge_pattern(node, direction)} {visible(profile, 'p', node)} }} LIMIT {int(cap)}"
    return f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {{ {edges} }} }} GROUP BY ?p ORDER BY DESC(?n) ?p"


def relations_around(
    profile: Profile, node: ox.NamedNode, cap: int, label_predicates: Sequence[str], languages: Sequence[str]
) -> str:
    """Both directions' predicates with counts (?d "out"/"in") among the first `cap` edges, and,
    with ?p unbound, the labels of `node` itself: everything get_relations shows, in one query."""
    keep = visible(profile, "p", node)
    edges = (
        f'SELECT ?p ?d WHERE {{ {{ {node} ?p ?o . {keep} BIND("out" AS ?d) }} '
        f'UNION {{ ?o ?p {node} . {keep} BIND("in" AS ?d) }} }} LIMIT {int(cap)}'
    )
    counts = f"SELECT ?p ?d (COUNT(*) AS ?n) WHERE {{ {{ {edges} }} }} GROUP BY ?p ?d"
    if not label_predicates:
        return counts
    langs = ", ".join(_string(lang) for lang in [*languages, ""])
    own = f"BIND({node} AS ?o) {label_pattern('?o', '?ol', label_predicates)} FILTER(LANG(?ol) IN ({langs}))"
    return f"SELECT ?p ?d ?n ?o ?lp ?ol WHERE {{ {{ {counts} }} UNION {{ {own} }} }}"


def distinct_relations(profile: Profile, node: ox.NamedNode, limit: int) -> str:
    """Each visible predicate around `node` once per direction (?d), however many edges use it."""
    keep = visible(profile, "p", node)
    return (
        f'SELECT DISTINCT ?p ?d WHERE {{ {{ {node} ?p ?o . {keep} BIND("out" AS ?d) }} '
        f'UNION {{ ?o ?p {node} . {keep} BIND("in" AS ?d) }} }} LIMIT {int(limit)}'
    )


def qualifiers(profile: Profile, node: ox.NamedNode, claims: Sequence[ox.NamedNode]) -> str:
    """Main value and qualifiers of `node`'s statements for the given claim predicates (p:Pn)."""
    model = profile.statements
    assert model is not None
    precision = ox.NamedNode(model.time_precision)
    # The precision of a date sits on its value node (psv:/pqv:), next to the plain value.
    value_precision = (
        f"OPTIONAL {{ ?st ?vnp ?vn . ?vn {precision} ?vprec . FILTER(STRSTARTS(STR(?vnp), {_string(model.value_node)})) }}"
    )
    qualifier_precision = (
        f"OPTIONAL {{ ?st ?qnp ?qn . ?qn {precision} ?qprec . "
        f"FILTER(STRSTARTS(STR(?qnp), {_string(model.qualifier_node)}) && STRAFTER(STR(?qnp), {_string(model.qualifier_node)}) = STRAFTER(STR(?q), {_string(model.qualifier)})) }}"
    )
    return (
        "SELECT ?claim ?value ?q ?qv ?vprec ?qprec WHERE { "
        f"{values('claim', claims)} {node} ?claim ?st . ?st ?vp ?value . "
        # The trailing P skips the value-node namespaces (psv:, pqv:) nested under the same path.
        f"FILTER(STRSTARTS(STR(?vp), {_string(model.value + 'P')})) {value_precision} "
        f"OPTIONAL {{ ?st ?q ?qv . FILTER(STRSTARTS(STR(?q), {_string(model.qualifier + 'P')})) {qualifier_precision} }} }}"
    )


def step(sources: Sequence[ox.NamedNode], predicate: ox.NamedNode, direction: Direction, limit: int) -> str:
    """Distinct (?s, ?o) pairs along `predicate` from any of `sources` (?s is the source either way)."""
    edge = f"?s {predicate} ?o ." if direction is Direction.OUTGOING else f"?o {predicate} ?s ."
    return f"SELECT DISTINCT ?s ?o WHERE {{ {values('s', sources)} {edge} }} LIMIT {int(limit)}"


def closure_edges(sources: Sequence[ox.NamedNode], predicate: ox.NamedNode, direction: Direction, limit: int) -> str:
    """The `predicate` edges (?a to ?b, in the walk's direction) among all that `sources` reach by
    `predicate*`: one property-path query gives a transitive walk its whole subgraph."""
    if direction is Direction.OUTGOING:
        body = f"?s {predicate}* ?a . ?a {predicate} ?b ."
    else:
        body = f"?a {predicate}* ?s . ?b {predicate} ?a ."
    return f"SELECT DISTINCT ?a ?b WHERE {{ {values('s', sources)} {body} }} LIMIT {int(limit)}"


def marked_properties(entities: Sequence[ox.NamedNode], mark: tuple[str, str]) -> str:
    """Which property entities carry the profile's identifier mark (e.g. wikibase:propertyType wikibase:ExternalId)."""
    predicate, obj = (ox.NamedNode(t) for t in mark)
    return f"SELECT ?x WHERE {{ {values('x', entities)} ?x {predicate} {obj} }}"


def ask_triple(subject: ox.NamedNode, predicate: ox.NamedNode, obj: Term) -> str:
    return f"ASK {{ {subject} {predicate} {obj} }}"


def ask_exists(node: ox.NamedNode) -> str:
    return f"ASK {{ {{ {node} ?p ?o }} UNION {{ ?s ?p {node} }} }}"


def label_pattern(subject: str, obj: str, predicates: Sequence[str]) -> str:
    """`subject` has label `obj` through one of `predicates`, bound to ?lp.

    One triple pattern per predicate joined by UNION: a second VALUES block (for the predicates)
    would make Oxigraph plan a cross product, hundreds of times slower.
    """
    blocks = [f"{{ {subject} <{ox.NamedNode(p).value}> {obj} . BIND(<{ox.NamedNode(p).value}> AS ?lp) }}" for p in predicates]
    return " UNION ".join(blocks)


def labels(nodes: Sequence[Term], predicates: Sequence[str], languages: Sequence[str] | None) -> str:
    """Candidate labels of `nodes`; with `languages`, only those (and untagged) ones."""
    lang_filter = ""
    if languages:
        langs = ", ".join(_string(lang) for lang in [*languages, ""])
        lang_filter = f"FILTER(LANG(?l) IN ({langs}))"
    return f"SELECT ?x ?lp ?l WHERE {{ {values('x', nodes)} {label_pattern('?x', '?l', predicates)} {lang_filter} }}"


def any_label(nodes: Sequence[Term], predicates: Sequence[str]) -> str:
    return (
        f"SELECT ?x (SAMPLE(?l) AS ?label) WHERE {{ {values('x', nodes)} {label_pattern('?x', '?l', predicates)} }} "
        "GROUP BY ?x"
    )


def exact_label(name: str, predicates: Sequence[str], languages: Sequence[str], limit: int) -> str:
    """Entities whose label is exactly `name` (untagged, xsd:string or one of `languages`): index-friendly."""
    forms = [ox.Literal(name)] + [ox.Literal(name, language=lang) for lang in languages]
    return f"SELECT DISTINCT ?x WHERE {{ {values('l', forms)} {label_pattern('?x', '?l', predicates)} }} LIMIT {int(limit)}"


def label_prefix_scan(prefix: str, predicates: Sequence[str], limit: int) -> str:
    """Entities whose label starts with `prefix`, ignoring case: a scan, for stores that can afford it."""
    return (
        f"SELECT ?x ?l WHERE {{ {label_pattern('?x', '?l', predicates)} "
        f"FILTER(isLiteral(?l) && STRSTARTS(LCASE(STR(?l)), {_string(prefix.lower())})) }} LIMIT {int(limit)}"
    )


def label_pattern_scan(pattern: str, predicates: Sequence[str], limit: int) -> str:
    """Entities whose label matches the regular expression `pattern`, any case: a scan, bounded by `limit`."""
    return (
        f"SELECT ?x ?l WHERE {{ {label_pattern('?x', '?l', predicates)} "
        # REGEX on the literal itself: on Virtuoso's STR() of it, regexes read UTF-8 byte by byte.
        f'FILTER(isLiteral(?l) && REGEX(?l, {_string(pattern)}, "i")) }} LIMIT {int(limit)}'
    )


def wikidata_entity_search(name: str, language: str, limit: int) -> str:
    """Wikidata's own entity search (the query service's mwapi), ranked as on wikidata.org."""
    return (
        "PREFIX wikibase: <http://wikiba.se/ontology#> PREFIX mwapi: <https://www.mediawiki.org/ontology#API/> "
        "PREFIX bd: <http://www.bigdata.com/rdf#> SELECT ?x WHERE { SERVICE wikibase:mwapi { "
        'bd:serviceParam wikibase:endpoint "www.wikidata.org"; wikibase:api "EntitySearch"; '
        f"mwapi:search {_string(name)}; mwapi:language {_string(language)}. "
        f"?x wikibase:apiOutputItem mwapi:item. }} }} LIMIT {int(limit)}"
    )


def degree(profile: Profile, node: ox.NamedNode, cap: int) -> str:
    """Visible edges of `node`, both directions, counted up to `cap` each so hubs stay cheap."""
    out = f"{{ SELECT ?p WHERE {{ {node} ?p ?o . {visible(profile, 'p', node)} }} LIMIT {int(cap)} }}"
    inc = f"{{ SELECT ?p WHERE {{ ?o ?p {node} . {visible(profile, 'p', node)} }} LIMIT {int(cap)} }}"
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ {out} UNION {inc} }}"


def count_triples() -> str:
    return "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"


def top_relations(limit: int) -> str:
    return f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ ?s ?p ?o }} GROUP BY ?p ORDER BY DESC(?n) ?p LIMIT {int(limit)}"


def count_distinct(var: str) -> str:
    return f"SELECT (COUNT(DISTINCT ?{var}) AS ?n) WHERE {{ ?s ?p ?o }}"


def count_entities() -> str:
    """The entities a KG is about: its named subjects (what the summary, kg://stats and `kg-mcp info`
    all count; blank nodes are parts of what they describe, counted apart)."""
    return "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s ?p ?o FILTER(isIRI(?s)) }"


def count_blank_subjects() -> str:
    return "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s ?p ?o FILTER(isBlank(?s)) }"


def ask_predicate(predicate: str) -> str:
    return f"ASK {{ ?s <{ox.NamedNode(predicate).value}> ?o }}"


def ask_class(node: ox.NamedNode) -> str:
    """Whether some node has the class `node` (as the object of rdf:type)."""
    return f"ASK {{ ?s <{RDF_TYPE}> {node} }}"


def path_ask(
    sources: Sequence[ox.NamedNode],
    first: Sequence[tuple[ox.NamedNode, Direction]],
    then: Sequence[tuple[ox.NamedNode, Direction]],
    targets: Sequence[ox.NamedNode],
) -> str:
    """Whether one `first` step, then any number of `then` steps, lead from a source to a target."""

    def alternatives(steps) -> str:
        return "|".join(("^" if d is Direction.INCOMING else "") + str(p) for p, d in steps)

    path = f"({alternatives(first)})" + (f"/({alternatives(then)})*" if then else "")
    return f"ASK {{ {values('s', sources)} {values('o', targets)} ?s {path} ?o }}"
