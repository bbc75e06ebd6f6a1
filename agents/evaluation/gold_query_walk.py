"""Gold queries as walks: a benchmark's gold SPARQL turned into chains of relations that the tools
can walk, from the query's entity constants to its answer variable.

CWQ, GrailQA and QALD-10 give each question the SPARQL that answers it. Most of those queries are
a tree of triple patterns: the answer variable at the root, entity constants (`ns:m.03_dwn`,
`wd:Q42`) at the leaves, unnamed mediator (CVT) variables in between. Each leaf's way to the root
is a chain of relations (`~rel` where the pattern is walked from object to subject); the answer is
what every chain reaches, so two topic entities make a path intersection. `plan` reads the query
with rdflib's parser and algebra, after the canonical rewrite the `sparql` tool applies (dotted
prefixed names written in full, Virtuoso's OR/AND as ||/&&).

What the walk leaves out, because it only narrows the answer and the tools show it anyway:
`FILTER (?x != ?c)` and `!= ns:m.xxx`, the language filter `!isLiteral(?x) OR lang(?x) = ''
OR langMatches(...)`, class constraints (`?x type.object.type ns:film.film`, and any pattern that
ends on a Freebase type rather than an entity) and variables that only have to exist (`?x time.event.start_date ?d` with ?d used nowhere else). So the walk's answer
is a superset of the query's: recall is exact, precision may be lower.

What it cannot walk, each a named reason (`REASONS`): a yes/no query, aggregates (COUNT), ORDER
BY or LIMIT (superlatives), filters that compare values (dates, numbers, strings), (NOT) EXISTS and
MINUS (CWQ's "current" time constraints), UNION and OPTIONAL, a triple with a literal constant, a
variable predicate, shapes that are not trees (cycles, disconnected patterns), no entity constant
to start from, and chains longer or more numerous than `follow` takes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pyoxigraph as ox

from kg_mcp.errors import KGError
from kg_mcp.ids import Vocabulary
from kg_mcp.profiles import FREEBASE, FREEBASE_PROFILE, GENERIC, PROFILES

MAX_HOPS = 6  # follow's limits (kg_mcp.tools.follow); a plan past them could not be walked in one call
MAX_BRANCHES = 5

REASONS = {
    "ask": "a yes/no (ASK) query",
    "aggregate": "COUNT or another aggregate",
    "order-limit": "ORDER BY or LIMIT (a superlative: the largest, the latest)",
    "comparison": "a FILTER that compares values (dates, numbers, strings)",
    "exists": "FILTER (NOT) EXISTS or MINUS (CWQ's time constraints: 'current', 'in 2010')",
    "union-optional": "UNION or OPTIONAL",
    "literal-constant": "a triple pattern with a literal constant (a date, a number, a name)",
    "variable-predicate": "a triple pattern whose relation is a variable",
    "property-path": "a property path other than a sequence or an inverse (p*, p+, p|q)",
    "not-a-tree": "the patterns are not chains to the answer (a cycle, a disconnected part)",
    "no-entity": "no entity constant to start a walk from",
    "too-long": f"a chain longer than {MAX_HOPS} relations, or more than {MAX_BRANCHES} chains",
    "unreadable": "the query does not parse",
    "no-matching-relation": "SimpleQuestions: none of the topic's relations ends with the gold relation",
    "other": "a query form the walk does not know (a computed value, several VALUES rows, a service)",
}

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
CLASS_PREDICATES = frozenset({RDF_TYPE, FREEBASE + "type.object.type"})
_HARMLESS_FUNCTIONS = frozenset({
    "ConditionalOrExpression", "ConditionalAndExpression", "UnaryNot", "RelationalExpression",
    "Builtin_isLITERAL", "Builtin_LANG", "Builtin_LANGMATCHES",
})  # fmt: skip
_QUERY_TOKENS = 100_000  # gold queries are read whole: no cap like the sparql tool's


@dataclass(frozen=True)
class Branch:
    start: str  # the entity constant, compact (m.03_dwn, wd:Q42)
    path: tuple[str, ...]  # relations from it to the answer; ~rel walks a pattern backwards


@dataclass(frozen=True)
class Walkable:
    branches: tuple[Branch, ...]
    answer: str  # the answer variable's name
    dropped: tuple[str, ...] = ()  # what the walk leaves out (class constraints, existence checks)

    @property
    def starts(self) -> tuple[str, ...]:
        return tuple(b.start for b in self.branches)


@dataclass(frozen=True)
class NotWalkable:
    reason: str  # a key of REASONS
    detail: str = ""


@dataclass
class _Parts:
    """What the algebra holds, gathered in one pass."""

    triples: list[tuple] = field(default_factory=list)
    values: dict = field(default_factory=dict)  # variable -> its one VALUES constant
    aliases: dict = field(default_factory=dict)  # (?x0 AS ?value): value -> x0
    filters: list = field(default_factory=list)
    projected: list = field(default_factory=list)
    refusal: NotWalkable | None = None

    def refuse(self, reason: str, detail: str = "") -> None:
        self.refusal = self.refusal or NotWalkable(reason, detail)


def plan(query: str, topics: tuple[str, ...] | list[str] = (), profile: str = "freebase") -> Walkable | NotWalkable:
    """The walk of a gold query, or why there is none. `topics`: the question's topic entities (compact
    ids), whose chains come first.

    >>> q = ("PREFIX ns: <http://rdf.freebase.com/ns/> SELECT DISTINCT ?x WHERE { FILTER (?x != ?c) "
    ...      "?c ns:sports.sports_team.team_mascot ns:m.03_dwn . ?c ns:sports.sports_team.championships ?x . }")
    >>> plan(q).branches
    (Branch(start='m.03_dwn', path=('~sports.sports_team.team_mascot', 'sports.sports_team.championships')),)
    >>> plan(q + " ORDER BY ?x LIMIT 1").reason
    'order-limit'
    """
    checked = _checked(query)
    if isinstance(checked, NotWalkable):
        return checked
    parts, answer = checked
    return _tree(parts, answer, _compactor(profile), topics)


@dataclass(frozen=True)
class GoldPatterns:
    triples: tuple[tuple, ...]  # rdflib terms; VALUES constants in place, property paths unrolled
    answer: str


def gold_patterns(query: str, profile: str = "freebase") -> GoldPatterns | NotWalkable:
    """The triple patterns of a walkable gold query, to build a KG on which the query holds."""
    from rdflib.term import Variable

    checked = _checked(query)  # one parse serves the check and the patterns
    if isinstance(checked, NotWalkable):
        return checked
    parts, answer = checked
    if isinstance(walk := _tree(parts, answer, _compactor(profile), ()), NotWalkable):
        return walk
    triples = _without_paths(parts.triples)
    bound = [tuple(parts.values.get(str(t), t) if isinstance(t, Variable) else t for t in triple) for triple in triples]
    return GoldPatterns(tuple(bound), answer)


def _checked(query: str) -> tuple[_Parts, str] | NotWalkable:
    """The query's parts and answer variable, or the first reason it cannot be walked."""
    parts = _read(query)
    if parts.refusal:
        return parts.refusal
    for expression in parts.filters:
        reason = _filter_reason(expression)
        if reason:
            return NotWalkable(reason, _short(expression))
    if len(parts.projected) != 1:
        return NotWalkable("other", f"{len(parts.projected)} projected variables")
    answer = parts.projected[0]
    while answer in parts.aliases:
        answer = parts.aliases[answer]
    return parts, answer


def reason_text(reason: str) -> str:
    return REASONS.get(reason, reason)


# --- reading the algebra -----------------------------------------------------------------------


def _read(query: str) -> _Parts:
    import logging

    from rdflib.plugins.sparql.algebra import translateQuery

    from kg_mcp.sparql.checked import parse
    from kg_mcp.sparql.lexing import lex

    parts = _Parts()
    # rdflib logs a traceback for every typed literal it cannot convert (CWQ's "1998"^^xsd:dateTime)
    quiet = logging.getLogger("rdflib.term")
    level, quiet.level = quiet.level, logging.CRITICAL
    try:
        algebra = translateQuery(parse(lex(query, max_tokens=_QUERY_TOKENS).lines())).algebra
    except (KGError, ValueError, TypeError, KeyError) as error:
        parts.refuse("unreadable", str(getattr(error, "message", error))[:200])
        return parts
    finally:
        quiet.setLevel(level)
    if algebra.name == "AskQuery":
        parts.refuse("ask")
        return parts
    parts.projected = [str(v) for v in algebra.get("PV") or []]
    _gather(algebra.p, parts)
    return parts


def _gather(node, parts: _Parts) -> None:  # noqa: C901 - one branch per algebra operator
    from rdflib.term import Variable

    name = getattr(node, "name", None)
    if name in ("Project", "Distinct", "Reduced", "ToMultiSet", "SelectQuery", "SubSelect"):
        _gather(node.p, parts)
    elif name == "Join":
        _gather(node.p1, parts)
        _gather(node.p2, parts)
    elif name == "BGP":
        parts.triples.extend(node.triples)
    elif name == "Filter":
        parts.filters.append(node.expr)
        _gather(node.p, parts)
    elif name == "Extend":
        if isinstance(node.expr, Variable):
            parts.aliases[str(node.var)] = str(node.expr)
        elif "Aggregate" in _names(node.expr) or str(node.var).startswith("__agg"):
            parts.refuse("aggregate", _short(node.expr))
        else:
            parts.refuse("other", f"a computed value: {_short(node.expr)}")
        _gather(node.p, parts)
    elif name == "values":
        rows = node.res
        if len(rows) != 1:
            parts.refuse("other", f"VALUES with {len(rows)} rows")
        else:
            parts.values.update({str(k): v for k, v in rows[0].items()})
    elif name in ("OrderBy", "Slice"):
        parts.refuse("order-limit")
        _gather(node.p, parts)
    elif name in ("Group", "AggregateJoin"):
        parts.refuse("aggregate")
        _gather(node.p, parts)
    elif name in ("LeftJoin", "Union"):
        parts.refuse("union-optional", name)
    elif name == "Minus":
        parts.refuse("exists", "MINUS")
    else:
        parts.refuse("other", str(name))


def _names(expression) -> set[str]:
    """The operator names in an expression tree."""
    found: set[str] = set()
    stack = [expression]
    while stack:
        node = stack.pop()
        if hasattr(node, "name") and isinstance(getattr(node, "name"), str) and hasattr(node, "items"):
            found.add(node.name)
            stack.extend(v for k, v in node.items() if not k.startswith("_"))
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return found


def _filter_reason(expression) -> str | None:
    """None for a filter the walk may leave out; else the reason it cannot be walked (each conjunct of
    an && read alone: rdflib joins a group's filters into one)."""
    from rdflib.term import Literal

    if getattr(expression, "name", None) == "ConditionalAndExpression":
        for conjunct in [expression.expr, *(expression.other or [])]:
            reason = _filter_reason(conjunct)
            if reason:
                return reason
        return None
    names = _names(expression)
    if names & {"Builtin_EXISTS", "Builtin_NOTEXISTS"}:
        return "exists"
    if getattr(expression, "name", None) == "RelationalExpression" and expression.op == "!=":
        sides = (expression.expr, expression.other)
        return "comparison" if any(isinstance(s, Literal) for s in sides) else None
    if names <= _HARMLESS_FUNCTIONS and names & {"Builtin_LANG", "Builtin_LANGMATCHES"}:
        return None  # the language filter: literal answers in English or without a language
    return "comparison"


def _short(expression) -> str:
    return " ".join(str(expression).split())[:160]


# --- the tree of patterns ----------------------------------------------------------------------


def _compactor(profile: str) -> Callable[[str], str]:
    """Ids as the tools show and take them (Freebase's bare m.xxx and dotted relations, else prefix:local)."""
    vocabulary = Vocabulary(PROFILES.get(profile, GENERIC))
    return lambda iri: vocabulary.compact(ox.NamedNode(iri))


def _tree(parts: _Parts, answer: str, compact: Callable[[str], str], topics) -> Walkable | NotWalkable:
    from rdflib.term import Literal, URIRef, Variable

    # node ids: ("v", name) for a variable; ("c", i, iri) for a constant, one per pattern it is in
    edges: dict[tuple, list[tuple[tuple, str, bool]]] = defaultdict(list)  # node -> (other, relation, forwards)
    dropped: list[str] = []
    kept = 0
    triples = _without_paths(parts.triples)
    if isinstance(triples, NotWalkable):
        return triples
    for i, (s, p, o) in enumerate(triples):
        s, o = (parts.values.get(str(t), t) if isinstance(t, Variable) else t for t in (s, o))
        if not isinstance(p, URIRef):
            return NotWalkable("variable-predicate", f"{s} {p} {o}")
        if isinstance(s, Literal) or isinstance(o, Literal):
            return NotWalkable("literal-constant", f"{compact(str(p))} {o if isinstance(o, Literal) else s}")
        if isinstance(o, URIRef) and isinstance(s, Variable) and (str(p) in CLASS_PREDICATES or _is_schema(str(o))):
            dropped.append(f"?{s} is a {compact(str(o))}")
            continue
        node = [("v", str(t)) if isinstance(t, Variable) else ("c", i, str(t)) for t in (s, o)]
        relation = compact(str(p))
        edges[node[0]].append((node[1], relation, True))
        edges[node[1]].append((node[0], relation, False))
        kept += 1
    root = ("v", answer)
    if root not in edges:
        return NotWalkable("not-a-tree", f"the answer ?{answer} is in no relation pattern")
    # walk the tree from the answer: every node's way back to it
    parent: dict[tuple, tuple[tuple, str] | None] = {root: None}
    order = [root]
    for node in order:
        for other, relation, forwards in edges[node]:
            if other in parent:
                continue
            # the step from `other` towards the answer: the pattern walked from other's side
            parent[other] = (node, relation if not forwards else "~" + relation)
            order.append(other)
    if len(order) - 1 != kept:
        return NotWalkable("not-a-tree", "a disconnected part" if set(edges) - set(parent) else "a cycle")
    branches = []
    for node in order:
        if node[0] != "c":
            continue
        path, at = [], node
        while parent[at] is not None:
            at, relation = parent[at]
            path.append(relation)
        branches.append(Branch(compact(node[2]), tuple(path)))
    for leaf in order:
        if leaf[0] == "v" and len(edges[leaf]) == 1 and leaf != root:
            dropped.append(f"?{leaf[1]} only has to exist")
    if not branches:
        return NotWalkable("no-entity")
    if len(branches) > MAX_BRANCHES or max(len(b.path) for b in branches) > MAX_HOPS:
        return NotWalkable("too-long", f"{len(branches)} chains, the longest {max(len(b.path) for b in branches)}")
    first = set(topics)
    branches.sort(key=lambda b: (b.start not in first, len(b.path)))
    return Walkable(tuple(branches), answer, tuple(dropped))


def _is_schema(iri: str) -> bool:
    """A Freebase type or property (`location.location`), not an entity (`m.0f8l9c`): a pattern that
    ends on one is a class constraint (`?x kg.object_profile.prominent_type ns:location.location`)."""
    return iri.startswith(FREEBASE) and FREEBASE_PROFILE.bare_id(iri[len(FREEBASE) :]) is None


def _without_paths(triples: list[tuple]) -> list[tuple] | NotWalkable:
    """Sequence paths (p/q) as chains through fresh variables, inverse paths (^p) as reversed patterns."""
    from rdflib.paths import InvPath, Path, SequencePath
    from rdflib.term import Variable

    out, fresh = [], 0
    stack = list(reversed(triples))
    while stack:
        s, p, o = stack.pop()
        if isinstance(p, InvPath):
            stack.append((o, p.arg, s))
        elif isinstance(p, SequencePath):
            nodes = [s]
            for _ in p.args[:-1]:
                fresh += 1
                nodes.append(Variable(f"_path{fresh}"))
            nodes.append(o)
            stack.extend(reversed([(nodes[i], step, nodes[i + 1]) for i, step in enumerate(p.args)]))
        elif isinstance(p, Path):
            return NotWalkable("property-path", str(p.n3()) if hasattr(p, "n3") else str(p))
        else:
            out.append((s, p, o))
    return out


def simple_relation_matches(relations: list[str], last_segment: str) -> list[str]:
    """The relations (`~rel` for incoming ones) whose last dotted segment is SimpleQuestions' gold relation.

    >>> simple_relation_matches(["film.film.country", "~location.location.contains", "people.person.nationality"], "country")
    ['film.film.country']
    """
    return [r for r in relations if r.lstrip("~").rsplit(".", 1)[-1].rsplit("/", 1)[-1] == last_segment]
